"""Explicit feature maps (gramtile.kernels.maps) against the pairwise cores: every mapped
contract-test instance, random inputs (hypothesis), real data (NUM, TREC QC, SemEval), and the
corpus-level feature ids that tiles from different batches share."""
import itertools
import random

import numpy as np
import pytest
from conftest import num_trees, require_data
from hypothesis import given, settings
from hypothesis import strategies as hs
from instances_route import rand_ptree
from strategies import tree_lists
from test_contracts import GENERATORS, INSTANCES, examples

import gramtile
from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import REGISTRY, as_spec, has_map, no_map_reason
from gramtile.pipeline.compute.product import block, features
from gramtile.pipeline.parsing.convert import complete
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.structures import TokenSeq
from gramtile.pipeline.representations.vocab import Vocabularies

MAPPED = [(d, g) for d, g in INSTANCES if has_map(as_spec(d))]


def max_rel(A, B):
    """Largest |A - B| relative to the larger entry of the pair (0 where both are 0)."""
    scale = np.maximum(np.abs(A), np.abs(B))
    diff = np.abs(A - B)
    return float(np.max(np.where(scale > 0, diff / np.where(scale > 0, scale, 1), 0.0), initial=0.0))


def product_gram(spec, X, Y=None, dense_every=False):
    """K(X, Y) on the product path, X and Y encoded over one vocabulary and one feature vocabulary."""
    spec = as_spec(spec)
    v = Vocabularies()
    bx = encode(X, v)
    by = None if Y is None else encode(Y, v)
    px, w, fv = features(spec, bx)
    if by is not None:
        py, w, fv = features(spec, by, fv)
        px = px.copy()
        px.resize((px.shape[0], len(fv)))
    dense = np.arange(len(fv)) if dense_every else np.arange(0, len(fv), 3)
    return block(px, w, dense, None if by is None else py)


def test_maps_are_declared_where_the_definitions_admit_them():
    yes = [{"kind": "st"}, {"kind": "st", "leaves": True}, {"kind": "bow"}, {"kind": "route"},
           {"kind": "route", "variant": "production", "lam": 2.0}, {"kind": "subsequence", "n": 4}]
    no = [{"kind": "sst"}, {"kind": "pt"}, {"kind": "route", "degree": 2}, {"kind": "route", "offset": 1},
          {"kind": "subsequence", "similarity": "wordnet"}, {"kind": "dependency_path"}, {"kind": "hdag"}]
    for d in yes:
        assert has_map(as_spec(d)) and no_map_reason(as_spec(d)) is None, d
    for d in no:
        s = as_spec(d)
        assert not has_map(s) and no_map_reason(s), d
    assert {d["kind"] for d, _ in MAPPED} == {"st", "bow", "route", "subsequence"}
    # every other kind of the contract instances (SST, PT, HDAG, dependency path, relation,
    # WSD kernels, composites) has none
    others = [as_spec(d) for d, _ in INSTANCES if d["kind"] not in {"st", "bow", "route", "subsequence"}]
    assert {s.kind for s in others} == set(REGISTRY) - {"st", "bow", "route", "subsequence"} - \
        {"normalized", "polynomial", "sum", "product"}
    for s in others:
        assert not has_map(s) and no_map_reason(s)


def test_a_kernel_without_a_map_says_so():
    with pytest.raises(KernelSpecError, match="no explicit feature map"):
        features(as_spec({"kind": "sst"}), encode([gramtile.pipeline.representations.structures.Tree("A")],
                                                  Vocabularies()))


@pytest.mark.parametrize("spec,gen", MAPPED, ids=[str(d) for d, _ in MAPPED])
def test_product_equals_pairwise_on_contract_instances(spec, gen):
    for seed in range(3):
        X = examples(gen, 16, seed)
        K = gramtile.gram(spec, X)
        Kp, dx, _ = product_gram(spec, X)
        assert max_rel(Kp, K) <= 1e-12
        assert max_rel(dx, np.diag(K)) <= 1e-12
        assert np.array_equal(Kp, Kp.T)
        # rectangular: features of Y interned after X's share X's ids
        R = gramtile.gram(spec, X[:6], X[6:])
        Rp, dx, dy = product_gram(spec, X[:6], X[6:])
        assert max_rel(Rp, R) <= 1e-12
        assert max_rel(dy, np.diag(K)[6:]) <= 1e-12


def test_dense_and_sparse_parts_agree():
    X = examples("tree", 20, 5)
    K = gramtile.gram({"kind": "st", "lam": 0.5, "leaves": True}, X)
    for dense_every in (False, True):
        Kp, _, _ = product_gram({"kind": "st", "lam": 0.5, "leaves": True}, X, dense_every=dense_every)
        assert max_rel(Kp, K) <= 1e-12


