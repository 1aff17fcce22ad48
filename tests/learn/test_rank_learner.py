"""The preference-ranking learner (``rank``, SVM-light ``-z p``): its exact dual solve on the
kernel against the same problem solved as a linear pairwise-difference SVM in the primal and as an
explicit box QP on the pair kernel; better than random on a problem with signal; blind to the order
of the groups; and a run through the one evaluation and selection loop scored by MAP."""
import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.svm import LinearSVC

from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import group_kfold
from gramtile.pipeline.learn.learners.rank import PairRanker, preference_pairs
from gramtile.pipeline.learn.learners.registry import LEARNERS, make, names_for_task
from gramtile.pipeline.learn.metrics import ranking_report
from gramtile.pipeline.learn.sources import ArrayKernelSource


def _ranking(rng, n=48, d=5, n_groups=8, graded=False, noise=0.5):
    X = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    groups = rng.integers(0, n_groups, n)
    s = X @ w + noise * rng.normal(size=n)
    y = np.clip(np.round(s), 0, 3) if graded else (s > np.median(s)).astype(float)
    return X, y, groups


def test_pairs_are_the_preferences_inside_each_group():
    y = np.array([1.0, 0.0, 2.0, 1.0, 0.0, 1.0])
    g = np.array([7, 7, 7, 3, 3, 9])
    first, second = preference_pairs(y, g)
    assert sorted(zip(first.tolist(), second.tolist())) == [(0, 1), (2, 0), (2, 1), (3, 4)]
    assert "rank" in LEARNERS and names_for_task("ranking") == ["rank"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("graded", [False, True])
def test_the_dual_on_the_kernel_equals_the_primal_pairwise_svm(graded):
    """A linear kernel K = X X^T: the scores must be those of the linear SVM without bias on the
    difference vectors x_i - x_j (LinearSVC with both orientations of every pair, hence C / 2), and
    the dual must be the optimum of the explicit box QP on the pair kernel."""
    rng = np.random.default_rng(10 + graded)
    for trial in range(6):
        X, y, g = _ranking(rng, graded=graded)
        K = X @ X.T
        C = float(rng.choice([0.05, 0.5, 5.0]))
        est = PairRanker(C).fit(K, y, g)
        assert est.converged_
        a, b = preference_pairs(y, g)
        D = X[a] - X[b]
        lin = LinearSVC(C=C / 2, loss="hinge", fit_intercept=False, dual=True, tol=1e-10,
                        max_iter=1_000_000).fit(np.vstack([D, -D]), np.r_[np.ones(len(D)), -np.ones(len(D))])
        Xt = rng.normal(size=(20, X.shape[1]))
        ours = est.decision_function(Xt @ X.T)
        theirs = Xt @ lin.coef_[0]
        assert np.allclose(ours, theirs, atol=1e-4 * max(1.0, np.abs(theirs).max()))
        assert np.array_equal(np.argsort(-ours, kind="stable"), np.argsort(-theirs, kind="stable")) or \
            np.min(np.abs(np.diff(np.sort(theirs)))) < 1e-3  # the rankings agree (unless two scores nearly tie)
        # the explicit pair kernel Q_pq = K(i,k) - K(i,l) - K(j,k) + K(j,l) and its box QP
        Q = K[np.ix_(a, a)] - K[np.ix_(a, b)] - K[np.ix_(b, a)] + K[np.ix_(b, b)]
        qp = minimize(lambda x: 0.5 * x @ Q @ x - x.sum(), np.zeros(len(a)), jac=lambda x: Q @ x - 1.0,
                      bounds=[(0.0, C)] * len(a), method="L-BFGS-B", options={"ftol": 1e-15, "gtol": 1e-12,
                                                                                "maxiter": 100000})
        obj = 0.5 * est.alpha_ @ Q @ est.alpha_ - est.alpha_.sum()
        assert obj <= qp.fun + 1e-6 * max(1.0, abs(qp.fun))
        assert np.all((est.alpha_ >= 0) & (est.alpha_ <= C))
        beta = np.zeros(len(y))
        beta[est.support_] = est.dual_coef_
        assert np.allclose(K @ beta, K[:, a] @ qp.x - K[:, b] @ qp.x, atol=1e-3 * max(1.0, np.abs(K @ beta).max()))


@pytest.mark.timeout(120)
def test_it_beats_random_scores_on_a_problem_with_signal():
    rng = np.random.default_rng(20)
    X, y, g = _ranking(rng, n=240, n_groups=40, noise=0.3)
    K = (X @ X.T + 1.0) ** 2
    tr, te = np.flatnonzero(g < 28), np.flatnonzero(g >= 28)
    scores = PairRanker(1.0).fit(K[np.ix_(tr, tr)], y[tr], g[tr]).predict(K[np.ix_(te, tr)])
    learnt = ranking_report(y[te], scores, g[te])["map"]
    chance = np.mean([ranking_report(y[te], rng.normal(size=te.size), g[te])["map"] for _ in range(200)])
    assert learnt > chance + 0.15


@pytest.mark.timeout(120)
def test_the_order_and_names_of_the_groups_change_nothing():
    rng = np.random.default_rng(30)
    X, y, g = _ranking(rng, n=60, n_groups=10)
    K = (X @ X.T + 1.0) ** 2 / 10
    Xt = rng.normal(size=(15, X.shape[1]))
    Kt = (Xt @ X.T + 1.0) ** 2 / 10
    base = PairRanker(1.0).fit(K, y, g).predict(Kt)
    # the groups in reverse order of their names, their examples in another order, other ids
    perm = np.argsort(-g, kind="stable")
    perm = np.concatenate([rng.permutation(perm[g[perm] == v]) for v in np.unique(g[perm])[::-1]])
    other = PairRanker(1.0).fit(K[np.ix_(perm, perm)], y[perm], np.array([f"q{100 - v}" for v in g[perm]])) \
        .predict(Kt[:, perm])
    assert np.allclose(base, other, atol=1e-5 * np.abs(base).max())
    # but merging two groups (new pairs across them) does change the fit
    merged = np.where(g == 1, 0, g)
    assert not np.allclose(base, PairRanker(1.0).fit(K, y, merged).predict(Kt), atol=1e-3)


@pytest.mark.timeout(120)
def test_the_loop_scores_ranking_by_map_over_group_folds():
    rng = np.random.default_rng(40)
    X, y, g = _ranking(rng, n=120, n_groups=24, noise=0.3)
    K = (X @ X.T + 1.0) ** 2 / 10
    splits = group_kfold(g, 4, 0)
    ev = selection.evaluate(make("rank"), ArrayKernelSource(K), y, splits, {"C": [0.1, 1.0]}, task="ranking",
                            groups=g)
    for row, pt in zip(ev.rows, ev.points):
        idx, pred = ev.predictions[f"rank C={pt['C']:g}"]
        ref = np.concatenate([PairRanker(pt["C"]).fit(K[np.ix_(s.train, s.train)], y[s.train], g[s.train])
                              .predict(K[np.ix_(s.test, s.train)]) for s in splits])
        assert np.allclose(pred, ref, atol=1e-9)
        rep = ranking_report(y[idx], pred, g[idx])  # group folds: every group in one test part
        assert {k: row[k] for k in ("map", "mrr", "p_at_1", "ndcg", "n_groups")} == \
            {k: rep[k] for k in ("map", "mrr", "p_at_1", "ndcg", "n_groups")}
        assert row["map"] > 0.8 and "accuracy" not in row
    nested = selection.evaluate(make("rank"), ArrayKernelSource(K), y, splits, {"C": [0.1, 1.0]}, task="ranking",
                                groups=g, select="nested")
    for scores, chosen in zip(nested.inner_scores, nested.chosen):
        assert chosen == ev.points[int(np.argmax(scores))]
    # the inner folds of nested selection keep every group whole
    parts, _ = selection.inner_splits(y, splits[0], 3, 0, selection.problem_of(y, task="ranking", groups=g))
    for tr, te in parts:
        assert not set(g[tr]) & set(g[te])


def test_the_loop_refuses_splits_that_divide_a_group_and_missing_groups():
    rng = np.random.default_rng(50)
    X, y, g = _ranking(rng, n=40, n_groups=5)
    src = ArrayKernelSource(X @ X.T)
    halves = [selection.Split(np.arange(0, 20), np.arange(20, 40), "split")]
    with pytest.raises(EvaluationError, match="both the training and the test part"):
        selection.evaluate(make("rank"), src, y, halves, task="ranking", groups=g)
    with pytest.raises(EvaluationError, match="needs the group id"):
        selection.evaluate(make("rank"), src, y, group_kfold(g, 2, 0), task="ranking")
    with pytest.raises(EvaluationError, match=r"--model svm learns classification only.*\['rank'\]"):
        selection.evaluate(make("svm"), src, y, group_kfold(g, 2, 0), task="ranking", groups=g)


@pytest.mark.timeout(120)
def test_pooled_ranking_keeps_the_groups_of_each_split_apart():
    """Two splits testing the same groups (different training parts): the pooled row ranks each
    group once per split, with that split's model, so it counts twice as many groups and its MAP
    is the mean of the per-split MAPs weighted by their groups."""
    rng = np.random.default_rng(60)
    X, y, g = _ranking(rng, n=90, n_groups=15, noise=1.0)
    K = X @ X.T
    test = np.flatnonzero(g < 5)
    a, b = np.flatnonzero((g >= 5) & (g < 10)), np.flatnonzero(g >= 10)
    splits = [selection.Split(a, test, "a"), selection.Split(b, test, "b")]
    ev = selection.evaluate(make("rank"), ArrayKernelSource(K), y, splits, {"C": [1.0]}, task="ranking", groups=g)
    row = ev.rows[0]
    per = [ranking_report(y[test], PairRanker(1.0).fit(K[np.ix_(s.train, s.train)], y[s.train], g[s.train])
                          .predict(K[np.ix_(test, s.train)]), g[test]) for s in splits]
    assert row["n_groups"] == per[0]["n_groups"] + per[1]["n_groups"]
    for k in ("map", "mrr", "p_at_1", "ndcg"):
        assert row[k] == pytest.approx((per[0][k] * per[0]["n_groups"] + per[1][k] * per[1]["n_groups"]) /
                                       row["n_groups"], abs=1e-12)
    assert per[0]["map"] != pytest.approx(per[1]["map"])  # two models: the check can tell them apart
