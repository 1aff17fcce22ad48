"""Kernel ridge classification, a learner of the registry: its fit against the explicit solve of
(K + alpha I) A = Y, and the same evaluate / train / predict path as every learner (real NUM
trees, a real Gram store)."""
import json

import numpy as np
import pytest
from conftest import corpus_store_of, num_trees

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.learners.registry import LEARNERS
from gramtile.pipeline.learn.learners.ridge import RidgeClassifier
from gramtile.pipeline.learn.models import SavedModel
from gramtile.pipeline.learn.sources import store_labels
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.cli import main

SPEC = {"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4}}


def _reference(K_tr, y, K_te, alpha):
    """The explicit solve: A = (K + alpha I)^-1 Y, scores K_te A, labels by sign or largest score."""
    cl = np.unique(y)
    cols = cl[1:] if cl.size == 2 else cl
    Y = np.where(y[:, None] == cols[None, :], 1.0, -1.0)
    A = np.linalg.solve(K_tr + alpha * np.eye(len(y)), Y)
    S = K_te @ A
    if cl.size == 2:
        return S[:, 0], np.where(S[:, 0] > 0, cl[1], cl[0])
    return S, cl[S.shape[1] - 1 - np.argmax(S[:, ::-1], axis=1)]


@pytest.mark.parametrize("k", [2, 4])
def test_fit_equals_the_explicit_solve(k):
    rng = np.random.default_rng(k)
    for trial in range(20):
        X = rng.normal(size=(30, 5))
        K = X @ X.T
        y = rng.integers(0, k, 30).astype(str)
        y[:k] = np.arange(k).astype(str)  # every class present
        alpha = float(rng.uniform(0.01, 10))
        tr, te = np.arange(22), np.arange(22, 30)
        est = RidgeClassifier(alpha).fit(K[np.ix_(tr, tr)], y[tr])
        S, pred = _reference(K[np.ix_(tr, tr)], y[tr], K[np.ix_(te, tr)], alpha)
        assert np.allclose(est.decision_function(K[np.ix_(te, tr)]), S, atol=1e-8)
        assert est.predict(K[np.ix_(te, tr)]).tolist() == pred.tolist()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    every = num_trees(6000)
    pos, neg = [d for d in every if d.label == "1"][:40], [d for d in every if d.label != "1"][:80]
    docs = [d for pair in zip(neg[:40], pos) for d in pair] + neg[40:]
    d = tmp_path_factory.mktemp("ridge")
    corpus = corpus_store_of(d / "c.zarr", docs, 64)
    run_gram(corpus, json.dumps(SPEC["kernel"]), d / "sst.zarr", tile=40, cluster="sequential")
    return d / "sst.zarr"


@pytest.mark.shared_data
def test_evaluate_and_train_take_ridge_from_the_registry(store, tmp_path, capsys):
    assert "ridge" in LEARNERS
    st = GramStore.open(store)
    y = np.asarray(store_labels(st))
    K = ComposedView(as_spec(SPEC), [store]).block()
    # every alpha scored on the test parts: the pooled predictions of the explicit solve
    assert main(["evaluate", "--gram", str(store), "--normalized", "--model", "ridge", "--alpha", "0.1,10",
                 "--C-on-test", "--folds", "3", "--folds-dir", str(tmp_path), "--out", str(tmp_path / "ev")]) == 0
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    folds = stratified_kfold(list(y), 3, 0)
    for alpha in (0.1, 10.0):
        pred = np.concatenate([_reference(K[np.ix_(f.train, f.train)], y[f.train], K[np.ix_(f.test, f.train)],
                                          alpha)[1] for f in folds])
        assert res["predictions"][f"ridge alpha={alpha:g}"]["predicted"] == pred.tolist()
    assert [r["alpha"] for r in res["rows"]] == [0.1, 10.0] and {"precision", "f1"} <= set(res["rows"][0])
    # nested selection of alpha, and train with a grid
    assert main(["evaluate", "--gram", str(store), "--normalized", "--model", "ridge", "--alpha", "0.1,10",
                 "--folds", "3", "--folds-dir", str(tmp_path), "--out", str(tmp_path / "nested")]) == 0
    row = json.loads((tmp_path / "nested" / "results.json").read_text())["rows"][0]
    assert row["alpha_grid"] == "0.1,10" and len(row["alpha_chosen"].split(",")) == 3
    corpus = st.meta["corpus_path"]
    assert main(["train", "--corpus", corpus, "--gram", str(store), "--kernel", json.dumps(SPEC), "--model", "ridge",
                 "--alpha", "1", "--out", str(tmp_path / "m")]) == 0
    m = SavedModel.load(tmp_path / "m")
    assert m.learner == "ridge" and m.n_support == y.size
    new = num_trees(7000)[-30:]
    K_new = m.kernel_to_support(new)
    want = RidgeClassifier(1.0).fit(K, y)
    assert np.allclose(m.decision_function(K_new), want.decision_function(K_new), atol=1e-9)
    assert m.predict(new).tolist() == want.predict(K_new).tolist()
    capsys.readouterr()
    assert main(["evaluate", "--gram", str(store), "--model", "ridge", "--C", "1"]) == 2
    assert "--model ridge takes no --C" in capsys.readouterr().err
