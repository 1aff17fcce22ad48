"""Slow references for the smoothed partial tree kernel (docs/kernels.md, "Smoothed partial tree kernel").

Two independent forms, on :class:`~gramtile.pipeline.representations.structures.Tree` values,
exact with :class:`fractions.Fraction` parameters and similarities:

- the recursive Delta straight from the definition (child index subsequences J1, J2 enumerated
  with ``itertools.combinations``), sigma(n1, n2) multiplying PT's Delta;
- explicit fragment enumeration with soft matching: every PT fragment occurrence of each tree,
  with its shape and the labels at its nodes; two occurrences of the same shape contribute PT's
  weight times the product of sigma over their aligned nodes.

``sim(a, b)`` is the lexical similarity of two labels (a dict lookup in the tests); ``lexical``
says which nodes it applies to: ``"leaves"`` (childless nodes) or ``"all"``. Equal labels have
sigma 1; a similarity below ``threshold`` counts as 0. Only for tiny trees.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from itertools import combinations, product

from gramtile.pipeline.representations.structures import Tree
from reference.tree_kernels import gap_exponent


def sigma(n1: Tree, n2: Tree, sim, threshold=0, lexical="leaves"):
    if n1.label == n2.label:
        return 1
    if lexical == "leaves" and (n1.children or n2.children):
        return 0
    s = sim(n1.label, n2.label)
    return s if s >= threshold and s > 0 else 0


def sptk_kernel(t1, t2, sim, lam, mu, gap="gaps", tf=1, max_length=None, threshold=0, lexical="leaves"):
    memo = {}

    def delta(n1, n2):
        key = (id(n1), id(n2))
        if key in memo:
            return memo[key]
        s = sigma(n1, n2, sim, threshold, lexical)
        if not s:
            out = 0
        elif not n1.children or not n2.children:
            out = s * mu * lam ** 2 * tf
        else:
            m1, m2 = len(n1.children), len(n2.children)
            top = min(m1, m2) if max_length is None else min(m1, m2, max_length)
            tot = 0
            for k in range(1, top + 1):
                for J1 in combinations(range(m1), k):
                    for J2 in combinations(range(m2), k):
                        w = lam ** (gap_exponent(J1, gap) + gap_exponent(J2, gap))
                        for a, b in zip(J1, J2):
                            w *= delta(n1.children[a], n2.children[b])
                            if not w:
                                break
                        tot += w
            out = s * mu * (lam ** 2 + tot)
        memo[key] = out
        return out

    return sum(delta(a, b) for a in t1.nodes() for b in t2.nodes())


def sptk_fragments(n: Tree, gap, max_length=None):
    """All PT fragment occurrences rooted at ``n``: ``(shape, nodes, gap exponent, ends)``.

    ``shape`` is the fragment with each node as ``(node, child shapes)`` (the tree nodes
    themselves, so labels and childlessness can be read); ``ends`` lists, for each fragment node
    that keeps no child, whether the tree node is childless.
    """
    out = [((n, ()), 1, 0, (not n.children,))]
    m = len(n.children)
    top = m if max_length is None else min(m, max_length)
    sub = [sptk_fragments(c, gap, max_length) for c in n.children]
    for k in range(1, top + 1):
        for J in combinations(range(m), k):
            g = gap_exponent(J, gap)
            for choice in product(*(sub[i] for i in J)):
                shape = (n, tuple(s for s, _, _, _ in choice))
                nodes = 1 + sum(x for _, x, _, _ in choice)
                gexp = g + sum(x for _, _, x, _ in choice)
                ends = tuple(e for _, _, _, es in choice for e in es)
                out.append((shape, nodes, gexp, ends))
    return out


def _skeleton(shape):
    """The fragment's shape without labels: nested tuples of child counts."""
    return tuple(_skeleton(c) for c in shape[1])


def _preorder(shape):
    """The tree nodes of a fragment in preorder."""
    yield shape[0]
    for c in shape[1]:
        yield from _preorder(c)


def sptk_by_fragments(t1, t2, sim, lam, mu, gap="gaps", tf=1, max_length=None, threshold=0, lexical="leaves"):
    """Sum over pairs of PT fragment occurrences of one skeleton of
    prod(sigma over aligned nodes) mu^{nodes} lam^{2 (ends) + g1 + g2} prod(tf where either end node
    is childless in its tree).

    Occurrences of a skeleton are counted by what the weight reads (labels and childlessness of
    their nodes in preorder, gap exponent, end flags), so equal occurrences pair once."""
    def occ(t):
        d = defaultdict(Counter)
        for n in t.nodes():
            for shape, nodes, g, ends in sptk_fragments(n, gap, max_length):
                at = tuple((x.label, not x.children) for x in _preorder(shape))
                d[_skeleton(shape)][(at, nodes, g, ends)] += 1
        return d

    def sig(a, b):
        if a[0] == b[0]:
            return 1
        if lexical == "leaves" and not (a[1] and b[1]):
            return 0
        s = sim(a[0], b[0])
        return s if s >= threshold and s > 0 else 0

    o1, o2 = occ(t1), occ(t2)
    k = 0
    for skel, occs1 in o1.items():
        for (at1, nodes, g1, e1), c1 in occs1.items():
            for (at2, _, g2, e2), c2 in o2.get(skel, {}).items():
                w = c1 * c2
                for a, b in zip(at1, at2):
                    w *= sig(a, b)
                    if not w:
                        break
                if not w:
                    continue
                w *= mu ** nodes * lam ** (2 * len(e1) + g1 + g2)
                for a, b in zip(e1, e2):
                    if a or b:
                        w *= tf
                k += w
    return k
