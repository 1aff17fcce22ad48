"""Errors of the compute room: bad cluster profiles (``cluster.yaml``)."""

from gramtile.kernels.errors import GramtileError


class ClusterConfigError(GramtileError, ValueError):
    """A bad cluster.yaml profile."""


class ClusterLostError(GramtileError):
    """The connection to the Dask scheduler was lost during a run (the scheduler died or its
    machine went away); the tiles finished before are kept and a rerun resumes."""
