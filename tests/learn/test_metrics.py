"""Metrics on small hand-made cases whose values are worked out by hand in the comments."""
import itertools
from fractions import Fraction

import numpy as np
import pytest

from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.metrics import accuracy, binary_prf, classification_report, confusion, neighbour_mrr

# truth and prediction of a binary task with positive class "+1":
# tp = 2 (0, 1), fn = 2 (2, 3), fp = 1 (4), tn = 2 (5, 6)
YT = ["+1", "+1", "+1", "+1", "-1", "-1", "-1"]
YP = ["+1", "+1", "-1", "-1", "+1", "-1", "-1"]


def test_accuracy_counts_equal_pairs():
    assert accuracy(YT, YP) == pytest.approx(4 / 7)
    assert accuracy(YT, YT) == 1.0


def test_binary_prf_of_the_positive_class():
    p, r, f = binary_prf(YT, YP, "+1")
    assert p == pytest.approx(2 / 3)  # tp / (tp + fp)
    assert r == pytest.approx(1 / 2)  # tp / (tp + fn)
    assert f == pytest.approx(4 / 7)  # 2pr / (p + r)
    # the negative class: tp = 2, fp = 2, fn = 1
    p, r, f = binary_prf(YT, YP, "-1")
    assert (p, r) == (pytest.approx(1 / 2), pytest.approx(2 / 3))


def test_binary_prf_never_predicted_class_is_zero_not_nan():
    assert binary_prf(["a", "b", "b"], ["b", "b", "b"], "a") == (0.0, 0.0, 0.0)


def test_multiclass_report_by_hand():
    yt = ["a", "a", "a", "b", "b", "c"]
    yp = ["a", "a", "b", "b", "c", "c"]
    rep = classification_report(yt, yp)
    assert rep["labels"] == ["a", "b", "c"]
    # rows = truth, columns = prediction
    assert rep["confusion"] == [[2, 1, 0], [0, 1, 1], [0, 0, 1]]
    pc = rep["per_class"]
    assert pc["a"] == {"precision": 1.0, "recall": pytest.approx(2 / 3), "f1": pytest.approx(0.8), "support": 3}
    assert (pc["b"]["precision"], pc["b"]["recall"], pc["b"]["f1"]) == (0.5, 0.5, 0.5)
    assert (pc["c"]["precision"], pc["c"]["recall"], pc["c"]["f1"]) == (0.5, 1.0, pytest.approx(2 / 3))
    assert rep["macro_precision"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert rep["macro_recall"] == pytest.approx((2 / 3 + 0.5 + 1) / 3)
    assert rep["macro_f1"] == pytest.approx((0.8 + 0.5 + 2 / 3) / 3)
    # single-label: micro P = R = F1 = accuracy
    assert rep["micro_f1"] == pytest.approx(4 / 6) == rep["accuracy"]


def test_confusion_with_given_label_order():
    labels, C = confusion(["x", "y", "y"], ["y", "y", "x"], labels=["y", "x"])
    assert labels == ["y", "x"]
    assert C.tolist() == [[1, 1], [1, 0]]


def test_metric_inputs_are_checked():
    with pytest.raises(EvaluationError, match="same length"):
        accuracy([1, 2], [1])
    with pytest.raises(EvaluationError, match="empty"):
        accuracy([], [])


# ---- neighbour MRR ---------------------------------------------------------------------------

def test_mrr_hand_case_without_ties():
    # labels a a b b; row i ranks the others by K[i, j] (diagonal ignored)
    K = np.array([[9, 5, 7, 1],    # 0: 2 (b, 7) then 1 (a, 5) -> rank 2
                  [5, 9, 2, 3],    # 1: 0 (a, 5) first         -> rank 1
                  [7, 2, 9, 4],    # 2: 0 (a, 7), 3 (b, 4)     -> rank 2
                  [1, 3, 4, 9.]])  # 3: 2 (b, 4) first         -> rank 1
    assert neighbour_mrr(K, list("aabb")) == pytest.approx((1 / 2 + 1 + 1 / 2 + 1) / 4)


def test_mrr_skips_singleton_classes():
    K = np.array([[1, .9, .1], [.9, 1, .2], [.1, .2, 1.]])
    # example 2 is alone in class c; examples 0 and 1 find each other first
    assert neighbour_mrr(K, ["a", "a", "c"]) == 1.0
    with pytest.raises(EvaluationError, match="single example"):
        neighbour_mrr(K, ["a", "b", "c"])


def test_mrr_ties_on_a_constant_kernel():
    # every off-diagonal value equal: for each example s = 1 same-label, d = 2 other-label tied
    K = np.ones((4, 4))
    y = list("aabb")
    assert neighbour_mrr(K, y, ties="optimistic") == 1.0
    assert neighbour_mrr(K, y, ties="pessimistic") == pytest.approx(1 / 3)
    # uniformly random order of the 3 tied: first same-label at position 1, 2, 3 equally likely
    assert neighbour_mrr(K, y, ties="expected") == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)


