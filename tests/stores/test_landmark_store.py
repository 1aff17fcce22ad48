"""Landmark-only Gram stores for Nystroem (issue 15, item 3): `gramtile gram --landmarks M`
computes K(rows, L) only; the store equals the landmark columns of the full store bitwise, and
Nystroem evaluation from it equals evaluate_nystroem from the full store with the same
landmarks. Real NUM trees, real Zarr stores, real scikit-learn."""
import json

import numpy as np
import pytest
from conftest import corpus_store_of, require_data, stop_after

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.repair import repair
from gramtile.pipeline.learn.crossval import evaluate_nystroem
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.nystroem import LandmarkSource, pick_landmarks
from gramtile.pipeline.learn.sources import open_gram_source
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_verify import verify
from gramtile.pipeline.stores.landmarks import choose_landmarks
from gramtile.workflows.cli import main

N, M, TILE = 180, 30, 32
SST = {"kind": "sst", "lam": 0.4}


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    docs = list(read(require_data("trec_qc_num_constituency") / "NUM_test.dat", "svmlighttk"))
    docs = [docs[i] for i in np.random.default_rng(5).choice(len(docs), N, replace=False)]
    root = tmp_path_factory.mktemp("lm")
    corpus = corpus_store_of(root / "c.zarr", docs, 64)
    run_gram(corpus, SST, root / "full.zarr", tile=TILE, cluster="sequential")
    # another tile size than the full store's: values must not depend on the tiling
    run_gram(corpus, SST, root / "lm.zarr", tile=24, cluster="sequential", landmarks=M,
             landmark_seed=7)
    return root, corpus, np.array([d.label for d in docs])


def test_landmark_store_is_the_full_stores_columns_bitwise(stores):
    root, _, y = stores
    full, lm = GramStore.open(root / "full.zarr"), GramStore.open(root / "lm.zarr")
    rec = lm.landmarks
    pos = np.asarray(rec["row_positions"])
    assert lm.shape == (N, M) and not lm.symmetric and lm.complete
    assert rec["m"] == M and rec["taken"] == M and rec["seed"] == 7 and rec["how"] == "stratified"
    # the draw is the one pick_landmarks makes over all rows, stratified by the corpus labels
    assert np.array_equal(pos, pick_landmarks(y, np.arange(N), M, seed=7))
    assert np.array_equal(lm.cols(), full.rows()[pos])
    assert lm.ids("col") == [full.ids("row")[p] for p in pos]
    K_full = full.view().to_numpy()[:, pos]
    K_lm = lm.view().to_numpy()
    assert K_lm.dtype == np.float64 and K_lm.tobytes() == np.ascontiguousarray(K_full).tobytes()
    d_full = full.view().diag()[0]
    assert lm.view().diag()[1].tobytes() == d_full[pos].tobytes()
    assert lm.view().diag()[0].tobytes() == d_full.tobytes()
    assert verify(lm).ok


