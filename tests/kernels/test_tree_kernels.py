"""ST, SST and PT tree kernels: Numba cores against slow references, specs, edge cases.

Chain of evidence: (1) on tiny random trees the plain recursion equals explicit fragment
enumeration exactly (Fractions); (2) the Numba block cores equal the recursion to 1e-12 relative
on >= 500 random tree pairs per configuration; (3) tests/kernels/test_svmlighttk_rowsums.py ties the
conventions to SVM-Light-TK on real trees.
"""
import os
import random
import subprocess
import sys
from collections import Counter
from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from reference.tree_kernels import (
    pt_by_fragments,
    pt_kernel,
    sst_by_fragments,
    sst_kernel,
    st_by_fragments,
    st_kernel,
)
from strategies import MIXED_WORDS, tree_lists, tree_pairs

from gramtile.kernels.errors import KernelSpecError, RepresentationError
from gramtile.kernels.registry import spec_from_dict
from gramtile.kernels.tree_kernels import PartialTreeKernel, SubsetTreeKernel, SubtreeKernel
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.structures import TokenSeq, Tree
from gramtile.pipeline.representations.vocab import Vocabularies

EXACT = settings(max_examples=120, derandomize=True, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])
BLOCKS = settings(max_examples=10, derandomize=True, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---- (1) recursion == explicit enumeration, exactly ------------------------------------

@EXACT
@given(tree_pairs(max_depth=3, max_children=3))
def test_sst_and_st_recursion_equal_fragment_enumeration(pair):
    t1, t2 = pair
    for lam in (F(2, 5), F(1)):
        assert sst_kernel(t1, t2, lam) == sst_by_fragments(t1, t2, lam)
        assert sst_kernel(t1, t2, lam, leaves=True) == sst_by_fragments(t1, t2, lam, leaves=True)
        assert st_kernel(t1, t2, lam) == st_by_fragments(t1, t2, lam)
        assert st_kernel(t1, t2, lam, leaves=True) == st_by_fragments(t1, t2, lam, leaves=True)
        assert sst_kernel(t1, t2, lam, typed=True) == sst_by_fragments(t1, t2, lam, typed=True)


@EXACT
@given(tree_pairs(max_depth=3, max_children=3, labels=("A", "B"), words=MIXED_WORDS))
def test_label_only_sst_and_st_equal_fragment_enumeration_where_labels_are_leaves_and_inner(pair):
    # labels occur both as leaves and as internal nodes: (C A) with a leaf A shares the fragment
    # (C A) with (C (A z)) under the label-only definition, not under typed_leaves
    t1, t2 = pair
    for lam in (F(2, 5), F(1)):
        for leaves in (False, True):
            assert sst_kernel(t1, t2, lam, leaves) == sst_by_fragments(t1, t2, lam, leaves)
            assert sst_kernel(t1, t2, lam, leaves, typed=True) == sst_by_fragments(t1, t2, lam, leaves, typed=True)
            # ST: a leaf and an internal node never root equal complete subtrees, so the two
            # production definitions give the same kernel
            assert st_kernel(t1, t2, lam, leaves) == st_by_fragments(t1, t2, lam, leaves)
            assert st_kernel(t1, t2, lam, leaves, typed=True) == st_by_fragments(t1, t2, lam, leaves)


def test_label_only_and_typed_productions_differ_on_a_leaf_and_an_inner_node():
    t1, t2 = parse_tree("(C A)"), parse_tree("(C (A z))")
    lam = F(1, 2)
    assert sst_by_fragments(t1, t2, lam) == lam  # the fragment (C A)
    assert sst_by_fragments(t1, t2, lam, typed=True) == 0
    assert st_by_fragments(t1, t2, lam) == 0


@EXACT
@given(tree_pairs(max_depth=2, max_children=3))
def test_pt_recursion_equals_fragment_enumeration(pair):
    t1, t2 = pair
    for lam, mu, gap, tf, ml in [(F(2, 5), F(3, 7), "gaps", 1, None), (F(1, 2), F(4, 5), "span", 1, None),
                                 (F(2, 3), F(1, 3), "gaps", F(5), None), (F(3, 5), F(1, 2), "span", F(1, 4), None),
                                 (F(2, 5), F(3, 7), "gaps", F(2), 1), (F(1, 2), F(1, 2), "span", 1, 2)]:
        assert pt_kernel(t1, t2, lam, mu, gap, tf, ml) == pt_by_fragments(t1, t2, lam, mu, gap, tf, ml)


def test_enumeration_and_recursion_differ_on_a_wrong_convention():
    """The exact check is sharp: swapping the gap convention changes the value."""
    t = parse_tree("(A (B b) (C c) (B b))")
    lam, mu = F(1, 2), F(1, 2)
    assert pt_kernel(t, t, lam, mu, "gaps") != pt_by_fragments(t, t, lam, mu, "span")
    assert pt_kernel(t, t, lam, mu, "gaps", F(2)) != pt_by_fragments(t, t, lam, mu, "gaps", 1)


# ---- worked examples ----------------------------------------------------------------------

def _k(spec, *ts):
    X = encode(list(ts), Vocabularies())
    return spec.block(X)


def test_collins_duffy_example_counts_six_fragments():
    # (NP (D the) (N man)) has 6 SST fragments (Collins & Duffy 2002, Fig. 1): 4 at NP, 1 at D, 1 at N
    K = _k(SubsetTreeKernel(lam=1.0), parse_tree("(NP (D the) (N man))"))
    assert K[0, 0] == 6.0
    # ST: complete subtrees only: (D the), (N man), the whole tree
    K = _k(SubtreeKernel(lam=1.0), parse_tree("(NP (D the) (N man))"))
    assert K[0, 0] == 3.0
    # ST with leaves: also the one-node subtrees "the" and "man" (lam each)
    K = _k(SubtreeKernel(lam=0.5, leaves=True), parse_tree("(NP (D the) (N man))"))
    assert K[0, 0] == 0.5 ** 3 + 2 * 0.5 + 2 * 0.5


def test_preterminals_give_lam_and_leaves_only_count_in_sst_bow():
    t1, t2 = parse_tree("(N dog)"), parse_tree("(V dog)")
    for spec, same, other in [(SubsetTreeKernel(lam=0.3), 0.3, 0.0), (SubtreeKernel(lam=0.3), 0.3, 0.0),
                              (SubsetTreeKernel(lam=0.3, leaves=True), 0.6, 0.3),
                              (SubtreeKernel(lam=0.3, leaves=True), 0.6, 0.3)]:
        K = _k(spec, t1, t2)
        assert K[0, 0] == pytest.approx(same, rel=1e-15)
        assert K[0, 1] == pytest.approx(other, rel=1e-15)


def test_pt_small_example_and_terminal_factor():
    # (A b) with itself: Delta(b,b) = mu lam^2 t, Delta(A,A) = mu (lam^2 + Delta(b,b))
    lam, mu, t = 0.5, 0.25, 3.0
    K = _k(PartialTreeKernel(lam=lam, mu=mu, terminal_factor=t), parse_tree("(A b)"))
    leaf = mu * lam ** 2 * t
    assert K[0, 0] == pytest.approx(leaf + mu * (lam ** 2 + leaf), rel=1e-15)


# ---- (2) Numba == recursion on random trees ----------------------------------------------

CONFIGS = [
    (SubtreeKernel(lam=0.4), lambda a, b: st_kernel(a, b, 0.4)),
    (SubtreeKernel(lam=1.0), lambda a, b: st_kernel(a, b, 1.0)),
    (SubtreeKernel(lam=0.6, leaves=True), lambda a, b: st_kernel(a, b, 0.6, leaves=True)),
    (SubtreeKernel(lam=1.0, leaves=True), lambda a, b: st_kernel(a, b, 1.0, leaves=True)),
    (SubsetTreeKernel(lam=0.4), lambda a, b: sst_kernel(a, b, 0.4)),
    (SubsetTreeKernel(lam=1.0), lambda a, b: sst_kernel(a, b, 1.0)),
    (SubsetTreeKernel(lam=0.7, leaves=True), lambda a, b: sst_kernel(a, b, 0.7, leaves=True)),
    (SubsetTreeKernel(lam=0.4, typed_leaves=True), lambda a, b: sst_kernel(a, b, 0.4, typed=True)),
    (SubsetTreeKernel(lam=0.7, leaves=True, typed_leaves=True),
     lambda a, b: sst_kernel(a, b, 0.7, leaves=True, typed=True)),
    (PartialTreeKernel(lam=0.4, mu=0.4), lambda a, b: pt_kernel(a, b, 0.4, 0.4)),
    (PartialTreeKernel(lam=0.5, mu=0.8, gap="span"), lambda a, b: pt_kernel(a, b, 0.5, 0.8, "span")),
    (PartialTreeKernel(lam=0.6, mu=0.3, terminal_factor=5.0), lambda a, b: pt_kernel(a, b, 0.6, 0.3, "gaps", 5.0)),
    (PartialTreeKernel(lam=1.0, mu=1.0, gap="span", terminal_factor=0.25),
     lambda a, b: pt_kernel(a, b, 1.0, 1.0, "span", 0.25)),
    (PartialTreeKernel(lam=0.4, mu=0.4, max_length=2), lambda a, b: pt_kernel(a, b, 0.4, 0.4, "gaps", 1, 2)),
    (PartialTreeKernel(lam=0.5, mu=0.7, gap="span", max_length=1),
     lambda a, b: pt_kernel(a, b, 0.5, 0.7, "span", 1, 1)),
]
CONFIG_IDS = [c[0].to_json() for c in CONFIGS]
N_ROWS, N_COLS = 8, 6  # per example: 36 symmetric pairs (i <= j) + 48 rectangular pairs


def _ref_matrix(ref, xs, ys):
    return np.array([[float(ref(a, b)) for b in ys] for a in xs])


@pytest.mark.parametrize("words", ["default", "mixed"])
@pytest.mark.parametrize("spec,ref", CONFIGS, ids=CONFIG_IDS)
def test_numba_block_equals_recursion(spec, ref, words):
    pairs = []
    kw = {"max_depth": 3, "max_children": 4}
    if words == "mixed":  # labels that are leaves in one place and internal nodes in another
        kw.update(labels=("A", "B"), words=MIXED_WORDS)

    @BLOCKS
    @given(tree_lists(N_ROWS, **kw), tree_lists(N_COLS, **kw))
    def check(xs, ys):
        v = Vocabularies()
        X, Y = encode(xs, v), encode(ys, v)
        R = _ref_matrix(ref, xs, xs)
        np.testing.assert_allclose(spec.block(X), R, rtol=1e-12, atol=0)
        np.testing.assert_allclose(spec.diag(X), np.diag(R), rtol=1e-12, atol=0)
        np.testing.assert_allclose(spec.block(X, Y), _ref_matrix(ref, xs, ys), rtol=1e-12, atol=0)
        pairs.append(N_ROWS * (N_ROWS + 1) // 2 + N_ROWS * N_COLS)

    check()
    assert sum(pairs) >= 500


def test_numba_matches_reference_on_a_broken_input_only_when_correct():
    """The comparison above is sharp: a one-label change in one tree moves the value."""
    t1, t2 = parse_tree("(A (B a) (C (B a) b))"), parse_tree("(A (B a) (C (B b) b))")
    for spec, ref in [(SubsetTreeKernel(lam=0.4), lambda a, b: sst_kernel(a, b, 0.4)),
                      (PartialTreeKernel(lam=0.4, mu=0.4), lambda a, b: pt_kernel(a, b, 0.4, 0.4))]:
        K = _k(spec, t1, t2)
        assert K[0, 1] == pytest.approx(ref(t1, t2), rel=1e-12)
        assert abs(K[0, 1] - ref(t1, t1)) > 1e-3 * ref(t1, t1)


# ---- big trees: no fixed limits ------------------------------------------------------------

def _chain(depth, label="A", word="a"):
    t = Tree(word)
    for _ in range(depth):
        t = Tree(label, (t,))
    return t


def test_deep_chain_beyond_any_scratch_size():
    # Heights h >= 1 count production nodes from the bottom (h = 1 is the pre-terminal A -> a).
    # Equal heights: e(h) = lam (1 + e(h-1)), e(1) = lam. Unequal heights with minimum m match as
    # A -> A but bottom out where one side reaches A -> a: u(m) = lam (1 + u(m-1)), u(1) = 0.
    depth, lam = 3000, 0.9
    K = _k(SubsetTreeKernel(lam=lam), _chain(depth))[0, 0]
    expected, e, u = 0.0, 0.0, 0.0
    for m in range(1, depth + 1):
        e = lam * (1 + e)
        u = lam * (1 + u) if m > 1 else 0.0
        expected += e + 2 * (depth - m) * u
    assert K == pytest.approx(expected, rel=1e-10)


def test_wide_and_deep_trees_match_the_recursion():
    # 3,600 and 6,400 matching node pairs: beyond the initial memo table, which must grow
    wide = Tree("A", tuple(Tree("B", (Tree("b"),)) for _ in range(60)))
    deep = _chain(80)
    for t in (wide, deep):
        K = _k(SubsetTreeKernel(lam=0.5), t)[0, 0]
        assert K == pytest.approx(sst_kernel(t, t, 0.5), rel=1e-12)
    K = _k(PartialTreeKernel(lam=0.5, mu=0.5), deep)[0, 0]
    assert K == pytest.approx(pt_kernel(deep, deep, 0.5, 0.5), rel=1e-12)
    narrow = Tree("A", wide.children[:14])
    K = _k(PartialTreeKernel(lam=0.5, mu=0.5, max_length=2), narrow)[0, 0]
    assert K == pytest.approx(pt_kernel(narrow, narrow, 0.5, 0.5, "gaps", 1, 2), rel=1e-12)


def test_many_matching_nodes_are_ordered_children_first():
    """Tree pairs with more than 32 matching X nodes (the placement path of ``_match``, not the
    insertion sort) equal the recursion; the trees share a small alphabet, so most nodes match."""

    def grow(rng, depth):
        if depth == 0 or rng.random() < 0.15:
            return Tree(rng.choice("ab"))
        return Tree(rng.choice("AB"), tuple(grow(rng, depth - 1) for _ in range(rng.randint(1, 3))))

    rng = random.Random(7)
    ts = []
    while len(ts) < 6:
        t = grow(rng, 6)
        if len(t) > 64:  # at least 33 internal nodes matching one of the two labels
            ts.append(t)
    X = encode(ts, Vocabularies())
    for spec, ref in [(SubsetTreeKernel(lam=0.5), lambda a, b: sst_kernel(a, b, 0.5)),
                      (SubtreeKernel(lam=0.5, leaves=True), lambda a, b: st_kernel(a, b, 0.5, leaves=True)),
                      (PartialTreeKernel(lam=0.5, mu=0.5), lambda a, b: pt_kernel(a, b, 0.5, 0.5))]:
        np.testing.assert_allclose(spec.block(X), _ref_matrix(ref, ts, ts), rtol=1e-12, atol=0)
        np.testing.assert_allclose(spec.block(X.slice(0, 3), X.slice(3, 6)),
                                   _ref_matrix(ref, ts[:3], ts[3:]), rtol=1e-12, atol=0)


@pytest.mark.parametrize("kind,cores", [("sst", ["_block_sst"]), ("st", ["_block_sst"]), ("pt", ["_block_pt", "_children_dp_limited", "_scratch_pt"])])
def test_each_kernel_compiles_only_its_own_core(tmp_path, kind, cores):
    # was: ST, SST and PT shared one block core and a diagonal core, each holding all three
    # paths, so a first SST tile also compiled PT's dynamic programme, twice (17-18 s cold).
    # Counted in Numba's cache (one file per compiled function and signature), block + diag.
    code = f"""
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies
X = encode([parse_tree("(S (NP (N a)) (VP (V b)))"), parse_tree("(S (VP (V b) (NP (N c))))")], Vocabularies())
spec = spec_from_dict({{"kind": {kind!r}}})
spec.block(X); spec.block(X.slice(0, 1), X.slice(1, 2)); spec.diag(X)
"""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=600)
    compiled = sorted(p.name.split("-")[0] for p in (tmp_path / "cache").rglob("tree_kernels.*.nbc"))
    assert compiled == sorted(f"tree_kernels.{c}" for c in [*cores, "_scratch"]), compiled


def test_leaf_and_inner_child_of_one_label_match_in_sst_only_by_label():
    # was: production keys carried a leaf/inner flag per child, so (C A) never matched (C (A z))
    t1, t2 = parse_tree("(C A)"), parse_tree("(C (A z))")
    assert _k(SubsetTreeKernel(lam=0.5), t1, t2)[0, 1] == 0.5  # the fragment (C A)
    assert _k(SubsetTreeKernel(lam=0.5, leaves=True), t1, t2)[0, 1] == 0.5  # leaves A, z differ
    assert _k(SubsetTreeKernel(lam=0.5, typed_leaves=True), t1, t2)[0, 1] == 0.0
    assert _k(SubtreeKernel(lam=0.5), t1, t2)[0, 1] == 0.0  # complete subtrees differ
    assert _k(SubtreeKernel(lam=0.5, leaves=True), t1, t2)[0, 1] == 0.0
    # deeper: (S (C A) (D d)) vs (S (C (A z)) (D d)): S -> C D matches, C's pair gives 0.5
    u1, u2 = parse_tree("(S (C A) (D d))"), parse_tree("(S (C (A z)) (D d))")
    lam = 0.5
    assert _k(SubsetTreeKernel(lam=lam), u1, u2)[0, 1] == pytest.approx(lam + lam + lam * (1 + lam) * (1 + lam))
    assert _k(SubtreeKernel(lam=lam), u1, u2)[0, 1] == pytest.approx(lam)  # (D d) only


def test_typed_leaves_is_in_the_spec_hash():
    a, b = SubsetTreeKernel(lam=0.4), SubsetTreeKernel(lam=0.4, typed_leaves=True)
    assert a.spec_hash != b.spec_hash
    assert '"typed_leaves":false' in a.to_json()  # every SST spec names it: no old hash is reused
    import hashlib
    old_json = '{"kind":"sst","lam":0.4,"leaves":false,"rep":"tree"}'  # the SST spec before issue 19
    assert a.spec_hash != hashlib.sha256(old_json.encode()).hexdigest()
    assert spec_from_dict(b.to_dict()) == b
    with pytest.raises(KernelSpecError):
        SubsetTreeKernel(typed_leaves="yes")


# ---- specs --------------------------------------------------------------------------------

@pytest.mark.parametrize("spec,param,value", [
    ({"kind": "st", "lam": 0}, "lam", "0"),
    ({"kind": "st", "lam": 1.5}, "lam", "1.5"),
    ({"kind": "sst", "lam": "big"}, "lam", "'big'"),
    ({"kind": "sst", "leaves": "yes"}, "leaves", "'yes'"),
    ({"kind": "st", "leaves": 1}, "leaves", "1"),
    ({"kind": "pt", "mu": 0.0}, "mu", "0.0"),
    ({"kind": "pt", "mu": 2}, "mu", "2"),
    ({"kind": "pt", "gap": "holes"}, "gap", "'holes'"),
    ({"kind": "pt", "terminal_factor": 0}, "terminal_factor", "0"),
    ({"kind": "pt", "terminal_factor": -1.0}, "terminal_factor", "-1.0"),
    ({"kind": "pt", "max_length": 0}, "max_length", "0"),
    ({"kind": "pt", "max_length": 2.5}, "max_length", "2.5"),
    ({"kind": "pt", "depth": 3}, "depth", "'depth'"),
])
def test_invalid_parameters_name_parameter_and_value(spec, param, value):
    with pytest.raises(KernelSpecError) as e:
        spec_from_dict(spec)
    msg = str(e.value)
    assert repr(param) in msg and value in msg


def test_specs_round_trip_with_defaults():
    for d, cls in [({"kind": "st"}, SubtreeKernel), ({"kind": "sst"}, SubsetTreeKernel), ({"kind": "pt"}, PartialTreeKernel)]:
        s = spec_from_dict(d)
        assert isinstance(s, cls) and s.reads == "tree" and s.rep_name == "tree" and s.lam == 0.4
        assert spec_from_dict(s.to_dict()) == s
    pt = spec_from_dict({"kind": "pt"})
    assert (pt.mu, pt.gap, pt.terminal_factor, pt.max_length) == (0.4, "gaps", 1.0, None)
    assert spec_from_dict({"kind": "sst"}).leaves is False
    assert spec_from_dict({"kind": "st"}).leaves is False


def test_st_leaves_default_keeps_the_spec_hash_of_stored_matrices():
    """Plain ST stores computed before ``leaves`` existed stay valid: the default is left out of
    the spec (its JSON and hash are those of {kind: st, lam, rep}); leaves=true is a new kernel."""
    import hashlib
    import json

    old = json.dumps({"kind": "st", "lam": 0.4, "rep": "tree"}, sort_keys=True, separators=(",", ":"))
    assert SubtreeKernel(lam=0.4).spec_hash == hashlib.sha256(old.encode()).hexdigest()
    assert spec_from_dict({"kind": "st", "leaves": False}) == SubtreeKernel()
    on = SubtreeKernel(leaves=True)
    assert on.to_dict()["leaves"] is True and on.spec_hash != SubtreeKernel().spec_hash
    assert spec_from_dict(on.to_dict()) == on


def test_wrong_batch_kind_is_a_typed_error():
    X = encode([TokenSeq(("a", "b"))], Vocabularies())
    with pytest.raises(RepresentationError, match="reads ordered trees"):
        SubsetTreeKernel().block(X)


def test_empty_batches():
    v = Vocabularies()
    X = encode([parse_tree("(A b)")], v)
    E = X.take(np.zeros(0, dtype=np.int64))
    assert SubsetTreeKernel().block(E).shape == (0, 0)
    assert PartialTreeKernel().block(X, E).shape == (1, 0)
    assert SubtreeKernel().diag(E).shape == (0,)


@pytest.mark.parametrize("spec", [{"kind": "st", "lam": 0.4, "leaves": True}, {"kind": "sst", "lam": 0.5, "leaves": True},
                                  {"kind": "sst", "lam": 0.5, "typed_leaves": True}, {"kind": "pt", "lam": 0.4, "mu": 0.6}])
def test_key_ids_far_beyond_the_vocabulary_give_the_same_kernel_in_a_small_table(spec):
    # a hand-built batch may carry production / label ids up to 2^31 - 1; the cores size their key
    # table by the largest id, so such ids once needed a 16 GB table (MemoryError); they are now
    # renumbered jointly (order and equality kept), and K is the one of the dense ids
    ts = [parse_tree(s) for s in ("(S (NP (D a) (N b)) (VP (V c) (NP (N b))))", "(S (VP (V c) (NP (D a) (N b))))",
                                  "(NP (D a) (N b))", "(X (Y z) (NP (D a)))")]
    X = encode(ts, Vocabularies())
    k = spec_from_dict(spec)
    cols = dict(X.columns)
    for name in ("prod", "label"):
        c = cols[name]
        cols[name] = np.where(c >= 0, (2**31 - 2) - 7 * c, c).astype(np.int32)  # huge, order reversed
    H = type(X)(X.kind, X.offsets, cols, X.child_ptr, X.child_idx)
    np.testing.assert_array_equal(k.block(H), k.block(X))
    np.testing.assert_array_equal(k.block(H, H), k.block(X, X))
    np.testing.assert_array_equal(k.diag(H), k.diag(X))
    assert k.block(X).max() > 0


# ---- PT shortcuts: none, one, two and more child pairs of equal labels ------------------------
# The PT core scans the child pairs of equal labels of a node pair first and skips the dynamic
# programme where their number and order give the DP's result in closed form. The trees below
# have wide nodes over a tiny alphabet, so that every case occurs many times; ``_pt_dp_baseline``
# is the core before those shortcuts (46b3b88) in Python floats, operation for operation, against
# which the core is compared bitwise.

PT_VARIANTS = [(lam, mu, gap, tf, ml) for lam, mu, tf in [(0.4, 0.4, 1.0), (0.7, 0.3, 2.5), (1.0, 1.0, 1.0)]
               for gap in ("gaps", "span") for ml in (None, 1, 2, 3, 5)]


def _wide_trees(seed, count, fanout=(6, 5, 2), labels="ABC", words=("a", "b", "A")):
    """Random trees of depth <= len(fanout), node fan-outs 1..fanout[depth]."""
    rng = random.Random(seed)

    def node(depth):
        if depth == len(fanout) or (depth and rng.random() < 0.3):
            return Tree(rng.choice(words))
        return Tree(rng.choice(labels), tuple(node(depth + 1) for _ in range(rng.randint(1, fanout[depth]))))

    return [node(0) for _ in range(count)]


def _pt_dp_baseline(X, Y, lam, mu, tf, f, maxlen):
    """K[i, j] as the PT core of 46b3b88 computes it (same operations in the same order)."""
    def trees(B):
        off, lab, cp, ci = B.offsets, B.columns["label"], B.child_ptr, B.child_idx
        out = []
        for t in range(B.n):
            o = int(off[t])
            n = int(off[t + 1]) - o
            out.append(([int(lab[o + v]) for v in range(n)],
                        [[int(ci[c]) for c in range(cp[o + v], cp[o + v + 1])] for v in range(n)]))
        return out

    def dp(k1, k2, l1, l2, memo):
        prev, cur = [0.0] * (len(k2) + 1), [0.0] * (len(k2) + 1)
        acc = 0.0
        for a1 in k1:
            run = 0.0
            for jj, a2 in enumerate(k2):
                s = 0.0
                if l1[a1] == l2[a2]:
                    s = memo[a1, a2] * (1.0 + f * prev[jj])
                    acc += s
                run = s + lam * run
                cur[jj + 1] = run + lam * prev[jj + 1]
            prev, cur = cur, prev
        return acc

    def dp_limited(k1, k2, l1, l2, memo):
        n1, n2, w = len(k1), len(k2), len(k2) + 1
        E = [[memo[a1, a2] if l1[a1] == l2[a2] else 0.0 for a2 in k2] for a1 in k1]
        acc = 0.0
        for row in E:
            for e in row:
                acc += e
        S = [row[:] for row in E]
        D = [[0.0] * w for _ in range(n1 + 1)]
        for _ in range(1, min(maxlen, min(n1, n2))):
            for ii in range(n1):
                run = 0.0
                for jj in range(n2):
                    run = S[ii][jj] + lam * run
                    D[ii + 1][jj + 1] = run + lam * D[ii][jj + 1]
            level = 0.0
            for ii in range(n1):
                for jj in range(n2):
                    v = E[ii][jj] * f * D[ii][jj]
                    S[ii][jj] = v
                    level += v
            acc += level
            if level == 0.0:
                break
        return acc

    lam2 = lam * lam
    leafval = mu * lam2 * tf

    def k(tx, ty):
        (l1, ch1), (l2, ch2) = tx, ty
        memo = {}
        total = 0.0
        for n1 in range(len(l1) - 1, -1, -1):
            for n2 in range(len(l2)):
                if l1[n1] != l2[n2]:
                    continue
                k1, k2 = ch1[n1], ch2[n2]
                if not k1 or not k2:
                    d = leafval
                elif len(k1) == 1 and len(k2) == 1:
                    d = mu * lam2
                    if l1[k1[0]] == l2[k2[0]]:
                        d += mu * memo[k1[0], k2[0]]
                elif 0 < maxlen < min(len(k1), len(k2)):
                    d = mu * (lam2 + dp_limited(k1, k2, l1, l2, memo))
                else:
                    d = mu * (lam2 + dp(k1, k2, l1, l2, memo))
                memo[n1, n2] = d
                total += d
        return total

    tx, ty = trees(X), trees(Y)
    return np.array([[k(a, b) for b in ty] for a in tx])


def _equal_label_child_pairs(ts, min_children=1):
    """Counts of internal node pairs of equal labels (both sides with children, not both unary;
    at least ``min_children`` each) by their equal-label child pairs: 0, 1, 2 or 3+, and whether
    two are in increasing order."""
    nodes = [n for t in ts for n in t.nodes() if len(n.children) >= min_children]
    c = Counter()
    for n1 in nodes:
        for n2 in nodes:
            if n1.label != n2.label or len(n1.children) == len(n2.children) == 1:
                continue
            m = [(i, j) for i, a in enumerate(n1.children) for j, b in enumerate(n2.children) if a.label == b.label]
            chain = any(i < i2 and j < j2 for i, j in m for i2, j2 in m)
            c[min(len(m), 3), chain] += 1
    return c


def test_wide_trees_cover_every_pt_shortcut():
    c = _equal_label_child_pairs(_wide_trees(1, 10))
    for case in [(0, False), (1, False), (2, False), (2, True), (3, False), (3, True)]:
        assert c[case] >= 20, (case, c)


@pytest.mark.parametrize("lam,mu,gap,tf,ml", PT_VARIANTS)
def test_pt_core_on_wide_trees_is_bitwise_the_dp_and_equals_the_recursion(lam, mu, gap, tf, ml):
    xs, ys = _wide_trees(1, 10), _wide_trees(2, 6)
    v = Vocabularies()
    X, Y = encode(xs, v), encode(ys, v)
    spec = PartialTreeKernel(lam=lam, mu=mu, gap=gap, terminal_factor=tf, max_length=ml)
    f = 1.0 if gap == "gaps" else lam * lam
    K, KXY = spec.block(X), spec.block(X, Y)
    # the symmetric block computes i <= j and mirrors it
    B = np.triu(_pt_dp_baseline(X, X, lam, mu, tf, f, ml or 0))
    np.testing.assert_array_equal(K, B + np.triu(B, 1).T)
    np.testing.assert_array_equal(spec.diag(X), np.diag(B))
    np.testing.assert_array_equal(KXY, _pt_dp_baseline(X, Y, lam, mu, tf, f, ml or 0))
    ref = lambda a, b: pt_kernel(a, b, lam, mu, gap, tf, ml)  # noqa: E731
    np.testing.assert_allclose(K, _ref_matrix(ref, xs, xs), rtol=1e-12, atol=0)
    np.testing.assert_allclose(KXY, _ref_matrix(ref, xs, ys), rtol=1e-12, atol=0)


def test_pt_label_masks_that_always_collide_give_the_same_kernel():
    # the core skips a node pair whose children's label masks (bit label % 64) share no bit;
    # labels multiplied by 64 all land on bit 0, so nothing is skipped and the scan decides
    xs = _wide_trees(3, 8)
    X = encode(xs, Vocabularies())
    cols = dict(X.columns)
    cols["label"] = np.where(cols["label"] >= 0, 64 * cols["label"], cols["label"]).astype(np.int32)
    H = type(X)(X.kind, X.offsets, cols, X.child_ptr, X.child_idx)
    for spec in (PartialTreeKernel(), PartialTreeKernel(gap="span", max_length=2)):
        np.testing.assert_array_equal(spec.block(H), spec.block(X))


@pytest.mark.parametrize("ml", [2, 3])
@pytest.mark.parametrize("gap", ["gaps", "span"])
def test_pt_length_limited_core_on_wider_nodes_is_bitwise_the_dp(gap, ml):
    # the limited programme runs where max_length < both fan-outs: wider nodes, so that each
    # shortcut also meets it often (a rounding slip in its closed forms shows here)
    xs = _wide_trees(4, 40, fanout=(8, 6), labels="ABCD", words="abcdeA")
    c = _equal_label_child_pairs(xs, min_children=ml + 1)
    assert min(c[2, True], c[3, False], c[3, True]) >= 50, c
    X = encode(xs, Vocabularies())
    for lam, mu in [(0.4, 0.4), (0.7, 0.3), (0.93, 0.61), (0.97, 1.0)]:  # last: Delta > 1, products dominate
        spec = PartialTreeKernel(lam=lam, mu=mu, gap=gap, max_length=ml)
        B = _pt_dp_baseline(X, X, lam, mu, 1.0, 1.0 if gap == "gaps" else lam * lam, ml)
        np.testing.assert_array_equal(spec.block(X, X), B)


@pytest.mark.parametrize("seed", range(6))
def test_paired_walks_the_pairs_as_the_block_of_each_pair_does(seed):
    """``paired(X, Y)`` = k(X_i, Y_i) from one pass of the core equals the generic one-pair-at-a-
    time evaluation (BaseSpec.paired) for every tree kernel and its options, to the last bit."""
    from instances_within_pair import rand_tree

    from gramtile.kernels.spec import BaseSpec
    from gramtile.pipeline.compute.inmemory import encode_with_resources

    rng = random.Random(seed)
    X = [rand_tree(rng) for _ in range(12)]
    Y = [rand_tree(rng) for _ in range(12)]
    Y[0] = X[0]  # one identical pair
    for d in ({"kind": "sst", "lam": 0.4}, {"kind": "st", "lam": 0.5}, {"kind": "st", "lam": 0.5, "leaves": True},
              {"kind": "sst", "lam": 0.3, "leaves": True, "typed_leaves": True},
              {"kind": "pt", "lam": 0.4, "mu": 0.4}, {"kind": "pt", "lam": 0.4, "mu": 0.6, "max_length": 2}):
        spec = spec_from_dict(d)
        bx, by, _ = encode_with_resources(spec, X, Y)
        a, b = bx[spec.rep_name].readonly(), by[spec.rep_name].readonly()
        got = spec.paired(a, b)
        want = BaseSpec.paired(spec, a, b)
        assert want.shape == (12,) and np.any(want > 0)
        np.testing.assert_array_equal(got, want, err_msg=str(d))
        np.testing.assert_array_equal(got, np.diag(spec.block(a, b)), err_msg=str(d))
        assert got[0] == spec.diag(a)[0]
    with pytest.raises(ValueError, match="one length"):
        spec.paired(a, b.take([0, 1]))
