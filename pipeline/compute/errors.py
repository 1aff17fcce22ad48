"""Errors of the compute room: bad cluster profiles (``cluster.yaml``)."""

from gramtile.kernels.errors import GramtileError


class ClusterConfigError(GramtileError, ValueError):
    """A bad cluster.yaml profile."""
