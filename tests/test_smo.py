"""The bounded-memory SMO solver against scikit-learn's SVC on problems both can solve: dual
objective, decision values, predictions; kernel rows read through a cache smaller than K."""
import numpy as np
import pytest
from conftest import corpus_store_of, num_trees
from sklearn.multiclass import OneVsRestClassifier
from sklearn.svm import SVC

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.smo import RowCache, class_C, decision_values, predict_ovr, solve_binary, solve_ovr
from gramtile.pipeline.learn.sources import ArrayKernelSource, open_gram_source


def rbf_problem(seed, n=260, n_test=80, d=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n + n_test, d))
    y = np.where(X @ rng.normal(size=d) + 0.6 * rng.normal(size=n + n_test) > 0, 1, -1)
    K = np.exp(-0.2 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    return K, y, np.arange(n), np.arange(n, n + n_test)


def sklearn_objective(svc, K_tr, y_tr):
    a = np.zeros(len(y_tr))
    a[svc.support_] = np.abs(svc.dual_coef_[0])
    Q = (y_tr[:, None] * y_tr[None, :]) * K_tr
    return 0.5 * a @ Q @ a - a.sum()


@pytest.mark.parametrize("seed,C,weight", [(0, 0.1, None), (1, 1.0, None), (2, 10.0, None), (3, 100.0, None),
                                           (4, 1.0, "balanced"), (5, 3.0, {1: 2.0, -1: 0.5})])
def test_binary_solutions_equal_sklearn_svc(seed, C, weight):
    K, y, tr, te = rbf_problem(seed)
    Ktr = K[np.ix_(tr, tr)]
    rows = RowCache(ArrayKernelSource(K), tr, cache_mb=0.05)  # 25 of 260 rows: constant eviction
    sol = solve_binary(rows, y[tr], class_C(y[tr], C, weight), tol=1e-6)
    svc = SVC(kernel="precomputed", C=C, class_weight=weight, tol=1e-6).fit(Ktr, y[tr])
    assert sol.converged
    ref = sklearn_objective(svc, Ktr, y[tr])
    assert abs(sol.objective - ref) <= 1e-6 * abs(ref)
    ours, theirs = decision_values(K[np.ix_(te, tr)], y[tr], sol), svc.decision_function(K[np.ix_(te, tr)])
    assert np.mean(np.sign(ours) == np.sign(theirs)) >= 0.999
    assert np.max(np.abs(ours - theirs)) < 1e-3
    assert rows.reads > rows.n // rows.band  # bands were evicted and read again: memory stayed bounded


def test_on_a_gram_store_with_a_cache_smaller_than_the_matrix(tmp_path):
    every = num_trees(5483)
    docs = [every[i] for i in np.random.default_rng(0).permutation(len(every))[:400]]  # the file is class-sorted
    corpus = corpus_store_of(tmp_path / "c.zarr", docs, 100)
    st = run_gram(corpus, {"kind": "sst", "lam": 0.4}, tmp_path / "g.zarr", tile=50, cluster="sequential",
                  progress=False)
    y = np.array([1 if d.label in ("1", "+1") else -1 for d in docs])
    tr, te = np.arange(300), np.arange(300, 400)
    src = open_gram_source(st.path, normalized=True)
    rows = RowCache(src, tr, cache_mb=8 * 300 * 60 / 1e6)  # 60 of 300 rows
    sol = solve_binary(rows, y[tr], 1.0, tol=1e-6)
    K = src.block(np.arange(400), np.arange(400))
    svc = SVC(kernel="precomputed", C=1.0, tol=1e-6).fit(K[np.ix_(tr, tr)], y[tr])
    ref = sklearn_objective(svc, K[np.ix_(tr, tr)], y[tr])
    assert abs(sol.objective - ref) <= 1e-6 * abs(ref)
    ours = np.where(decision_values(K[np.ix_(te, tr)], y[tr], sol) > 0, 1, -1)
    assert np.mean(ours == svc.predict(K[np.ix_(te, tr)])) >= 0.999


def test_one_vs_rest_on_six_classes_predicts_as_sklearn():
    rng = np.random.default_rng(7)
    centers = rng.normal(scale=3, size=(6, 4))
    lab = rng.integers(0, 6, size=360)
    X = centers[lab] + rng.normal(size=(360, 4))
    K = X @ X.T + 1.0
    tr, te = np.arange(300), np.arange(300, 360)
    sols = solve_ovr(RowCache(ArrayKernelSource(K), tr, cache_mb=0.2), lab[tr], 0.5, tol=1e-6)
    ovr = OneVsRestClassifier(SVC(kernel="precomputed", C=0.5, tol=1e-6)).fit(K[np.ix_(tr, tr)], lab[tr])
    ours = predict_ovr(K[np.ix_(te, tr)], lab[tr], sols)
    assert np.mean(ours == ovr.predict(K[np.ix_(te, tr)])) >= 0.999


def test_warm_start_along_a_C_grid_reaches_the_same_solution_in_fewer_iterations():
    K, y, tr, _ = rbf_problem(11)
    src = ArrayKernelSource(K)
    at1 = solve_binary(RowCache(src, tr, cache_mb=1), y[tr], 1.0, tol=1e-6)
    cold = solve_binary(RowCache(src, tr, cache_mb=1), y[tr], 1.2, tol=1e-6)
    warm = solve_binary(RowCache(src, tr, cache_mb=1), y[tr], 1.2, tol=1e-6, alpha0=at1.alpha)
    assert abs(warm.objective - cold.objective) <= 1e-6 * abs(cold.objective)
    assert warm.iterations < cold.iterations


def test_a_cache_smaller_than_two_rows_names_the_fix():
    K, y, tr, _ = rbf_problem(0)
    with pytest.raises(EvaluationError, match="fewer than two kernel rows.*--cache-mb"):
        RowCache(ArrayKernelSource(K), tr, cache_mb=8 * 260 * 1.5 / 1e6)


class RecordingSource(ArrayKernelSource):
    """An in-memory kernel source that records the size of every block read from it."""

    def __init__(self, K):
        super().__init__(K)
        self.sizes = []

    def block(self, rows, cols):
        self.sizes.append(len(rows) * len(cols))
        return super().block(rows, cols)


def test_evaluate_with_smo_never_reads_more_than_the_cache_at_once():
    from gramtile.pipeline.learn.crossval import evaluate
    from gramtile.pipeline.learn.folds import stratified_kfold

    K, y, _, _ = rbf_problem(3, n=300, n_test=60)
    folds = stratified_kfold(y, 3, seed=0)
    cache_mb = 8 * 240 * 40 / 1e6  # 40 kernel rows of a 240-example training part
    src = RecordingSource(K)
    ev = evaluate(src, y, folds, C=[0.5, 2.0], select="nested", inner_folds=2, solver="smo", cache_mb=cache_mb)
    assert ev.solver["used"] == "smo"
    assert max(src.sizes) * 8 <= cache_mb * 1e6  # no K(train, train), no whole K(test, train)
    lib = evaluate(ArrayKernelSource(K), y, folds, C=[0.5, 2.0], select="nested", inner_folds=2, solver="libsvm")
    assert np.mean(next(iter(ev.predictions.values()))[1] == next(iter(lib.predictions.values()))[1]) >= 0.999
