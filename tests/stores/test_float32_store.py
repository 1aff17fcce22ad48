"""`gramtile gram --dtype float32` (issue 15, item 4): K and the diagonals in single precision,
recorded in the provenance, rounded once from the float64 tile (so they equal a float64 store's
values rounded to float32 bitwise), checked by the tile checksums, read / exported / verified as
float32, and refused in a composite with float64 stores. Real NUM trees, real Zarr stores."""
import json

import numpy as np
import pytest
from conftest import corpus_store_of, num_trees

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.learn.crossval import evaluate
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.sources import ViewKernelSource, open_gram_source
from gramtile.pipeline.stores.errors import StoreError, StoreMismatchError
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_export import export_selection
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_verify import verify
from gramtile.workflows.cli import main

SST = {"kind": "sst", "lam": 0.4}
ST = {"kind": "st", "lam": 0.4}
SUM = {"kind": "sum", "kernels": [{"weight": 1.0, "kernel": {"kind": "normalized", "kernel": SST}},
                                  {"weight": 1.0, "kernel": {"kind": "normalized", "kernel": ST}}]}
TILE = 40


def _du(path):
    return sum(f.stat().st_size for f in (path / "K").rglob("*") if f.is_file())


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    every = num_trees(6000)  # sorted by label in the file: interleave the classes
    pos, neg = [d for d in every if d.label == "1"][:50], [d for d in every if d.label != "1"][:110]
    docs = [d for pair in zip(neg[:50], pos) for d in pair] + neg[50:]
    d = tmp_path_factory.mktemp("f32")
    corpus = corpus_store_of(d / "c.zarr", docs, 64)
    for name, spec in (("sst", SST), ("st", ST)):
        for dt in ("float64", "float32"):
            run_gram(corpus, spec, d / f"{name}-{dt}.zarr", tile=TILE, cluster="sequential",
                     dtype=dt)
    return d, corpus, np.array([x.label for x in docs])


def test_float32_store_is_the_float64_store_rounded(stores):
    d, _, _ = stores
    s64, s32 = GramStore.open(d / "sst-float64.zarr"), GramStore.open(d / "sst-float32.zarr")
    assert s32.dtype == "float32" and s32.meta["dtype"] == "float32" and "dtype" not in s64.meta
    assert s32.K.dtype == np.float32 and s32.diag_rows.dtype == np.float32
    K64, K32 = s64.view().to_numpy(), s32.view().to_numpy()
    assert K32.dtype == np.float32 and K64.dtype == np.float64
    assert K32.tobytes() == K64.astype(np.float32).tobytes()
    assert s32.view().diag()[0].tobytes() == s64.view().diag()[0].astype(np.float32).tobytes()
    # normalised: float32 out, within float32 round-off of the float64 values
    n32, n64 = s32.view().block(normalized=True), s64.view().block(normalized=True)
    assert n32.dtype == np.float32 and np.abs(n32 - n64).max() < 1e-6
    # half the bytes on disk (crc32c adds 4 bytes per chunk to both)
    assert 0.45 < _du(d / "sst-float32.zarr") / _du(d / "sst-float64.zarr") < 0.55
    assert s32.summary()["dtype"] == "float32"


def test_float32_checksums_verify_and_catch_a_swap(stores, tmp_path):
    d, corpus, _ = stores
    out = tmp_path / "g.zarr"
    run_gram(corpus, SST, out, tile=TILE, cluster="sequential", dtype="float32")
    st = GramStore.open(out)
    assert verify(st).ok and verify(st).checked == 10
    crc = np.asarray(st.tile_crc[...])
    assert crc[np.triu_indices(4)].min() > 0  # every computed tile (i <= j) has its checksum
    a, b = out / "K" / "c" / "0" / "1", out / "K" / "c" / "0" / "2"
    ba, bb = a.read_bytes(), b.read_bytes()
    a.write_bytes(bb)
    b.write_bytes(ba)
    bad = verify(GramStore.open(out)).bad
    assert {tuple(t) for t, _ in bad} == {(0, 1), (0, 2)} and "checksum" in bad[0][1]
    assert main(["verify", str(out), "--repair"]) == 0
    assert GramStore.open(out).view().to_numpy().tobytes() == \
        GramStore.open(d / "sst-float32.zarr").view().to_numpy().tobytes()


