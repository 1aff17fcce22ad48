"""The regression learners of the registry, epsilon-SVR (``svr``) and kernel ridge regression
(``krr``): each fit against an independent reference on random problems, and a run of each
through the one evaluation and selection loop scored by Pearson's correlation."""
import numpy as np
import pytest
import scipy.stats
from sklearn.kernel_ridge import KernelRidge
from sklearn.svm import SVR as SklearnSVR

from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import group_kfold
from gramtile.pipeline.learn.learners.krr import RidgeRegressor
from gramtile.pipeline.learn.learners.registry import LEARNERS, make, names_for_task
from gramtile.pipeline.learn.learners.svr import SVRegressor
from gramtile.pipeline.learn.sources import ArrayKernelSource


def _problem(rng, n=40, d=4):
    X = rng.normal(size=(n, d))
    y = X @ rng.normal(size=d) + 0.3 * rng.normal(size=n)
    K = (X @ X.T + 1.0) ** 2 / 10.0  # a polynomial kernel: not linear in the targets
    return K, y


def test_the_regression_learners_are_registered_for_regression_only():
    assert names_for_task("regression") == ["svr", "krr"]
    assert LEARNERS["svr"].task_kinds == ("regression",) and LEARNERS["krr"].task_kinds == ("regression",)
    assert [p.option for p in LEARNERS["svr"].params] == ["--C", "--epsilon"]


@pytest.mark.timeout(120)
def test_svr_equals_sklearn_and_keeps_the_epsilon_tube():
    rng = np.random.default_rng(0)
    for trial in range(15):
        K, y = _problem(rng)
        C, eps = float(rng.choice([0.1, 1.0, 10.0])), float(rng.uniform(0.05, 0.5))
        tr, te = np.arange(30), np.arange(30, 40)
        est = SVRegressor(C, eps, tol=1e-9).fit(K[np.ix_(tr, tr)], y[tr])
        ref = SklearnSVR(kernel="precomputed", C=C, epsilon=eps, tol=1e-9).fit(K[np.ix_(tr, tr)], y[tr])
        assert np.allclose(est.predict(K[np.ix_(te, tr)]), ref.predict(K[np.ix_(te, tr)]), atol=1e-6)
        # the independent property: the optimality (KKT) conditions of the SVR dual
        beta = np.zeros(tr.size)
        beta[est.support_] = est.dual_coef_
        f = K[np.ix_(tr, tr)] @ beta + est.intercept_
        r = np.abs(y[tr] - f)
        assert np.all(np.abs(beta) <= C + 1e-9)                     # box
        assert abs(beta.sum()) < 1e-7                                 # the bias' equality constraint
        off = beta == 0
        assert np.all(r[off] <= eps + 1e-5)                           # non-support: inside the tube
        free = (np.abs(beta) > 1e-8) & (np.abs(beta) < C - 1e-8)
        assert np.allclose(r[free], eps, atol=1e-5)                   # free support: on its edge
        bound = np.abs(beta) >= C - 1e-8
        assert np.all(r[bound] >= eps - 1e-5)                         # at C: on or outside
        assert np.all(np.sign(beta[~off]) == np.sign((y[tr] - f)[~off]))  # pulled towards the target
        assert off.any() and (~off).any()


