"""Nystroem evaluation in one feature array (pipeline/learn/nystroem.py): the in-place band
transform against the plain one, the learner against scikit-learn's LinearSVC on copied
features (the previous implementation), and the memory held (one n x m array)."""
import tracemalloc

import numpy as np
import pytest
from sklearn.svm import LinearSVC

from gramtile.pipeline.learn import nystroem
from gramtile.pipeline.learn.crossval import evaluate_nystroem
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.nystroem import NystroemMap, features_in_place, pick_landmarks
from gramtile.pipeline.learn.sources import ArrayKernelSource


def rbf_problem(seed, n=None):
    """An RBF kernel on Gaussian clusters (2-4 classes, some overlap), as an in-memory source."""
    rng = np.random.default_rng(seed)
    n = n or int(rng.integers(120, 400))
    k = int(rng.integers(2, 5))
    y = rng.integers(0, k, n)
    X = rng.normal(size=(n, 5)) + rng.normal(size=(k, 5))[y] * 1.5
    sq = (X * X).sum(1)
    K = np.exp(-rng.uniform(0.05, 0.5) * np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0))
    return ArrayKernelSource(K), np.array([f"c{v}" for v in y]), rng


@pytest.mark.parametrize("seed", range(12))
def test_features_in_place_equal_plain_transform(seed):
    src, y, rng = rbf_problem(seed)
    rows = np.sort(rng.choice(src.n, int(0.8 * src.n), replace=False))
    L = pick_landmarks(y, rows, int(rng.integers(5, 60)), seed=seed)
    band = int(rng.integers(1, 50))
    buf = np.full(rows.size * L.size + int(rng.integers(0, 20)), np.nan)
    F, fmap = features_in_place(src, rows, L, buf, band=band)
    ref = NystroemMap().fit(src.block(L, L))
    np.testing.assert_allclose(F, ref.transform(src.block(rows, L)), rtol=1e-12, atol=1e-12)
    assert fmap.rank == ref.rank and F.shape == (rows.size, ref.rank)
    assert np.shares_memory(F, buf) and F.flags.c_contiguous


def test_features_in_place_refuses_bad_input():
    src, y, rng = rbf_problem(0, n=50)
    rows = np.arange(40)
    with pytest.raises(EvaluationError, match="among the rows"):
        features_in_place(src, rows, np.array([3, 45]), np.empty(80))
    with pytest.raises(EvaluationError, match="feature buffer"):
        features_in_place(src, rows, np.array([3, 5]), np.empty(79))
    K = src.K.copy()
    K[7, 3] = np.nan
    with pytest.raises(EvaluationError, match="NaN or infinite"):
        features_in_place(ArrayKernelSource(K), rows, np.array([3, 5]), np.empty(80), band=8)


def reference(src, y, splits, m, C, seed, loss):
    """The previous implementation: the whole block, the features and their train/test copies,
    scikit-learn's LinearSVC, here run to a tight tolerance."""
    preds = []
    for sp in splits:
        L = pick_landmarks(y, sp.train, m, seed)
        fmap = NystroemMap().fit(src.block(L, L))
        clf = LinearSVC(C=C, loss=loss, tol=1e-8, max_iter=1_000_000).fit(
            fmap.transform(src.block(sp.train, L)), y[sp.train])
        preds.append(clf.predict(fmap.transform(src.block(sp.test, L))))
    return np.concatenate(preds)


@pytest.mark.parametrize("loss", ["squared_hinge", "hinge"])
@pytest.mark.parametrize("seed", range(6))
def test_evaluate_agrees_with_liblinear_on_copies(seed, loss):
    src, y, rng = rbf_problem(seed)
    splits = stratified_kfold(y, 3, seed=seed)
    m, C = int(rng.integers(10, 80)), float(10 ** rng.uniform(-1, 1))
    row = evaluate_nystroem(src, y, splits, m=m, C=(C,), seed=seed, tol=1e-8, max_iter=1_000_000,
                            loss=loss)[0]
    ref = reference(src, y, splits, m, C, seed, loss)
    idx, pred = row["predictions"]
    assert np.array_equal(idx, np.concatenate([sp.test for sp in splits]))
    assert np.mean(pred == ref) >= 0.99  # differences only where a point sits on a margin (ties)
    assert abs(row["accuracy"] - np.mean(ref == y[idx])) <= 0.01
    assert row["converged"] and row["cutoff"] == nystroem.CUTOFF and row["rank"] >= 1 and row["loss"] == loss


def test_memory_is_one_feature_array(monkeypatch):
    src, y, _ = rbf_problem(1, n=3000)
    splits = stratified_kfold(y, 5, seed=0)
    m = 300
    monkeypatch.setattr(nystroem, "_band_rows", lambda source, m, free_mb=None: 200)
    evaluate_nystroem(src, y, splits[:1], m=m, C=(1.0,), max_iter=5)  # one-time costs (Numba's cache) first
    tracemalloc.start()
    try:
        evaluate_nystroem(src, y, splits, m=m, C=(1.0,), max_iter=200)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    block = 8 * src.n * m
    # the n x m array, plus O(m^2 + band m + n): the old implementation held about 4 blocks
    assert peak <= block + 8 * (4 * m * m + 2 * 200 * m) + 200 * src.n, (peak, block)
