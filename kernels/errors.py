"""The gramtile error hierarchy.

Every error names what is wrong (parameter, file and line, store), the offending value and
the fix. ``kernels/`` owns the hierarchy because it imports nothing but numpy and numba, so
every layer above can raise and catch the same types.
"""


class GramtileError(Exception):
    """Base class of every error gramtile raises on purpose."""


class KernelSpecError(GramtileError, ValueError):
    """An invalid kernel spec: unknown kind, unknown key, or a parameter out of range."""


class RepresentationError(GramtileError, ValueError):
    """A structure that cannot be encoded (for example a dependency tree with a cycle)."""


class CorpusFormatError(GramtileError, ValueError):
    """A malformed input record. Carries ``path`` and ``line`` (1-based) when known."""

    def __init__(self, message, path=None, line=None, fix=None):
        self.path = None if path is None else str(path)
        self.line = line
        self.fix = fix
        self.reason = message
        where = ""
        if self.path is not None:
            where = f"{self.path}"
            if line is not None:
                where += f", line {line}"
            where += ": "
        text = where + message
        if fix:
            text += f" Fix: {fix}"
        super().__init__(text)


class StoreError(GramtileError):
    """Base class of corpus-store and Gram-store errors."""


class StoreMismatchError(StoreError):
    """A store reopened with a different kernel spec or corpus than it was created with."""


class StoreLockedError(StoreError):
    """Another writer holds the store's lock."""


class IncompleteTileError(StoreError):
    """A read touched a tile that is not marked done."""


class StoreCorruptError(StoreError):
    """A chunk failed its checksum or a store's metadata is inconsistent."""


class ClusterConfigError(GramtileError, ValueError):
    """A bad cluster.yaml profile."""


class EvaluationError(GramtileError, ValueError):
    """Bad learning or evaluation input: folds, splits, labels, or a learner parameter."""


class WorkflowError(GramtileError, ValueError):
    """A bad workflow file (``gramtile run``): names the file, the key, the value and the fix."""
