"""Group k-fold and the regression and ranking metrics: hand-computed small cases, scipy.stats and
scikit-learn where they define the same number, and the answer-selection convention (only groups
with both a relevant and an irrelevant candidate count)."""
import numpy as np
import pytest
import scipy.stats
from sklearn.metrics import ndcg_score
from sklearn.model_selection import KFold

from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import group_kfold
from gramtile.pipeline.learn.metrics import (
    average_ranks,
    group_ranking,
    mse,
    pearson,
    ranking_report,
    regression_report,
    spearman,
)


def _keeps_groups(splits, groups) -> bool:
    return all(not set(groups[s.train]) & set(groups[s.test]) for s in splits)


def test_group_kfold_never_divides_a_group_and_plain_kfold_does():
    rng = np.random.default_rng(0)
    groups = np.repeat(np.arange(30), rng.integers(1, 9, 30))
    groups = groups[rng.permutation(groups.size)]
    for k in (2, 3, 5, 10):
        for seed in (0, 1):
            splits = group_kfold(groups, k, seed)
            assert len(splits) == k and _keeps_groups(splits, groups)
            tests = np.sort(np.concatenate([s.test for s in splits]))
            assert np.array_equal(tests, np.arange(groups.size))  # a partition
            for s in splits:
                assert np.array_equal(np.sort(np.concatenate([s.train, s.test])), np.arange(groups.size))
            sizes = [s.test.size for s in splits]
            assert max(sizes) - min(sizes) <= 8  # balanced up to the largest group
    kf = KFold(5, shuffle=True, random_state=0).split(groups)
    assert not _keeps_groups([type(splits[0])(tr, te) for tr, te in kf], groups)
    # seeded: the same seed gives the same folds, another seed others
    same = [s.test.tolist() for s in group_kfold(groups, 5, 3)]
    assert same == [s.test.tolist() for s in group_kfold(groups, 5, 3)]
    assert same != [s.test.tolist() for s in group_kfold(groups, 5, 4)]
    # string ids, singleton groups: plain seeded k-fold
    assert _keeps_groups(group_kfold(np.array(list("aabbbcdd")), 2, 0), np.array(list("aabbbcdd")))
    with pytest.raises(EvaluationError, match="larger than the number of groups"):
        group_kfold([1, 1, 2], 3)
    with pytest.raises(EvaluationError, match="not an integer >= 2"):
        group_kfold([1, 2, 3], 1)


def test_regression_metrics_equal_scipy_and_hand_cases():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert np.isnan(pearson([1, 2, 3], [5, 5, 5]))
    assert mse([1, 2, 3], [1, 2, 5]) == pytest.approx(4 / 3)
    assert average_ranks([10, 20, 20, 5]).tolist() == [2.0, 3.5, 3.5, 1.0]
    assert spearman([1, 2, 3, 4], [1, 4, 9, 16]) == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = rng.integers(0, 5, 25).astype(float)  # ties
        b = rng.normal(size=25) + a
        rep = regression_report(a, b)
        assert rep["pearson"] == pytest.approx(scipy.stats.pearsonr(a, b)[0], abs=1e-12)
        assert rep["spearman"] == pytest.approx(scipy.stats.spearmanr(a, b)[0], abs=1e-12)
        assert rep["mse"] == pytest.approx(np.mean((a - b) ** 2), abs=1e-12)
    with pytest.raises(EvaluationError, match="NaN"):
        pearson([1.0, np.nan], [1.0, 2.0])


def test_ranking_metrics_of_hand_computed_groups():
    # one group: relevant at ranks 2 and 3 of 4
    g = group_ranking([0, 1, 1, 0], [0.9, 0.8, 0.7, 0.1])
    assert g["map"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert g["mrr"] == pytest.approx(1 / 2) and g["p_at_1"] == 0.0
    dcg = 1 / np.log2(3) + 1 / np.log2(4)
    assert g["ndcg"] == pytest.approx(dcg / (1 + 1 / np.log2(3)))
    # ties are pessimistic: the irrelevant candidate of a tie comes first
    t = group_ranking([1, 0], [0.5, 0.5])
    assert t["map"] == 0.5 and t["p_at_1"] == 0.0
    # only groups with a relevant and an irrelevant candidate count
    assert group_ranking([1, 1], [0.2, 0.1]) is None and group_ranking([0, 0], [0.2, 0.1]) is None
    rep = ranking_report([1, 0, 0, 0, 1, 1, 0, 0], [0.1, 0.9, 0.5, 0.3, 0.2, 0.4, 0.8, 0.0],
                         ["q1", "q1", "q2", "q2", "q3", "q3", "q4", "q4"])
    # q1: relevant at rank 2 (AP 1/2, RR 1/2, P@1 0); q2, q3: all or none relevant (skipped);
    # q4: nothing relevant (skipped)
    assert rep["n_groups"] == 1 and rep["n_groups_skipped"] == 3
    assert rep["map"] == 0.5 and rep["mrr"] == 0.5 and rep["p_at_1"] == 0.0
    rep2 = ranking_report([1, 0, 0, 1, 0], [0.9, 0.1, 0.8, 0.7, 0.2], [1, 1, 2, 2, 2])
    assert rep2["map"] == pytest.approx((1.0 + 1 / 2) / 2) and rep2["mrr"] == pytest.approx(0.75)
    assert rep2["p_at_1"] == 0.5 and rep2["n_groups"] == 2
    assert np.isnan(ranking_report([1, 1], [0.1, 0.2], [0, 0])["map"])


def test_ndcg_equals_sklearn_without_ties():
    rng = np.random.default_rng(2)
    for _ in range(30):
        t = rng.integers(0, 4, 9).astype(float)
        t[0], t[1] = 0.0, 2.0  # relevant and irrelevant present
        s = rng.normal(size=9)
        assert group_ranking(t, s)["ndcg"] == pytest.approx(ndcg_score([t], [s]), abs=1e-12)
