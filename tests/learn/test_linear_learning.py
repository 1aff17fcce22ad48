"""The linear learners on a feature store (pipeline/learn/linear.py): SGD against scikit-learn's
exact hinge-loss SVM, chunked reading, determinism, (fold x C) fits on threads and worker
processes equal to the serial run, and saved linear models predicting from examples exactly as
the kernel does (pipeline/learn/linear_models.py)."""
import json

import numpy as np
import pytest
import scipy.sparse as sp
import yaml
from conftest import corpus_store_of, evaluate_features, num_trees

import gramtile
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.feature_sets import write_store
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn import linear
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.linear_models import LinearModel
from gramtile.pipeline.readers.jsonl import write_jsonl
from gramtile.pipeline.representations.structures import Document
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.feature_store import FeatureStore
from gramtile.workflows.cli import main

NST = {"kind": "normalized", "kernel": {"kind": "st", "lam": 0.4}}


@pytest.fixture(scope="module")
def num(tmp_path_factory):
    every = num_trees(5483)  # class-sorted: take a seeded sample of both classes
    pick = np.random.default_rng(0).permutation(len(every))
    docs = [every[i] for i in pick[:300]]
    d = tmp_path_factory.mktemp("lin")
    corpus = corpus_store_of(d / "c.zarr", docs, 70)
    write_store(corpus, as_spec(NST), d / "f.zarr")
    (d / "cluster.yaml").write_text(yaml.safe_dump({"profiles": {"two": {"type": "local", "n_workers": 2,
                                                                         "memory_limit": "1GiB"},
                                                                 "pool": {"type": "threads", "n_workers": 2}}}))
    new = [every[i] for i in pick[300:340]]  # held-out trees: partly unseen features
    return {"dir": d, "corpus": corpus, "features": d / "f.zarr", "new": new}


def _objective(w, b, X, y, C):
    m = y * (X @ w + b)
    return 0.5 * float(w @ w) + C * float(np.maximum(0.0, 1.0 - m).sum())


def test_sgd_reaches_the_exact_hinge_svm_objective(num):
    """SGD's objective (alpha = 1/(C n)) is the SVM's; after enough passes it is near the exact
    optimum of scikit-learn's SVC(kernel='linear') on the same rows and predicts as it does."""
    svm = pytest.importorskip("sklearn.svm")
    fs = FeatureStore(num["features"])
    X = fs.all_rows()
    y = np.where(np.asarray(fs.labels) == "1", 1.0, -1.0)
    C = 1.0
    exact = svm.SVC(kernel="linear", C=C, tol=1e-8).fit(X, y)
    w0, b0 = np.asarray(exact.coef_.todense()).ravel() if sp.issparse(exact.coef_) else exact.coef_.ravel(), \
        float(exact.intercept_[0])
    best = _objective(w0, b0, X, y, C)
    rows = np.arange(fs.n)
    coef, icpt, classes = linear.fit(fs, rows, C, "sgd", seed=0, epochs=60, chunk_rows=64)
    assert classes == ["-1", "1"]
    got = _objective(coef.ravel(), float(icpt[0]), X, y, C)
    assert best <= got * (1 + 1e-9) and got <= 1.10 * best, (got, best)
    agree = np.mean(np.sign(X @ coef.ravel() + icpt[0]) == np.sign(X @ w0 + b0))
    assert agree >= 0.97
    # one pass is far from it: the bound above can fail
    c1, i1, _ = linear.fit(fs, rows, C, "sgd", seed=0, epochs=1, chunk_rows=64)
    assert _objective(c1.ravel(), float(i1[0]), X, y, C) > 1.10 * best


