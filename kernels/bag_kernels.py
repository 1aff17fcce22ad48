"""Bag-of-words / bag-of-attributes kernel (the BOW baseline of the WSD, QC and HDAG papers).

K(x, y) = sum_w c_w(x) c_w(y), where c_w is the count of symbol w in the chosen column (or 1
for presence when ``binary``), or the stored weight for a sparse ``bag`` representation (KeLP's
bag-of-words vectors). Linear; use ``normalized`` for the cosine and ``polynomial`` for BOA'.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from gramtile.kernels.spec import BaseSpec, register

#: Column read for each ``on`` value, per batch kind.
_COLUMN = {
    "seq": {"tokens": "token", "lemmas": "lemma", "pos": "pos"},
    "dep": {"tokens": "word", "lemmas": "lemma", "pos": "pos"},
    "wsd": {"tokens": "word", "lemmas": "lemma", "pos": "pos"},
}


def sparse_rows(batch, on="tokens", binary=True):
    """Per-example sorted distinct feature ids and their weights, in CSR form.

    Returns ``(ptr int64 (n+1,), feat int32, weight float64)``.
    """
    if batch.kind == "bag":
        feat = batch.columns["feat"]
        w = batch.columns["weight"]
        if binary:
            w = (w != 0).astype(np.float64)
        return batch.offsets.astype(np.int64), feat.astype(np.int32), w.astype(np.float64)
    try:
        col = batch.columns[_COLUMN[batch.kind][on]]
    except KeyError:
        raise ValueError(f"bow cannot read {on!r} from a {batch.kind!r} batch") from None
    n = batch.n
    offsets = np.asarray(batch.offsets, dtype=np.int64)
    example = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    ids = np.asarray(col[offsets[0]:offsets[-1]], dtype=np.int64) if n else np.zeros(0, np.int64)
    keep = ids >= 0
    example, ids = example[keep], ids[keep]
    # one sort of (example, id) keys gives every example's distinct ids in order, and their counts
    width = int(ids.max()) + 1 if ids.size else 1
    keys, counts = np.unique(example * width + ids, return_counts=True)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(keys // width, minlength=n), out=ptr[1:])
    feat = (keys % width).astype(np.int32)
    weight = np.ones(len(keys)) if binary else counts.astype(np.float64)
    return ptr, feat, weight


@njit(cache=True, nogil=True)
def _dot(pa, fa, wa, a, pb, fb, wb, b):
    i, ie = pa[a], pa[a + 1]
    j, je = pb[b], pb[b + 1]
    s = 0.0
    while i < ie and j < je:
        if fa[i] == fb[j]:
            s += wa[i] * wb[j]
            i += 1
            j += 1
        elif fa[i] < fb[j]:
            i += 1
        else:
            j += 1
    return s


@njit(cache=True, nogil=True)
def _block(pa, fa, wa, pb, fb, wb, symmetric):
    na = pa.shape[0] - 1
    nb = pb.shape[0] - 1
    out = np.empty((na, nb))
    for a in range(na):
        start = a if symmetric else 0
        for b in range(start, nb):
            v = _dot(pa, fa, wa, a, pb, fb, wb, b)
            out[a, b] = v
            if symmetric:
                out[b, a] = v
    return out


@njit(cache=True, nogil=True)
def _paired(pa, fa, wa, pb, fb, wb):
    out = np.empty(pa.shape[0] - 1)
    for a in range(out.shape[0]):
        out[a] = _dot(pa, fa, wa, a, pb, fb, wb, a)
    return out


@register
@dataclass(frozen=True)
class BagOfWordsKernel(BaseSpec):
    """Linear bag-of-words kernel over tokens, lemmas or PoS (or a stored sparse bag)."""

    kind = "bow"
    reads = "seq"
    on: str = "tokens"
    binary: bool = True
    rep: str = "seq"

    def validate(self):
        self._choice("on", ("tokens", "lemmas", "pos"))
        self._flag("binary")
        self._string("rep")

    def block(self, X, Y=None):
        ra = sparse_rows(X, self.on, self.binary)
        if Y is None:
            return _block(*ra, *ra, True)
        return _block(*ra, *sparse_rows(Y, self.on, self.binary), False)

    def diag(self, X):
        _, _, w = ra = sparse_rows(X, self.on, self.binary)
        ptr = ra[0]
        return np.array([float(np.dot(w[ptr[e]:ptr[e + 1]], w[ptr[e]:ptr[e + 1]])) for e in range(X.n)])

    def paired(self, X, Y):
        """``k(X_i, Y_i)`` of two batches of one length, shape (X.n,)."""
        if X.n != Y.n:
            raise ValueError(f"paired(): {X.n} and {Y.n} sequences; give two batches of one length")
        return _paired(*sparse_rows(X, self.on, self.binary), *sparse_rows(Y, self.on, self.binary))
