"""HDAG kernel (kernels/hdag.py) against the explicit enumeration of docs/kernels.md, "HDAG kernel: Features"
(tests/reference/hdag.py), docs/kernels.md's HDAG worked example and its hierarchy-free special cases; the
HDAG representation (pipeline/representations/hdag.py)."""
import json
import random
from fractions import Fraction

import numpy as np
import pytest
from instances_hdag import rand_hdag
from reference.hdag import dag_kernel, features, hdag_kernel, subsequence_kernel
from reference.hdag import skip_costs as ref_skip_costs

import gramtile
from gramtile.kernels.errors import KernelSpecError, RepresentationError
from gramtile.kernels.hdag import HDAGKernel, skip_costs
from gramtile.pipeline.representations.encode import decode, encode
from gramtile.pipeline.representations.hdag import HDAG, hdag_from_obj, hdag_to_obj
from gramtile.pipeline.representations.vocab import Vocabularies

# docs/kernels.md, "HDAG kernel: Worked example (HDAG)". G1: P -> z, P = chunk{x -> y}. G2: Q -> m -> z, Q = chunk{x -> k -> y}.
G1 = HDAG([[], ["z"], ["x"], ["y"]], [-1, -1, 0, 0], [(0, 1), (2, 3)])
G2 = HDAG([[], ["m"], ["z"], ["x"], ["k"], ["y"]], [-1, -1, -1, 0, 0, 0], [(0, 1), (1, 2), (3, 4), (4, 5)])


def exact_gram(hs, lam, p, others=None, exact=False):
    """Reference Gram matrix (Fractions -> float): features of each HDAG enumerated once."""
    fa = [features(h, lam, p, exact) for h in hs]
    fb = fa if others is None else [features(h, lam, p, exact) for h in others]
    return np.array([[float(sum(w * b[f] for f, w in a.items() if f in b)) for b in fb] for a in fa])


def test_worked_example_exact():
    lam = Fraction(1, 2)
    assert hdag_kernel(G1, G2, lam, 3) == Fraction(31, 8)
    assert hdag_kernel(G1, G1, lam, 3) == Fraction(11, 2)
    assert hdag_kernel(G2, G2, lam, 3) == Fraction(679, 64)
    K = gramtile.gram({"kind": "hdag", "lam": 0.5, "p": 3}, [G1, G2])
    assert K.tolist() == [[5.5, 3.875], [3.875, 679 / 64]]  # dyadic: exact in float64
    N = gramtile.gram({"kind": "normalized", "kernel": {"kind": "hdag", "lam": 0.5, "p": 3}}, [G1], [G2])
    assert N[0, 0] == pytest.approx(0.5072773389, abs=1e-10)


@pytest.mark.parametrize("lam", [Fraction(1, 3), Fraction(7, 10), Fraction(1)])
def test_worked_example_polynomials(lam):
    want = {(0, 1): 3 + lam + lam ** 2 + 2 * lam ** 4, (0, 0): 5 + 2 * lam ** 2,
            (1, 1): 9 + 4 * lam ** 2 + 9 * lam ** 4 + 3 * lam ** 6}
    K = HDAGKernel(lam=float(lam), p=3).block(encode([G1, G2], Vocabularies()))
    for (i, j), v in want.items():
        assert hdag_kernel([G1, G2][i], [G1, G2][j], lam, 3) == v
        assert K[i, j] == pytest.approx(float(v), rel=1e-14)


def test_worked_example_skip_costs():
    lam = Fraction(1, 2)
    nodes, D, U, B = skip_costs(encode([G2, G1], Vocabularies()), 0.5)
    # G2 nodes: Q, m, z, x, k, y
    assert D[:6].tolist() == [lam ** 3, lam, lam, lam, lam, lam]
    assert U[:6].tolist() == [1, lam ** 3, lam ** 4, 1, lam, lam ** 2]
    assert B[:6].tolist() == [lam ** 2, lam, 1, lam ** 2, lam, 1]
    # G1 nodes: P, z, x, y
    assert D[6:].tolist() == [lam ** 2, lam, lam, lam]
    assert U[6:].tolist() == [1, lam ** 2, 1, lam] and B[6:].tolist() == [lam, 1, lam, 1]
    assert ref_skip_costs(G2, lam) == [lam ** 3, lam, lam, lam, lam, lam]