@pytest.mark.timeout(60)
def test_krr_equals_the_closed_form_and_sklearn():
    rng = np.random.default_rng(1)
    for trial in range(20):
        K, y = _problem(rng)
        alpha = float(rng.uniform(0.01, 10))
        tr, te = np.arange(30), np.arange(30, 40)
        est = RidgeRegressor(alpha).fit(K[np.ix_(tr, tr)], y[tr])
        a = np.linalg.solve(K[np.ix_(tr, tr)] + alpha * np.eye(tr.size), y[tr])
        assert np.allclose(est.dual_coef_, a, atol=1e-6 * max(1.0, np.abs(a).max()))
        assert np.allclose(est.predict(K[np.ix_(te, tr)]), K[np.ix_(te, tr)] @ a, atol=1e-6)
        ref = KernelRidge(alpha=alpha, kernel="precomputed").fit(K[np.ix_(tr, tr)], y[tr])
        assert np.allclose(est.predict(K[np.ix_(te, tr)]), ref.predict(K[np.ix_(te, tr)]), atol=1e-6)
        pos, coef, b = est.functions()[0]
        assert pos.tolist() == list(range(30)) and b == 0.0 and np.array_equal(coef, est.dual_coef_)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("model,grid", [("svr", {"C": [0.1, 10.0], "epsilon": [0.1]}), ("krr", {"alpha": [0.01, 10.0]})])
def test_the_loop_scores_regression_by_pearson_spearman_and_mse(model, grid):
    rng = np.random.default_rng(2)
    K, y = _problem(rng, n=60)
    splits = group_kfold(np.arange(60), 3, 0)
    ev = selection.evaluate(make(model), ArrayKernelSource(K), y, splits, grid, task="regression")
    assert len(ev.rows) == 2
    for row, pt in zip(ev.rows, ev.points):
        idx, pred = ev.predictions[selection.label_of(make(model), pt, make(model).varying(ev.points))]
        est = SVRegressor(pt["C"], pt["epsilon"]) if model == "svr" else RidgeRegressor(pt["alpha"])
        ref = np.concatenate([est.fit(K[np.ix_(s.train, s.train)], y[s.train]).predict(K[np.ix_(s.test, s.train)])
                              for s in splits])
        assert np.allclose(pred, ref, atol=1e-9)
        assert row["pearson"] == pytest.approx(scipy.stats.pearsonr(y[idx], pred)[0], abs=1e-12)
        assert row["spearman"] == pytest.approx(scipy.stats.spearmanr(y[idx], pred)[0], abs=1e-12)
        assert row["mse"] == pytest.approx(np.mean((y[idx] - pred) ** 2), abs=1e-12)
        folds = [scipy.stats.pearsonr(y[s.test], p)[0] for s, p in zip(splits, np.split(pred, np.cumsum(
            [s.test.size for s in splits])[:-1]))]
        assert row["pearson_std"] == pytest.approx(np.std(folds, ddof=1), abs=1e-12)
        assert "accuracy" not in row and "positive" not in row and row["pearson"] > 0.8
    # nested: the point chosen per split is the one of the best pooled inner Pearson
    nested = selection.evaluate(make(model), ArrayKernelSource(K), y, splits, grid, task="regression",
                                select="nested")
    for scores, chosen in zip(nested.inner_scores, nested.chosen):
        assert chosen == ev.points[int(np.argmax(scores))]
    assert len(nested.rows) == 1 and "pearson" in nested.rows[0]


def test_the_loop_refuses_a_learner_of_another_task_and_bad_targets():
    rng = np.random.default_rng(3)
    K, y = _problem(rng, n=30)
    src, splits = ArrayKernelSource(K), group_kfold(np.arange(30), 3, 0)
    with pytest.raises(EvaluationError, match=r"--model svm learns classification only.*\['svr', 'krr'\]"):
        selection.evaluate(make("svm"), src, y, splits, task="regression")
    with pytest.raises(EvaluationError, match=r"--model svr learns regression only.*classification task"):
        selection.evaluate(make("svr"), src, (y > 0).astype(int), splits)
    with pytest.raises(EvaluationError, match="not numbers"):
        selection.evaluate(make("krr"), src, np.array(["a", "b", "c"] * 10), splits, task="regression")
    with pytest.raises(EvaluationError, match="does not score a regression"):
        selection.evaluate(make("krr"), src, y, splits, task="regression", metric="accuracy")
    with pytest.raises(EvaluationError, match="no class weights"):
        selection.evaluate(make("krr"), src, y, splits, task="regression", class_weight="balanced")
