"""A stopped worker does not stall a run: the scheduler drops a worker silent for the profile's
worker_ttl and its tasks are computed by the others, with the same matrix."""
import os
import signal

import numpy as np
import pytest
import yaml
from conftest import corpus_store_of, num_trees

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.runtime import Runtime

SST = {"kind": "sst", "lam": 0.4}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return corpus_store_of(tmp_path_factory.mktemp("c") / "c.zarr", num_trees(400), 100)


def test_a_sigstopped_worker_is_dropped_and_its_tiles_recomputed_elsewhere(corpus, tmp_path):
    ref = run_gram(corpus, SST, tmp_path / "seq.zarr", tile=25, cluster="sequential").view().block()
    cfile = tmp_path / "cluster.yaml"
    cfile.write_text(yaml.safe_dump({"profiles": {"ttl": {"type": "local", "n_workers": 2, "worker_ttl": 3,
                                                          "memory_limit": "1GiB"}}}))
    stopped = []

    def stop_first_worker(res):
        if not stopped:
            pid = int(res.worker.rsplit(":", 1)[1])
            if pid != os.getpid():
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)

    try:
        st = run_gram(corpus, SST, tmp_path / "g.zarr", tile=25, cluster=Runtime("ttl", cfile), on_tile=stop_first_worker)
    finally:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert stopped, "no worker was stopped: the test did not exercise the fault"
    assert st.complete
    assert np.array_equal(st.view().block(), ref)
    ends = [r for r in st.read_log() if r["event"] == "end"]
    assert ends and ends[-1]["seconds"] < 120  # Dask's default worker-ttl alone would wait 300 s