def test_section3_decay_example():
    # chunk p1 holds p2 -> p3 and p4 -> p3; p1 -> p5 at the top
    h = HDAG([["p1"], ["p2"], ["p3"], ["p4"], ["p5"]], [-1, 0, 0, 0, -1], [(1, 2), (3, 2), (0, 4)])
    lam = 0.5
    _, D, U, B = skip_costs(encode([h], Vocabularies()), lam)
    assert D[0] == 2 * lam ** 2 and D[1] == lam
    assert U[2] == 2 * lam and U[0] == 1 and U[4] == 2 * lam ** 2
    assert B[1] == lam and B[0] == lam
    assert ref_skip_costs(h, Fraction(1, 2))[0] == 2 * Fraction(1, 2) ** 2


def _richer(h, rng):
    """``h`` with a shared attribute ``w`` added to about 60 % of its nodes (chunks too)."""
    return HDAG([tuple(sorted(set(a) | ({"w"} if rng.random() < 0.6 else set()))) for a in h.attrs], h.parent,
                h.edges)


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("p", [1, 2, 3, 4, 5, 6])
def test_numba_equals_enumeration_on_random_hdags(p, exact):
    # 2 x 6 x 90 = 1,080 random HDAGs (nesting depth <= 3, chunk attributes, parallel routes)
    rng = random.Random(1000 + p + 100 * exact)
    lam = [Fraction(1, 2), Fraction(3, 10), Fraction(1), Fraction(9, 10), Fraction(1, 7), Fraction(2, 3)][p - 1]
    # exact: slightly larger, attribute-richer HDAGs, so that features of length exactly 5 or 6 occur
    hs = [_richer(rand_hdag(rng, max_nodes=14), rng) if exact else rand_hdag(rng) for _ in range(85)]
    hs += [HDAG([["x"]], [-1]), HDAG([["x"]], [-1]), HDAG([["q"]], [-1]), hs[0], HDAG([[], ["q"]], [-1, 0])]
    spec = HDAGKernel(lam=float(lam), p=p, exact=exact)
    v = Vocabularies()
    R = exact_gram(hs, lam, p, exact=exact)
    K = spec.block(encode(hs, v))
    np.testing.assert_allclose(K, R, rtol=1e-12, atol=0)
    np.testing.assert_allclose(spec.diag(encode(hs, v)), np.diag(R), rtol=1e-12, atol=0)
    np.testing.assert_allclose(spec.block(encode(hs[:30], v), encode(hs[30:], v)), R[:30, 30:], rtol=1e-12, atol=0)
    assert K[-3, -5] == 0.0  # nothing shared
    lone = 0.0 if exact and p > 1 else 1.0  # one attribute: a feature of length 1 only
    assert K[-1, -1] == K[-1, -3] == lone  # a lone chunk adds nothing to its content
    if exact:
        assert np.count_nonzero(K - np.diag(np.diag(K))) >= 10  # pairs share features of length exactly p


def test_exact_lengths_add_up_to_the_sum_over_lengths():
    rng = random.Random(21)
    hs = [rand_hdag(rng, max_nodes=14) for _ in range(40)]
    X = encode(hs, Vocabularies())
    for p in (1, 3, 5):
        parts = [HDAGKernel(lam=0.7, p=q, exact=True).block(X) for q in range(1, p + 1)]
        np.testing.assert_allclose(sum(parts), HDAGKernel(lam=0.7, p=p).block(X), rtol=1e-12, atol=0)
        assert all(np.any(q > 0) for q in parts)


