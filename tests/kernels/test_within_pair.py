"""The within-pair similarity kernel k(p, q) = s(p) s(q), s(p) = K(p.a, p.b): against the slow
reference (each pair's s from the base kernel on its two texts alone, by ``gramtile.gram``) on
random pairs of trees and sequences, symmetric and PSD, through the tiled engine and a saved
model as in memory, and its spec refusals."""
import json
import random

import numpy as np
import pytest
from instances_within_pair import rand_seq, rand_tree
from sklearn.svm import SVC

import gramtile
from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.representations.structures import Document

BASES = [{"kind": "sst", "lam": 0.4}, {"kind": "pt", "lam": 0.4, "mu": 0.4}, {"kind": "st", "lam": 0.5},
         {"kind": "bow", "on": "tokens"}, {"kind": "subsequence", "n": 2, "lam": 0.5}]


def _pairs(rng, n):
    return {f"{f}.{r}": [(rand_tree if r == "tree" else rand_seq)(rng) for _ in range(n)]
            for f in ("q", "a") for r in ("tree", "seq")}


def _rep(base):
    return "seq" if base["kind"] in ("bow", "subsequence") else "tree"


def _reference_s(base, X, normalized):
    """s(p) of every pair, each from the base kernel on that pair's two texts alone."""
    rep = _rep(base)
    s = []
    for a, b in zip(X[f"q.{rep}"], X[f"a.{rep}"]):
        k = gramtile.gram(base, [a], [b])[0, 0]
        if normalized:
            kaa, kbb = gramtile.gram(base, [a])[0, 0], gramtile.gram(base, [b])[0, 0]
            k = k / np.sqrt(kaa * kbb) if kaa > 0 and kbb > 0 else 0.0
        s.append(k)
    return np.array(s)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", range(4))
def test_within_pair_equals_the_reference_and_is_psd(seed):
    rng = random.Random(seed)
    X, Y = _pairs(rng, 25), _pairs(rng, 7)
    for base in BASES:
        for normalized in (True, False):
            spec = {"kind": "within_pair", "kernel": base, "fields": ["q", "a"], "normalized": normalized}
            sx, sy = _reference_s(base, X, normalized), _reference_s(base, Y, normalized)
            K = gramtile.gram(spec, X)
            np.testing.assert_allclose(K, np.outer(sx, sx), rtol=1e-12, atol=1e-300)
            np.testing.assert_allclose(gramtile.gram(spec, X, Y), np.outer(sx, sy), rtol=1e-12, atol=1e-300)
            assert np.array_equal(K, K.T)
            ev = np.linalg.eigvalsh(K)
            assert ev[-1] > 0 and ev[0] >= -1e-9 * ev[-1], (base, normalized, ev[0], ev[-1])
            if normalized:
                assert (sx >= 0).all() and (sx <= 1 + 1e-12).all()


def test_the_reference_check_fails_on_swapped_fields():
    """The assertion above can fail: the kernel of q against q (both fields the same text) is not
    the within-pair kernel."""
    rng = random.Random(0)
    X = _pairs(rng, 15)
    base = BASES[0]
    K = gramtile.gram({"kind": "within_pair", "kernel": base, "fields": ["q", "a"]}, X)
    wrong = {**X, "a.tree": list(reversed(X["a.tree"]))}
    assert not np.allclose(gramtile.gram({"kind": "within_pair", "kernel": base, "fields": ["q", "a"]}, wrong), K)