def test_sgd_is_seeded_streams_chunks_and_balances_like_sklearn(num, monkeypatch):
    fs = FeatureStore(num["features"])
    rows = np.arange(0, fs.n, 2)
    a = linear.fit(fs, rows, 0.5, "sgd", seed=3, epochs=3, chunk_rows=50)
    b = linear.fit(FeatureStore(num["features"]), rows, 0.5, "sgd", seed=3, epochs=3, chunk_rows=50)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    c = linear.fit(fs, rows, 0.5, "sgd", seed=4, epochs=3, chunk_rows=50)
    assert not np.array_equal(a[0], c[0])
    # rows are read a chunk at a time: never more than chunk_rows plus one shard (70 rows)
    asked = []
    real = FeatureStore.rows
    monkeypatch.setattr(FeatureStore, "rows", lambda self, idx: asked.append(len(idx)) or real(self, idx))
    linear.fit(fs, rows, 0.5, "sgd", seed=3, epochs=2, chunk_rows=50)
    assert asked and max(asked) <= 50 + 70 and sum(asked) == 2 * rows.shape[0]
    utils = pytest.importorskip("sklearn.utils")
    y = [fs.labels[i] for i in rows]
    want = utils.compute_class_weight("balanced", classes=np.array(["-1", "1"]), y=np.array(y))
    got = linear.balanced_weights(y, ["-1", "1"])
    assert np.allclose([got["-1"], got["1"]], want)


@pytest.mark.parametrize("solver", ["liblinear", "sgd"])
def test_parallel_linear_fits_equal_the_serial_run(num, solver):
    common = dict(folds=3, seed=0, Cs=(0.1, 1.0), class_weight="balanced", solver=solver, epochs=3, chunk_rows=60)
    serial = evaluate_features(num["features"], cluster="sequential", **common)
    assert serial.solver["used"] == solver
    keys = ["linear C=0.1", "linear C=1"]
    assert list(serial.predictions) == keys
    for cluster in ("pool", "two"):
        par = evaluate_features(num["features"], cluster=Runtime(cluster, num["dir"] / "cluster.yaml"), **common)
        for k in keys:
            assert np.array_equal(par.predictions[k][0], serial.predictions[k][0])
            assert np.array_equal(par.predictions[k][1], serial.predictions[k][1])
        assert [r["accuracy"] for r in par.fold_rows] == [r["accuracy"] for r in serial.fold_rows]
    labels = FeatureStore(num["features"]).labels
    majority = max(list(labels).count(c) for c in ("1", "-1")) / 300
    assert max(r["accuracy"] for r in serial.rows) > majority
    # the same columns as every learner: precision, recall, F1 of the positive class
    assert {"precision", "recall", "f1", "accuracy_std", "positive"} <= set(serial.rows[0])


def test_folds_are_those_gramtile_evaluate_makes_on_the_rows(num, tmp_path):
    from gramtile.pipeline.learn.folds import stratified_kfold

    res = evaluate_features(num["features"], folds=3, seed=0, Cs=(1.0,), rows="0:210", solver="liblinear")
    fs = FeatureStore(num["features"])
    splits = stratified_kfold(fs.labels[:210], 3, 0)
    assert res.predictions["linear C=1"][0].tolist() == [int(i) for s in splits for i in s.test]
    with pytest.raises(EvaluationError, match="--rows"):
        evaluate_features(num["features"], rows="0:9999")
    hinge = evaluate_features(num["features"], folds=3, seed=0, Cs=(1.0,), rows="0:210", solver="liblinear",
                              loss="hinge")
    assert hinge.solver["loss"] == "hinge" and res.solver["loss"] == "squared_hinge"
    rows = np.arange(210)
    assert not np.allclose(linear.fit(fs, rows, 1.0, "liblinear", loss="hinge")[0],
                           linear.fit(fs, rows, 1.0, "liblinear")[0])
    with pytest.raises(EvaluationError, match="--linear-loss"):
        linear.fit(fs, rows, 1.0, "liblinear", loss="log")


def test_saved_model_predicts_from_examples_as_from_the_stored_rows(num, tmp_path):
    m = linear.train_store(num["features"], tmp_path / "m", C=1.0, solver="liblinear")
    m = LinearModel.load(tmp_path / "m")
    fs = FeatureStore(num["features"])
    docs = CorpusStore.open(num["corpus"]).documents()
    S_rows = m.decision_function(fs.all_rows())
    S_docs = m.decision_function(docs)
    assert np.max(np.abs(S_rows - S_docs)) <= 1e-12
    assert m.predict(docs) == m.predict(fs.all_rows())


