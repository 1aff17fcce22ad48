"""The bounded-memory SMO solver against the slow reference (tests/reference/smo.py) and
scikit-learn's SVC on problems both can solve: dual objective, decision values, predictions;
kernel rows read through a cache smaller than K, with and without shrinking."""
import numpy as np
import pytest
from conftest import corpus_store_of, num_trees
from reference.smo import solve as reference_solve
from sklearn.multiclass import OneVsRestClassifier
from sklearn.svm import SVC

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.runtime import Runtime
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
    assert rows.slots == 24 and rows.reads > 2 * rows.slots  # rows were evicted and read again: memory stayed bounded


def test_on_a_gram_store_with_a_cache_smaller_than_the_matrix(tmp_path):
    every = num_trees(5483)
    docs = [every[i] for i in np.random.default_rng(0).permutation(len(every))[:400]]  # the file is class-sorted
    corpus = corpus_store_of(tmp_path / "c.zarr", docs, 100)
    st = run_gram(corpus, {"kind": "sst", "lam": 0.4}, tmp_path / "g.zarr", tile=50, cluster="sequential")
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
    ev = evaluate(src, y, folds, C=[0.5, 2.0], select="nested", inner_folds=2, solver="smo",
                  cluster=Runtime("sequential", cache_mb=cache_mb))
    assert ev.solver["used"] == "smo"
    assert max(src.sizes) * 8 <= cache_mb * 1e6  # no K(train, train), no whole K(test, train)
    lib = evaluate(ArrayKernelSource(K), y, folds, C=[0.5, 2.0], select="nested", inner_folds=2, solver="libsvm")
    assert np.mean(next(iter(ev.predictions.values()))[1] == next(iter(lib.predictions.values()))[1]) >= 0.999


def random_problem(seed):
    """A random binary problem: RBF or linear kernel, n 20..300, balanced or skewed labels, C 0.1..100."""
    rng = np.random.default_rng(seed)
    n, d = int(rng.integers(20, 300)), int(rng.integers(2, 8))
    X = rng.normal(size=(n, d))
    y = np.where(X @ rng.normal(size=d) + rng.normal(size=n) + rng.uniform(-1, 1) > 0, 1.0, -1.0)
    y[:2] = [1.0, -1.0]
    K = np.exp(-rng.uniform(0.05, 1) * ((X[:, None] - X[None]) ** 2).sum(-1)) if seed % 2 else X @ X.T + 1.0
    C = float(10 ** rng.uniform(-1, 2))
    return K, y, class_C(y, C, "balanced" if seed % 3 == 0 else None)


def kkt_violation(K, y, a, C):
    """m(a) - M(a) over every example, from a gradient computed afresh."""
    G = (y[:, None] * y[None, :] * K) @ a - 1.0
    up = ((y > 0) & (a < C)) | ((y < 0) & (a > 0))
    low = ((y > 0) & (a > 0)) | ((y < 0) & (a < C))
    return np.max(-y[up] * G[up]) + np.max(y[low] * G[low])


@pytest.mark.parametrize("seed", range(40))
def test_fast_solver_equals_the_reference_with_and_without_shrinking_and_partial_caches(seed):
    K, y, Cv = random_problem(seed)
    n = y.size
    _, rho, obj, _ = reference_solve(K, y, Cv, tol=1e-6)
    for shrinking in (False, True):
        for frac in (1.0, 0.1):
            rows = RowCache(ArrayKernelSource(K), np.arange(n), 8 * n * max(2, int(frac * n)) / 1e6)
            sol = solve_binary(rows, y, Cv, tol=1e-6, shrinking=shrinking)
            assert sol.converged
            assert abs(sol.objective - obj) <= 1e-6 * abs(obj), (shrinking, frac)
            assert abs(sol.rho - rho) <= 1e-3 * max(1.0, abs(rho))
            assert kkt_violation(K, y, sol.alpha, Cv) < 1e-6  # over all examples, the shrunk ones too
            assert abs(y @ sol.alpha) < 1e-9 * max(1.0, sol.alpha.sum())
            assert np.all(sol.alpha >= 0) and np.all(sol.alpha <= Cv)
            if not shrinking:
                assert sol.min_active == n


def test_shrinking_scans_fewer_examples_and_reconstructs_the_gradient():
    K, y, tr, _ = rbf_problem(5, n=600, n_test=0)
    full = solve_binary(RowCache(ArrayKernelSource(K), tr, cache_mb=8 * 600 * 600 / 1e6), y, 1.0, tol=1e-6,
                        shrinking=False)
    shr = solve_binary(RowCache(ArrayKernelSource(K), tr, cache_mb=8 * 600 * 60 / 1e6), y, 1.0, tol=1e-6)
    assert shr.min_active < 600 // 2  # the iterations ran on a shrunk active set
    assert abs(shr.objective - full.objective) <= 1e-9 * abs(full.objective)
    assert kkt_violation(K, y, shr.alpha, np.ones(600)) < 1e-6


def test_the_cache_serves_the_right_row_under_constant_eviction():
    rng = np.random.default_rng(3)
    K = rng.normal(size=(50, 50))
    idx = rng.permutation(50)[:40]
    rows = RowCache(ArrayKernelSource(K), idx, cache_mb=8 * 40 * 5 / 1e6)
    assert rows.slots == 5
    for t in rng.integers(0, 40, size=500).tolist():
        assert np.array_equal(rows.row(t), K[idx[t], idx])
    assert rows.hits + rows.misses == 500 and rows.misses > 5 and rows.hits > 0
    assert np.array_equal(rows.diag(), K[idx, idx])


def test_the_cache_reads_whole_bands_when_it_holds_every_row():
    K, y, tr, _ = rbf_problem(1)
    src = RecordingSource(K)
    rows = RowCache(src, tr, cache_mb=8 * 260 * 260 / 1e6, band=100)
    rows.row(150)
    assert src.sizes == [100 * 260] and rows.misses == 1
    for t in range(100, 200):
        assert np.array_equal(rows.row(t), K[t, tr])
    assert len(src.sizes) == 1 and rows.misses == 1  # the band's other rows were cached with it


def test_warm_start_and_shrinking_together():
    K, y, tr, _ = rbf_problem(12)
    src = ArrayKernelSource(K)
    at1 = solve_binary(RowCache(src, tr, cache_mb=0.1), y[tr], 1.0, tol=1e-6)
    cold = solve_binary(RowCache(src, tr, cache_mb=0.1), y[tr], 3.0, tol=1e-6, shrinking=False)
    warm = solve_binary(RowCache(src, tr, cache_mb=0.1), y[tr], 3.0, tol=1e-6, alpha0=at1.alpha)
    assert abs(warm.objective - cold.objective) <= 1e-6 * abs(cold.objective)
    assert kkt_violation(K[np.ix_(tr, tr)], y[tr].astype(float), warm.alpha, np.full(tr.size, 3.0)) < 1e-6


def test_fits_running_at_once_in_one_process_split_the_cache():
    from gramtile.pipeline.learn.crossval import plan_solver

    one = Runtime("sequential", memory_mb=6000, cache_mb=3000)
    two = Runtime("threads", memory_mb=6000, cache_mb=3000)  # two threads of one process
    assert plan_solver("smo", 40_000, 10_000, one).cache_mb == 3000
    assert plan_solver("smo", 40_000, 10_000, two).cache_mb == 1500
    with pytest.raises(EvaluationError, match="fewer than two kernel rows"):
        plan_solver("smo", 40_000, 10_000, two.with_settings(cache_mb=1.0))
