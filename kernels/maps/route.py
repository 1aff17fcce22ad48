"""Feature map of the route kernel (degree 1, offset 0): one feature per (route, end label) or
(route, end production), value its count, weight lam^(route length) (docs/kernels.md, "Route
kernel"). Key of a route of length 0: ``[end key + 1]``; of length s: ``[id of the route of
length s - 1 to the same end node, position of the edge added on top]`` (the level-by-level
extension of ``kernels/route.py``, interned across batches). With ``degree`` > 1 the polynomial
of the total has a finite map too (products of features) but it is not used; ``offset`` > 0
would need a constant feature: neither has a map here.
"""
from __future__ import annotations

import numpy as np

from gramtile.kernels.errors import RepresentationError
from gramtile.kernels.maps import FeatureMap, LevelBuilder, LocalFeatures, register_map


def _local(spec, batch) -> LocalFeatures:
    if batch.kind != "ptree":
        raise RepresentationError(f"kernel 'route' reads positional trees, got a {batch.kind!r} batch")
    off = batch.offsets.astype(np.int64)
    n = batch.n
    total = int(off[-1])
    key = batch.columns["label" if spec.variant == "label" else "prod"].astype(np.int64)
    parent = batch.columns["parent"].astype(np.int64)
    position = batch.columns["position"].astype(np.int64)
    ex = np.repeat(np.arange(n, dtype=np.int64), np.diff(off))
    gparent = np.where(parent >= 0, parent + off[ex], -1)
    b = LevelBuilder(n)
    nodes = np.arange(total, dtype=np.int64)
    cur = b.add_level(ex, (key + 1).reshape(-1, 1), np.zeros(1, np.bool_), np.zeros(total, np.int64))
    anc = nodes
    s = 0
    while True:
        live = gparent[anc] >= 0
        if not live.any():
            break
        s += 1
        nodes, anc, cur = nodes[live], anc[live], cur[live]
        rows = np.stack([cur, position[anc]], axis=1)
        cur = b.add_level(ex[nodes], rows, np.array([True, False]), np.full(nodes.shape[0], s, np.int64))
        anc = gparent[anc]
    return b.finish()


def _admits(spec):
    if spec.degree != 1 or spec.offset != 0:
        return ("the route kernel has a feature map here only with degree 1 and offset 0 "
                f"(got degree {spec.degree}, offset {spec.offset})")
    return None


ROUTE = register_map(FeatureMap(
    kind="route", admits=_admits, local=_local,
    params=lambda spec: {"rep": spec.rep_name, "variant": spec.variant},
    base=lambda spec: spec.lam))
