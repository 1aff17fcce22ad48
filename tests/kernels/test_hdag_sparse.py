"""The HDAG kernel's sparse pair core (kernels/hdag.py: active node pairs, J as path-weight sums)
against the dense table recursion it replaced (tests/reference/hdag_dense.py) on many random
HDAGs larger than the explicit enumeration of tests/kernels/test_hdag.py reaches, every p, lam, and the
exact variant; and the per-batch arrays it reads (deep attribute lists, path weights)."""
import random
from collections import defaultdict

import numpy as np
import pytest
from instances_hdag import rand_hdag
from reference.hdag import skip_costs as ref_skip_costs
from reference.hdag_dense import dense_block, dense_diag

from gramtile.kernels.hdag import HDAGKernel, prepare
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.hdag import HDAG
from gramtile.pipeline.representations.vocab import Vocabularies


def _question_like(rng):
    """A TREC-question-shaped HDAG: words (form, PoS, sometimes NE) in chains inside chunks of 1-3
    words with a label, chunks and loose words linked by a random dependency tree, entities
    nested inside some chunks."""
    attrs, parent, edges, units = [], [], [], []
    for _ in range(rng.randint(1, 7)):
        if rng.random() < 0.3:  # a loose word in the top graph
            units.append(len(attrs))
            attrs.append((rng.choice("xyzabc"), rng.choice(["NN", "VB", "WP"])))
            parent.append(-1)
            continue
        c = len(attrs)
        units.append(c)
        attrs.append((rng.choice(["NP", "VP", "PP"]),))
        parent.append(-1)
        prev = None
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.2:  # an entity chunk nested in the chunk
                e = len(attrs)
                attrs.append(("GPE",))
                parent.append(c)
                w0 = None
                for _ in range(rng.randint(1, 2)):
                    w = len(attrs)
                    attrs.append((rng.choice("xyzabc"), "NNP", "GPE"))
                    parent.append(e)
                    if w0 is not None:
                        edges.append((w0, w))
                    w0 = w
                node = e
            else:
                node = len(attrs)
                attrs.append(tuple(sorted({rng.choice("xyzabc"), rng.choice(["NN", "VB", "DT", "IN"])})))
                parent.append(c)
            if prev is not None:
                edges.append((prev, node))
            prev = node
    for k in range(1, len(units)):
        edges.append((units[k], units[rng.randrange(k)]))  # dependent -> governor
    return HDAG(attrs, parent, edges)


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("p,lam", [(1, 0.5), (2, 0.3), (3, 0.5), (3, 0.77), (4, 1.0), (4, 0.13)])
def test_sparse_core_equals_dense_recursion(p, lam, exact):
    # 120 random HDAGs per case (60 general: nesting <= 4, diamonds, parallel edges, chunk
    # attributes, up to 30 nodes; 60 question-shaped), all pairs, both block shapes and the diagonal
    rng = random.Random(int(1000 * lam) + 10 * p + exact)
    hs = [rand_hdag(rng, max_nodes=30, max_depth=4) for _ in range(60)] + [_question_like(rng) for _ in range(60)]
    v = Vocabularies()
    X, Y = encode(hs[:70], v), encode(hs[70:], v)
    spec = HDAGKernel(lam=lam, p=p, exact=exact)
    for got, want in ((spec.block(X), dense_block(X, None, lam, p, exact)),
                      (spec.block(X, Y), dense_block(X, Y, lam, p, exact)),
                      (spec.diag(Y), dense_diag(Y, lam, p, exact))):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
        assert np.count_nonzero(want) > (0.05 if exact else 0.2) * want.size  # the inputs share features


def test_random_inputs_reach_long_features_and_nesting():
    # the comparison above can fail: lengths up to 4 and nested chunks change K on these inputs
    rng = random.Random(5)
    hs = [rand_hdag(rng, max_nodes=30, max_depth=4) for _ in range(40)] + [_question_like(rng) for _ in range(40)]
    X = encode(hs, Vocabularies())
    K3, K4 = HDAGKernel(lam=0.5, p=3).block(X), HDAGKernel(lam=0.5, p=4).block(X)
    assert np.count_nonzero(K4 > K3 * (1 + 1e-9)) > 0.05 * K3.size  # 547 of 6,400 pairs share length-4 features
    flat = [HDAG(h.attrs, [-1] * len(h.attrs), [(u, w) for u, w in h.edges if h.parent[u] < 0]) for h in hs]
    Kf = HDAGKernel(lam=0.5, p=3).block(encode(flat, Vocabularies()))
    assert np.count_nonzero(np.abs(Kf - K3) > 1e-9 * K3) > 0.2 * K3.size


def _deep(h):
    """Python sets: own attributes and the attributes strictly inside each node (at any depth)."""
    inside = defaultdict(set)
    for v in range(len(h.attrs)):
        c = h.parent[v]
        while c >= 0:
            inside[c] |= set(h.attrs[v])
            c = h.parent[c]
    return [(sorted(h.attrs[v]), inside[v] - set(h.attrs[v])) for v in range(len(h.attrs))]


def test_deep_attribute_lists_and_path_weights():
    # compared per example as multisets over nodes (the core numbers nodes in its processing order)
    rng = random.Random(11)
    hs = [rand_hdag(rng, max_nodes=20, max_depth=4) for _ in range(50)]
    v = Vocabularies()
    X = encode(hs, v)
    lam = 0.6
    nptr, P, Q = prepare(X, lam)
    wptr, widx, wval, dptr, dend, dids, down = Q
    D = P[1]
    for e, h in enumerate(hs):
        want = sorted((len(own), len(inherited)) for own, inherited in _deep(h))
        got = sorted((int(down[dptr[g]:dend[g]].sum()), int((1 - down[dptr[g]:dend[g]]).sum()))
                     for g in range(nptr[e], nptr[e + 1]))
        assert got == want  # own occurrences, and each inherited attribute once
        for g in range(nptr[e], nptr[e + 1]):
            ents = dids[dptr[g]:dend[g]]
            assert len(set(ents[down[dptr[g]:dend[g]] == 0].tolist()) & set(ents[down[dptr[g]:dend[g]] == 1].tolist())) == 0
        # W(s0, v): sum over in-graph paths s0 -> ... -> v of prod D strictly between (enumerated)
        pa = defaultdict(list)
        for a_, b_ in h.edges:
            pa[b_].append(a_)
        Dv = sorted(D[nptr[e]:nptr[e + 1]].tolist())
        np.testing.assert_allclose(Dv, sorted(_ref_d(h, lam)), rtol=1e-13)

        def paths_into(v_, acc, d):
            for u in pa[v_]:
                yield u, acc
                yield from paths_into(u, acc * d[u], d)

        d = _ref_d(h, lam)
        want = sorted(sorted(round(w, 12) for w in _sum_by(paths_into(v_, 1.0, d)).values()) for v_ in range(len(h.attrs)))
        got = sorted(sorted(round(w, 12) for w in wval[wptr[g]:wptr[g + 1]].tolist()) for g in range(nptr[e], nptr[e + 1]))
        assert got == want


def _sum_by(pairs):
    out = defaultdict(float)
    for k, w in pairs:
        out[k] += w
    return out


def _ref_d(h, lam):
    """D of every node in the example's own numbering (tests/reference/hdag.py's path enumeration)."""
    return [float(x) for x in ref_skip_costs(h, lam)]
