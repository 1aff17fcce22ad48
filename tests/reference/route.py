"""Slow, obviously correct route kernel (Aiolli, Da San Martino, Sperduti 2009; docs/kernels.md, "Route kernel").

Each tree is turned into its explicit feature multiset: for every node v and every ancestor-or-
self a of v, the feature ``(route(a, v), end(v))``, where the route is the tuple of child
positions read from a down to v and ``end`` is v's label or its production
``(label, ((position, child label), ...))``. The kernel is the dot product of the two multisets
with weight ``lam ** len(route)`` per common feature, then ``(K + offset) ** degree``.
Exact with :class:`fractions.Fraction` parameters.
"""
from __future__ import annotations

from collections import Counter


def _end(node, variant):
    if variant == "label":
        return node.label
    return (node.label, tuple((p, c.label) for p, c in node.children))


def features(tree, variant="label") -> Counter:
    """Feature multiset ``{(route, end): count}`` of a :class:`PTree`."""
    out = Counter()
    # (node, [positions from the root down to the node])
    stack = [(tree, ())]
    while stack:
        node, path = stack.pop()
        end = _end(node, variant)
        for start in range(len(path) + 1):
            out[(path[start:], end)] += 1
        for p, c in node.children:
            stack.append((c, path + (p,)))
    return out


def route_kernel(t1, t2, lam=0.5, variant="label", offset=0, degree=1):
    """K_gr(t1, t2) = (sum_f c_f(t1) c_f(t2) lam^{|route_f|} + offset)^degree."""
    f1, f2 = features(t1, variant), features(t2, variant)
    k = sum(c * f2[f] * lam ** len(f[0]) for f, c in f1.items() if f in f2)
    return (k + offset) ** degree