def test_worked_example_exact_variant():
    # docs/kernels.md, "HDAG kernel: Worked example (HDAG)"'s table by length: 3 (x, y, z), lam + 2 lam^4 (x-y, x-z, y-z), lam^2 ((x-y)-z)
    lam = Fraction(1, 2)
    want = {1: 3, 2: lam + 2 * lam ** 4, 3: lam ** 2}
    for p, v in want.items():
        assert hdag_kernel(G1, G2, lam, p, exact=True) == v
        K = gramtile.gram({"kind": "hdag", "lam": 0.5, "p": p, "exact": True}, [G1], [G2])
        assert K[0, 0] == float(v)  # dyadic: exact in float64
    assert sum(want.values()) == Fraction(31, 8)
    assert gramtile.gram({"kind": "hdag", "lam": 0.5, "p": 4, "exact": True}, [G1], [G2])[0, 0] == 0.0


def test_deeper_and_larger_random_hdags():
    rng = random.Random(7)
    hs = [rand_hdag(rng, max_nodes=16, max_depth=4) for _ in range(25)]
    lam = Fraction(3, 5)
    K = HDAGKernel(lam=0.6, p=4).block(encode(hs, Vocabularies()))
    np.testing.assert_allclose(K, exact_gram(hs, lam, 4), rtol=1e-12, atol=0)


def test_node_numbering_does_not_matter():
    rng = random.Random(3)
    for _ in range(20):
        h = rand_hdag(rng)
        perm = list(range(len(h)))
        rng.shuffle(perm)
        attrs, parent = [None] * len(h), [None] * len(h)
        for old, new in enumerate(perm):
            attrs[new] = h.attrs[old]
            parent[new] = -1 if h.parent[old] < 0 else perm[h.parent[old]]
        g = HDAG(attrs, parent, [(perm[u], perm[v]) for u, v in reversed(h.edges)])
        K = gramtile.gram({"kind": "hdag", "lam": 0.7, "p": 4}, [h, g])
        np.testing.assert_allclose(K, K[0, 0], rtol=1e-12)


def _flat(rng, n):
    attrs = [tuple(rng.sample("abc", rng.choice((1, 1, 2)))) for _ in range(n)]
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.45]
    edges += [e for e in edges if rng.random() < 0.2]  # parallel edges
    return HDAG(attrs, [-1] * n, edges)


def test_without_hierarchy_equals_gap_weighted_dag_kernel():
    rng = random.Random(11)
    hs = [_flat(rng, rng.randint(1, 7)) for _ in range(30)]
    for lam, p in ((Fraction(1, 2), 3), (Fraction(4, 5), 5)):
        K = HDAGKernel(lam=float(lam), p=p).block(encode(hs, Vocabularies()))
        R = np.array([[float(dag_kernel(a, b, lam, p)) for b in hs] for a in hs])
        np.testing.assert_allclose(K, R, rtol=1e-12, atol=0)


def test_chain_equals_gap_weighted_subsequence_kernel():
    rng = random.Random(5)
    words = [[rng.choice("ab") for _ in range(rng.randint(1, 8))] for _ in range(20)]
    hs = [HDAG.chain(w) for w in words]
    lam = Fraction(3, 5)
    K = HDAGKernel(lam=0.6, p=4).block(encode(hs, Vocabularies()))
    R = np.array([[float(subsequence_kernel(s, t, lam, 4)) for t in words] for s in words])
    np.testing.assert_allclose(K, R, rtol=1e-12, atol=0)


def test_single_item_chunk_is_its_content_and_brackets_matter():
    lone = HDAG([[], ["x"], ["z"]], [-1, 0, -1], [(0, 2)])  # (x) -> z
    bare = HDAG([["x"], ["z"]], [-1, -1], [(0, 1)])          # x -> z
    K = gramtile.gram({"kind": "hdag", "lam": 0.5, "p": 3}, [lone, bare])
    assert K[0, 1] == K[1, 1] == K[0, 0] == 3.0  # x, z, x-z
    grouped = HDAG([["N"], [], ["d"], ["a"]], [-1, -1, 1, 1], [(0, 1), (2, 3)])  # N -> (d -> a)
    flat = HDAG([["N"], ["d"], ["a"]], [-1, -1, -1], [(0, 1), (1, 2)])           # N -> d -> a
    K = gramtile.gram({"kind": "hdag", "lam": 1.0, "p": 3}, [grouped, flat])
    # common: N, d, a, d-a, N-d, N-a; not N-(d-a) vs N-d-a
    assert K[0, 1] == 6.0 and K[0, 0] == 7.0 and K[1, 1] == 7.0