def test_new_examples_get_the_kernel_decision(num):
    """A model w = sum_i a_i x_i (random a) decides new examples by sum_i a_i K(x_i, new) + b, K the
    normalised ST kernel computed pairwise: new trees and raw texts, with features unseen in
    training (dropped from the row, counted in its norm)."""
    fs = FeatureStore(num["features"])
    m = linear.train_store(num["features"], None, C=1.0, solver="liblinear")
    A = np.random.default_rng(5).normal(size=(1, fs.n))
    m.coef = np.asarray(sp.csr_matrix(A) @ fs.all_rows().toarray())
    m.intercept = np.array([0.25])
    train = CorpusStore.open(num["corpus"]).documents()
    texts = ["How many people live in Boston ?", "What year did the war end ?", "Zyxw qqq blorf ?"]
    parsed = gramtile.parse(texts)
    new = num["new"] + [Document(id=f"t{i}", structures={"tree": p.structures["tree"]}) for i, p in enumerate(parsed)]
    K = gramtile.gram(NST, [d.structures["tree"] for d in train], [d.structures["tree"] for d in new])
    want = (A @ K).ravel() + 0.25
    got = m.decision_function(new)
    assert np.max(np.abs(got - want)) <= 1e-10 * max(1.0, np.max(np.abs(want)))
    X = m.feature_rows(new)
    full = np.asarray(X.multiply(X).sum(axis=1)).ravel()
    assert np.any(full < 1 - 1e-6)  # some new examples have features unseen in training
    assert np.allclose(m.decision_function(texts), got[-3:], atol=1e-10)  # raw texts parsed by the model
    dep_only = [Document(id=f"d{i}", structures={"dep": p.structures["dep"]}) for i, p in enumerate(parsed)]
    assert np.allclose(m.decision_function(dep_only), got[-3:], atol=1e-10)  # tree derived as prepare derives it


def test_cli_train_predict_and_nothing_partial(num, tmp_path, capsys):
    f = str(num["features"])
    assert main(["-q", "evaluate", "--features", f, "--model", "linear", "--linear-solver", "sgd", "--sgd-epochs", "2",
                 "--folds", "3", "--C", "1", "--out", str(tmp_path / "ev"), "--no-progress"]) == 0
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert res["solver"]["used"] == "sgd" and [r["C"] for r in res["rows"]] == [1.0]
    capsys.readouterr()
    # train with a C grid: C chosen by 3-fold cross-validation on the training rows, then fitted on all
    grid = (0.001, 1.0, 100.0)
    assert main(["-q", "train", "--features", f, "--model", "linear", "--linear-solver", "liblinear", "--C",
                 ",".join(map(str, grid)), "--out", str(tmp_path / "grid")]) == 0
    chosen = LinearModel.load(tmp_path / "grid")
    inner = evaluate_features(f, folds=3, seed=0, Cs=grid, solver="liblinear")
    want = max(inner.rows, key=lambda r: (r["accuracy"], -r["C"]))["C"]
    assert chosen.params["C"] == want and chosen.params["selection"]["chosen"] == {"C": want}
    assert [r["accuracy"] for r in chosen.params["selection"]["inner_accuracy"]] == [r["accuracy"] for r in inner.rows]
    assert main(["-q", "train", "--features", f, "--model", "linear", "--linear-solver", "liblinear", "--C",
                 str(want), "--out", str(tmp_path / "one")]) == 0
    one = LinearModel.load(tmp_path / "one")
    assert np.array_equal(one.coef, chosen.coef) and "selection" not in one.params
    capsys.readouterr()
    assert main(["-q", "train", "--features", f, "--model", "linear", "--linear-solver", "sgd", "--out",
                 str(tmp_path / "m")]) == 0
    new = num["new"][:10]
    write_jsonl(new, tmp_path / "new.jsonl")
    capsys.readouterr()
    assert main(["-q", "predict", "--model-dir", str(tmp_path / "m"), "--input", str(tmp_path / "new.jsonl"),
                 "--out", str(tmp_path / "p.json")]) == 0
    got = json.loads((tmp_path / "p.json").read_text())
    m = LinearModel.load(tmp_path / "m")
    assert [g["predicted"] for g in got] == m.predict(new)
    assert np.allclose([g["score"][0] for g in got], m.decision_function(new), atol=1e-12)
    # a failing train leaves no model directory and no temporary folder behind
    assert main(["-q", "train", "--features", f, "--model", "linear", "--rows", "0:99999", "--out",
                 str(tmp_path / "bad")]) == 2
    assert "--rows" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ev", "grid", "m", "new.jsonl", "one", "p.json"]


