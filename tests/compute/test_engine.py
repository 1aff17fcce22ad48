"""The tiled engine end to end: sequential = Dask LocalCluster = in-memory gram(), for tile sizes
that divide n and that do not; cluster.yaml edits never change a stored number or hash; a driver
SIGKILLed mid-run resumes computing only the missing tiles; the CLI commands."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import corpus_store_of, num_trees, stop_after

import gramtile
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.tiles import Tile

N = 700
SST = '{"kind": "sst", "lam": 0.4}'
GRAMTILE = [sys.executable, "-m", "gramtile"]


@pytest.fixture(scope="module")
def docs():
    return num_trees(N)


@pytest.fixture(scope="module")
def corpus(docs, tmp_path_factory):
    # shards of 256 so that tiles straddle shard boundaries
    return corpus_store_of(tmp_path_factory.mktemp("corpus") / "num700.zarr", docs, 256)


@pytest.fixture(scope="module")
def reference(docs):
    return gramtile.gram(SST, docs)


@pytest.fixture(scope="module")
def cluster_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("cluster") / "cluster.yaml"
    p.write_text("profiles:\n  local: {n_workers: 2, threads_per_worker: 1, memory_limit: 1GiB, dashboard_address: ':0'}\n")
    return p


@pytest.fixture(scope="module")
def local_client(cluster_file):
    with Runtime("local", cluster_file) as rt, rt.session() as ex:
        yield ex.client


def _meta_without_times(st):
    m = dict(st.meta)
    m.pop("created")
    m.pop("updated")
    m.pop("uid")
    m.pop("run")  # the id of the run that last took the store (fences older runs' tasks)
    m.pop("attr_sha256", None)  # the sha256 of the attribute, times and uid included
    return m


@pytest.mark.parametrize("tile", [100, 77])
def test_sequential_equals_local_cluster_equals_in_memory(corpus, reference, local_client, tmp_path, tile):
    seq = run_gram(corpus, SST, tmp_path / "seq.zarr", tile=tile, cluster="sequential")
    dsk = run_gram(corpus, SST, tmp_path / "dask.zarr", tile=tile, cluster=Runtime(client=local_client))
    Ks, Kd = seq.view().block(), dsk.view().block()
    assert np.array_equal(Ks, Kd)
    assert np.array_equal(seq.view().diag()[0], dsk.view().diag()[0])
    assert np.allclose(Ks, reference, rtol=1e-12, atol=0)
    assert _meta_without_times(seq) == _meta_without_times(dsk)
    # the Dask tiles really ran on the worker processes, and each tile once
    tiles = [r for r in dsk.read_log() if r["event"] == "tile"]
    assert len({r["worker"] for r in tiles}) == 2
    assert sorted(tuple(r["tile"]) for r in tiles) == sorted(map(tuple, dsk.grid().tiles()))
    assert all(r["worker"] != f"{os.uname().nodename}:{os.getpid()}" for r in tiles)


def test_editing_cluster_yaml_never_changes_numbers_or_hashes(corpus, reference, tmp_path):
    small = tmp_path / "cluster.yaml"
    small.write_text("profiles:\n  local: {n_workers: 1, threads_per_worker: 2, memory_limit: 1GiB, "
                     "dashboard_address: ':0'}\n")
    a = run_gram(corpus, SST, tmp_path / "a.zarr", rows="0:300", tile=64, cluster=Runtime("local", small))
    b = run_gram(corpus, SST, tmp_path / "b.zarr", rows="0:300", tile=64, cluster="sequential")
    assert np.array_equal(a.view().block(), b.view().block())
    assert np.allclose(a.view().block(), reference[:300, :300], rtol=1e-12, atol=0)
    assert _meta_without_times(a) == _meta_without_times(b)
    # the store made under one profile is resumed under another without a mismatch (nothing to do)
    again = run_gram(corpus, SST, tmp_path / "a.zarr", rows="0:300", cluster="sequential")
    assert again.kernel_hash == a.kernel_hash
    ends = [r for r in again.read_log() if r["event"] == "end"]
    assert ends[-1]["tiles_computed"] == 0


def test_threads_profile_computes_tiles_in_the_driver_process_with_identical_K(corpus, reference, tmp_path):
    st = run_gram(corpus, SST, tmp_path / "t.zarr", rows="0:300", tile=64, cluster="threads")
    seq = run_gram(corpus, SST, tmp_path / "s.zarr", rows="0:300", tile=64, cluster="sequential")
    assert np.array_equal(st.view().block(), seq.view().block())  # bitwise, 64 does not divide 300
    assert np.allclose(st.view().block(), reference[:300, :300], rtol=1e-12, atol=0)
    log = st.read_log()
    assert [r["executor"] for r in log if r["event"] == "start"] == ["threads"]
    workers = {r["worker"] for r in log if r["event"] == "tile"}
    assert workers == {f"{os.uname().nodename}:{os.getpid()}"}  # worker threads of this process


def test_threads_executor_needs_no_dask_cluster(corpus, tmp_path):
    # the point of the executor: a `threads` run imports neither distributed nor starts a cluster
    code = ("import sys\nfrom gramtile.pipeline.compute.engine import run_gram\n"
            f"run_gram({str(corpus)!r}, {SST!r}, {str(tmp_path / 'g.zarr')!r}, rows='0:120', tile=50, "
            "cluster='threads')\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'distributed'))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env={**os.environ, "GRAMTILE_CLUSTER_FILE": ""})
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "[]"
    assert GramStore.open(tmp_path / "g.zarr").complete


def test_threads_run_stopped_by_an_error_keeps_its_done_tiles_and_resumes(corpus, reference, tmp_path):
    out = tmp_path / "stop.zarr"
    stop_after_three, seen = stop_after(3)
    with pytest.raises(RuntimeError, match="stop here"):
        run_gram(corpus, SST, out, rows="0:300", tile=40, cluster="threads", on_tile=stop_after_three)
    st = GramStore.open(out)
    done = {t for t in st.grid().tiles() if st.done_mask()[t.i, t.j]}
    assert done == set(seen)  # exactly the recorded tiles, nothing the interrupted run left in flight
    again = run_gram(corpus, SST, out, rows="0:300", cluster="threads")
    ends = [r for r in again.read_log() if r["event"] == "end"]
    assert ends[-1]["tiles_computed"] == len(st.grid().tiles()) - 3
    assert np.allclose(again.view().block(), reference[:300, :300], rtol=1e-12, atol=0)


def test_local_profile_with_thread_workers_still_runs_on_dask(corpus, reference, tmp_path):
    f = tmp_path / "cluster.yaml"
    f.write_text("profiles:\n  dask-threads: {type: local, n_workers: 2, processes: false, dashboard_address: ':0'}\n")
    st = run_gram(corpus, SST, tmp_path / "d.zarr", rows="0:150", tile=64, cluster=Runtime("dask-threads", f))
    assert [r["executor"] for r in st.read_log() if r["event"] == "start"] == ["dask"]
    assert np.allclose(st.view().block(), reference[:150, :150], rtol=1e-12, atol=0)


def _tile_lines(store):
    p = store / "log" / "records.jsonl"
    if not p.exists():
        return 0
    return sum('"event": "tile"' in line for line in p.read_text().splitlines())


def test_driver_killed_mid_run_resumes_only_missing_tiles(corpus, reference, tmp_path, capsys):
    out = tmp_path / "killed.zarr"
    cmd = GRAMTILE + ["gram", "--corpus", str(corpus), "--kernel", SST, "--out", str(out), "--tile", "35",
                      "--cluster", "sequential", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while _tile_lines(out) < 20 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    st = GramStore.open(out)
    done_before = {t for t in st.grid().tiles() if st.done_mask()[t.i, t.j]}
    total = len(st.grid().tiles())
    assert 20 <= len(done_before) < total
    assert (out / "gramtile.lock").exists()  # left behind by the killed driver: stale, taken over

    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    log = GramStore.open(out).read_log()
    runs = [r["run"] for r in log if r["event"] == "start"]
    assert len(runs) == 2
    rerun = [Tile(*r["tile"]) for r in log if r["event"] == "tile" and r["run"] == runs[1]]
    assert len(rerun) == len(set(rerun))
    assert set(rerun) == set(st.grid().tiles()) - done_before
    st = GramStore.open(out)
    assert st.complete
    assert np.allclose(st.view().block(), reference, rtol=1e-12, atol=0)

    # the CLI around the finished store (in-process: the same entry point as the script)
    from gramtile.workflows.cli import main

    assert main(["status", str(out)]) == 0
    s = capsys.readouterr().out
    assert f"{total}/{total} tiles done" in s and st.kernel_hash in s
    assert main(["verify", str(out)]) == 0 and "0 bad" in capsys.readouterr().out
    npy = tmp_path / "K.npy"
    assert main(["export", str(out), "--out", str(npy), "--normalized"]) == 0
    assert np.array_equal(np.load(npy), st.view().block(normalized=True))


def test_cli_gram_rectangular_selection_file_and_errors(corpus, reference, tmp_path):
    sel = tmp_path / "test.txt"
    sel.write_text("\n".join(str(i) for i in (650, 3, 699, 10)) + "\n")
    out = tmp_path / "rect.zarr"
    from gramtile.workflows.cli import main

    assert main(["gram", "--corpus", str(corpus), "--kernel", SST, "--out", str(out), "--rows", f"@{sel}",
                 "--cols", "0:150", "--tile", "64", "--cluster", "sequential", "--no-progress"]) == 0
    st = GramStore.open(out)
    assert np.allclose(st.view().block(), reference[np.ix_([650, 3, 699, 10], np.arange(150))], rtol=1e-12, atol=0)
    # a mismatched rerun is a clear error (exit status 2), and the store is untouched
    r = subprocess.run(GRAMTILE + ["gram", "--corpus", str(corpus), "--kernel", '{"kind": "st"}', "--out", str(out),
                                   "--rows", f"@{sel}", "--cols", "0:150", "--cluster", "sequential"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "StoreMismatch" not in r.stderr and "new --out" in r.stderr
    r = subprocess.run(GRAMTILE + ["export", str(tmp_path / "nothing.zarr"), "--out", str(tmp_path / "x.npy")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "not a gramtile Gram store" in r.stderr


def test_script_entry_exits_fast_without_losing_output(corpus, tmp_path, capsys):
    """`python -m gramtile` / the console script skip interpreter finalisation (os._exit) after
    flushing: block-buffered output to a pipe must still arrive whole, and exit statuses too."""
    from gramtile.workflows.cli import main

    out = tmp_path / "small.zarr"
    assert main(["gram", "--corpus", str(corpus), "--kernel", SST, "--out", str(out), "--rows", "0:40",
                 "--tile", "16", "--cluster", "sequential", "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["status", str(out)]) == 0
    expected = capsys.readouterr().out
    assert "6/6 tiles done" in expected
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # a pipe is block-buffered then
    r = subprocess.run(GRAMTILE + ["status", str(out)], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout == expected
    r = subprocess.run(GRAMTILE + ["status", str(tmp_path / "none.zarr")], capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "gramtile status: error" in r.stderr


def test_cli_gram_input_jsonl_is_prepared_on_the_fly(docs, reference, tmp_path):
    from gramtile.pipeline.readers.jsonl import write_jsonl
    from gramtile.workflows.cli import main

    src = tmp_path / "trees.jsonl"
    write_jsonl(docs[:90], src)
    out = tmp_path / "fly.zarr"
    args = ["gram", "--input", str(src), "--kernel", SST, "--out", str(out), "--tile", "40",
            "--cluster", "sequential", "--no-progress"]
    assert main(args) == 0
    assert (tmp_path / "fly.zarr.corpus.zarr" / "zarr.json").exists()
    assert np.allclose(GramStore.open(out).view().block(), reference[:90, :90], rtol=1e-12, atol=0)
    assert main(args) == 0  # rerun: corpus reused, no tile recomputed
    assert [r["tiles_computed"] for r in GramStore.open(out).read_log() if r["event"] == "end"] == [6, 0]