# ---- representation -----------------------------------------------------------------------

def test_encode_decode_and_json_round_trip():
    rng = random.Random(2)
    hs = [rand_hdag(rng) for _ in range(30)] + [G1, G2]
    v = Vocabularies()
    X = encode(hs, v)
    assert X.kind == "hdag" and decode(X, v) == hs
    assert decode(X.take([3, 0, 31]), v) == [hs[3], hs[0], hs[31]]
    for h in hs:
        assert hdag_from_obj(json.loads(json.dumps(hdag_to_obj(h)))) == h
    assert hdag_from_obj({"attrs": [["a"], ["b"]]}) == HDAG([["a"], ["b"]], [-1, -1], [])


@pytest.mark.parametrize("attrs,parent,edges,words", [
    ([], [], [], ["empty HDAG"]),
    ([["a"]], [-1, -1], [], ["'parent' has 2 entries", "1 nodes"]),
    ([["a", "a"]], [-1], [], ["node 0", "['a']", "repeated"]),
    ([["a"], ["b"]], [-1, 5], [], ["node 1", "parent 5", "[0, 1]"]),
    ([["a"], ["b"]], [1, 0], [], ["membership cycle"]),
    ([["a"], ["b"], ["c"]], [-1, -1, 0], [(1, 2)], ["edge 0", "(1, 2)", "different graphs"]),
    ([["a"], ["b"]], [-1, -1], [(0, 1), (1, 0)], ["cycle", "acyclic"]),
    ([["a"], ["b"]], [-1, -1], [(0, 0)], ["self-loop"]),
    ([["a"], ["b"]], [-1, -1], [(0, 3)], ["edge 0", "[0, 3]", "node indices"]),
    ([["a"], [7]], [-1, -1], [], ["node 1", "7", "not a string"]),
])
def test_invalid_hdags_raise_typed_errors(attrs, parent, edges, words):
    with pytest.raises(RepresentationError) as e:
        HDAG(attrs, parent, edges)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


@pytest.mark.parametrize("obj,words", [
    ([1, 2], ["'hdag' must be an object", "list"]),
    ({"attrs": [["a"]], "labels": []}, ["unknown key 'labels'"]),
    ({"attrs": "a b"}, ["'hdag.attrs'", "'a b'"]),
    ({"attrs": [["a"]], "edges": [3]}, ["'hdag.edges'", "[u, v]"]),
])
def test_invalid_json_objects_raise_typed_errors(obj, words):
    with pytest.raises(RepresentationError) as e:
        hdag_from_obj(obj)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


@pytest.mark.parametrize("bad,words", [
    ({"lam": 0}, ["'lam'", "(0, 1]", "0"]),
    ({"lam": 1.5}, ["'lam'", "(0, 1]", "1.5"]),
    ({"p": 0}, ["'p'", "[1, inf]", "0"]),
    ({"p": 2.5}, ["'p'", "integer", "2.5"]),
    ({"exact": "yes"}, ["'exact'", "true or false", "'yes'"]),
])
def test_invalid_parameters_raise_typed_errors(bad, words):
    with pytest.raises(KernelSpecError) as e:
        gramtile.gram({"kind": "hdag", **bad}, [G1])
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_exact_default_keeps_the_spec_hash_of_stored_matrices():
    """HDAG stores computed before ``exact`` existed stay valid: the default is left out of the
    spec (its JSON and hash are those of {kind: hdag, lam, p, rep}); exact=true is a new kernel."""
    import hashlib
    import json

    from gramtile.kernels.registry import as_spec

    old = json.dumps({"kind": "hdag", "lam": 0.5, "p": 3, "rep": "hdag"}, sort_keys=True, separators=(",", ":"))
    assert as_spec({"kind": "hdag", "lam": 0.5, "p": 3}).spec_hash == hashlib.sha256(old.encode()).hexdigest()
    assert as_spec({"kind": "hdag", "exact": False}) == as_spec({"kind": "hdag"})
    assert as_spec({"kind": "hdag", "exact": True}).spec_hash != as_spec({"kind": "hdag"}).spec_hash
