"""Smoothed partial tree kernel: the Numba core against two slow references on random trees and
random similarity tables, SPTK = PT bit for bit when sigma is label equality, spec checks."""
from __future__ import annotations

import random
from fractions import Fraction as F

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference.sptk import sptk_by_fragments, sptk_kernel
from reference.tree_kernels import pt_kernel
from strategies import MIXED_WORDS, tree_lists, tree_pairs

from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import spec_from_dict
from gramtile.kernels.sptk import SmoothedPartialTreeKernel
from gramtile.kernels.tree_kernels import PartialTreeKernel
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies

EXACT = settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
BLOCKS = settings(max_examples=12, derandomize=True, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

#: every symbol the random trees use (strategies.py alphabets)
SYMBOLS = ("A", "B", "C", "a", "b", "X", "Y", "x", "y")


@st.composite
def sim_tables(draw):
    """A random symmetric similarity over SYMBOLS: exact fractions in (0, 1], some pairs absent."""
    sim = {}
    for i, a in enumerate(SYMBOLS):
        for b in SYMBOLS[i + 1:]:
            if draw(st.booleans()):
                s = F(draw(st.integers(1, 20)), 20)
                sim[a, b] = sim[b, a] = s
    return sim


def _lookup(sim):
    return lambda a, b: sim.get((a, b), 0)


def _table(sim, vocabs):
    """The CSR table over the symbol ids of ``vocabs`` (unit diagonal, as the resource builders make)."""
    sym = vocabs.sym
    n = len(sym)
    rows, cols, vals = list(range(n)), list(range(n)), [1.0] * n
    for (a, b), s in sim.items():
        if a in sym and b in sym:
            rows.append(sym.get(a))
            cols.append(sym.get(b))
            vals.append(float(s))
    return sp.csr_matrix((vals, (rows, cols)), shape=(n, n))


def _spec(**kw):
    return SmoothedPartialTreeKernel(similarity="wordnet", **kw)


def _res(spec, A):
    return {spec.resources()[0]: A}


# ---- (1) the two references agree, exactly ------------------------------------------------

@EXACT
@given(tree_pairs(max_depth=2, max_children=3), sim_tables(), st.sampled_from(["leaves", "all"]),
       st.sampled_from([0, F(1, 2)]))
def test_recursion_equals_soft_fragment_enumeration(pair, sim, lexical, threshold):
    t1, t2 = pair
    look = _lookup(sim)
    for lam, mu, gap, tf, ml in [(F(2, 5), F(2, 5), "gaps", 1, None), (F(1, 2), F(3, 4), "span", 3, 2)]:
        a = sptk_kernel(t1, t2, look, lam, mu, gap, tf, ml, threshold, lexical)
        b = sptk_by_fragments(t1, t2, look, lam, mu, gap, tf, ml, threshold, lexical)
        assert a == b


@EXACT
@given(tree_pairs(max_depth=2, max_children=3))
def test_references_with_equality_are_pt(pair):
    t1, t2 = pair
    none = _lookup({})
    lam, mu = F(2, 5), F(3, 5)
    assert sptk_kernel(t1, t2, none, lam, mu, "gaps", 2) == pt_kernel(t1, t2, lam, mu, "gaps", 2)
    assert sptk_by_fragments(t1, t2, none, lam, mu, "span", 1, 2) == pt_kernel(t1, t2, lam, mu, "span", 1, 2)


def test_soft_matching_adds_the_similar_leaf_fragments():
    # (A a) vs (A b) with s(a, b) = 1/2: fragments A, (A a~b), and the leaf pair a~b
    t1, t2 = parse_tree("(A a)"), parse_tree("(A b)")
    lam, mu = F(1, 2), F(1, 2)
    look = _lookup({("a", "b"): F(1, 2), ("b", "a"): F(1, 2)})
    leaf = F(1, 2) * mu * lam ** 2
    root = mu * (lam ** 2 + leaf)
    assert sptk_kernel(t1, t2, look, lam, mu) == root + leaf
    assert sptk_kernel(t1, t2, _lookup({}), lam, mu) == mu * lam ** 2
    assert sptk_by_fragments(t1, t2, look, lam, mu) == root + leaf


# ---- (2) the Numba core against the references --------------------------------------------

CONFIGS = [
    dict(lam=0.4, mu=0.4),
    dict(lam=0.5, mu=0.7, gap="span", terminal_factor=3.0),
    dict(lam=0.3, mu=0.9, max_length=2, terminal_factor=5.0),
    dict(lam=1.0, mu=1.0, threshold=0.3),
]


def _ref_args(cfg):
    return (cfg.get("lam", 0.4), cfg.get("mu", 0.4), cfg.get("gap", "gaps"), cfg.get("terminal_factor", 1.0),
            cfg.get("max_length"), cfg.get("threshold", 0.5))


@pytest.mark.parametrize("lexical", ["leaves", "prefix"])
@pytest.mark.parametrize("words", ["default", "mixed"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=[str(c) for c in CONFIGS])
def test_numba_block_equals_both_references(cfg, words, lexical):
    spec = _spec(lexical=lexical, **cfg)
    lam, mu, gap, tf, ml, thr = _ref_args(cfg)
    ref_lex = "leaves" if lexical == "leaves" else "all"  # the table of "prefix" holds only lexical symbols
    kw = {"max_depth": 3, "max_children": 4}
    if words == "mixed":
        kw.update(labels=("A", "B"), words=MIXED_WORDS)
    counted = []

    @BLOCKS
    @given(tree_lists(7, **kw), tree_lists(5, **kw), sim_tables())
    def check(xs, ys, sim):
        v = Vocabularies()
        X, Y = encode(xs, v), encode(ys, v)
        A = _table(sim, v)
        look = _lookup(sim)

        def ref(a, b):
            return float(sptk_kernel(a, b, look, lam, mu, gap, tf, ml, thr, ref_lex))

        R = np.array([[ref(a, b) for b in xs] for a in xs])
        np.testing.assert_allclose(spec.block(X, resources=_res(spec, A)), R, rtol=1e-12, atol=0)
        np.testing.assert_allclose(spec.diag(X, resources=_res(spec, A)), np.diag(R), rtol=1e-12, atol=0)
        RY = np.array([[ref(a, b) for b in ys] for a in xs])
        np.testing.assert_allclose(spec.block(X, Y, resources=_res(spec, A)), RY, rtol=1e-12, atol=0)
        # the fragment enumeration on a few pairs (exponential)
        for a, b in list(zip(xs, ys))[:2]:
            if sum(1 for _ in a.nodes()) <= 9 and sum(1 for _ in b.nodes()) <= 9:
                fr = float(sptk_by_fragments(a, b, look, lam, mu, gap, tf, ml, thr, ref_lex))
                assert fr == pytest.approx(ref(a, b), rel=1e-12, abs=0)
        counted.append(sum(1 for s in sim.values() if s >= thr))

    check()
    assert sum(counted) > 20  # soft matches were there to be found


def test_core_matches_reference_only_when_the_similarity_is_used():
    """The comparison is sharp: with s(a, b) the value differs from PT's, and from the reference
    without soft matching."""
    t1, t2 = parse_tree("(A (B a) (C (B a) b))"), parse_tree("(A (B b) (C (B b) a))")
    v = Vocabularies()
    X = encode([t1, t2], v)
    sim = {("a", "b"): F(3, 4), ("b", "a"): F(3, 4)}
    spec = _spec(lam=0.4, mu=0.4)
    K = spec.block(X, resources=_res(spec, _table(sim, v)))
    soft = float(sptk_kernel(t1, t2, _lookup(sim), 0.4, 0.4, threshold=0.5))
    hard = float(pt_kernel(t1, t2, 0.4, 0.4))
    assert K[0, 1] == pytest.approx(soft, rel=1e-12)
    assert abs(soft - hard) > 1e-3 * hard
    # below the threshold the pair no longer matches: PT again
    spec9 = _spec(lam=0.4, mu=0.4, threshold=0.9)
    assert spec9.block(X, resources=_res(spec9, _table(sim, v)))[0, 1] == pytest.approx(hard, rel=1e-12)


def test_leaves_mode_ignores_similar_internal_labels():
    t1, t2 = parse_tree("(A (B a))"), parse_tree("(A (C a))")
    v = Vocabularies()
    X = encode([t1, t2], v)
    sim = {("B", "C"): F(1), ("C", "B"): F(1)}
    leaves, prefix = _spec(lexical="leaves"), _spec(lexical="prefix")
    A = _table(sim, v)
    assert leaves.block(X, resources=_res(leaves, A))[0, 1] == pytest.approx(float(pt_kernel(t1, t2, 0.4, 0.4)))
    assert prefix.block(X, resources=_res(prefix, A))[0, 1] == pytest.approx(float(pt_kernel(t1, t1, 0.4, 0.4)))


# ---- (3) SPTK = PT, bit for bit, when sigma is label equality --------------------------------

def _equality_tables(v):
    """Tables that make sigma label equality: the identity, and one whose off-diagonal entries
    all lie below the threshold 0.5."""
    n = len(v.sym)
    eye = sp.identity(n, format="csr")
    rng = np.random.default_rng(0)
    low = sp.random(n, n, density=0.5, random_state=rng, format="lil") * 0.49
    low.setdiag(0)
    low = low.tocsr()
    return [eye, ((low + low.T) * 0.5 + eye).tocsr()]


PT_CONFIGS = [dict(lam=0.4, mu=0.4), dict(lam=0.4, mu=0.4, terminal_factor=5.0), dict(lam=0.7, mu=0.2, gap="span"),
              dict(lam=0.5, mu=0.5, max_length=2), dict(lam=1.0, mu=1.0, max_length=5)]


@pytest.mark.parametrize("cfg", PT_CONFIGS, ids=[str(c) for c in PT_CONFIGS])
def test_sptk_with_equality_is_pt_bitwise_on_random_trees(cfg):
    pt = PartialTreeKernel(**cfg)
    seen = []

    @BLOCKS
    @given(tree_lists(9, max_depth=4, max_children=5), tree_lists(6, max_depth=4, max_children=5))
    def check(xs, ys):
        v = Vocabularies()
        X, Y = encode(xs, v), encode(ys, v)
        for A in _equality_tables(v):
            for lexical in ("leaves", "prefix"):
                spec = _spec(lexical=lexical, **cfg)
                r = _res(spec, A)
                assert np.array_equal(spec.block(X, resources=r), pt.block(X))
                assert np.array_equal(spec.block(X, Y, resources=r), pt.block(X, Y))
                assert np.array_equal(spec.diag(X, resources=r), pt.diag(X))
        seen.append(1)

    check()
    assert len(seen) == 12


def test_sptk_with_equality_is_pt_bitwise_on_wide_random_trees():
    # fan-outs up to 12 with repeated labels: the chain, two-match and box paths of PT all run
    rng = random.Random(5)

    def grow(depth):
        if depth == 0 or rng.random() < 0.2:
            return f"w{rng.randrange(4)}"
        kids = " ".join(grow(depth - 1) for _ in range(rng.randrange(1, 13)))
        return f"(L{rng.randrange(3)} {kids})"

    trees = []
    while len(trees) < 30:
        s = grow(3)
        if s.startswith("("):
            trees.append(parse_tree(s))
    v = Vocabularies()
    X = encode(trees, v)
    for cfg in PT_CONFIGS:
        spec = _spec(**cfg)
        for A in _equality_tables(v):
            assert np.array_equal(spec.block(X, resources=_res(spec, A)), PartialTreeKernel(**cfg).block(X))


# ---- specs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("d,param", [
    ({"kind": "sptk", "similarity": "vectors"}, "vectors"),
    ({"kind": "sptk", "similarity": "wordnet", "vectors": "v.txt"}, "vectors"),
    ({"kind": "sptk", "similarity": "glove", "vectors": "v.txt"}, "similarity"),
    ({"kind": "sptk", "similarity": "wordnet", "threshold": 1.5}, "threshold"),
    ({"kind": "sptk", "similarity": "wordnet", "lexical": "inner"}, "lexical"),
    ({"kind": "sptk", "similarity": "wordnet", "mu": 0}, "mu"),
])
def test_invalid_parameters_name_the_parameter(d, param):
    with pytest.raises(KernelSpecError, match=param):
        spec_from_dict(d)


