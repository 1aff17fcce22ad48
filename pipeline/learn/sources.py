"""Kernel sources: what learners read K from (an in-memory matrix, a Gram store, a view), and labels.

A *kernel source* is anything with ``n`` (examples) and ``block(rows, cols) -> ndarray``. A
store source reads only the chunks a block touches; :func:`store_labels` reads the labels of a
store's rows from the corpus store it names, :func:`read_labels` from a file.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from gramtile.kernels.composite import normalize_block
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_view import GramView


@runtime_checkable
class KernelSource(Protocol):
    """Read access to an n x n kernel matrix by blocks."""

    n: int

    def block(self, rows, cols) -> np.ndarray:
        """K[rows][:, cols] as a float64 array of shape (len(rows), len(cols))."""


class ArrayKernelSource:
    """A kernel source over an in-memory matrix.

    Parameters
    ----------
    K : ndarray, shape (n, n)
    normalized : bool
        Serve K(x, y) / sqrt(K(x, x) K(y, y)) (0 where a self-similarity is 0).

    Attributes
    ----------
    reads : int
        Number of :meth:`block` calls so far.
    """

    def __init__(self, K, normalized: bool = False):
        K = np.asarray(K, dtype=np.float64)
        if K.ndim != 2 or K.shape[0] != K.shape[1]:
            raise EvaluationError(f"ArrayKernelSource: K has shape {K.shape}; pass a square Gram matrix")
        if normalized:
            # the same arithmetic as a Gram store's normalized reads, so both give equal numbers
            K = normalize_block(K, np.diag(K), np.diag(K))
        self.K = K
        self.n = K.shape[0]
        self.reads = 0

    def block(self, rows, cols) -> np.ndarray:
        self.reads += 1
        return self.K[np.ix_(np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))]


class StoreKernelSource:
    """A kernel source over a square Gram store (:class:`~gramtile.pipeline.stores.gram_view.GramView`).

    Row/column positions are positions in the store's own row selection. ``chunk_reads``
    counts the K chunks read so far.
    """

    #: every block is finite: each chunk is refused when read unless finite, and normalisation keeps
    #: it so (a self-kernel <= 0 gives 0), so learners need not scan the blocks again
    finite = True

    def __init__(self, store, normalized: bool = False):
        self.store = store
        self.view = store.view()
        self.normalized = bool(normalized)
        nr, nc = self.view.shape
        if not store.symmetric or nr != nc:
            raise EvaluationError(f"Gram store {store.path} is rectangular ({nr} x {nc}); learning needs a square "
                                  "store over the labelled examples (gramtile gram without --cols)")
        self.n = int(nr)

    @property
    def chunk_reads(self) -> int:
        return self.view.chunk_reads

    def block(self, rows, cols) -> np.ndarray:
        """K[rows][:, cols], normalised in place when asked: the block is the only copy made (the
        store's own normalised read builds two more of its size), with the same arithmetic, so the
        same numbers."""
        return self.blocks([(rows, cols)])[0]

    def blocks(self, pairs, out=None) -> list:
        """``[self.block(rows, cols) for rows, cols in pairs]``, each stored chunk read once for all;
        ``out``: float64 arrays to fill (:meth:`GramView.blocks`; used when the store is float64)."""
        pairs = [(np.asarray(r, dtype=np.int64), np.asarray(c, dtype=np.int64)) for r, c in pairs]
        if np.dtype(self.store.dtype) == np.float64:  # normalised while read, with normalize_inplace's arithmetic
            return self.view.blocks(pairs, normalized=self.normalized, out=out)
        got = []  # float32: widened to float64 first, then normalised in float64
        for (rows, cols), B in zip(pairs, self.view.blocks(pairs, out=out)):
            out = np.asarray(B, dtype=np.float64)
            if self.normalized:
                dr, dc = self.view.diag(rows, cols)
                normalize_inplace(out, dr, dc)
            got.append(out)
        return got


def normalize_inplace(K, dr, dc):
    """:func:`gramtile.kernels.composite.normalize_block` on ``K`` itself (no copy of the block):
    K / sqrt(dr)[:, None] / sqrt(dc)[None, :], 0 where a self-kernel is not positive."""
    dr, dc = np.asarray(dr, dtype=np.float64), np.asarray(dc, dtype=np.float64)
    if not (np.isfinite(dr).all() and np.isfinite(dc).all()):
        normalize_block(K[:0, :0], dr, dc)  # raises its error, which names the repair
    sr = np.sqrt(np.where(dr > 0, dr, 1.0))
    sc = np.sqrt(np.where(dc > 0, dc, 1.0))
    np.divide(K, sr[:, None], out=K)
    np.divide(K, sc[None, :], out=K)
    K[dr <= 0, :] = 0.0
    K[:, dc <= 0] = 0.0
    return K


class ViewKernelSource:
    """A kernel source over any view with ``block(rows, cols)`` (a :class:`GramView` or a
    :class:`ComposedView` of stored base matrices), optionally over the examples ``idx`` of the
    view renumbered 0..len(idx)-1, or its first ``n`` examples; with ``scale``, every value is
    divided by it (e.g. the mean self-kernel of the training examples, which keeps huge raw tree
    kernel values in a range an SVM handles: the SVM with K / s and cost C is the one with K and
    cost s C)."""

    def __init__(self, view, idx=None, n: int | None = None, scale: float | None = None):
        self.view = view
        self.idx = None if idx is None else np.asarray(idx, dtype=np.int64)
        self.n = int(len(self.idx) if self.idx is not None else n if n is not None else view.shape[0])
        if scale is not None and not (np.isfinite(scale) and scale > 0):
            raise EvaluationError(f"kernel scale {scale!r} must be a positive finite number")
        self.scale = None if scale is None else float(scale)

    def _scaled(self, B):
        """``B / scale`` in float64, a new array (a view may hand out memory it keeps)."""
        return B if self.scale is None else np.asarray(B, dtype=np.float64) / self.scale

    @property
    def chunk_reads(self) -> int:
        return self.view.chunk_reads

    @property
    def finite(self) -> bool:
        """Blocks of one store's view are finite (its chunks are checked when read); a composite's
        are checked by the learners."""
        return isinstance(self.view, GramView)

    def block(self, rows, cols) -> np.ndarray:
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        if self.idx is not None:
            rows, cols = self.idx[rows], self.idx[cols]
        return self._scaled(self.view.block(rows, cols))

    def blocks(self, pairs, out=None) -> list:
        """``[self.block(rows, cols) for rows, cols in pairs]``; over one store's view, each stored chunk
        is read once for all of them (into ``out`` where it fits, :meth:`GramView.blocks`)."""
        if not isinstance(self.view, GramView):
            return [self.block(r, c) for r, c in pairs]
        pairs = [(np.asarray(r, dtype=np.int64), np.asarray(c, dtype=np.int64)) for r, c in pairs]
        if self.idx is not None:
            pairs = [(self.idx[r], self.idx[c]) for r, c in pairs]
        return [self._scaled(B) for B in self.view.blocks(pairs, out=out)]


def open_gram_source(path, normalized: bool = False) -> StoreKernelSource:
    """A kernel source over the Gram store at ``path`` (reads only the chunks each block needs)."""

    return StoreKernelSource(GramStore.open(path), normalized)


def check_labels(labels, where):
    for i, y in enumerate(labels):
        if y is None or isinstance(y, (list, tuple, dict)) or (isinstance(y, str) and not y.strip()):
            raise EvaluationError(f"{where}: example {i} has label {y!r}; learning needs one non-empty label "
                                  "per example (multi-label and unlabelled examples are not supported)")
    return list(labels)


def store_labels(store) -> list:
    """Labels of a Gram store's row examples, from the corpus store named in its provenance.

    Raises
    ------
    StoreMismatchError
        If that corpus store's content hash is not the one the Gram store was computed from.
    """

    labels = store.labels("row", fix="pass --labels FILE with the labels of the store's rows")
    return check_labels(labels, f"corpus store {store.meta.get('corpus_path')}")


def read_labels(path, n: int | None = None) -> list:
    """One label per line (UTF-8, surrounding blanks stripped), in the order of the store's rows."""

    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        raise CorpusFormatError(f"cannot read labels file ({e.strerror})", path=path,
                                fix="pass an existing file with one label per line") from None
    while lines and not lines[-1].strip():
        lines.pop()
    for i, t in enumerate(lines):
        if not t.strip():
            raise CorpusFormatError("empty label", path=path, line=i + 1, fix="write one label on every line")
    if n is not None and len(lines) != n:
        raise CorpusFormatError(f"{len(lines)} labels for a Gram store of {n} examples", path=path,
                                fix=f"give exactly {n} lines, one per row of the store, in row order")
    return [t.strip() for t in lines]
