"""Errors of workflow files (``gramtile run``)."""

from gramtile.kernels.errors import GramtileError


class WorkflowError(GramtileError, ValueError):
    """A bad workflow file (``gramtile run``): names the file, the key, the value and the fix."""


class UsageError(GramtileError, ValueError):
    """A bad command-line value (an option's number, an output path): names the option, the value
    and the fix."""
