"""Feature map of the subtree kernel (ST): one feature per complete subtree.

The ST core (``kernels/tree_kernels.py``) gives a pair of internal nodes
``Delta(n1, n2) = lam^(internal nodes of the subtree)`` when the complete subtrees below them are
equal (equal productions at every internal node; a production fixes the children's labels and
which of them are leaves), else 0; with ``leaves`` a pair of equal childless nodes adds lam. So

    K_ST(T1, T2) = sum over complete subtrees f of c_f(T1) c_f(T2) lam^(order_f)

with c_f the number of nodes of T whose complete subtree is f and order_f its internal nodes
(1 for a leaf feature). Key of an internal node's subtree: ``[prod + 1, ids of its internal
children's subtrees in order]`` (level = height above its lowest internal descendants); key of a
leaf feature: ``[0, label]`` (level 0). SST and PT count fragments that are not complete
subtrees (exponentially many per tree): no finite map is used for them.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from gramtile.kernels.errors import RepresentationError
from gramtile.kernels.maps import FeatureMap, LevelBuilder, LocalFeatures, register_map


@njit(cache=True, nogil=True)
def _heights(offsets, prod, cp, ci):
    """Per node: level (-1 for a childless node), order (internal nodes of its complete
    subtree) and number of internal children. Children follow their parent in node order."""
    total = prod.shape[0]
    level = np.full(total, -1, np.int64)
    order = np.zeros(total, np.int64)
    width = np.zeros(total, np.int64)
    for e in range(offsets.shape[0] - 1):
        a = offsets[e]
        for g in range(offsets[e + 1] - 1, a - 1, -1):
            if cp[g + 1] == cp[g]:
                continue
            lv = 0
            od = 1
            k = 0
            for q in range(cp[g], cp[g + 1]):
                c = a + ci[q]
                if level[c] >= 0:
                    lv = max(lv, level[c] + 1)
                    od += order[c]
                    k += 1
            level[g] = lv
            order[g] = od
            width[g] = k
    return level, order, width


@njit(cache=True, nogil=True)
def _rows(nodes, node_ex, offsets, prod, cp, ci, level, fid, w):
    """Key rows ``[prod + 1, fid of internal children..., -1 pad]`` of ``nodes`` (global indices)."""
    out = np.full((nodes.shape[0], w), -1, np.int64)
    for r in range(nodes.shape[0]):
        g = nodes[r]
        a = offsets[node_ex[g]]
        out[r, 0] = prod[g] + 1
        k = 1
        for q in range(cp[g], cp[g + 1]):
            c = a + ci[q]
            if level[c] >= 0:
                out[r, k] = fid[c]
                k += 1
    return out


def _local(spec, batch) -> LocalFeatures:
    if batch.kind != "tree":
        raise RepresentationError(f"kernel 'st' reads ordered trees, got a {batch.kind!r} batch")
    off = np.ascontiguousarray(batch.offsets, dtype=np.int64)
    prod = np.ascontiguousarray(batch.columns["prod"], dtype=np.int64)
    cp = np.ascontiguousarray(batch.child_ptr, dtype=np.int64)
    ci = np.ascontiguousarray(batch.child_idx, dtype=np.int64)
    level, order, width = _heights(off, prod, cp, ci)
    node_ex = np.repeat(np.arange(batch.n, dtype=np.int64), np.diff(off))
    fid = np.full(prod.shape[0], -1, np.int64)
    b = LevelBuilder(batch.n)
    top = int(level.max(initial=-1))
    leaf_rows = None
    if spec.leaves:
        leaves = np.flatnonzero(level < 0)
        leaf_rows = (node_ex[leaves], np.stack([np.zeros(leaves.shape[0], np.int64),
                                                batch.columns["label"][leaves].astype(np.int64)], axis=1))
    for lv in range(top + 1):
        nodes = np.flatnonzero(level == lv)
        w = 1 + int(width[nodes].max(initial=0))
        rows = _rows(nodes, node_ex, off, prod, cp, ci, level, fid, w)
        if lv == 0 and leaf_rows is not None:
            # leaf features [0, label] join level 0 (internal keys start with prod + 1 >= 1)
            lr = np.full((leaf_rows[1].shape[0], max(w, 2)), -1, np.int64)
            lr[:, :2] = leaf_rows[1]
            if w < 2:
                rows = np.concatenate([rows, np.full((rows.shape[0], 1), -1, np.int64)], axis=1)
            ids = b.add_level(np.concatenate([node_ex[nodes], leaf_rows[0]]), np.concatenate([rows, lr]),
                              np.zeros(max(w, 2), np.bool_),  # level 0 references nothing
                              np.concatenate([order[nodes], np.ones(lr.shape[0], np.int64)]))
            fid[nodes] = ids[:nodes.shape[0]]
            leaf_rows = None
            continue
        ref = np.arange(w) >= 1
        fid[nodes] = b.add_level(node_ex[nodes], rows, ref, order[nodes])
    if leaf_rows is not None:  # trees without internal nodes
        b.add_level(leaf_rows[0], leaf_rows[1], np.zeros(2, np.bool_), np.ones(leaf_rows[1].shape[0], np.int64))
    return b.finish()


def _admits(spec):
    return None


ST = register_map(FeatureMap(
    kind="st", admits=_admits, local=_local,
    params=lambda spec: {"rep": spec.rep_name, "leaves": spec.leaves},
    base=lambda spec: spec.lam))
