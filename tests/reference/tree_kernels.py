"""Slow references for the ST, SST and PT tree kernels (docs/kernels.md, "Tree kernels: ST, SST, PT").

Two independent forms of each kernel, on :class:`~gramtile.pipeline.representations.structures.Tree` values,
exact with :class:`fractions.Fraction` parameters:

- the plain recursive Delta straight from the definitions (PT enumerates the child index
  subsequences J1, J2 with ``itertools.combinations``);
- explicit fragment enumeration: list every fragment each tree contains, with its weight, and
  sum the weights of co-occurring fragments.

Only for tiny trees: the enumeration is exponential.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from functools import cache
from itertools import combinations, product

from gramtile.pipeline.representations.structures import Tree


def production(t: Tree, typed=False):
    """A node's production: its label and its children's labels (Collins & Duffy; Aiolli et al.
    2009). ``typed``: each child also says whether it is a leaf (the ``typed_leaves`` option)."""
    if typed:
        return (t.label, tuple((c.label, not c.children) for c in t.children))
    return (t.label, tuple(c.label for c in t.children))


def _pairs(t1, t2):
    for n1 in t1.nodes():
        for n2 in t2.nodes():
            yield n1, n2


def _leaf_pairs(t1, t2):
    l1, l2 = Counter(t1.leaves()), Counter(t2.leaves())
    return sum(c * l2[w] for w, c in l1.items())


# ---- recursion --------------------------------------------------------------------------

@cache
def delta_sst(n1: Tree, n2: Tree, lam, st=False, typed=False):
    """SST Delta (ST when ``st``): 0 for leaves and different productions.

    With label-only productions a child pair may be a leaf and an internal node of the same
    label: its Delta is 0 (a leaf has none), so SST multiplies by 1 + 0 and ST by 0 (the
    complete subtrees below differ)."""
    if not n1.children or not n2.children or production(n1, typed) != production(n2, typed):
        return 0
    out = lam
    for c1, c2 in zip(n1.children, n2.children):
        if st:
            out *= 1 if (not c1.children and not c2.children) else delta_sst(c1, c2, lam, True, typed)
        else:
            out *= 1 + delta_sst(c1, c2, lam, False, typed)
    return out


def sst_kernel(t1, t2, lam, leaves=False, typed=False):
    k = sum(delta_sst(a, b, lam, False, typed) for a, b in _pairs(t1, t2))
    if leaves:
        k += lam * _leaf_pairs(t1, t2)
    return k


def st_kernel(t1, t2, lam, leaves=False, typed=False):
    k = sum(delta_sst(a, b, lam, True, typed) for a, b in _pairs(t1, t2))
    if leaves:
        k += lam * _leaf_pairs(t1, t2)
    return k


def gap_exponent(J, gap):
    """g(J): children skipped inside the span ("gaps") or J_last - J_first ("span")."""
    span = J[-1] - J[0]
    return span + 1 - len(J) if gap == "gaps" else span


@cache
def delta_pt(n1: Tree, n2: Tree, lam, mu, gap="gaps", tf=1, max_length=None):
    if n1.label != n2.label:
        return 0
    if not n1.children or not n2.children:
        return mu * lam ** 2 * tf
    m1, m2 = len(n1.children), len(n2.children)
    top = min(m1, m2) if max_length is None else min(m1, m2, max_length)
    s = 0
    for k in range(1, top + 1):
        for J1 in combinations(range(m1), k):
            for J2 in combinations(range(m2), k):
                w = lam ** (gap_exponent(J1, gap) + gap_exponent(J2, gap))
                for a, b in zip(J1, J2):
                    w *= delta_pt(n1.children[a], n2.children[b], lam, mu, gap, tf, max_length)
                    if not w:
                        break
                s += w
    return mu * (lam ** 2 + s)


def pt_kernel(t1, t2, lam, mu, gap="gaps", tf=1, max_length=None):
    return sum(delta_pt(a, b, lam, mu, gap, tf, max_length) for a, b in _pairs(t1, t2))


# ---- explicit fragment enumeration ------------------------------------------------------

def sst_fragments(n: Tree, typed=False):
    """All SST fragments rooted at internal node ``n`` as ``(fragment, production count)``.

    A fragment keeps, for each node, all of its children or none: a child is a leaf (kept
    as is) or cut, both a frontier node ``("end", label)`` (``typed``: ``("leaf", label)`` and
    ``("cut", label)``, told apart), or expanded into one of its own fragments.
    """
    options = []
    for c in n.children:
        if not c.children:
            options.append([(("leaf" if typed else "end", c.label), 0)])
        else:
            options.append([(("cut" if typed else "end", c.label), 0)] + sst_fragments(c, typed))
    out = []
    for choice in product(*options):
        out.append(((n.label, tuple(f for f, _ in choice)), 1 + sum(s for _, s in choice)))
    return out


def sst_by_fragments(t1, t2, lam, leaves=False, typed=False):
    """sum_f c_f(T1) c_f(T2) lam^{size(f)} over SST fragments (+ lam per equal leaf pair)."""
    def feats(t):
        c, size = Counter(), {}
        for n in t.nodes():
            if n.children:
                for f, s in sst_fragments(n, typed):
                    c[f] += 1
                    size[f] = s
        if leaves:
            for w in t.leaves():
                c[("bow", w)] += 1
                size[("bow", w)] = 1
        return c, size

    (c1, size), (c2, _) = feats(t1), feats(t2)
    return sum(c1[f] * c2[f] * lam ** size[f] for f in c1 if f in c2)


def st_by_fragments(t1, t2, lam, leaves=False):
    """sum over complete subtrees rooted at internal nodes: c(T1) c(T2) lam^{internal nodes};
    with ``leaves`` the one-node subtrees (leaves) count too, each weighted lam."""
    def feats(t):
        return Counter(n for n in t.nodes() if n.children or leaves)

    def weight(s):
        return lam if not s.children else lam ** sum(1 for x in s.nodes() if x.children)

    c1, c2 = feats(t1), feats(t2)
    return sum(c1[s] * c2[s] * weight(s) for s in c1 if s in c2)


def pt_fragments(n: Tree, gap, max_length=None):
    """All PT fragment occurrences rooted at ``n``: ``(fragment, nodes, gap exponent, flags)``.

    A fragment keeps any increasing subsequence J of each node's children (at most
    ``max_length`` long); ``flags`` lists, for each fragment node that keeps no child, whether
    the tree node there is childless (the terminal factor depends on both trees' flags).
    """
    out = [((n.label, ()), 1, 0, (not n.children,))]
    m = len(n.children)
    top = m if max_length is None else min(m, max_length)
    sub = [pt_fragments(c, gap, max_length) for c in n.children]
    for k in range(1, top + 1):
        for J in combinations(range(m), k):
            g = gap_exponent(J, gap)
            for choice in product(*(sub[i] for i in J)):
                frag = (n.label, tuple(f for f, _, _, _ in choice))
                nodes = 1 + sum(x for _, x, _, _ in choice)
                gexp = g + sum(x for _, _, x, _ in choice)
                flags = tuple(fl for _, _, _, fls in choice for fl in fls)
                out.append((frag, nodes, gexp, flags))
    return out


def pt_by_fragments(t1, t2, lam, mu, gap="gaps", tf=1, max_length=None):
    """Sum over pairs of co-occurring PT fragments of
    mu^{nodes} lam^{2 (childless-end nodes) + g1 + g2} prod(tf where either tree node is childless)."""
    def occ(t):
        d = defaultdict(list)
        for n in t.nodes():
            for frag, nodes, g, flags in pt_fragments(n, gap, max_length):
                d[frag].append((nodes, g, flags))
        return d

    o1, o2 = occ(t1), occ(t2)
    k = 0
    for frag, occs1 in o1.items():
        for nodes, g1, f1 in occs1:
            for _, g2, f2 in o2.get(frag, ()):
                w = mu ** nodes * lam ** (2 * len(f1) + g1 + g2)
                for a, b in zip(f1, f2):
                    if a or b:
                        w *= tf
                k += w
    return k
