"""Errors of corpus stores and Gram stores: mismatch, lock, incomplete tile, corruption, a feature set too large."""

from gramtile.kernels.errors import GramtileError


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


class FeatureSetTooLargeError(StoreError):
    """A feature set whose vocabulary could not fit in the memory available (it is not built)."""


class FeatureSetWriteError(StoreError):
    """The corpus store's storage refused the feature set (full, read-only): the message names the
    corpus store and its storage, not the command's --out."""
