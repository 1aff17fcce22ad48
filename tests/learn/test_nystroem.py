"""Nystroem features from a Gram store (pipeline/learn/nystroem.py) on real trees.

With every training example as a landmark the linear model on phi(x) = K(x, L) K_LL^{-1/2}
matches the exact kernel SVM closely; with few landmarks only the landmark columns' chunks are read.
"""
import numpy as np
import pytest
from conftest import require_data

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.learn.crossval import evaluate, evaluate_nystroem
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.nystroem import NystroemMap, pick_landmarks
from gramtile.pipeline.learn.sources import open_gram_source
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.stores.corpus_store import CorpusStore

N, TILE = 200, 32
SST = {"kind": "sst", "lam": 0.4}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    docs = list(read(require_data("trec_qc_num_constituency") / "NUM_test.dat", "svmlighttk"))
    # a seeded sample in random order: the file is sorted by label, the store must not be
    docs = [docs[i] for i in np.random.default_rng(3).choice(len(docs), N, replace=False)]
    root = tmp_path_factory.mktemp("nys")
    cs = CorpusStore.create(root / "c.zarr", shard_size=100)
    for k in range(0, N, 100):
        cs.write_shard(k // 100, docs[k:k + 100])
    cs.finish()
    cs.close()
    run_gram(root / "c.zarr", SST, root / "g.zarr", tile=TILE, cluster="sequential")
    return root / "g.zarr", np.array([d.label for d in docs])


def test_all_landmarks_match_exact_svm(store):
    path, y = store
    splits = stratified_kfold(y, 4, seed=0)
    exact = evaluate(open_gram_source(path, normalized=True), y, splits, C=(1.0,))
    idx_e, pred_e = exact.predictions["svm C=1"]
    rows = evaluate_nystroem(open_gram_source(path, normalized=True), y, splits, m=N, C=(1.0,))
    idx_n, pred_n = rows[0]["predictions"]
    assert np.array_equal(idx_e, idx_n)
    agree = np.mean(pred_e == pred_n)
    assert agree >= 0.97, agree
    assert abs(rows[0]["accuracy"] - exact.rows[0]["accuracy"]) <= 0.02
    assert rows[0]["rank"] > 0.9 * (N * 3 // 4)


def test_feature_map_reproduces_K(store):
    path, _ = store
    src = open_gram_source(path, normalized=True)
    L = np.arange(N)
    K = src.block(L, L)
    F = NystroemMap().fit(K).transform(K)
    np.testing.assert_allclose(F @ F.T, K, atol=1e-6)
    # few landmarks: phi . phi is the projection, exact on the landmarks themselves
    Lm = pick_landmarks(np.zeros(N), L, 20, seed=1, stratified=False)
    Fm = NystroemMap().fit(K[np.ix_(Lm, Lm)]).transform(K[:, Lm])
    np.testing.assert_allclose((Fm @ Fm.T)[np.ix_(Lm, Lm)], K[np.ix_(Lm, Lm)], atol=1e-8)
    assert not np.allclose(Fm @ Fm.T, K, atol=1e-3)


def test_reads_only_landmark_chunks(store):
    path, y = store
    src = open_gram_source(path, normalized=True)
    splits = stratified_kfold(y, 4, seed=0)[:1]
    # landmarks from the first column tiles only: a selection of the training part
    cand = splits[0].train[splits[0].train < 2 * TILE]
    L = pick_landmarks(y, cand, 12, seed=0)
    assert np.unique(L // TILE).size <= 2
    from gramtile.pipeline.learn.folds import Split

    sp = Split(cand, splits[0].test, "s")
    evaluate_nystroem(src, y, [sp], m=12, C=(1.0,))
    rows = np.union1d(sp.train, sp.test)
    # the stored chunks (above the diagonal) of row tiles x landmark tiles, each read once
    expected = len({(min(a, b), max(a, b)) for a in np.unique(rows // TILE) for b in np.unique(L // TILE)})
    total = (-(-N // TILE)) * (-(-N // TILE) + 1) // 2
    assert src.chunk_reads == expected < total


def test_landmarks_stratified_and_errors():
    y = np.array(["a"] * 90 + ["b"] * 10)
    L = pick_landmarks(y, np.arange(100), 10, seed=0)
    assert (y[L] == "b").sum() == 1 and (y[L] == "a").sum() == 9
    assert np.array_equal(L, pick_landmarks(y, np.arange(100), 10, seed=0))
    assert not np.array_equal(L, pick_landmarks(y, np.arange(100), 10, seed=1))
    with pytest.raises(EvaluationError, match="m=0"):
        pick_landmarks(y, np.arange(100), 0)
    with pytest.raises(EvaluationError, match="no positive eigenvalue"):
        NystroemMap().fit(np.zeros((3, 3)))