def test_a_store_written_again_under_a_run_is_refused(num, tmp_path):
    import shutil

    shutil.copytree(num["features"], tmp_path / "f.zarr")
    fs = linear.open_features(tmp_path / "f.zarr")
    task = linear.FitTask(str(tmp_path / "f.zarr"), fs.uid, np.arange(200), np.arange(200, 300), 1.0, "liblinear",
                          None, 0, 1, 100)
    assert len(linear.run_fit(task)["predicted"]) == 100
    shutil.rmtree(tmp_path / "f.zarr")
    write_store(num["corpus"], as_spec(NST), tmp_path / "f.zarr")
    linear.open_features(tmp_path / "f.zarr")  # this process now sees the new store
    with pytest.raises(EvaluationError, match="written again"):
        linear.run_fit(task)


def test_nested_C_selection_equals_choosing_by_hand_on_inner_folds(num):
    """Nested selection: per split, C is the one with the best pooled accuracy over stratified inner
    folds of the training part only (ties to the smaller C); the split is then fitted at that C on
    its whole training part. Recomputed here fit by fit, and equal on threads and processes."""
    from gramtile.pipeline.learn.folds import stratified_kfold

    Cs = (0.001, 0.1, 10.0)
    common = dict(folds=3, seed=2, Cs=Cs, solver="liblinear", select="nested", inner_folds=3)
    res = evaluate_features(num["features"], cluster="sequential", **common)
    fs = FeatureStore(num["features"])
    y = list(fs.labels)
    splits = stratified_kfold(y, 3, 2)
    chosen, pooled_pred, spread = [], [], []
    for part in splits:
        ytr = [y[k] for k in part.train]
        hits = dict.fromkeys(Cs, 0)
        for inner in stratified_kfold(ytr, 3, 2):
            tr, te = part.train[inner.train], part.train[inner.test]
            for C in Cs:
                coef, icpt, classes = linear.fit(fs, tr, C, "liblinear")
                s = (fs.rows(te) @ coef.T).ravel() + icpt[0]
                pred = np.where(s > 0, classes[1], classes[0])
                hits[C] += int(np.sum(pred == np.asarray([y[k] for k in te], dtype=object)))
        best = max(Cs, key=lambda c: (hits[c], -c))
        spread.append(len(set(hits.values())))
        chosen.append(best)
        coef, icpt, classes = linear.fit(fs, part.train, best, "liblinear")
        s = (fs.rows(part.test) @ coef.T).ravel() + icpt[0]
        pooled_pred += np.where(s > 0, classes[1], classes[0]).tolist()
    row = res.rows[0]
    assert len(res.rows) == 1 and row["C"] is None and row["C_grid"] == "0.001,0.1,10"
    assert row["C_chosen"] == ",".join(f"{c:g}" for c in chosen)
    idx, pred = res.predictions["linear C=nested"]
    assert pred.tolist() == pooled_pred
    assert idx.tolist() == [int(i) for s in splits for i in s.test]
    # the grid is wide enough that the choice is not the same C everywhere by accident of ties
    assert all(n > 1 for n in spread)
    for cluster in ("pool", "two"):
        par = evaluate_features(num["features"], cluster=Runtime(cluster, num["dir"] / "cluster.yaml"), **common)
        assert par.predictions["linear C=nested"][1].tolist() == pooled_pred and par.rows[0]["C_chosen"] == \
            row["C_chosen"]
    # one C: no selection, one row
    one = evaluate_features(num["features"], folds=3, seed=2, Cs=(1.0,), select="nested")
    assert len(one.rows) == 1 and one.rows[0]["C"] == 1.0 and "C_chosen" not in one.rows[0]
    with pytest.raises(EvaluationError, match="select"):
        evaluate_features(num["features"], select="inner")
