"""The kernel row file of smo (pipeline/learn/rowfile.py): every value equal to the kernel
source's bitwise (normalised or not, a composite view, a renumbering), each store chunk read
once, a stale / foreign / truncated file refused, the disk space checked (naming --scratch),
nothing left behind, and evaluate over it equal to libsvm."""
import json
import os

import numpy as np
import pytest
from conftest import corpus_store_of

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn import rowfile
from gramtile.pipeline.learn.crossval import evaluate
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.rowfile import RowFile, identity, row_file, write_row_file
from gramtile.pipeline.learn.smo import RowCache
from gramtile.pipeline.learn.sources import ArrayKernelSource, StoreKernelSource, ViewKernelSource
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.structures import Document
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore

N = 230  # not a multiple of the tile: ragged last tile row and column


def random_tree(rng, depth=0):
    if depth > 2 or rng.random() < 0.3:
        return f"(N{rng.integers(3)} w{rng.integers(6)})"
    return f"(S{rng.integers(3)} " + " ".join(random_tree(rng, depth + 1) for _ in range(rng.integers(1, 3))) + ")"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("rowfile")
    rng = np.random.default_rng(0)
    trees = [random_tree(rng) for _ in range(N)]  # labelled by the root's symbol: a learnable task
    docs = [Document(id=f"d{i}", label=t[1:3], structures={"tree": parse_tree(t)}) for i, t in enumerate(trees)]
    corpus = corpus_store_of(d / "c.zarr", docs, 100)
    st = run_gram(corpus, {"kind": "st", "lam": 0.4}, d / "st.zarr", tile=64, cluster="sequential")
    sst = run_gram(corpus, {"kind": "sst", "lam": 0.4}, d / "sst.zarr", tile=64, cluster="sequential")
    return d, st.path, sst.path, np.array([doc.label for doc in docs])


def read_all(rf, n):
    out, buf = np.empty((n, n)), np.empty(n)
    for r in range(n):
        rf.read_into(r, None, out[r], buf)
    return out