def test_feature_ids_are_shared_across_batches():
    """Two batches interned into one vocabulary (as shards of a corpus are) give K of the pair."""
    X = examples("tree", 30, 2)
    spec = as_spec({"kind": "st", "lam": 0.4})
    v = Vocabularies()
    b1, b2 = encode(X[:15], v), encode(X[15:], v)
    p1, _, fv = features(spec, b1)
    n1 = len(fv)
    p2, w, fv = features(spec, b2, fv)
    p3, _, fv = features(spec, b1, fv)  # interning again adds nothing and gives the same ids
    assert len(fv) == len(w)
    p1.resize((15, len(fv)))
    assert (p3 - p1).nnz == 0 and len(fv) >= n1
    K = gramtile.gram(spec, X)
    Kp, _, _ = block(p1, w, None, p2)
    assert max_rel(Kp, K[:15, 15:]) <= 1e-12


@settings(max_examples=60, deadline=None)
@given(tree_lists(9), hs.floats(0.05, 1.0), hs.booleans())
def test_st_map_on_random_trees(trees, lam, leaves):
    spec = {"kind": "st", "lam": lam, "leaves": leaves}
    K = gramtile.gram(spec, trees)
    assert max_rel(product_gram(spec, trees)[0], K) <= 1e-12


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.lists(hs.sampled_from("abc"), min_size=1, max_size=9), min_size=2, max_size=8),
       hs.integers(1, 4), hs.floats(0.05, 1.0), hs.booleans())
def test_subsequence_map_on_random_sequences(words, n, lam, cumulative):
    seqs = [TokenSeq(tuple(w)) for w in words]
    spec = {"kind": "subsequence", "n": n, "lam": lam, "cumulative": cumulative}
    K = gramtile.gram(spec, seqs)
    assert max_rel(product_gram(spec, seqs)[0], K) <= 1e-12


@settings(max_examples=40, deadline=None)
@given(hs.integers(0, 10_000), hs.floats(0.1, 2.5), hs.sampled_from(["label", "production"]))
def test_route_map_on_random_ptrees(seed, lam, variant):
    rng = random.Random(seed)
    X = [rand_ptree(rng) for _ in range(10)]
    spec = {"kind": "route", "lam": lam, "variant": variant}
    K = gramtile.gram(spec, X)
    assert max_rel(product_gram(spec, X)[0], K) <= 1e-12


@settings(max_examples=40, deadline=None)
@given(hs.integers(0, 10_000), hs.booleans(), hs.sampled_from(["tokens", "lemmas", "pos"]))
def test_bow_map_on_random_sequences(seed, binary, on):
    rng = random.Random(seed)
    X = [GENERATORS["seq"](rng) for _ in range(12)]
    spec = {"kind": "bow", "binary": binary, "on": on}
    assert max_rel(product_gram(spec, X)[0], gramtile.gram(spec, X)) <= 1e-12


# ---- real data: a few hundred examples of NUM, TREC QC and SemEval --------------------------------

def check_real(spec, structs):
    spec = as_spec(spec)
    v = Vocabularies()
    b = encode(structs, v)
    K = spec.block(b.readonly())
    phi, w, _ = features(spec, b)
    Kp, d, _ = block(phi, w, np.flatnonzero(np.diff(phi.tocsc().indptr) > 0.2 * len(structs)))
    assert max_rel(Kp, K) <= 1e-12, spec
    assert max_rel(d, np.diag(K)) <= 1e-12


def test_real_num_trees():
    trees = [d.structures["tree"] for d in num_trees(300)]
    for spec in ({"kind": "st", "lam": 0.4}, {"kind": "st", "lam": 0.7, "leaves": True}):
        check_real(spec, trees)
    ptrees = [complete({"tree": t}, ["ptree"])["ptree"] for t in trees]
    check_real({"kind": "route", "lam": 0.5, "rep": "ptree"}, ptrees)


def test_real_trec_qc():
    docs = list(itertools.islice(read(require_data("trec_qc_kelp_trees") / "train_5500.coarse.klp.gz", "kelp"), 300))
    trees = [d.structures["grct"] for d in docs]
    check_real({"kind": "st", "lam": 0.4, "rep": "grct"}, trees)
    check_real({"kind": "bow", "rep": "bow", "binary": False}, [d.structures["bow"] for d in docs])
    check_real({"kind": "route", "lam": 0.5, "rep": "ptree"},
               [complete({"tree": t}, ["ptree"])["ptree"] for t in trees])
    text = [d.text for d in itertools.islice(read(require_data("trec_qc") / "train.txt", "trec"), 300)]
    seqs = [d.structures["seq"] for d in gramtile.parse(text, reps=["seq"])]
    for spec in ({"kind": "subsequence", "n": 3, "lam": 0.5}, {"kind": "subsequence", "n": 4, "lam": 0.8},
                 {"kind": "subsequence", "n": 2, "lam": 0.5, "on": "lemmas", "cumulative": False},
                 {"kind": "bow"}):
        check_real(spec, seqs)


def test_real_semeval():
    docs = list(itertools.islice(read(require_data("semeval2010_task8_train") / "TRAIN_FILE.TXT", "semeval"), 200))
    seqs = [d.structures["seq"] for d in docs]
    for spec in ({"kind": "subsequence", "n": 3, "lam": 0.5}, {"kind": "bow", "on": "lemmas"}):
        check_real(spec, seqs)
