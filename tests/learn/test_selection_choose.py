"""selection.choose over explicit splits, with pooled or mean scores, either tie rule and a list of
kernel sources as a grid dimension; point_scores and pick. Every choice is checked against scores
recomputed here from scikit-learn fits on the same blocks."""
import math

import numpy as np
import pytest
from sklearn.svm import SVC

from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import Split
from gramtile.pipeline.learn.learners.registry import make
from gramtile.pipeline.learn.metrics import binary_prf
from gramtile.pipeline.learn.sources import ArrayKernelSource

CS = [0.01, 0.1, 1.0, 10.0]


def data(n=90, seed=3, noise=1.5):
    """A noisy binary problem over a linear kernel (labels "a" / "b")."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = np.where(X[:, 0] + X[:, 1] + noise * rng.normal(size=n) > 0, "b", "a")
    return X @ X.T, y


def splits_of(n, k=3, seed=0):
    fold = np.random.default_rng(seed).permutation(n) % k
    idx = np.arange(n, dtype=np.int64)
    return [Split(idx[fold != f], idx[fold == f], f"part-{f}") for f in range(k)]


def reference(K, y, splits, C):
    """Per split, the test labels and the predictions of SVC(kernel="precomputed", C) fitted on its
    training part."""
    out = []
    for sp in splits:
        m = SVC(kernel="precomputed", C=C).fit(K[np.ix_(sp.train, sp.train)], y[sp.train])
        out.append((y[sp.test], m.predict(K[np.ix_(sp.test, sp.train)])))
    return out


def pooled_accuracy(parts):
    t = np.concatenate([a for a, _ in parts])
    p = np.concatenate([b for _, b in parts])
    return float(np.mean(t == p))


def mean_f1(parts):
    return float(np.mean([binary_prf(t, p, "b")[2] for t, p in parts]))


def test_explicit_splits_pooled_score_is_the_pooled_held_out_accuracy():
    K, y = data()
    sp = splits_of(len(y))
    point, ev = selection.choose(make("svm", solver="libsvm"), ArrayKernelSource(K), y, {"C": CS}, splits=sp)
    ref = [pooled_accuracy(reference(K, y, sp, C)) for C in CS]
    assert selection.point_scores(ev, "accuracy") == pytest.approx(ref, abs=1e-15)
    assert [r["splits"] for r in ev.rows] == [3] * len(CS)  # the given splits, not k folds of all examples
    top = max(ref)
    assert point["C"] == min(C for C, v in zip(CS, ref) if v == top)


def test_mean_score_is_the_mean_of_the_per_split_values():
    K, y = data(seed=5)
    sp = splits_of(len(y), k=4, seed=1)
    point, ev = selection.choose(make("svm", solver="libsvm"), ArrayKernelSource(K), y, {"C": CS}, splits=sp,
                                 metric="f1", score="mean", positive="b")
    ref = [mean_f1(reference(K, y, sp, C)) for C in CS]
    got = selection.point_scores(ev, "f1", "mean")
    assert got == pytest.approx(ref, abs=1e-15)
    # the mean of per-split F1 is not the F1 of the pooled predictions
    assert got != pytest.approx(selection.point_scores(ev, "f1", "pooled"), abs=1e-9)
    top = max(ref)
    assert point["C"] == min(C for C, v in zip(CS, ref) if v == top)


def test_ties_smaller_or_first():
    """A separable problem every C solves: all scores tie. ``smaller`` takes the smallest C,
    ``first`` the first of the grid as given (here the largest)."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(size=(20, 2)) + 8, rng.normal(size=(20, 2)) - 8])
    y = np.array(["p"] * 20 + ["q"] * 20)
    src, sp = ArrayKernelSource(X @ X.T), splits_of(40)
    grid = {"C": [10.0, 1.0, 0.1]}
    smaller, ev = selection.choose(make("svm", solver="libsvm"), src, y, grid, splits=sp)
    assert selection.point_scores(ev, "accuracy") == [1.0, 1.0, 1.0]
    first, _ = selection.choose(make("svm", solver="libsvm"), src, y, grid, splits=sp, ties="first")
    assert (smaller["C"], first["C"]) == (0.1, 10.0)


def test_a_list_of_sources_is_a_grid_dimension():
    """Two kernels over the same examples: the grid spans (kernel, C), alternative first; the choice
    names the kernel by its position."""
    K, y = data(seed=7, noise=0.3)
    rng = np.random.default_rng(1)
    R = rng.normal(size=(len(y), 30))
    bad = R @ R.T  # a kernel of noise: it knows nothing of the labels
    sp = splits_of(len(y))
    point, ev = selection.choose(make("svm", solver="libsvm"), [ArrayKernelSource(bad), ArrayKernelSource(K)], y,
                                 {"C": CS}, splits=sp, ties="first")
    assert [(p["alternative"], p["C"]) for p in ev.points] == [(a, C) for a in (0, 1) for C in CS]
    ref = [pooled_accuracy(reference(M, y, sp, C)) for M in (bad, K) for C in CS]
    scores = selection.point_scores(ev, "accuracy")
    assert scores == pytest.approx(ref, abs=1e-15)
    assert point == ev.points[int(np.argmax(ref))]  # argmax: the first of equal maxima
    assert point["alternative"] == 1


def test_default_is_stratified_folds_of_every_example():
    K, y = data(seed=11)
    point, ev = selection.choose(make("svm", solver="libsvm"), ArrayKernelSource(K), y, {"C": CS}, folds=3, seed=0)
    parts, _ = selection.inner_splits(y, Split(np.arange(len(y)), np.arange(len(y)), "all"), 3, 0,
                                      selection.problem_of(y))
    ref = [pooled_accuracy(reference(K, y, [Split(tr, te) for tr, te in parts], C)) for C in CS]
    assert selection.point_scores(ev, "accuracy") == pytest.approx(ref, abs=1e-15)


def test_pick_first_wins_ties_and_passes_over_rows_without_the_score():
    rows = [{"name": "skipped"}, {"name": "a", "acc": 0.5}, {"name": "b", "acc": float("nan")},
            {"name": "c", "acc": 0.75}, {"name": "d", "acc": 0.75}, {"name": "e", "acc": 0.25}]
    assert selection.pick(rows, "acc")["name"] == "c"
    assert selection.pick(rows[::-1], "acc")["name"] == "d"
    assert selection.pick([{"acc": math.nan}, {"acc": -1.0}], "acc") == {"acc": -1.0}  # NaN is the worst
    assert selection.pick([{"name": "x"}], "acc") is None
    assert selection.pick([], "acc") is None


def test_bad_options_are_refused():
    K, y = data()
    sp = splits_of(len(y))
    with pytest.raises(EvaluationError, match="ties"):
        selection.choose(make("svm"), ArrayKernelSource(K), y, {"C": CS}, splits=sp, ties="last")
    with pytest.raises(EvaluationError, match="score"):
        selection.choose(make("svm"), ArrayKernelSource(K), y, {"C": CS}, splits=sp, score="median")
    with pytest.raises(EvaluationError, match="not a result column"):
        selection.choose(make("svm"), ArrayKernelSource(K), y, {"C": CS}, splits=sp, metric="auc")