def test_float32_export_and_readers(stores, tmp_path):
    d, _, _ = stores
    st = GramStore.open(d / "sst-float32.zarr")
    K = st.view().to_numpy()
    npy = export_selection(st, tmp_path / "k.npy")[0]
    got = np.load(npy)
    assert got.dtype == np.float32 and got.tobytes() == K.tobytes()
    st.view().export(tmp_path / "all.npy")
    assert np.load(tmp_path / "all.npy").tobytes() == K.tobytes()
    sk = pytest.importorskip("sklearn.datasets")
    txt = export_selection(st, tmp_path / "k.svmlight", "svmlight", rows=np.arange(10), cols=np.arange(20))[0]
    X, _ = sk.load_svmlight_file(str(txt), n_features=20)
    assert np.array_equal(X.toarray().astype(np.float32), K[:10, :20])
    da = st.view().to_dask()
    assert da.dtype == np.float32 and np.asarray(da.compute()).tobytes() == K.tobytes()


def test_composite_refuses_mixed_dtypes_and_accepts_float32_pairs(stores):
    d, _, _ = stores
    from gramtile.kernels.registry import as_spec

    spec = as_spec(SUM)
    with pytest.raises(StoreMismatchError, match="different dtypes.*--dtype"):
        ComposedView(spec, [d / "sst-float32.zarr", d / "st-float64.zarr"])
    v32 = ComposedView(spec, [d / "sst-float32.zarr", d / "st-float32.zarr"])
    v64 = ComposedView(spec, [d / "sst-float64.zarr", d / "st-float64.zarr"])
    b32, b64 = v32.block(), v64.block()
    assert b32.dtype == np.float32 and np.abs(b32 - b64).max() < 1e-6


def test_cli_dtype_resume_mismatch_and_status(stores, tmp_path, capsys):
    d, corpus, y = stores
    out = tmp_path / "c.zarr"
    args = ["gram", "--corpus", str(corpus), "--kernel", json.dumps(SST), "--out", str(out), "--tile", str(TILE),
            "--cluster", "sequential", "--no-progress"]
    assert main(args + ["--dtype", "float32"]) == 0
    assert "float32" in capsys.readouterr().out
    assert main(args) == 2  # resuming it as float64
    err = capsys.readouterr().err
    assert "holds float32 values" in err and "--dtype float32" in err
    assert main(["status", str(out)]) == 0
    assert "float32" in capsys.readouterr().out
    assert main(["evaluate", "--gram", str(out), "--gram", str(d / "st-float64.zarr"), "--kernel", json.dumps(SUM),
                 "--folds", "3", "--folds-dir", str(tmp_path)]) == 2
    assert "different dtypes" in capsys.readouterr().err
    with pytest.raises(StoreError, match="--dtype 'float16'"):
        run_gram(corpus, SST, tmp_path / "h.zarr", cluster="sequential", dtype="float16")


def test_evaluate_float32_matches_float64(stores):
    d, _, y = stores
    splits = stratified_kfold(y, 4, seed=0)
    a = evaluate(open_gram_source(d / "sst-float64.zarr", normalized=True), y, splits, C=(1.0,))
    b = evaluate(open_gram_source(d / "sst-float32.zarr", normalized=True), y, splits, C=(1.0,))
    pa, pb = a.predictions["svm C=1"][1], b.predictions["svm C=1"][1]
    assert np.mean(pa == pb) >= 0.99
    assert abs(a.rows[0]["accuracy"] - b.rows[0]["accuracy"]) <= 0.01
    assert ViewKernelSource(GramStore.open(d / "sst-float32.zarr").view()).block([0, 1], [0, 1]).dtype == np.float32
