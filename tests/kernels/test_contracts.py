"""Contract tests run for every registered kernel instance (docs/ARCHITECTURE.md, "Tests and checks").

Each kernel family adds a module ``tests/instances_<family>.py`` defining ``INSTANCES`` (a list
of ``(spec dict, generator name)``) and ``GENERATORS`` (generator name -> ``f(random.Random) ->
structure``). The same checks run for each base kernel and for composites built on it.
"""
import hashlib
import importlib.util
import json
import pickle
import random
from pathlib import Path

import numpy as np
import pytest

import gramtile
from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import REGISTRY, kinds, spec_from_dict
from gramtile.pipeline.representations.structures import Document, TokenSeq, Tree

LABELS = ["A", "B", "C"]
WORDS = ["x", "y", "z", "w"]


def rand_tree(rng, depth=0):
    if depth >= 3 or rng.random() < 0.3:
        if depth > 0 and rng.random() < 0.5:
            return Tree(rng.choice(WORDS))
        return Tree(rng.choice(LABELS), (Tree(rng.choice(WORDS)),)) if depth > 0 else Tree(rng.choice(LABELS))
    return Tree(rng.choice(LABELS), tuple(rand_tree(rng, depth + 1) for _ in range(rng.randint(1, 3))))


def rand_seq(rng):
    n = rng.randint(1, 7)
    return TokenSeq(tuple(rng.choice(WORDS) for _ in range(n)), tuple(rng.choice(WORDS[:2]) for _ in range(n)),
                    tuple(rng.choice(LABELS) for _ in range(n)))


def rand_bag(rng):
    return {w: float(rng.randint(0, 3)) for w in rng.sample(WORDS, rng.randint(0, len(WORDS)))}


def rand_tree_leaves_are_words(rng):
    """Random trees whose childless nodes are all words (no single-node trees): the setting of
    PT's ``terminal_factor``, which is PSD only when a label is never both a leaf and an inner node."""
    t = rand_tree(rng)
    return t if t.children else Tree(t.label, (Tree(rng.choice(WORDS)),))


GENERATORS = {"tree": rand_tree, "tree_words": rand_tree_leaves_are_words, "seq": rand_seq, "bag": rand_bag}

# (spec dict, generator kind). Families append here as they land.
INSTANCES = [
    ({"kind": "bow"}, "seq"),
    ({"kind": "bow", "on": "lemmas", "binary": False}, "seq"),
    ({"kind": "bow", "on": "pos"}, "seq"),
    ({"kind": "bow", "rep": "bow", "binary": False}, "bag"),
]
if "sst" in REGISTRY:
    INSTANCES += [
        ({"kind": "st", "lam": 0.4}, "tree"),
        ({"kind": "st", "lam": 0.6, "leaves": True}, "tree"),
        ({"kind": "sst", "lam": 0.4}, "tree"),
        ({"kind": "sst", "lam": 0.7, "leaves": True}, "tree"),
        ({"kind": "pt", "lam": 0.4, "mu": 0.4}, "tree"),
        ({"kind": "pt", "lam": 0.5, "mu": 0.8, "gap": "span"}, "tree"),
        ({"kind": "pt", "lam": 0.4, "mu": 0.4, "terminal_factor": 5}, "tree_words"),
        ({"kind": "pt", "lam": 0.5, "mu": 0.8, "gap": "span", "terminal_factor": 5}, "tree_words"),
    ]


def composites(base):
    return [
        {"kind": "normalized", "kernel": base},
        {"kind": "polynomial", "kernel": base, "degree": 2, "offset": 1},
        {"kind": "sum", "kernels": [{"weight": 0.5, "kernel": base},
                                    {"weight": 2.0, "kernel": {"kind": "normalized", "kernel": base}}]},
        {"kind": "product", "kernels": [base, {"kind": "normalized", "kernel": base}]},
    ]


