"""Relative store paths under a real Dask scheduler whose worker runs in another working
directory: the driver makes every path absolute before a task leaves it, for every command that
sends tasks (evaluate over a Gram store, evaluate --features, train, smo's --scratch). Before, the
worker resolved ``g.zarr`` against its own directory and the run failed with "not a gramtile Gram
store ... create it with `gramtile gram`". Real processes on 127.0.0.1, hard timeouts."""
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_integrity import BASE, ST, write_examples

from gramtile.workflows.cli import main

GRAMTILE = [sys.executable, "-m", "gramtile"]
DASK = str(Path(sys.executable).with_name("dask"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A `dask scheduler` and one `dask worker` started in a folder of their own, and a folder
    holding a corpus store, its Gram store and a feature store (named relatively from there)."""
    d = tmp_path_factory.mktemp("relative")
    elsewhere = d / "elsewhere"
    elsewhere.mkdir()
    work = d / "work"
    work.mkdir()
    write_examples(work / "d.jsonl", 40, 3)
    q = ["--cluster", "sequential", "--no-progress", "-q"]
    here = os.getcwd()
    os.chdir(work)
    try:
        assert main(["prepare", "--input", "d.jsonl", "--format", "jsonl", "--out", "c.zarr", *q]) == 0
        assert main(["gram", "--corpus", "c.zarr", "--kernel", BASE, "--out", "g.zarr", "--tile", "10", *q]) == 0
        assert main(["features", "--corpus", "c.zarr", "--kernel", ST, "--out", "f.zarr", "-q"]) == 0
    finally:
        os.chdir(here)
    addr = f"tcp://127.0.0.1:{_free_port()}"
    log = open(d / "dask.log", "w")
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", addr.rsplit(":", 1)[1],
                               "--no-dashboard"], cwd=elsewhere, stdout=log, stderr=subprocess.STDOUT)]
    procs.append(subprocess.Popen([DASK, "worker", addr, "--nthreads", "1", "--no-nanny", "--no-dashboard",
                                   "--host", "127.0.0.1"], cwd=elsewhere, stdout=log, stderr=subprocess.STDOUT))
    (work / "cluster.yaml").write_text(f"profiles:\n  shared: {{type: scheduler, address: '{addr}', timeout: 20}}\n")
    try:
        yield work
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=30)
        log.close()


def run_in(work: Path, argv, timeout=300):
    r = subprocess.run(GRAMTILE + [str(a) for a in argv] + ["--cluster", "shared", "--cluster-file", "cluster.yaml"],
                       cwd=work, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


@pytest.mark.parametrize("case", ["gram", "gram-smo-scratch", "features"])
def test_evaluate_with_relative_store_paths_on_a_worker_elsewhere(cluster, case, tmp_path):
    out = f"res-{case}"
    if case == "features":
        argv = ["evaluate", "--features", "f.zarr", "--model", "linear", "--folds", "2", "--out", out]
    else:
        argv = ["evaluate", "--gram", "g.zarr", "--kernel", ST, "--folds", "2", "--folds-dir", "folds", "--out", out]
        (cluster / "folds").mkdir(exist_ok=True)
    if case == "gram-smo-scratch":
        (cluster / "scratch").mkdir(exist_ok=True)
        argv += ["--solver", "smo", "--cache-mb", "0.001", "--scratch", "scratch"]
    t0 = time.time()
    rc, out_, err = run_in(cluster, argv)
    assert rc == 0, err[-2000:]
    assert (cluster / out / "results.json").is_file() and time.time() - t0 < 300


@pytest.mark.parametrize("case", ["gram", "gram-smo-scratch", "features"])
def test_train_with_relative_store_paths_on_a_worker_elsewhere(cluster, case):
    out = f"m-{case}"
    if case == "features":
        argv = ["train", "--features", "f.zarr", "--model", "linear", "--out", out]
    else:
        argv = ["train", "--corpus", "c.zarr", "--gram", "g.zarr", "--kernel", ST, "--out", out]
    if case == "gram-smo-scratch":
        (cluster / "scratch").mkdir(exist_ok=True)
        argv += ["--solver", "smo", "--cache-mb", "0.001", "--scratch", "scratch"]
    rc, _, err = run_in(cluster, argv)
    assert rc == 0, err[-2000:]
    assert (cluster / out / "manifest.json").is_file()