def _brute_force_rr(K, y):
    """Per row: RR of the first same-label example under every order of the other examples
    that sorts them by value (a stable sort of each permutation breaks ties uniformly)."""
    n = len(y)
    out = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        if not any(y[j] == y[i] for j in others):
            continue
        rrs = []
        for perm in itertools.permutations(others):
            ranked = sorted(perm, key=lambda j: -K[i, j])  # stable: ties keep the permuted order
            first = next(r for r, j in enumerate(ranked, start=1) if y[j] == y[i])
            rrs.append(Fraction(1, first))
        out.append(rrs)
    return out


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_mrr_ties_equal_brute_force_over_orders(seed):
    rng = np.random.default_rng(seed)
    A = rng.integers(0, 3, size=(6, 6)).astype(float)  # values 0..2: many ties
    K = A + A.T
    y = list(rng.choice(["a", "b"], size=6))
    rows = _brute_force_rr(K, y)
    assert neighbour_mrr(K, y, ties="optimistic") == pytest.approx(np.mean([float(max(r)) for r in rows]))
    assert neighbour_mrr(K, y, ties="pessimistic") == pytest.approx(np.mean([float(min(r)) for r in rows]))
    assert neighbour_mrr(K, y, ties="expected") == pytest.approx(
        np.mean([float(sum(r) / len(r)) for r in rows]))


def test_mrr_rejects_bad_input():
    with pytest.raises(EvaluationError, match="shape"):
        neighbour_mrr(np.ones((3, 3)), ["a", "b"])
    with pytest.raises(EvaluationError, match="NaN"):
        neighbour_mrr(np.full((2, 2), np.nan), ["a", "a"])
    with pytest.raises(EvaluationError, match="ties"):
        neighbour_mrr(np.ones((2, 2)), ["a", "a"], ties="random")


def test_reports_equal_scikit_learn_bit_for_bit_on_random_predictions():
    """The counting metrics are computed here, with scikit-learn's arithmetic: every number equals
    ``precision_recall_fscore_support(..., zero_division=0)`` and ``confusion_matrix`` exactly,
    including classes never predicted or never present and labels missing from ``labels``."""
    import warnings

    from sklearn.metrics import confusion_matrix
    from sklearn.metrics import precision_recall_fscore_support as prfs

    rng = np.random.default_rng(1)
    for trial in range(600):
        k, n = int(rng.integers(2, 7)), int(rng.integers(1, 60))
        pool = np.array(list("abcdefg"))[:k] if trial % 2 else np.arange(k)
        yt, yp = rng.choice(pool, n), rng.choice(pool, n)
        dropped = {pool[rng.integers(k)].item()} if trial % 5 == 0 else set()
        labels = sorted(set(pool.tolist()) - dropped)
        rep = classification_report(yt, yp, labels)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p, r, f, s = prfs(yt, yp, labels=labels, average=None, zero_division=0)
            for i, c in enumerate(labels):
                got = rep["per_class"][str(c)]
                assert (got["precision"], got["recall"], got["f1"], got["support"]) == (p[i], r[i], f[i], s[i])
            for avg in ("micro", "macro"):
                ap, ar, af, _ = prfs(yt, yp, labels=labels, average=avg, zero_division=0)
                assert (rep[f"{avg}_precision"], rep[f"{avg}_recall"], rep[f"{avg}_f1"]) == (ap, ar, af)
            if set(yt.tolist()) & set(labels):
                assert rep["confusion"] == confusion_matrix(yt, yp, labels=labels).tolist()
            bp = prfs(yt, yp, labels=[labels[-1]], average=None, zero_division=0)
            assert binary_prf(yt, yp, labels[-1]) == (bp[0][0], bp[1][0], bp[2][0])