def test_sums_with_field_kernels_compose_and_stay_psd():
    rng = random.Random(3)
    X = _pairs(rng, 30)
    wp = {"kind": "within_pair", "kernel": {"kind": "sst", "lam": 0.4}, "fields": ["q", "a"]}
    field = {"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4, "rep": "a.tree"}}
    K = gramtile.gram({"kind": "sum", "kernels": [{"weight": 1.0, "kernel": wp}, {"weight": 1.0, "kernel": field}]}, X)
    np.testing.assert_allclose(K, gramtile.gram(wp, X) + gramtile.gram(field, X), rtol=1e-12)
    assert np.linalg.eigvalsh(K)[0] >= -1e-9 * np.abs(K).max()


@pytest.mark.parametrize("spec,match", [
    ({"kind": "within_pair"}, "needs a 'kernel'"),
    ({"kind": "within_pair", "kernel": {"kind": "normalized", "kernel": {"kind": "sst"}}}, "must be a base kernel"),
    ({"kind": "within_pair", "kernel": {"kind": "sst", "rep": "q.tree"}}, "give the representation alone"),
    ({"kind": "within_pair", "kernel": {"kind": "sst"}, "fields": ["q", "q"]}, "two different fields"),
    ({"kind": "within_pair", "kernel": {"kind": "sst"}, "fields": ["q"]}, "two different fields"),
    ({"kind": "within_pair", "kernel": {"kind": "sst"}, "normalized": 1}, "must be true or false"),
    ({"kind": "within_pair", "kernel": {"kind": "sptk", "similarity": "wordnet"}}, "resources"),
    ({"kind": "within_pair", "kernel": {"kind": "bogus"}}, "in 'kernel' of 'within_pair'"),
])
def test_bad_specs_are_refused_naming_the_fix(spec, match):
    with pytest.raises(KernelSpecError, match=match):
        spec_from_dict(spec)


def test_examples_without_both_fields_are_refused():
    rng = random.Random(1)
    X = _pairs(rng, 4)
    with pytest.raises(KernelSpecError, match=r"reads representation '[xy].tree', but the examples have"):
        gramtile.gram({"kind": "within_pair", "kernel": {"kind": "sst"}, "fields": ["x", "y"]}, X)


QS = ["What is the capital of France ?", "Who wrote Hamlet ?", "How tall is Everest ?", "When did the war end ?",
      "Where do pandas live ?", "What is the capital of Spain ?"]
AS = ["Paris is the capital of France .", "The weather is nice today .", "Everest is 8,848 metres tall .",
      "The war ended in 1945 .", "Pandas live in the mountains of China .", "Madrid is a large city ."]


@pytest.mark.timeout(300)
def test_tiled_engine_equals_in_memory(tmp_path):
    tsv = tmp_path / "pairs.tsv"
    tsv.write_text("q\ta\tlabel\n" + "".join(f"{q}\t{a}\t{i % 2}\n" for i, (q, a) in enumerate(zip(QS, AS))),
                   encoding="utf-8")
    prepare(tsv, "tsv", tmp_path / "p.zarr", shard_size=4, cluster="sequential",
            reader_options={"fields": "q=q,a=a", "label_col": "label"})
    spec = {"kind": "within_pair", "kernel": {"kind": "sst", "lam": 0.4}, "fields": ["q", "a"]}
    got = run_gram(tmp_path / "p.zarr", spec, tmp_path / "g.zarr", tile=4, cluster="sequential").view().to_numpy()
    docs = gramtile.parse(list(zip(QS, AS)), fields=["q", "a"])
    assert all(isinstance(d, Document) for d in docs)
    want = gramtile.gram(spec, docs)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    s = np.sqrt(np.diag(want))
    assert s[0] > s[1]  # an answer that shares the question's words scores above one that shares nothing


@pytest.mark.timeout(600)
def test_a_saved_model_predicts_as_trained(tmp_path, capsys):
    """train --kernel within_pair + a field kernel, on a pair store with its Gram store; predict on
    the raw pair file gives the labels the model gives its training examples."""
    from gramtile.workflows.cli import main
    tsv = tmp_path / "pairs.tsv"
    labels = ["1", "0", "1", "1", "1", "0"]
    tsv.write_text("q\ta\tlabel\n" + "".join(f"{q}\t{a}\t{y}\n" for q, a, y in zip(QS, AS, labels)), encoding="utf-8")
    opts = ["--fields", "q=q,a=a", "--label-col", "label"]
    assert main(["prepare", "--input", str(tsv), "--format", "tsv", *opts, "--out", str(tmp_path / "p.zarr"),
                 "--cluster", "sequential"]) == 0
    wp = {"kind": "within_pair", "kernel": {"kind": "sst", "lam": 0.4}, "fields": ["q", "a"]}
    spec = {"kind": "sum", "kernels": [{"weight": 1.0, "kernel": wp},
                                       {"weight": 1.0, "kernel": {"kind": "bow", "rep": "a.seq"}}]}
    for i, base in enumerate((wp, {"kind": "bow", "rep": "a.seq"})):
        run_gram(tmp_path / "p.zarr", base, tmp_path / f"g{i}.zarr", cluster="sequential")
    assert main(["train", "--corpus", str(tmp_path / "p.zarr"), "--gram", str(tmp_path / "g0.zarr"), "--gram",
                 str(tmp_path / "g1.zarr"), "--kernel", json.dumps(spec), "--C", "10", "--out", str(tmp_path / "m"),
                 "--cluster", "sequential"]) == 0
    out = tmp_path / "pred.json"
    assert main(["predict", "--model-dir", str(tmp_path / "m"), "--input", str(tsv), "--format", "tsv", *opts,
                 "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert [g["predicted"] for g in got] == labels  # C = 10 on six examples: the model fits its training examples
    # the scores are those of libsvm on the kernel computed in memory (so predict evaluated the
    # within-pair similarities of the new examples and of the support examples as training did)
    K = gramtile.gram(spec, gramtile.parse(list(zip(QS, AS)), fields=["q", "a"]))
    dec = SVC(kernel="precomputed", C=10).fit(K, labels).decision_function(K)
    np.testing.assert_allclose(np.abs([g["score"][0] for g in got]), np.abs(dec), rtol=1e-6)