def test_spec_round_trip_and_resource_name():
    s = spec_from_dict({"kind": "sptk", "similarity": "vectors", "vectors": "w.vec", "threshold": 0.5,
                        "lexical": "prefix", "rep": "lct"})
    assert spec_from_dict(s.to_dict()) == s
    (name,) = s.resources()
    assert name.startswith("sptk:") and '"vectors":"w.vec"' in name and '"prefix":"LEX##"' in name
    # parameters that change the table change its name; PT's parameters do not
    assert _spec(threshold=0.4).resources() != _spec(threshold=0.5).resources()
    assert _spec(lam=0.1).resources() == _spec(lam=0.2).resources()


def test_missing_or_bad_table_is_refused():
    v = Vocabularies()
    X = encode([parse_tree("(A a)")], v)
    spec = _spec()
    with pytest.raises(KernelSpecError, match="needs the resource"):
        spec.block(X)
    bad = sp.csr_matrix(np.full((len(v.sym), len(v.sym)), 1.5))
    with pytest.raises(KernelSpecError, match=r"\[0, 1\]"):
        spec.block(X, resources=_res(spec, bad))
    small = sp.identity(1, format="csr")
    with pytest.raises(KernelSpecError, match="covers 1 symbols"):
        spec.block(X, resources=_res(spec, small))