@pytest.mark.parametrize("normalized", [False, True])
def test_a_store_row_file_equals_the_source_bitwise_and_reads_each_chunk_once(stores, tmp_path, normalized):
    _, st_path, _, _ = stores
    src = StoreKernelSource(GramStore.open(st_path), normalized=normalized)
    rf = write_row_file(src, tmp_path)
    nt = -(-N // 64)
    assert src.chunk_reads == nt * (nt + 1) // 2  # the upper triangle, once
    want = src.block(np.arange(N), np.arange(N))
    assert np.array_equal(read_all(rf, N), want)
    assert np.array_equal(rf.diag(np.arange(N)), np.diag(want))
    assert os.listdir(tmp_path) == [os.path.basename(rf.path)]  # renamed, no partial left
    assert f"-{os.getpid()}-" in rf.path
    rf.remove()
    assert os.listdir(tmp_path) == []


def test_a_composite_and_a_renumbered_source(stores, tmp_path):
    _, st_path, sst_path, _ = stores
    spec = as_spec({"kind": "sum", "kernels": [{"weight": 1.0, "kernel": {"kind": "st", "lam": 0.4}},
                                              {"weight": 0.5, "kernel": {"kind": "sst", "lam": 0.4}}]})
    src = ViewKernelSource(ComposedView(spec, [st_path, sst_path]))
    with row_file(src, tmp_path) as rf:
        assert np.array_equal(read_all(rf, N), src.block(np.arange(N), np.arange(N)))
        idx = np.random.default_rng(1).permutation(N)[:90]
        sub = ViewKernelSource(src, idx=idx)
        assert np.array_equal(rf.positions(sub), idx)
        tr = np.arange(0, 90, 2)
        rows = RowCache(sub, tr, cache_mb=8 * 45 * 4 / 1e6, row_file=rf)
        for t in [3, 0, 44, 3, 17, 30, 8]:
            assert np.array_equal(rows.row(t), src.block(idx[tr[t:t + 1]], idx[tr])[0])
        assert np.array_equal(rows.diag(), np.diag(sub.block(tr, tr)))
        other = StoreKernelSource(GramStore.open(st_path))
        assert rf.positions(other) is None
        with pytest.raises(EvaluationError, match="not written from this kernel source"):
            RowCache(other, tr, cache_mb=1.0, row_file=rf)
    assert not os.path.exists(rf.path)


def test_stale_foreign_truncated_or_missing_files_are_refused(stores, tmp_path):
    _, st_path, _, _ = stores
    src = StoreKernelSource(GramStore.open(st_path))
    rf = write_row_file(src, tmp_path)
    buf, out = np.empty(N), np.empty(N)
    foreign = RowFile(rf.path, N, "0" * 32, rf.identity)  # the same path, another run's token
    with pytest.raises(EvaluationError, match="not the one this evaluation wrote"):
        foreign.read_into(0, None, out, buf)
    other_src = RowFile(rf.path, N, rf.token, identity(StoreKernelSource(GramStore.open(st_path), normalized=True)))
    with pytest.raises(EvaluationError, match="never reused"):
        other_src.read_into(0, None, out, buf)
    os.truncate(rf.path, rf.nbytes - 8)
    with pytest.raises(EvaluationError, match="truncated"):
        RowFile(rf.path, N, rf.token, rf.identity).read_into(0, None, out, buf)
    rf.remove()
    with pytest.raises(EvaluationError, match="--scratch"):
        RowFile(rf.path, N, rf.token, rf.identity).read_into(0, None, out, buf)


def test_too_little_disk_names_scratch_and_writes_nothing(stores, tmp_path, monkeypatch):
    _, st_path, _, _ = stores
    src = StoreKernelSource(GramStore.open(st_path))

    class Usage:
        free = rowfile.HEADER + 8 * N * N  # the file fits, the margin does not

    monkeypatch.setattr(rowfile.shutil, "disk_usage", lambda d: Usage)
    with pytest.raises(EvaluationError, match="--scratch DIR"):
        write_row_file(src, tmp_path)
    assert os.listdir(tmp_path) == []
    with pytest.raises(EvaluationError, match="does not exist"):
        write_row_file(src, tmp_path / "nope")


def test_a_failed_write_or_a_failed_evaluation_leaves_no_file(stores, tmp_path, monkeypatch):
    _, st_path, _, _ = stores
    src = StoreKernelSource(GramStore.open(st_path))
    calls = []

    def broken(fd, data, offset):
        calls.append(offset)
        if len(calls) > 3:
            raise OSError(28, "No space left on device")
        os.pwrite(fd, memoryview(np.ascontiguousarray(data)).cast("B"), offset)

    with monkeypatch.context() as m:
        m.setattr(rowfile, "_pwrite_all", broken)
        with pytest.raises(EvaluationError, match="--scratch"):  # the scratch directory's fault, named
            write_row_file(src, tmp_path)
    assert os.listdir(tmp_path) == []
    with pytest.raises(RuntimeError), row_file(src, tmp_path) as rf:
        assert os.path.exists(rf.path)
        raise RuntimeError("a fit failed")
    assert os.listdir(tmp_path) == []


def test_in_memory_sources_need_no_row_file(tmp_path):
    src = ArrayKernelSource(np.eye(4))
    assert identity(src) is None
    with row_file(src, tmp_path) as rf:
        assert rf is None
    with pytest.raises(EvaluationError, match="in-memory"):
        write_row_file(src, tmp_path)


@pytest.mark.parametrize("cluster", [None, "threads"])
def test_evaluate_through_a_row_file_equals_libsvm(stores, tmp_path, monkeypatch, cluster):
    _, _, sst_path, labels = stores
    src = StoreKernelSource(GramStore.open(sst_path), normalized=True)
    written = []
    real = rowfile.write_row_file

    def spy(source, directory=None):
        rf = real(source, directory)
        written.append(rf.path)
        return rf

    monkeypatch.setattr(rowfile, "write_row_file", spy)
    folds = stratified_kfold(labels, 3, seed=0)
    n_tr = max(f.train.size for f in folds)
    cache = 8 * n_tr * (n_tr // 10) / 1e6 * (2 if cluster else 1)  # 10 % of the training rows per fit
    kw = dict(C=[0.5, 2.0], select="nested", inner_folds=2)
    smo = evaluate(src, labels, folds, solver="smo", **kw,
                   cluster=Runtime.of(cluster).with_settings(cache_mb=cache, scratch=str(tmp_path)))
    lib = evaluate(src, labels, folds, solver="libsvm", **kw)
    assert len(written) == 1 and os.path.dirname(written[0]) == str(tmp_path)  # one file for every fold and C
    assert os.listdir(tmp_path) == []  # removed at the end
    for key in lib.predictions:
        assert np.mean(lib.predictions[key][1] == smo.predictions[key][1]) >= 0.999
    for r, s in zip(lib.rows, smo.rows):
        assert r["accuracy"] == s["accuracy"] and r.get("C_chosen") == s.get("C_chosen")


def test_files_of_dead_writers_are_removed_and_live_ones_kept(stores, tmp_path):
    import socket
    import subprocess
    import sys

    _, st_path, _, _ = stores
    host = socket.gethostname()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"gramtile-rows-{host}-{int(dead.stdout)}-{'a' * 12}.f64.partial"
    live = tmp_path / f"gramtile-rows-{host}-1-{'b' * 12}.f64"  # pid 1 runs
    mine = tmp_path / "notes.txt"
    for p in (stale, live, mine):
        p.write_bytes(b"x")
    with row_file(StoreKernelSource(GramStore.open(st_path)), tmp_path) as rf:
        assert sorted(os.listdir(tmp_path)) == sorted([live.name, mine.name, os.path.basename(rf.path)])
    assert sorted(os.listdir(tmp_path)) == sorted([live.name, mine.name])


def test_the_command_writes_its_row_file_under_scratch(stores, tmp_path, monkeypatch, capsys):
    from gramtile.workflows.cli import main

    _, _, sst_path, _ = stores
    seen = []
    real = rowfile.write_row_file
    monkeypatch.setattr(rowfile, "write_row_file", lambda src, d=None: seen.append(str(d)) or real(src, d))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    rc = main(["evaluate", "--gram", str(sst_path), "--folds", "3", "--C", "1", "--normalized", "--solver", "smo",
               "--cache-mb", "0.1", "--scratch", str(scratch), "--folds-dir", str(tmp_path), "--no-progress"])
    assert rc in (0, None) and seen == [str(scratch)] and os.listdir(scratch) == []
    rc = main(["evaluate", "--gram", str(sst_path), "--folds", "3", "--C", "1", "--solver", "smo",
               "--scratch", str(tmp_path / "missing"), "--folds-dir", str(tmp_path), "--no-progress"])
    assert rc == 2 and "does not exist" in capsys.readouterr().err  # one line naming --scratch, exit 2


def test_train_writes_its_row_file_under_scratch_too(stores, tmp_path, monkeypatch):
    """`gramtile train --solver smo --scratch DIR` over a Gram store: the row file goes to DIR and is
    removed when the model is complete; the model predicts what the smo fit decided."""
    from gramtile.workflows.cli import main

    d, _, sst_path, _ = stores
    corpus = d / "c.zarr"
    seen = []
    real = rowfile.write_row_file
    monkeypatch.setattr(rowfile, "write_row_file", lambda src, d=None: seen.append(str(d)) or real(src, d))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    rc = main(["train", "--corpus", str(corpus), "--gram", str(sst_path), "--kernel", '{"kind": "sst", "lam": 0.4}',
               "--C", "1", "--solver", "smo", "--cache-mb", "0.1", "--scratch", str(scratch),
               "--out", str(tmp_path / "model")])
    assert rc in (0, None) and seen == [str(scratch)] and os.listdir(scratch) == []
    assert json.loads((tmp_path / "model" / "model.json").read_text())["params"]["solver"]["used"] == "smo"
