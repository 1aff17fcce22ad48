"""The gramtile error hierarchy.

Every error names what is wrong (parameter, file and line, store), the offending value and
the fix. ``kernels/`` owns the base class (and the errors kernels themselves raise) because it imports
nothing but numpy and numba, so every layer above can raise and catch the same base type; each
room of ``pipeline/`` and ``workflows/`` keeps its own errors in its ``errors.py``.
"""


class GramtileError(Exception):
    """Base class of every error gramtile raises on purpose."""


class KernelSpecError(GramtileError, ValueError):
    """An invalid kernel spec: unknown kind, unknown key, or a parameter out of range."""


class RepresentationError(GramtileError, ValueError):
    """A structure that cannot be encoded (for example a dependency tree with a cycle)."""
