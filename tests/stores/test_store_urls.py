"""Corpus and Gram stores at fsspec URLs (pipeline/stores/storage.py).

``file://`` URLs go through fsspec (not the local-path code) and are seen by other processes, so
they carry the multi-process cases: Dask worker processes that open both URLs themselves, a
second writer in another process, the CLI. ``memory://`` URLs serve the in-process executors,
and, with the memory filesystem treated as an object store (no exclusive create, no append),
the per-run log objects and the written-then-read-back lock. Every K is compared bitwise with
the same run on local paths.
"""
import json
import os
import socket
import subprocess
import sys
import uuid

import fsspec
import numpy as np
import pytest
from conftest import corpus_store_of, lock_holder, num_trees, senseval_head, stop_after

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.repair import repair
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.stores import storage
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import (
    IncompleteTileError,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreMismatchError,
)
from gramtile.pipeline.stores.gram_export import export
from gramtile.pipeline.stores.gram_store import GramStore, store_lock
from gramtile.pipeline.stores.gram_verify import verify
from gramtile.pipeline.stores.locks import StoreLock, UrlLock
from gramtile.pipeline.stores.storage import FsspecLocation, LocalLocation, location
from gramtile.pipeline.stores.tiles import Tile

N = 110
TILE = 25  # 5 x 5 tiles, 15 of them in the upper triangle; tiles straddle the 40-example shards
SST = '{"kind": "sst", "lam": 0.4}'
ST = '{"kind": "st"}'
GRAMTILE = [sys.executable, "-m", "gramtile"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return corpus_store_of(tmp_path_factory.mktemp("corpus") / "num.zarr", num_trees(N), 40)


@pytest.fixture(scope="module")
def local_K(corpus, tmp_path_factory):
    """K of the same run on local paths: the value every URL run must reproduce bit for bit."""
    st = run_gram(corpus, SST, tmp_path_factory.mktemp("local") / "g.zarr", tile=TILE, cluster="sequential")
    return st.view().block()


@pytest.fixture
def mem(corpus):
    """A fresh memory:// prefix holding a copy of the corpus store; removed afterwards."""
    fs = fsspec.filesystem("memory")
    root = f"/fsx-{uuid.uuid4().hex[:8]}"
    fs.put(str(corpus), f"{root}/c.zarr", recursive=True)
    yield f"memory://{root}"
    fs.rm(root, recursive=True)


def _events(st):
    return [r["event"] for r in st.read_log()]


def _tiles_logged(st):
    return sorted(tuple(r["tile"]) for r in st.read_log() if r["event"] == "tile")


def _upper_tiles(st):
    return sorted(tuple(t) for t in st.grid().tiles())


# ---- which code path ---------------------------------------------------------------------------

def test_paths_stay_local_and_urls_go_through_fsspec(corpus, tmp_path):
    assert isinstance(location(tmp_path / "g.zarr"), LocalLocation)
    assert isinstance(location(str(tmp_path / "g.zarr")), LocalLocation)
    loc = location(f"file://{tmp_path}/g.zarr")
    assert isinstance(loc, FsspecLocation) and loc.exclusive and loc.appendable
    assert isinstance(location("memory://x/g.zarr"), FsspecLocation)
    # the local-path branch keeps its O_EXCL lock and hands Zarr the plain path string
    assert isinstance(location(tmp_path).lock("gramtile.lock", "x"), StoreLock)
    assert isinstance(loc.lock("gramtile.lock", "x"), UrlLock)
    assert location(tmp_path).zarr_store("K") == str(tmp_path / "K")
    cs = CorpusStore.open(f"file://{corpus}")
    assert cs.path == f"file://{corpus}" and cs.content_hash == CorpusStore.open(corpus).content_hash


# ---- file:// URLs: every executor, worker processes included ----------------------------------------

@pytest.fixture(scope="module")
def cluster_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("cluster") / "cluster.yaml"
    p.write_text("profiles:\n  local: {n_workers: 2, threads_per_worker: 1, processes: true, memory_limit: 1GiB, "
                 "dashboard_address: ':0'}\n")
    return p


@pytest.mark.parametrize("cluster", ["sequential", "threads", "local"])
def test_file_urls_give_the_local_path_K_with_every_executor(cluster, corpus, local_K, cluster_file, tmp_path):
    corpus_url, out_url = f"file://{corpus}", f"file://{tmp_path}/g.zarr"
    st = run_gram(corpus_url, SST, out_url, tile=TILE, cluster=Runtime(cluster, cluster_file))
    assert isinstance(st.loc, FsspecLocation) and st.path == out_url
    assert np.array_equal(st.view().block(), local_K)
    assert st.meta["corpus_path"] == corpus_url  # the URL as given, not a resolved local path
    # the bytes are where the URL points, and the run released its lock
    assert (tmp_path / "g.zarr" / "K" / "c" / "0" / "4").is_file()
    assert not (tmp_path / "g.zarr" / "gramtile.lock").exists()
    assert _events(st)[0] == "start" and _events(st)[-1] == "end"
    assert _tiles_logged(st) == _upper_tiles(st)
    workers = {r["worker"] for r in st.read_log() if r["event"] == "tile"}
    if cluster == "local":
        # Dask worker processes opened both URLs themselves
        assert workers and all(w.rsplit(":", 1)[1] != str(os.getpid()) for w in workers)
        assert [r["executor"] for r in st.read_log() if r["event"] == "start"] == ["dask"]
    else:
        assert workers == {f"{socket.gethostname()}:{os.getpid()}"}


def test_a_stopped_url_run_resumes_computing_only_the_missing_tiles(corpus, local_K, tmp_path):
    out = f"file://{tmp_path}/stop.zarr"
    stop_after_four, seen = stop_after(4)
    with pytest.raises(RuntimeError, match="stop here"):
        run_gram(f"file://{corpus}", SST, out, tile=TILE, cluster="threads", on_tile=stop_after_four)
    st = GramStore.open(out)
    done = {t for t in st.grid().tiles() if st.done_mask()[t.i, t.j]}
    assert done == set(seen)
    assert not st.complete
    # an unfinished tile cannot be read, and an incomplete store cannot be exported
    missing = next(t for t in st.grid().tiles() if t not in done)
    with pytest.raises(IncompleteTileError, match="not computed yet"):
        st.view().block(slice(missing.i * TILE, missing.i * TILE + 1), slice(missing.j * TILE, missing.j * TILE + 1))
    with pytest.raises(IncompleteTileError, match="incomplete"):
        export(out, tmp_path / "K.npy")
    again = run_gram(f"file://{corpus}", SST, out, cluster="threads")
    ends = [r for r in again.read_log() if r["event"] == "end"]
    assert [e["tiles_computed"] for e in ends] == [4, len(st.grid().tiles()) - 4]
    assert np.array_equal(again.view().block(), local_K)


def test_reopening_a_url_store_with_another_kernel_is_a_mismatch(corpus, tmp_path):
    out = f"file://{tmp_path}/g.zarr"
    run_gram(f"file://{corpus}", SST, out, rows="0:30", tile=TILE, cluster="sequential")
    with pytest.raises(StoreMismatchError, match="another kernel spec") as e:
        run_gram(f"file://{corpus}", ST, out, rows="0:30", cluster="sequential")
    assert out in str(e.value)
    assert not (tmp_path / "g.zarr" / "gramtile.lock").exists()  # the refused run released the lock


def test_a_second_writer_at_a_url_is_refused_and_a_dead_writers_lock_taken_over(corpus, tmp_path):
    out = f"file://{tmp_path}/locked.zarr"
    with lock_holder(out) as holder:
        with pytest.raises(StoreLockedError, match=f"locked by process {holder.pid}") as e:
            run_gram(f"file://{corpus}", SST, out, rows="0:30", cluster="sequential")
        assert f"{out}/gramtile.lock" in str(e.value)  # the fix names the lock object to delete
    lock = json.loads((tmp_path / "locked.zarr" / "gramtile.lock").read_text())
    assert lock["pid"] == holder.pid and lock["token"]
    # the holder died without releasing: on this host its lock is stale and the next run proceeds
    st = run_gram(f"file://{corpus}", SST, out, rows="0:30", tile=TILE, cluster="sequential")
    assert st.complete and not (tmp_path / "locked.zarr" / "gramtile.lock").exists()
    # a lock from another host is never taken over
    (tmp_path / "locked.zarr" / "gramtile.lock").write_text(json.dumps({"pid": holder.pid, "host": "elsewhere"}))
    with pytest.raises(StoreLockedError, match="on elsewhere"):
        run_gram(f"file://{corpus}", SST, out, rows="0:30", cluster="sequential")


def test_verify_finds_flipped_bytes_at_a_url_and_repair_restores_them(corpus, tmp_path):
    out = f"file://{tmp_path}/g.zarr"
    good = run_gram(f"file://{corpus}", SST, out, tile=TILE, cluster="sequential").view().block()
    assert verify(out).bad == []
    loc = location(out)
    key = GramStore.chunk_key(Tile(1, 3))
    raw = bytearray(loc.read_bytes(key))
    raw[100] ^= 0xFF
    loc.write_bytes(key, bytes(raw))
    loc.remove(GramStore.chunk_key(Tile(0, 2)))  # a lost chunk reads back as NaN fill
    rep = verify(out)
    assert {tuple(t) for t, _ in rep.bad} == {(1, 3), (0, 2)}
    with pytest.raises(StoreCorruptError, match="verify"):
        GramStore.open(out).view().block(slice(25, 50), slice(75, 100))
    rep = repair(out)
    assert sorted(rep.repaired) == [Tile(0, 2), Tile(1, 3)]
    assert verify(out).bad == []
    assert np.array_equal(GramStore.open(out).view().block(), good)
    runs = [r for r in GramStore.open(out).read_log() if r["event"] == "end"]
    assert [r["tiles_computed"] for r in runs] == [15, 2]


def test_cli_gram_status_verify_export_with_urls(corpus, local_K, tmp_path):
    out = f"file://{tmp_path}/cli.zarr"
    env = dict(os.environ, PYTHONUNBUFFERED="1")

    def cli(*args):
        return subprocess.run(GRAMTILE + list(args), capture_output=True, text=True, env=env, timeout=300)

    r = cli("gram", "--corpus", f"file://{corpus}", "--kernel", SST, "--out", out, "--tile", str(TILE),
            "--cluster", "sequential", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "15/15 tiles done" in r.stdout
    assert not (tmp_path / "file:").exists()  # the URL was never taken for a relative local path
    r = cli("status", out, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["path"] == out and s["complete"] and s["corpus_path"] == f"file://{corpus}"
    r = cli("verify", out)
    assert r.returncode == 0 and "15 done tile(s) checked, 0 bad" in r.stdout, r.stdout + r.stderr
    loc = location(out)
    raw = bytearray(loc.read_bytes("K/c/2/2"))
    raw[64] ^= 0x01
    loc.write_bytes("K/c/2/2", bytes(raw))
    r = cli("verify", out)
    assert r.returncode == 1 and "bad tile (2, 2)" in r.stdout
    r = cli("verify", out, "--repair")
    assert r.returncode == 0 and "repaired 1 tile(s)" in r.stdout, r.stdout + r.stderr
    r = cli("export", out, "--out", str(tmp_path / "K.npy"))
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(tmp_path / "K.npy"), local_K)


# ---- memory:// URLs: the in-process executors -------------------------------------------------------

@pytest.mark.parametrize("cluster", ["sequential", "threads"])
def test_memory_urls_give_the_local_path_K(cluster, mem, local_K, tmp_path):
    st = run_gram(f"{mem}/c.zarr", SST, f"{mem}/g.zarr", tile=TILE, cluster=cluster)
    assert isinstance(st.loc, FsspecLocation) and st.loc.protocol == "memory"
    assert np.array_equal(st.view().block(), local_K)
    assert _events(st)[0] == "start" and _events(st)[-1] == "end"
    assert _tiles_logged(st) == _upper_tiles(st)
    fs = fsspec.filesystem("memory")
    root = mem.split("://", 1)[1]
    assert fs.exists(f"{root}/g.zarr/log/records.jsonl") and not fs.exists(f"{root}/g.zarr/gramtile.lock")
    assert export(f"{mem}/g.zarr", tmp_path / "K.npy") == tmp_path / "K.npy"
    assert np.array_equal(np.load(tmp_path / "K.npy"), local_K)


@pytest.fixture
def object_store(monkeypatch):
    """Treat memory:// as an object store: no exclusive create, no append (the s3:// code path)."""
    monkeypatch.setattr(storage, "LOCAL_LIKE_PROTOCOLS", {"file", "local"})


def test_on_an_object_store_each_run_writes_its_own_log_object_and_read_log_merges_them(object_store, mem,
                                                                                         local_K):
    out = f"{mem}/g.zarr"
    assert not location(out).appendable and not location(out).exclusive
    seen = []

    def stop_after_five(res):
        seen.append(res.tile)
        if len(seen) == 5:
            raise RuntimeError("stop here")

    with pytest.raises(RuntimeError):
        run_gram(f"{mem}/c.zarr", SST, out, tile=TILE, cluster="threads", on_tile=stop_after_five)
    st = run_gram(f"{mem}/c.zarr", SST, out, cluster="sequential")
    assert np.array_equal(st.view().block(), local_K)
    fs = fsspec.filesystem("memory")
    root = mem.split("://", 1)[1]
    assert not fs.exists(f"{root}/g.zarr/log/records.jsonl")
    objs = sorted(p.rsplit("/", 1)[1] for p in fs.ls(f"{root}/g.zarr/log/records", detail=False))
    recs = st.read_log()
    runs = [r["run"] for r in recs if r["event"] == "start"]
    assert objs == sorted(f"{r}.jsonl" for r in runs) and len(runs) == 2
    # one run's records, then the other's, in the order they ran
    assert [r["event"] for r in recs] == (["start"] + ["tile"] * 5 + ["end"] + ["start"] + ["tile"] * 10 + ["end"])
    assert [r["run"] for r in recs] == [runs[0]] * 7 + [runs[1]] * 12
    assert _tiles_logged(st) == _upper_tiles(st)
    assert not fs.exists(f"{root}/g.zarr/gramtile.lock")


def test_on_an_object_store_the_lock_is_written_if_absent_and_read_back(object_store, mem):
    out = f"{mem}/g.zarr"
    with store_lock(out):
        other = location(out).lock("gramtile.lock", "Gram store")
        with pytest.raises(StoreLockedError, match=f"locked by process {os.getpid()}"):
            other.acquire()
    assert not location(out).exists("gramtile.lock")
    # a writer whose object was overwritten by a racing writer does not hold the lock
    lk = location(out).lock("gramtile.lock", "Gram store")
    lk.acquire()
    location(out).write_bytes("gramtile.lock", json.dumps({"pid": 1, "host": "racer", "token": "t"}).encode())
    lk.release()  # not ours any more: left in place
    assert json.loads(location(out).read_bytes("gramtile.lock"))["host"] == "racer"


# ---- errors ----------------------------------------------------------------------------------------

def test_a_scheme_without_an_installed_filesystem_names_the_url_and_the_package(corpus, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a URL mistaken for a relative path would land here, and be seen
    with pytest.raises(StoreError, match=r"gs://bucket/g\.zarr.*Fix: pip install gcsfs"):
        run_gram(corpus, SST, "gs://bucket/g.zarr", cluster="sequential")
    with pytest.raises(StoreError, match=r"gs://b/c\.zarr.*Fix: pip install gcsfs"):
        CorpusStore.open("gs://b/c.zarr")
    with pytest.raises(StoreError, match="fsspec knows no scheme 'nosuch'"):
        GramStore.open("nosuch://x/g.zarr")
    assert not any(tmp_path.iterdir())


def test_corpus_stores_are_written_to_urls_and_a_missing_filesystem_is_named(corpus, mem, tmp_path, monkeypatch):
    from gramtile.workflows.cli import main

    monkeypatch.chdir(tmp_path)  # a URL taken as a relative path would land here, and be seen
    with CorpusStore.create(f"{mem}/new.zarr", shard_size=40) as cs:
        assert isinstance(location(cs.path), FsspecLocation) and location(cs.path).exists(".lock")
    assert not location(f"{mem}/new.zarr").exists(".lock")
    with pytest.raises(StoreMismatchError, match=f"{mem}/new.zarr already exists"):
        CorpusStore.create(f"{mem}/new.zarr")
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "tree": "(S (A a))"}\n{"id": "b", "tree": "(S (B (C b)))"}\n')
    r = subprocess.run(GRAMTILE + ["prepare", "--input", str(src), "--format", "jsonl", "--out", "abfs://b/c.zarr",
                                   "--cluster", "sequential", "--no-progress"], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 2 and "abfs://b/c.zarr" in r.stderr and "Fix: pip install adlfs" in r.stderr
    # gram --input at a URL: its corpus store goes beside --out, at the URL
    assert main(["gram", "--input", str(src), "--kernel", SST, "--out", f"{mem}/g.zarr", "--cluster", "sequential",
                 "--no-progress"]) == 0
    assert GramStore.open(f"{mem}/g.zarr").meta["corpus_path"] == f"{mem}/g.zarr.corpus.zarr"
    assert CorpusStore.open(f"{mem}/g.zarr.corpus.zarr").ids == ["a", "b"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # no URL became a relative local path


# ---- corpus resources at a URL ---------------------------------------------------------------------

def test_corpus_resources_are_built_at_and_loaded_from_a_url(mem, tmp_path):
    from conftest import require_data
    
    from gramtile.pipeline.cache import Cache
    from gramtile.pipeline.compute.prepare import prepare
    from gramtile.pipeline.readers.senseval import read_senseval  # noqa: F401  (registers the reader)
    from gramtile.pipeline.stores import resource_store

    serve = senseval_head(require_data("senseval_hard_line_serve") / "serve.pos", tmp_path / "serve.pos", 30)
    local = tmp_path / "serve.zarr"
    prepare(serve, "senseval", local, shard_size=15, cluster="sequential")
    fsspec.filesystem("memory").put(str(local), f"{mem.split('://', 1)[1]}/serve.zarr", recursive=True)
    spec = {"kind": "syntagmatic", "similarity": "lsa"}
    want = run_gram(local, spec, tmp_path / "g.zarr", tile=8, cluster="sequential")
    # the URL corpus lacks the resource: the driver builds it there (under the URL lock)
    with Cache().active() as c:
        st = run_gram(f"{mem}/serve.zarr", spec, f"{mem}/g.zarr", tile=8, cluster="threads")
    assert c.counts("resources")["built"] == 1
    assert [r["group"] for r in resource_store.stored(f"{mem}/serve.zarr")] == list(st.meta["resources"])
    assert st.meta["resources"] == want.meta["resources"]
    assert not location(f"{mem}/serve.zarr").exists(".lock")
    assert np.array_equal(st.view().block(), want.view().block())
    # a second run (fresh caches, as a new worker) loads it from the URL and builds nothing
    with Cache().active() as c:
        again = run_gram(f"{mem}/serve.zarr", spec, f"{mem}/g2.zarr", tile=8, cluster="sequential")
    assert c.counts("resources").get("built", 0) == 0 and c.counts("resources")["loads"] >= 1
    assert np.array_equal(again.view().block(), want.view().block())


def test_memory_urls_are_refused_for_worker_processes_before_any_work(mem, cluster_file):
    with pytest.raises(StoreError, match=r"memory:///fsx-\w+/c\.zarr lives in this process's memory.*--cluster threads"):
        run_gram(f"{mem}/c.zarr", SST, f"{mem}/g.zarr", tile=TILE, cluster=Runtime("local", cluster_file))
    assert not location(f"{mem}/g.zarr").exists()


def test_evaluate_reads_a_url_store_given_a_folds_directory(corpus, tmp_path, capsys, monkeypatch):
    from gramtile.pipeline.learn.sources import store_labels
    from gramtile.workflows.cli import main

    monkeypatch.chdir(tmp_path)  # a URL mistaken for a relative path would land here, and be seen

    out = f"file://{tmp_path}/g.zarr"
    run_gram(f"file://{corpus}", SST, out, tile=TILE, cluster="sequential")
    local = run_gram(corpus, SST, tmp_path / "local.zarr", tile=TILE, cluster="sequential")
    # labels come from the corpus store the provenance names: here its URL
    assert store_labels(GramStore.open(out)) == CorpusStore.open(corpus).labels
    # (the first NUM trees are all negative: k-fold needs two classes, so labels from a file)
    labels = tmp_path / "labels.txt"
    labels.write_text("".join(f"{'ab'[i % 2]}\n" for i in range(N)))
    # fold files live beside the store by default: at a URL the command asks for a local directory
    assert main(["evaluate", "--gram", out, "--folds", "3", "--labels", str(labels)]) == 2
    assert "pass --folds-dir DIR" in capsys.readouterr().err
    tables = []
    for gram in (out, str(local.path)):
        assert main(["evaluate", "--gram", gram, "--folds", "3", "--C", "1", "--folds-dir", str(tmp_path / "folds"),
                     "--labels", str(labels)]) == 0
        tables.append(capsys.readouterr().out)
    assert tables[0] == tables[1] and "accuracy" in tables[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folds", "g.zarr", "labels.txt", "local.zarr"]


def test_train_from_url_stores_gives_the_local_model(tmp_path):
    from gramtile.pipeline.learn.models import SavedModel
    from gramtile.pipeline.learn.training import train_from_store
    from gramtile.workflows.cli import main

    trees = num_trees(6000)  # the file is sorted by label: take both ends for two classes
    corpus = corpus_store_of(tmp_path / "two.zarr", trees[:50] + trees[-50:], 40)
    run_gram(f"file://{corpus}", SST, f"file://{tmp_path}/g.zarr", tile=TILE, cluster="sequential")
    run_gram(corpus, SST, tmp_path / "l.zarr", tile=TILE, cluster="sequential")
    assert main(["train", "--corpus", f"file://{corpus}", "--gram", f"file://{tmp_path}/g.zarr", "--kernel", SST,
                 "--out", str(tmp_path / "m")]) == 0
    m_url = SavedModel.load(tmp_path / "m")
    m_loc = train_from_store(corpus, [tmp_path / "l.zarr"], SST)
    assert m_url.provenance["corpus"] == f"file://{corpus}"  # the URL as given
    docs = CorpusStore.open(corpus).documents()
    assert [d.id for d in m_url.support] == [d.id for d in m_loc.support] and len(m_loc.support) > 0
    np.testing.assert_array_equal(m_url.kernel_to_support(docs[:30]), m_loc.kernel_to_support(docs[:30]))
    assert m_url.predict(docs).tolist() == m_loc.predict(docs).tolist()


@pytest.mark.parametrize("argv", [
    ["export", "STORE", "--out", "s3://bucket/K.npy"],
    ["run", "workflows/conll04_relations.yaml", "--out", "file:///tmp/never-here"],
    ["demo", "--out", "memory://demo"],
])
def test_commands_writing_local_files_refuse_a_url_out(argv, tmp_path, capsys, monkeypatch):
    from gramtile.workflows.cli import main

    monkeypatch.chdir(tmp_path)  # a URL taken as a relative path would create "s3:" etc. here
    argv = [str(tmp_path / "nothing.zarr") if a == "STORE" else a for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert argv[-1] in err and "only `gramtile gram --out` and `gramtile prepare --out` write to URLs" in err
    assert list(tmp_path.iterdir()) == []
