"""Slow, obviously correct HDAG kernel: the explicit feature enumeration of docs/kernels.md, "HDAG kernel: Features".

Every occurrence of every feature is listed with its weight (exact with Fraction ``lam``):

* items of a node: each own attribute (a ``str``, weight 1), and for a chunk each inner
  occurrence: a complete source-to-sink path of its inner graph, a non-empty set of chosen nodes
  on it, an item from each chosen node; unchosen nodes cost D. The item is the tuple of the
  chosen items, or the single chosen item itself when only one is chosen;
* occurrences: in any graph, any directed path v1 -> ... -> vk with v1 and vk chosen; unchosen
  nodes cost D; chosen nodes give items, except that a one-node path gives own attributes only.
  The feature is the tuple of items; its length is its number of attributes.

D is computed by enumerating paths too (no U/B recursion), and parallel edges give distinct
paths. Also here: the plain gap-weighted DAG kernel and the gap-weighted subsequence kernel, by
direct formulas, for the hierarchy-free checks of docs/kernels.md, "HDAG kernel: Conventions where the papers are not certain".
"""
from __future__ import annotations

from collections import defaultdict
from itertools import combinations, product


def length(item) -> int:
    """Number of attributes in an item (``str``) or a feature / group (tuple)."""
    return 1 if isinstance(item, str) else sum(length(x) for x in item)


def _out_edges(h):
    out = defaultdict(list)
    for u, v in h.edges:
        out[u].append(v)  # one entry per edge: parallel edges are distinct routes
    return out


def _paths_from(out, v):
    """All directed paths starting at v (as node lists), one per sequence of edges."""
    res = [[v]]
    for w in out[v]:
        res += [[v] + p for p in _paths_from(out, w)]
    return res


def _inner(h, v):
    return [w for w in range(len(h)) if h.parent[w] == v]


def _complete_paths(h, out, v):
    """Source-to-sink paths of the inner graph of chunk v."""
    nodes = _inner(h, v)
    has_in = {w for u in nodes for w in out[u]}
    sources = [w for w in nodes if w not in has_in]
    return [p for s in sources for p in _paths_from(out, s) if not out[p[-1]]]


def skip_costs(h, lam) -> list:
    """D(v) of every node: lam when terminated, else the sum over complete inner paths of prod D."""
    out = _out_edges(h)
    memo = {}

    def D(v):
        if v not in memo:
            if not _inner(h, v):
                memo[v] = lam
            else:
                total = 0
                for path in _complete_paths(h, out, v):
                    w = 1
                    for u in path:
                        w *= D(u)
                    total += w
                memo[v] = total
        return memo[v]

    return [D(v) for v in range(len(h))]


def _add(acc, key, w):
    acc[key] = acc.get(key, 0) + w


def items(h, lam, p):
    """Per node: dict item -> total weight of the node contributing that item (length <= p)."""
    out = _out_edges(h)
    D = skip_costs(h, lam)
    memo = {}

    def it(v):
        if v in memo:
            return memo[v]
        acc = {}
        for x in h.attrs[v]:
            _add(acc, x, 1)
        if _inner(h, v):
            for path in _complete_paths(h, out, v):
                k = len(path)
                for r in range(1, k + 1):
                    for chosen in combinations(range(k), r):
                        skip = 1
                        for q in range(k):
                            if q not in chosen:
                                skip *= D[path[q]]
                        for combo in product(*[list(it(path[q]).items()) for q in chosen]):
                            seq = tuple(c[0] for c in combo)
                            if sum(length(c) for c in seq) > p:
                                continue
                            w = skip
                            for c in combo:
                                w *= c[1]
                            _add(acc, seq if len(seq) > 1 else seq[0], w)
        memo[v] = acc
        return acc

    return [it(v) for v in range(len(h))]


def features(h, lam, p, exact=False) -> dict:
    """phi(G): dict feature (tuple of items) -> summed occurrence weight, lengths 1..p (only
    length p when ``exact``: docs/kernels.md, "HDAG kernel: Features"'s exact variant)."""
    out = _out_edges(h)
    D = skip_costs(h, lam)
    its = items(h, lam, p)
    phi = {}
    for v in range(len(h)):
        for x in h.attrs[v]:
            _add(phi, (x,), 1)  # one-node sub-paths: own attributes only
        for path in _paths_from(out, v):
            k = len(path)
            if k < 2:
                continue
            for r in range(0, k - 1):
                for mid in combinations(range(1, k - 1), r):
                    chosen = (0,) + mid + (k - 1,)
                    skip = 1
                    for q in range(1, k - 1):
                        if q not in mid:
                            skip *= D[path[q]]
                    for combo in product(*[list(its[path[q]].items()) for q in chosen]):
                        seq = tuple(c[0] for c in combo)
                        if length(seq) > p:
                            continue
                        w = skip
                        for c in combo:
                            w *= c[1]
                        _add(phi, seq, w)
    if exact:
        phi = {f: w for f, w in phi.items() if length(f) == p}
    return phi


def hdag_kernel(h1, h2, lam, p, exact=False):
    """K(G1, G2) = sum over common features of length 1..p (exactly p when ``exact``) of
    phi_f(G1) phi_f(G2)."""
    f1, f2 = features(h1, lam, p, exact), features(h2, lam, p, exact)
    return sum(w * f2[f] for f, w in f1.items() if f in f2)


# ---- hierarchy-free special cases -------------------------------------------------------

def dag_kernel(h1, h2, lam, p):
    """Gap-weighted DAG kernel of two flat HDAGs by dynamic programming over chosen node pairs.

    ``W(u, v)`` = sum over directed paths u -> ... -> v (>= 1 edge) of lam^(inner nodes);
    ``K = sum_{n=1..p} sum over chosen sequences a_1..a_n, b_1..b_n of
    prod Gamma(a_i, b_i) prod W1(a_i, a_i+1) W2(b_i, b_i+1)``.
    """
    def reach(h):
        out = _out_edges(h)
        W = defaultdict(int)
        for v in range(len(h)):
            for path in _paths_from(out, v):
                if len(path) > 1:
                    W[(path[0], path[-1])] += lam ** (len(path) - 2)
        return W

    W1, W2 = reach(h1), reach(h2)
    n1, n2 = len(h1), len(h2)
    pred1 = [[(a2, w) for (a2, a), w in W1.items() if a == a_] for a_ in range(n1)]
    pred2 = [[(b2, w) for (b2, b), w in W2.items() if b == b_] for b_ in range(n2)]
    gamma = {(a, b): len(set(h1.attrs[a]) & set(h2.attrs[b])) for a in range(n1) for b in range(n2)}
    F = dict(gamma)  # sequences of one chosen pair ending at (a, b)
    total = sum(F.values())
    for _ in range(2, p + 1):
        F = {(a, b): gamma[(a, b)] * sum(w1 * w2 * F[(a2, b2)] for a2, w1 in pred1[a] for b2, w2 in pred2[b])
             if gamma[(a, b)] else 0
             for a in range(n1) for b in range(n2)}
        total += sum(F.values())
    return total


def subsequence_kernel(s, t, lam, p):
    """Gap-weighted subsequence kernel: sum over equal index tuples of lam^(gaps in i + gaps in j)."""
    total = 0
    for n in range(1, p + 1):
        for i in combinations(range(len(s)), n):
            for j in combinations(range(len(t)), n):
                if all(s[a] == t[b] for a, b in zip(i, j)):
                    total += lam ** ((i[-1] - i[0] + 1 - n) + (j[-1] - j[0] + 1 - n))
    return total
