"""Feature map of the gap-weighted subsequence kernel with exact matching.

With exact matching (``similarity: null``) the kernel of ``kernels/subsequence.py`` is

    K_p(s, t) = sum over u in Sigma^p of phi_u(s) phi_u(t),   phi_u(s) = sum over i with s[i] = u of lam^l(i)

(l(i) = i_p - i_1 + 1, the span: the core's lam^2 per matched symbol plus lam per gap inside the
span gives lam^(l(i) + l(j)) per occurrence pair, split as lam^l(i) on each side). Features are
the symbol tuples u of length 1..n (``cumulative``) or exactly n, value phi_u, weight 1; key
``[u_1, ..., u_p]``. A sequence of length L has sum_p C(L, p) occurrences, so the map suits
short sequences and small n. Soft matching (a similarity matrix A) has a map only through a
factorisation of A at every position: no map is used for it.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from gramtile.kernels.errors import RepresentationError
from gramtile.kernels.maps import FeatureMap, LocalFeatures, flat_features, register_map

_COLUMN = {"tokens": "token", "lemmas": "lemma", "pos": "pos"}


@njit(cache=True, nogil=True)
def _count(offsets, pmin, pmax):
    total = 0
    for e in range(offsets.shape[0] - 1):
        L = offsets[e + 1] - offsets[e]
        c = 1
        for p in range(1, pmax + 1):
            c = c * (L - p + 1) // p  # C(L, p)
            if p >= pmin:
                total += c
    return total


@njit(cache=True, nogil=True)
def _enumerate(offsets, col, pmin, pmax, lam, total):
    """Every occurrence: example, symbol tuple (-1 padded to pmax) and lam^span."""
    ex = np.empty(total, np.int64)
    rows = np.full((total, pmax), -1, np.int64)
    val = np.empty(total, np.float64)
    idx = np.empty(pmax, np.int64)
    k = 0
    for e in range(offsets.shape[0] - 1):
        a = offsets[e]
        L = offsets[e + 1] - a
        for p in range(pmin, pmax + 1):
            if p > L:
                break
            for q in range(p):
                idx[q] = q
            while True:
                ex[k] = e
                for q in range(p):
                    rows[k, q] = col[a + idx[q]]
                val[k] = lam ** (idx[p - 1] - idx[0] + 1)
                k += 1
                # next increasing tuple of length p over 0..L-1
                q = p - 1
                while q >= 0 and idx[q] == L - p + q:
                    q -= 1
                if q < 0:
                    break
                idx[q] += 1
                for r in range(q + 1, p):
                    idx[r] = idx[r - 1] + 1
    return ex, rows, val


def occurrences(spec, sizes) -> int:
    """Occurrences the map enumerates for sequences of the given lengths (its work and memory)."""
    pmin = 1 if spec.cumulative else spec.n
    off = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(np.asarray(sizes, np.int64), out=off[1:])
    return int(_count(off, pmin, spec.n))


def _local(spec, batch) -> LocalFeatures:
    name = _COLUMN[spec.on]
    col = batch.columns.get(name)
    if col is None or (col.size and int(col.min()) < 0):
        raise RepresentationError(f"kernel 'subsequence' with on={spec.on!r} reads the {name!r} column, which "
                                  f"these examples lack; give every sequence its {spec.on} or set 'on' to 'tokens'")
    off = np.ascontiguousarray(batch.offsets, dtype=np.int64)
    pmin = 1 if spec.cumulative else spec.n
    total = _count(off, pmin, spec.n)
    ex, rows, val = _enumerate(off, np.ascontiguousarray(col, dtype=np.int64), pmin, spec.n, spec.lam, total)
    return flat_features(ex, rows, val, batch.n)


def _admits(spec):
    if spec.similarity is not None:
        return (f"the subsequence kernel has a feature map here only with exact matching "
                f"(similarity null), got similarity {spec.similarity!r}")
    return None


SUBSEQUENCE = register_map(FeatureMap(
    kind="subsequence", admits=_admits, local=_local,
    params=lambda spec: {"rep": spec.rep_name, "on": spec.on, "n": spec.n, "cumulative": spec.cumulative,
                         "lam": spec.lam},
    base=lambda spec: 1.0))
