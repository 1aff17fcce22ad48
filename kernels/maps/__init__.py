"""Explicit feature maps: the kernels whose definition is a finite weighted dot product.

For a base spec with a map, ``K(x, y) = sum_f w_f phi_f(x) phi_f(y)`` exactly, so a Gram block
is the product ``Phi_X diag(w) Phi_Y^T`` (docs/kernels.md, "Feature maps"). The convention is
**unweighted rows plus a weight per feature**: ``phi_f(x)`` is a count (ST, route, bow) or a sum
of occurrence weights (subsequence: lam^span per occurrence), and ``w_f = base ** order_f`` with
the spec's ``base`` (lam for ST and route, 1 otherwise) and the feature's ``order`` (ST: internal
nodes of the subtree, 1 for a leaf; route: edges of the route; 0 otherwise). Keeping ``w`` apart
lets one stored feature set serve every ``lam`` of ST and route, whose features and counts do not
depend on it.

A map turns a batch into :class:`LocalFeatures`: feature ids local to the batch, each with a
*key* that identifies the feature across batches. A key is a short list of integers, some of
which (``key_ref``) are ids of other local features of a lower ``level`` (an ST subtree is its
production and the ids of its internal children's subtrees; a route of length s is the route of
length s - 1 and one position). The pipeline (``gramtile.pipeline.compute.feature_sets``) interns
keys level by level into a corpus-level feature vocabulary, so tiles computed on different
workers share feature ids. This package imports numpy and numba only, like the rest of
``gramtile.kernels``; the SciPy matrices are built in the pipeline.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

#: kind -> FeatureMap (filled by the family modules of this package on import)
MAPS: dict = {}


@dataclass(frozen=True, eq=False)
class LocalFeatures:
    """The features of one batch, with ids local to it.

    Attributes
    ----------
    key_ptr : int64 (m+1,)
        Local feature f has the key ``key_items[key_ptr[f]:key_ptr[f+1]]``.
    key_items : int64
    key_ref : bool, like key_items
        True where the item is the local id of another feature (of a lower level).
    level : int64 (m,)
        A feature's key references only features of lower levels (0: none).
    order : int64 (m,)
        Weight exponent: ``w_f = base ** order_f``.
    ptr, idx, val : CSR rows over the batch's examples
        Example e holds local features ``idx[ptr[e]:ptr[e+1]]`` (increasing) with values ``val``.
    """

    key_ptr: np.ndarray
    key_items: np.ndarray
    key_ref: np.ndarray
    level: np.ndarray
    order: np.ndarray
    ptr: np.ndarray
    idx: np.ndarray
    val: np.ndarray

    @property
    def m(self) -> int:
        return int(self.level.shape[0])


@dataclass(frozen=True)
class FeatureMap:
    """How a kernel kind maps a batch to features.

    ``admits(spec)`` is None when the spec admits the map, else the reason it does not;
    ``local(spec, batch)`` gives :class:`LocalFeatures`; ``params(spec)`` the parameters that
    fix features and values (the rest, e.g. ST's lam, only changes weights); ``base(spec)`` the
    base of the weights.
    """

    kind: str
    admits: object
    local: object
    params: object
    base: object


def register_map(fmap: FeatureMap) -> FeatureMap:
    if fmap.kind in MAPS:
        raise TypeError(f"feature map of kind {fmap.kind!r} registered twice")
    MAPS[fmap.kind] = fmap
    return fmap


def feature_map(spec):
    """The :class:`FeatureMap` of a base spec, or None when it has none (or its parameters
    rule one out, e.g. a soft-matched subsequence kernel)."""
    fmap = MAPS.get(getattr(spec, "kind", None))
    if fmap is None or fmap.admits(spec) is not None:
        return None
    return fmap


def no_map_reason(spec) -> str | None:
    """Why a base spec has no feature map (None when it has one)."""
    fmap = MAPS.get(getattr(spec, "kind", None))
    if fmap is None:
        return f"kernel kind {spec.kind!r} has no finite explicit feature map (docs/kernels.md, 'Feature maps')"
    return fmap.admits(spec)


def weights(fmap: FeatureMap, spec, order: np.ndarray) -> np.ndarray:
    """``w_f = base ** order_f`` for features of the given orders."""
    return np.power(float(fmap.base(spec)), np.asarray(order, dtype=np.float64))


def row_codes(rows: np.ndarray):
    """Distinct rows of an int64 matrix (entries >= -1; -1 pads a shorter key at its end):
    ``(unique rows, inverse)``, rows in lexicographic order of their codes. Rows are packed into
    one int64 each when the alphabet allows (radix max + 2), else compared whole."""
    k, w = rows.shape
    if k == 0:
        return rows, np.zeros(0, np.int64)
    radix = int(rows.max()) + 2
    if w * np.log2(max(radix, 2)) < 62:
        code = np.zeros(k, np.int64)
        for c in range(w):
            code = code * radix + (rows[:, c] + 1)
        uc, first, inv = np.unique(code, return_index=True, return_inverse=True)
        return rows[first], inv.astype(np.int64)
    u, inv = np.unique(rows, axis=0, return_inverse=True)
    return u, inv.reshape(-1).astype(np.int64)


def unpad(rows: np.ndarray):
    """CSR ``(key_ptr, key_items)`` of -1-padded key rows."""
    lens = (rows >= 0).sum(axis=1) if rows.shape[0] else np.zeros(0, np.int64)
    ptr = np.zeros(rows.shape[0] + 1, np.int64)
    np.cumsum(lens, out=ptr[1:])
    return ptr, rows[rows >= 0].astype(np.int64)


def flat_features(ex: np.ndarray, rows: np.ndarray, values: np.ndarray, n: int) -> LocalFeatures:
    """LocalFeatures of level 0 (keys without references) from occurrences: example ``ex[k]``
    has the feature keyed by row ``rows[k]`` (int64 entries >= 0, padded with -1 at the end)
    with value ``values[k]``; equal (example, key) occurrences are summed."""
    z0 = np.zeros(0, np.int64)
    if rows.shape[0] == 0:
        return LocalFeatures(np.zeros(1, np.int64), z0, np.zeros(0, np.bool_), z0, z0,
                             np.zeros(n + 1, np.int64), z0, np.zeros(0))
    uk, kinv = row_codes(rows)
    m = uk.shape[0]
    ex = np.ascontiguousarray(ex, dtype=np.int64)
    if ex.shape[0] and bool((np.diff(ex) >= 0).all()):
        # occurrences in example order (the maps enumerate them so): merge per example, no global sort
        ptr, idx, val = _merge_rows(ex, np.ascontiguousarray(kinv), np.ascontiguousarray(values, np.float64), n, m)
    else:
        pair = ex * np.int64(m) + kinv
        up, pinv = np.unique(pair, return_inverse=True)
        val = np.bincount(pinv.reshape(-1), weights=values, minlength=up.shape[0])
        ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(up // m, minlength=n), out=ptr[1:])
        idx = (up % m).astype(np.int64)
    kp, ki = unpad(uk)
    z = np.zeros(m, np.int64)
    return LocalFeatures(kp, ki, np.zeros(ki.shape[0], np.bool_), z, z.copy(), ptr, idx, val.astype(np.float64))


@njit(cache=True, nogil=True)
def _merge_rows(ex, feat, values, n, m):
    """CSR rows from occurrences sorted by example: equal features of an example summed, ids
    increasing within each row (a scatter table over the m features, reset per example)."""
    slot = np.full(m, -1, np.int64)
    ptr = np.zeros(n + 1, np.int64)
    idx = np.empty(feat.shape[0], np.int64)
    val = np.empty(feat.shape[0], np.float64)
    k = 0
    a = 0
    total = feat.shape[0]
    while a < total:
        e = ex[a]
        b = a
        start = k
        while b < total and ex[b] == e:
            f = feat[b]
            if slot[f] < 0:
                slot[f] = k
                idx[k] = f
                val[k] = values[b]
                k += 1
            else:
                val[slot[f]] += values[b]
            b += 1
        order = np.argsort(idx[start:k])
        ii = idx[start:k][order]
        vv = val[start:k][order]
        idx[start:k] = ii
        val[start:k] = vv
        for q in range(start, k):
            slot[idx[q]] = -1
        ptr[e + 1] = k - start
        a = b
    for e in range(n):
        ptr[e + 1] += ptr[e]
    return ptr, idx[:k].copy(), val[:k].copy()


class LevelBuilder:
    """Builds :class:`LocalFeatures` level by level: each level's occurrence rows are interned
    (equal rows = one local feature), and the ids returned are what the next level's rows
    reference."""

    def __init__(self, n: int):
        self.n = n
        self.base = 0
        self.keys, self.refs, self.levels, self.orders = [], [], [], []
        self.ex, self.ids, self.vals = [], [], []

    def add_level(self, ex, rows, ref_cols, order, values=None) -> np.ndarray:
        """Occurrences of one level: example ``ex[k]`` holds the feature keyed by ``rows[k]``
        (-1-padded; columns flagged in ``ref_cols`` hold local ids of lower levels) of weight
        exponent ``order[k]`` with value ``values[k]`` (default 1). Returns each row's local id."""
        rows = np.ascontiguousarray(rows, dtype=np.int64)
        uk, inv = row_codes(rows)
        m = uk.shape[0]
        first = np.full(m, -1, np.int64)
        first[inv[::-1]] = np.arange(inv.shape[0] - 1, -1, -1)
        self.keys.append(uk)
        self.refs.append(np.broadcast_to(np.asarray(ref_cols, np.bool_), uk.shape) & (uk >= 0))
        self.levels.append(np.full(m, len(self.levels), np.int64))
        self.orders.append(np.asarray(order, np.int64)[first])
        ids = inv + self.base
        self.ex.append(np.asarray(ex, np.int64))
        self.ids.append(ids)
        self.vals.append(np.ones(ids.shape[0]) if values is None else np.asarray(values, np.float64))
        self.base += m
        return ids

    def finish(self) -> LocalFeatures:
        n = self.n
        if not self.base:
            return flat_features(np.zeros(0, np.int64), np.zeros((0, 1), np.int64), np.zeros(0), n)
        kptr, kitems, kref = [np.zeros(1, np.int64)], [], []
        off = 0
        for uk, rf in zip(self.keys, self.refs):
            p, it = unpad(uk)
            kptr.append(p[1:] + off)
            off += int(p[-1])
            kitems.append(it)
            kref.append(rf[uk >= 0])
        ex = np.concatenate(self.ex)
        ids = np.concatenate(self.ids)
        vals = np.concatenate(self.vals)
        m = self.base
        up, pinv = np.unique(ex * np.int64(m) + ids, return_inverse=True)
        val = np.bincount(pinv.reshape(-1), weights=vals, minlength=up.shape[0])
        ptr = np.zeros(n + 1, np.int64)
        np.cumsum(np.bincount(up // m, minlength=n), out=ptr[1:])
        return LocalFeatures(np.concatenate(kptr), np.concatenate(kitems), np.concatenate(kref),
                             np.concatenate(self.levels), np.concatenate(self.orders), ptr,
                             (up % m).astype(np.int64), val)
