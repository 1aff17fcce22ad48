"""The engine on a real ``dask scheduler`` with two ``dask worker`` processes on 127.0.0.1, reached
through the ``scheduler`` profile of a cluster file: equal to the sequential reference for tile
sizes that divide n and that do not, and unchanged when a worker is SIGKILLed mid-run."""
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_store_of, num_trees

import gramtile
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.runtime import Runtime

N = 700
SST = '{"kind": "sst", "lam": 0.4}'
DASK = str(Path(sys.executable).with_name("dask"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def docs():
    return num_trees(N)


@pytest.fixture(scope="module")
def corpus(docs, tmp_path_factory):
    return corpus_store_of(tmp_path_factory.mktemp("corpus") / "num700.zarr", docs, 200)


@pytest.fixture(scope="module")
def reference(docs):
    return gramtile.gram(SST, docs)


@pytest.fixture(scope="module")
def dask_cluster(tmp_path_factory):
    """A scheduler and two single-thread workers without nannies (a killed worker stays dead)."""
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    logs = tmp_path_factory.mktemp("dasklogs")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs = {"scheduler": subprocess.Popen(
        [DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        stdout=open(logs / "scheduler.log", "w"), stderr=subprocess.STDOUT, env=env)}
    for k in range(2):
        procs[f"worker{k}"] = subprocess.Popen(
            [DASK, "worker", addr, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host", "127.0.0.1",
             "--name", f"w{k}"],
            stdout=open(logs / f"worker{k}.log", "w"), stderr=subprocess.STDOUT, env=env)
    from distributed import Client

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with Client(addr, timeout=5) as c:
                    c.wait_for_workers(2, timeout=max(1, deadline - time.monotonic()))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        cfile = tmp_path_factory.mktemp("cluster") / "cluster.yaml"
        cfile.write_text(f"profiles:\n  scheduler: {{address: '{addr}'}}\n")
        yield {"address": addr, "cluster_file": cfile, "procs": procs, "logs": logs}
    finally:
        # workers first: a worker whose scheduler is gone waits to reconnect before it exits
        for name in sorted(procs, key=lambda k: k == "scheduler"):
            p = procs[name]
            if p.poll() is None:
                p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.mark.parametrize("tile", [100, 77])
def test_real_scheduler_equals_sequential_and_in_memory(corpus, reference, dask_cluster, tmp_path, tile):
    seq = run_gram(corpus, SST, tmp_path / "seq.zarr", tile=tile, cluster="sequential")
    dist = run_gram(corpus, SST, tmp_path / "dist.zarr", tile=tile, cluster=Runtime("scheduler", dask_cluster["cluster_file"]))
    assert np.array_equal(seq.view().block(), dist.view().block())
    assert np.array_equal(seq.view().diag()[1], dist.view().diag()[1])
    assert np.allclose(dist.view().block(), reference, rtol=1e-12, atol=0)
    workers = {r["worker"] for r in dist.read_log() if r["event"] == "tile"}
    pids = {str(p.pid) for k, p in dask_cluster["procs"].items() if k.startswith("worker")}
    assert {w.rsplit(":", 1)[1] for w in workers} <= pids and len(workers) == 2


def test_worker_sigkilled_mid_run_changes_nothing(corpus, reference, dask_cluster, tmp_path):
    victim = dask_cluster["procs"]["worker1"]
    seen = []

    def kill_after_some(res):
        seen.append(res.worker)
        if len(seen) == 8:
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait()

    st = run_gram(corpus, SST, tmp_path / "killed.zarr", tile=50, cluster=Runtime("scheduler", dask_cluster["cluster_file"]), on_tile=kill_after_some,
                  max_in_flight=4)
    assert victim.returncode == -signal.SIGKILL
    assert st.complete
    assert np.allclose(st.view().block(), reference, rtol=1e-12, atol=0)
    seq = run_gram(corpus, SST, tmp_path / "seq.zarr", tile=50, cluster="sequential")
    assert np.array_equal(st.view().block(), seq.view().block())
    # after the kill, only the surviving worker finished tiles (a couple may have been in flight)
    late = {w.rsplit(":", 1)[1] for w in seen[12:]}
    assert late == {str(dask_cluster["procs"]["worker0"].pid)}
    assert str(victim.pid) in {w.rsplit(":", 1)[1] for w in seen[:8]}
    tiles = [tuple(r["tile"]) for r in st.read_log() if r["event"] == "tile"]
    assert len(tiles) == len(set(tiles)) == len(st.grid().tiles())
