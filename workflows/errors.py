"""Errors of workflow files (``gramtile run``)."""

from gramtile.kernels.errors import GramtileError


class WorkflowError(GramtileError, ValueError):
    """A bad workflow file (``gramtile run``): names the file, the key, the value and the fix."""
