"""Slow, obviously correct dependency-path kernel (Kate 2008; docs/kernels.md, "Dependency path kernel").

Two independent forms, both exact with ``fractions.Fraction`` alpha:

* :func:`kernel_by_paths` enumerates every simple path of each tree explicitly. A path from
  node u to node v (u != v) is read as the words along it with an arrow per edge, ``">"`` for a
  child-to-parent step (``a -> cat``) and ``"<"`` for a parent-to-child step (``was <- chased``).
  Every undirected path is read in both directions, so it appears twice in a tree's multiset of
  readings. Then ``K = sum_w c1(w) c2(w) + 1/2 sum_r c1(r) c2(r) alpha^edges(r)``: the first
  sum counts common words, the second counts each pair of common paths once per alignment (a
  path with identical arms, x -> w <- x, reads the same both ways and aligns in two ways, which
  is the convention of the recursion).
* :func:`kernel_by_recursion` is the CDP/CPP recursion written literally (memoised per node
  pair), with the alpha^2 (1 + CDP)(1 + CDP') two-arm terms.
"""
from __future__ import annotations

from collections import Counter
from fractions import Fraction
from functools import cache


def _attr(tree, match):
    return tree.words if match == "word" else tree.lemmas


def _children(heads):
    kids = [[] for _ in heads]
    for v, h in enumerate(heads):
        if h >= 0:
            kids[h].append(v)
    return kids


def _ancestors(heads, u):
    out = [u]
    while heads[out[-1]] >= 0:
        out.append(heads[out[-1]])
    return out


def path_readings(tree, match="word") -> Counter:
    """Multiset of directed readings of all simple paths with >= 1 edge (both directions)."""
    w = _attr(tree, match)
    heads = tree.heads
    n = len(w)
    readings = Counter()
    for u in range(n):
        up_u = _ancestors(heads, u)
        for v in range(n):
            if u == v:
                continue
            up_v = _ancestors(heads, v)
            peak = next(x for x in up_u if x in up_v)
            rise = up_u[:up_u.index(peak) + 1]           # u ... peak
            fall = list(reversed(up_v[:up_v.index(peak)]))  # below peak ... v
            r = [w[rise[0]]]
            for x in rise[1:]:
                r += [">", w[x]]
            for x in fall:
                r += ["<", w[x]]
            readings[tuple(r)] += 1
    return readings


def kernel_by_paths(t1, t2, alpha, match="word"):
    """K(T1, T2) from explicit path enumeration (see module docstring)."""
    alpha = Fraction(alpha)
    c1, c2 = Counter(_attr(t1, match)), Counter(_attr(t2, match))
    k = Fraction(sum(c1[x] * c2[x] for x in c1))
    r1, r2 = path_readings(t1, match), path_readings(t2, match)
    paths = Fraction(0)
    for r, c in r1.items():
        if r in r2:
            paths += c * r2[r] * alpha ** (len(r) // 2)
    return k + paths / 2


def _cdp_table(t1, t2, alpha, match):
    w1, w2 = _attr(t1, match), _attr(t2, match)
    k1, k2 = _children(t1.heads), _children(t2.heads)

    @cache
    def cdp(n1, n2):
        if w1[n1] != w2[n2]:
            return Fraction(0)
        return sum((alpha * (1 + cdp(c1, c2)) for c1 in k1[n1] for c2 in k2[n2] if w1[c1] == w2[c2]),
                   Fraction(0))

    def cpp(n1, n2):
        if w1[n1] != w2[n2]:
            return Fraction(0)
        pairs = [(c1, c2) for c1 in k1[n1] for c2 in k2[n2] if w1[c1] == w2[c2]]
        two = Fraction(0)
        for a in range(len(pairs)):
            for b in range(a + 1, len(pairs)):
                (c1, c2), (d1, d2) = pairs[a], pairs[b]
                if c1 != d1 and c2 != d2:
                    two += alpha ** 2 * (1 + cdp(c1, c2)) * (1 + cdp(d1, d2))
        return cdp(n1, n2) + two

    return cdp, cpp


def cdp(t1, n1, t2, n2, alpha, match="word"):
    """CDP(n1, n2): weighted common downward paths starting at node n1 of T1 and n2 of T2."""
    return _cdp_table(t1, t2, Fraction(alpha), match)[0](n1, n2)


def kernel_by_recursion(t1, t2, alpha, match="word"):
    """K(T1, T2) = sum over equal-word node pairs of 1 + CPP (docs/kernels.md, "Dependency path kernel")."""
    alpha = Fraction(alpha)
    w1, w2 = _attr(t1, match), _attr(t2, match)
    _, cpp = _cdp_table(t1, t2, alpha, match)
    return sum((1 + cpp(a, b) for a in range(len(w1)) for b in range(len(w2)) if w1[a] == w2[b]), Fraction(0))