def test_evaluate_from_landmark_store_equals_full_store(stores):
    root, _, y = stores
    splits = stratified_kfold(y, 5, seed=0)
    src = LandmarkSource(GramStore.open(root / "lm.zarr"), normalized=True)
    for protocol in ("train", "all"):
        a = evaluate_nystroem(src, y, splits, m=0, C=(1.0,), landmarks=src.landmarks, protocol=protocol)
        b = evaluate_nystroem(open_gram_source(root / "full.zarr", normalized=True), y, splits, m=0, C=(1.0,),
                              landmarks=src.landmarks, protocol=protocol)
        (ia, pa), (ib, pb) = a[0].pop("predictions"), b[0].pop("predictions")
        assert np.array_equal(ia, ib) and np.array_equal(pa, pb)
        assert a == b
    # the default protocol uses only each fold's training landmarks: none of them is a test example
    for sp in splits:
        assert np.intersect1d(np.intersect1d(src.landmarks, sp.train), sp.test).size == 0
    # reads: only the landmark columns' chunks exist; each split reads the rows' chunks once
    assert src.chunk_reads <= 2 * len(splits) * (-(-N // 24)) * (-(-M // 24))


def test_landmark_source_refuses_non_landmark_columns_and_square_stores(stores):
    root, _, _ = stores
    src = LandmarkSource(GramStore.open(root / "lm.zarr"))
    not_lm = np.setdiff1d(np.arange(N), src.landmarks)[:1]
    with pytest.raises(EvaluationError, match="is not a landmark"):
        src.block(np.arange(3), not_lm)
    with pytest.raises(EvaluationError, match="not a landmark store"):
        LandmarkSource(GramStore.open(root / "full.zarr"))


def test_cli_gram_landmarks_then_evaluate_nystroem(stores, tmp_path, capsys):
    root, corpus, y = stores
    out = tmp_path / "cli.zarr"
    assert main(["gram", "--corpus", str(corpus), "--kernel", json.dumps(SST), "--out", str(out), "--landmarks",
                 str(M), "--landmark-seed", "7", "--tile", "24", "--cluster", "sequential", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert f"K {N} x {M} float64, {M} landmarks (stratified, seed 7)" in text, text
    assert GramStore.open(out).view().to_numpy().tobytes() == GramStore.open(root / "lm.zarr").view().to_numpy().tobytes()
    assert main(["status", str(out)]) == 0
    assert f"landmarks   {M} of the rows (asked {M}), stratified, seed 7" in capsys.readouterr().out
    res = tmp_path / "res"
    assert main(["evaluate", "--gram", str(out), "--model", "nystroem", "--folds", "5", "--normalized",
                 "--folds-dir", str(tmp_path), "--out", str(res)]) == 0
    got = json.loads((res / "results.json").read_text())["rows"][0]
    splits = stratified_kfold(y, 5, seed=0)
    src = LandmarkSource(GramStore.open(root / "lm.zarr"), normalized=True)
    want = evaluate_nystroem(src, y, splits, m=0, C=(1.0,), landmarks=src.landmarks)[0]
    assert got["accuracy"] == want["accuracy"] and got["m"] == M
    # a landmark store serves Nystroem only; --cols and --landmarks exclude each other
    capsys.readouterr()
    assert main(["evaluate", "--gram", str(out), "--model", "svm", "--folds", "5", "--folds-dir", str(tmp_path)]) == 2
    assert "is a landmark store" in capsys.readouterr().err
    assert main(["gram", "--corpus", str(corpus), "--kernel", json.dumps(SST), "--out", str(tmp_path / "x.zarr"),
                 "--landmarks", "5", "--cols", "0:5", "--cluster", "sequential"]) == 2
    assert "drop --cols" in capsys.readouterr().err
    assert not (tmp_path / "x.zarr").exists()
    # another seed on the same store is another landmark set: refused, naming the choice
    assert main(["gram", "--corpus", str(corpus), "--kernel", json.dumps(SST), "--out", str(out), "--landmarks",
                 str(M), "--landmark-seed", "8", "--cluster", "sequential", "--no-progress"]) == 2
    assert "column selection" in capsys.readouterr().err


def test_landmark_store_resumes_and_repairs(stores, tmp_path):
    root, corpus, _ = stores
    out = tmp_path / "r.zarr"
    on_tile, seen = stop_after(3)
    with pytest.raises(RuntimeError, match="stop here"):
        run_gram(corpus, SST, out, tile=24, cluster="sequential", landmarks=M, landmark_seed=7,
                 on_tile=on_tile)
    assert GramStore.open(out).tiles_done()[0] == 3
    st = run_gram(corpus, SST, out, cluster="sequential", landmarks=M, landmark_seed=7)
    assert st.complete
    want = GramStore.open(root / "lm.zarr").view().to_numpy().tobytes()
    assert st.view().to_numpy().tobytes() == want
    # a damaged chunk is recomputed as a landmark store (same columns drawn again)
    (out / "K" / "c" / "1" / "0").write_bytes(b"garbage")
    rep = repair(out, cluster="sequential")
    assert rep.ok and rep.repaired
    assert GramStore.open(out).view().to_numpy().tobytes() == want


def test_uniform_when_labels_missing_and_bad_m(tmp_path):
    docs = list(read(require_data("trec_qc_num_constituency") / "NUM_test.dat", "svmlighttk"))[:40]
    for d in docs:
        d.label = None
    corpus = corpus_store_of(tmp_path / "c.zarr", docs, 40)
    st = run_gram(corpus, SST, tmp_path / "u.zarr", cluster="sequential", landmarks=6,
                  landmark_seed=2)
    assert st.landmarks["how"] == "uniform"
    assert st.landmarks["row_positions"] == choose_landmarks(None, np.arange(40), 6, 2).tolist()
    with pytest.raises(StoreError, match="--landmarks 0"):
        run_gram(corpus, SST, tmp_path / "z.zarr", cluster="sequential", landmarks=0)


def test_train_and_predict_nystroem_model_evaluate_only_the_landmarks(stores, tmp_path, capsys):
    root, corpus, y = stores
    from sklearn.svm import LinearSVC

    from gramtile.pipeline.learn import dcd
    from gramtile.pipeline.learn.models import SavedModel
    from gramtile.pipeline.learn.nystroem import NystroemMap
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    norm = {"kind": "normalized", "kernel": SST}
    md = tmp_path / "model"
    assert main(["train", "--corpus", str(corpus), "--gram", str(root / "lm.zarr"), "--kernel", json.dumps(norm),
                 "--model", "nystroem", "--C", "1", "--out", str(md)]) == 0
    m = SavedModel.load(md)
    assert m.learner == "nystroem" and m.n_support == M and m.params["m"] == M
    # the reference: the linear SVM (pipeline/learn/dcd.py) on the features of the stored block, as
    # evaluate_nystroem builds them; and scikit-learn's LinearSVC on them, to its tolerance
    src = LandmarkSource(GramStore.open(root / "lm.zarr"), normalized=True)
    B = src.block(np.arange(N), src.landmarks)
    fmap = NystroemMap().fit(B[src.landmarks])
    F = np.ascontiguousarray(fmap.transform(B))
    clf = dcd.fit(F, np.arange(N), y, C=1.0, loss="squared_hinge", max_iter=20000)
    sk = LinearSVC(C=1.0, loss="squared_hinge", max_iter=20000, random_state=0).fit(F, y)
    docs = CorpusStore.open(corpus).documents()
    K = m.kernel_to_support(docs)
    assert K.shape == (N, M)  # prediction evaluates K(x, L) only
    np.testing.assert_allclose(m.decision_function(K), clf.decision_function(F, np.arange(N)), atol=1e-8)
    np.testing.assert_allclose(m.decision_function(K), sk.decision_function(F), atol=1e-3)
    assert np.array_equal(m.predict_from_kernel(K).astype(str), sk.predict(F))
    # the CLI: new trees (not in the corpus), M kernel values per input
    new = list(read(require_data("trec_qc_num_constituency") / "NUM_train.dat", "svmlighttk"))[:25]
    f = tmp_path / "new.dat"
    lines = (require_data("trec_qc_num_constituency") / "NUM_train.dat").read_text().splitlines()[:25]
    f.write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["predict", "--model-dir", str(md), "--input", str(f), "--format", "svmlighttk"]) == 0
    cap = capsys.readouterr()
    assert len(cap.out.strip().splitlines()) == len(new)
    assert f"{len(new)} examples x {M} support examples ({len(new) * M:,} kernel evaluations)" in cap.err
    # a square store is not a landmark store
    assert main(["train", "--corpus", str(corpus), "--gram", str(root / "full.zarr"), "--kernel", json.dumps(norm),
                 "--model", "nystroem", "--out", str(tmp_path / "bad")]) == 2
    assert "not a landmark store" in capsys.readouterr().err and not (tmp_path / "bad").exists()


@pytest.mark.parametrize("spec", [{"kind": "st", "lam": 0.4}, {"kind": "pt", "lam": 0.4, "mu": 0.4}])
def test_landmark_columns_bitwise_for_other_tree_kernels(stores, tmp_path, spec):
    _, corpus, _ = stores
    # a landmark store is computed pair by pair; bitwise equal to the pairwise square store (ST has a
    # feature map: a square store on the product path agrees to rounding, checked below)
    run_gram(corpus, spec, tmp_path / "full.zarr", rows="0:70", tile=16, cluster="sequential",
             path="pairwise")
    st = run_gram(corpus, spec, tmp_path / "lm.zarr", rows="0:70", tile=20, cluster="sequential",
                  landmarks=15, landmark_seed=3)
    pos = np.asarray(st.landmarks["row_positions"])
    full = GramStore.open(tmp_path / "full.zarr").view().to_numpy()
    assert st.view().to_numpy().tobytes() == np.ascontiguousarray(full[:, pos]).tobytes()
    auto = run_gram(corpus, spec, tmp_path / "auto.zarr", rows="0:70", tile=16, cluster="sequential")
    np.testing.assert_allclose(st.view().to_numpy(), auto.view().to_numpy()[:, pos], rtol=1e-12, atol=0)


def test_landmark_tiles_take_their_landmarks_from_one_assembly_per_column_tile(stores, tmp_path):
    # landmarks lie in every shard, and each tile row splits them differently (before / after /
    # inside its rows): assembled from the corpus per tile, every tile re-read every shard (O(n)
    # reads and memory per tile). Now each column tile's landmarks are assembled once.
    from gramtile.pipeline.cache import Cache

    root, corpus, _ = stores
    run = Cache()
    run.limit("shards", items=1)  # every shard request beyond the last one loads
    with run.active():
        st = run_gram(corpus, SST, tmp_path / "lm.zarr", tile=24, cluster="sequential", landmarks=M,
                      landmark_seed=7)
    loads = run.counts("shards")["loads"]
    n_shards, row_tiles, col_tiles = -(-N // 64), -(-N // 24), -(-M // 24)
    # each tile row's range once (one or two shards), each column tile's landmarks once (every shard)
    assert loads <= row_tiles + n_shards + col_tiles * n_shards, loads
    assert st.view().to_numpy().tobytes() == GramStore.open(root / "lm.zarr").view().to_numpy().tobytes()


def test_assembled_examples_follow_the_order_asked_for_across_shards(stores):
    from gramtile.pipeline.compute import tile_task
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    _, corpus, _ = stores
    cs = CorpusStore.open(corpus)
    idx = np.random.default_rng(3).permutation(N)[:50]  # scattered over the 3 shards, in no order
    idx = np.concatenate([idx, idx[:5], [0, 63, 64, N - 1]])  # repeats and shard edges
    got = tile_task._assemble(str(corpus), cs.content_hash, ("tree",), idx)["tree"]
    whole = cs.load("tree", 0, N)
    want = whole.take(idx)
    assert got.n == len(idx)
    assert np.array_equal(got.offsets, want.offsets)
    for k in want.columns:
        assert np.array_equal(got.columns[k], want.columns[k]), k
    assert np.array_equal(got.child_ptr, want.child_ptr) and np.array_equal(got.child_idx, want.child_idx)
    empty = tile_task._assemble(str(corpus), cs.content_hash, ("tree",), np.zeros(0, np.int64))["tree"]
    assert empty.n == 0
