"""Errors of the compute room: bad cluster profiles (``cluster.yaml``), runs that lost their
workers or stalled, and the termination signal."""

from gramtile.kernels.errors import GramtileError


class ClusterConfigError(GramtileError, ValueError):
    """A bad cluster.yaml profile, or a cluster that cannot be reached or started."""


class ClusterLostError(GramtileError):
    """A run lost what runs its tasks: the connection to the Dask scheduler, or every worker for
    longer than the profile's ``worker_wait``. The work finished before is kept; a rerun resumes."""


class RunStalledError(ClusterLostError):
    """Workers are connected, but no task finished for the profile's ``stall_timeout`` seconds
    (workers paused at their memory limit, a hung task)."""


class TaskLostError(ClusterLostError):
    """A task was lost with its worker more often than the scheduler allows."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (a batch system ending the driver's job, ``kill``): handled like Ctrl-C, so every
    ``finally`` and ``except KeyboardInterrupt`` that keeps a store consistent runs for it too."""

    signal_name = "SIGTERM"


class TaskTooLargeError(GramtileError):
    """A task planned for more memory than one worker (or this process) may give it: refused
    before it starts, since a worker over its limit pauses and the run would stall."""