for _path in sorted(Path(__file__).resolve().parents[1].glob("instances_*.py")):  # tests/, shared by the rooms
    _spec = importlib.util.spec_from_file_location(_path.stem, _path)
    _mod = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)
    GENERATORS.update(getattr(_mod, "GENERATORS", {}))
    INSTANCES += list(_mod.INSTANCES)

ALL = [(d, g) for d, g in INSTANCES] + [(c, g) for d, g in INSTANCES for c in composites(d)]
IDS = [json.dumps(d, sort_keys=True)[:90] for d, _ in ALL]


def examples(gen, n, seed):
    rng = random.Random(seed)
    return [GENERATORS[gen](rng) for _ in range(n)]


def test_every_registered_kind_has_contract_instances():
    covered = {d["kind"] for d, _ in ALL}
    missing = set(kinds()) - covered
    assert not missing, f"kinds without contract-test instances: {missing}"


@pytest.mark.parametrize("spec,gen", ALL, ids=IDS)
def test_gram_contract(spec, gen):
    s = spec_from_dict(spec)
    for seed in range(3):
        X = examples(gen, 14, seed)
        K = gramtile.gram(s, X)
        assert K.shape == (14, 14) and K.dtype == np.float64
        assert np.all(np.isfinite(K))
        np.testing.assert_allclose(K, K.T, rtol=1e-12, atol=0)
        ev = np.linalg.eigvalsh((K + K.T) / 2)
        assert ev.min() >= -1e-9 * max(np.trace(K), 1e-300), f"not PSD: min eigenvalue {ev.min()}"
        # rectangular blocks equal the corresponding part of the square matrix
        R = gramtile.gram(s, X[:5], X[5:])
        np.testing.assert_allclose(R, K[:5, 5:], rtol=1e-12, atol=1e-300)
        # diagonals reported by the evaluator equal the matrix diagonal
        from gramtile.pipeline.compute.inmemory import add_resources, evaluate_block
        from gramtile.pipeline.representations.encode import encode
        from gramtile.pipeline.representations.vocab import Vocabularies
        v = Vocabularies()
        def of(r):  # examples of several texts hold each representation under its name
            return [x.structures[r] for x in X] if isinstance(X[0], Document) else X
        data = {r: encode(of(r), v) for r in s.reps()}
        add_resources(s, data, v, [{r: of(r) for r in s.reps()}])  # e.g. soft-matching similarity matrices
        Kb, d1, d2 = evaluate_block(s, data)
        np.testing.assert_allclose(d1, np.diag(Kb), rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(Kb, K, rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("spec,gen", INSTANCES, ids=[json.dumps(d, sort_keys=True) for d, _ in INSTANCES])
def test_normalized_unit_diagonal(spec, gen):
    X = examples(gen, 12, 7)
    raw = np.diag(gramtile.gram(spec, X))
    K = gramtile.gram({"kind": "normalized", "kernel": spec}, X)
    np.testing.assert_allclose(np.diag(K)[raw > 0], 1.0, rtol=1e-12)
    assert np.all(np.diag(K)[raw == 0] == 0.0)
    assert np.all(np.abs(K) <= 1 + 1e-12)


@pytest.mark.parametrize("spec,gen", ALL, ids=IDS)
def test_spec_round_trip_hash_and_pickle(spec, gen):
    s = spec_from_dict(spec)
    d = s.to_dict()
    s2 = spec_from_dict(json.loads(json.dumps(d)))
    assert s2 == s and s2.spec_hash == s.spec_hash and s2.to_dict() == d
    s3 = pickle.loads(pickle.dumps(s))
    assert s3 == s and s3.spec_hash == s.spec_hash
    assert len({s.spec_hash, spec_from_dict({"kind": "normalized", "kernel": s}).spec_hash}) == 2


def test_spec_hash_is_stable_across_versions():
    # Pinned: a changed hash would orphan every existing Gram store.
    s = spec_from_dict({"kind": "bow"})
    canon = '{"binary":true,"kind":"bow","on":"tokens","rep":"seq"}'
    assert s.to_json() == canon
    assert s.spec_hash == hashlib.sha256(canon.encode()).hexdigest()


def test_composite_matches_manual_combination():
    X = examples("seq", 10, 3)
    K = gramtile.gram({"kind": "bow", "binary": False}, X)
    d = np.diag(K)
    N = K / np.sqrt(np.outer(d, d))
    S = gramtile.gram({"kind": "sum", "kernels": [{"weight": 2.0, "kernel": {"kind": "bow", "binary": False}},
                                                  {"weight": 1.0, "kernel": {"kind": "normalized", "kernel": {"kind": "bow", "binary": False}}}]}, X)
    np.testing.assert_allclose(S, 2 * K + N, rtol=1e-12)
    P = gramtile.gram({"kind": "polynomial", "kernel": {"kind": "bow", "binary": False}, "degree": 3, "offset": 1}, X)
    np.testing.assert_allclose(P, (K + 1) ** 3, rtol=1e-12)
    Q = gramtile.gram({"kind": "product", "kernels": [{"kind": "bow", "binary": False}, {"kind": "bow"}]}, X)
    np.testing.assert_allclose(Q, K * gramtile.gram({"kind": "bow"}, X), rtol=1e-12)


def test_zero_self_similarity_normalizes_to_zero_not_nan():
    K = gramtile.gram({"kind": "normalized", "kernel": {"kind": "bow", "rep": "bow"}}, [{"a": 1.0}, {}])
    assert np.array_equal(K, np.array([[1.0, 0.0], [0.0, 0.0]]))


@pytest.mark.parametrize("bad,words", [
    ({"kind": "nope"}, ["unknown kernel kind", "'nope'", "known kinds"]),
    ({"kind": "bow", "colour": 1}, ["unknown key", "'colour'", "allowed keys"]),
    ({"kind": "bow", "on": "chars"}, ["'on'", "'chars'", "tokens"]),
    ({"kind": "bow", "binary": "yes"}, ["'binary'", "'yes'"]),
    ({"kind": "polynomial", "kernel": {"kind": "bow"}, "degree": 0}, ["'degree'", "0", "[1, inf]"]),
    ({"kind": "sum", "kernels": [{"weight": -1, "kernel": {"kind": "bow"}}]}, ["weight", "-1", ">= 0"]),
    ({"kind": "normalized"}, ["needs a 'kernel'"]),
    ({"lam": 0.4}, ["no 'kind'"]),
])
def test_invalid_specs_raise_typed_errors(bad, words):
    with pytest.raises(KernelSpecError) as e:
        spec_from_dict(bad)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


BASE_ONE_REP = [(d, g) for d, g in INSTANCES
                if len(spec_from_dict(d).rep_names) == 1 and not (getattr(spec_from_dict(d), "resources", None)
                                                                   and spec_from_dict(d).resources())]


@pytest.mark.parametrize("spec,gen", BASE_ONE_REP, ids=[json.dumps(d, sort_keys=True)[:90] for d, _ in BASE_ONE_REP])
def test_paired_values_are_the_diagonal_of_the_block(spec, gen):
    """``paired(X, Y)`` = k(X_i, Y_i) (what the within-pair kernel reads) equals the diagonal of
    ``block(X, Y)`` for every base kernel, through its own one-pass core or the generic loop."""
    from gramtile.pipeline.compute.inmemory import batch_for
    from gramtile.pipeline.representations.encode import encode
    from gramtile.pipeline.representations.vocab import Vocabularies

    s = spec_from_dict(spec)
    X = examples(gen, 16, 7)
    rep = s.rep_name
    of = (lambda xs: [x.structures[rep] for x in xs]) if isinstance(X[0], Document) else (lambda xs: xs)
    v = Vocabularies()
    a = batch_for({rep: encode(of(X[:8]), v)}, s)
    b = batch_for({rep: encode(of(X[8:]), v)}, s)
    got = s.paired(a, b)
    assert got.shape == (8,)
    np.testing.assert_allclose(got, np.diag(s.block(a, b)), rtol=1e-12, atol=1e-300)
