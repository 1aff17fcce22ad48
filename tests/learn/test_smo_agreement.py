"""The bounded-memory SVM (smo) against scikit-learn's SVC(kernel="precomputed") on real data: the
NUM question trees under ST, SST and PT, and TREC QC's six coarse classes (one-vs-rest): dual
objective within 1e-6 relative, >= 99.9 % identical test decisions, the same accuracy, with and
without shrinking, with the cache holding all, 22 % or 10 % of the training rows; and the same
through ``evaluate`` (solver smo against libsvm, at the default tolerance)."""
import itertools

import numpy as np
import pytest
from conftest import num_trees, require_data
from reference.smo_grid import smo_fit_predict
from sklearn.multiclass import OneVsRestClassifier
from sklearn.svm import SVC

from gramtile import gram
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.crossval import evaluate
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.smo import RowCache, class_C, decision_values, solve_binary
from gramtile.pipeline.learn.sources import ArrayKernelSource
from gramtile.pipeline.parsing.formats import read

N_TRAIN, N_TEST = 900, 300


def objective(svc, K_tr, y_pm):
    a = np.zeros(len(y_pm))
    a[svc.support_] = np.abs(svc.dual_coef_[0])
    return 0.5 * a @ ((y_pm[:, None] * y_pm[None, :]) * K_tr) @ a - a.sum()


@pytest.fixture(scope="module")
def num_docs():
    every = num_trees(5483)
    pick = np.random.default_rng(0).permutation(len(every))[:N_TRAIN + N_TEST]  # the file is sorted by class
    return [every[i] for i in pick]


@pytest.fixture(scope="module")
def qc_docs():
    path = require_data("trec_qc_kelp_trees") / "train_5500.coarse.klp.gz"
    docs = list(itertools.islice(read(path, "kelp"), 3000))
    pick = np.random.default_rng(0).permutation(len(docs))[:N_TRAIN + N_TEST]
    return [docs[i] for i in pick]


CACHES = [(True, 200), (False, 200), (True, 90), (False, 90), (True, N_TRAIN)]  # (shrinking, rows held of 900)


@pytest.mark.parametrize("shrinking,held", CACHES)
@pytest.mark.parametrize("kind", ["st", "sst", "pt"])
def test_num_trees_binary_equals_svc(num_docs, kind, shrinking, held):
    spec = {"kind": "normalized", "kernel": {"kind": kind, "lam": 0.4, **({"mu": 0.4} if kind == "pt" else {})}}
    K = gram(spec, [d.structures["tree"] for d in num_docs])
    y = np.array([1.0 if d.label in ("1", "+1") else -1.0 for d in num_docs])
    tr, te = np.arange(N_TRAIN), np.arange(N_TRAIN, N_TRAIN + N_TEST)
    Ktr, Kte = K[np.ix_(tr, tr)], K[np.ix_(te, tr)]
    rows = RowCache(ArrayKernelSource(K), tr, cache_mb=8 * N_TRAIN * held / 1e6)
    sol = solve_binary(rows, y[tr], 1.0, tol=1e-6, shrinking=shrinking)
    assert (sol.min_active < N_TRAIN) == shrinking
    svc = SVC(kernel="precomputed", C=1.0, tol=1e-6).fit(Ktr, y[tr])
    ref = objective(svc, Ktr, y[tr])
    assert sol.converged and abs(sol.objective - ref) <= 1e-6 * abs(ref)
    ours, theirs = decision_values(Kte, y[tr], sol), svc.decision_function(Kte)
    assert np.mean(np.sign(ours) == np.sign(theirs)) >= 0.999
    pred = np.where(ours > 0, 1.0, -1.0)
    assert np.mean(pred == y[te]) == np.mean(svc.predict(Kte) == y[te])


@pytest.mark.parametrize("shrinking,held", CACHES)
def test_trec_qc_six_classes_one_vs_rest_equals_svc(qc_docs, shrinking, held):
    K = gram({"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4, "rep": "grct"}},
             {"grct": [d.structures["grct"] for d in qc_docs]})
    y = np.array([d.label for d in qc_docs])
    classes = sorted(set(y.tolist()))
    assert len(classes) == 6
    tr, te = np.arange(N_TRAIN), np.arange(N_TRAIN, N_TRAIN + N_TEST)
    Ktr, Kte = K[np.ix_(tr, tr)], K[np.ix_(te, tr)]
    ovr = OneVsRestClassifier(SVC(kernel="precomputed", C=1.0, tol=1e-6)).fit(Ktr, y[tr])
    rows = RowCache(ArrayKernelSource(K), tr, cache_mb=8 * N_TRAIN * held / 1e6)
    for c, est in zip(ovr.classes_, ovr.estimators_):
        yc = np.where(y[tr] == c, 1.0, -1.0)
        sol = solve_binary(rows, yc, class_C(yc, 1.0), tol=1e-6, shrinking=shrinking)
        ref = objective(est, Ktr, yc)
        assert sol.converged and abs(sol.objective - ref) <= 1e-6 * abs(ref), c
        # sklearn's binary sub-problem has labels 0 / 1, so its decision is f for "this class"
        assert np.mean(np.sign(decision_values(Kte, yc, sol)) == np.sign(est.decision_function(Kte))) >= 0.999
    pred = smo_fit_predict(ArrayKernelSource(K), y, tr, te, [1.0], classes, tol=1e-6,
                           cache_mb=8 * N_TRAIN * held / 1e6, shrinking=shrinking)[1.0]
    want = ovr.predict(Kte)
    assert np.mean(pred == want) >= 0.999
    assert np.mean(pred == y[te]) == np.mean(want == y[te])


@pytest.mark.parametrize("select", ["test", "nested"])
def test_evaluate_smo_equals_libsvm_at_the_default_tolerance(qc_docs, select):
    K = gram({"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4, "rep": "grct"}},
             {"grct": [d.structures["grct"] for d in qc_docs[:600]]})
    y = np.array([d.label for d in qc_docs[:600]])
    folds = stratified_kfold(y, 3, seed=0)
    kw = dict(C=[0.5, 2.0], select=select, inner_folds=2)
    lib = evaluate(ArrayKernelSource(K), y, folds, solver="libsvm", **kw)
    smo = evaluate(ArrayKernelSource(K), y, folds, solver="smo", cluster=Runtime("sequential", cache_mb=1.0), **kw)
    assert lib.solver["used"] == "libsvm" and smo.solver["used"] == "smo"
    for key in lib.predictions:
        a, b = lib.predictions[key][1], smo.predictions[key][1]
        assert np.mean(a == b) >= 0.999
    for r, s in zip(lib.rows, smo.rows):
        assert r["accuracy"] == s["accuracy"]
        assert r.get("C_chosen") == s.get("C_chosen")
