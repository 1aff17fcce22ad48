"""Recipe workflows learn through the fit-level task runner on the run's cluster profile (issue 15):
the WSD workflow (alternatives x outer folds x inner split x C, then one fit per outer fold) and
the TREC QC HDAG workflow (each grid point's folds x C) and the INEX selection (each variant x C)
give the serial run's results.json on the threads pool and on a LocalCluster of worker processes. Real senseval instances and TREC
questions, real Gram stores, real Dask."""
import json

import numpy as np
import pytest
import yaml
from conftest import require_data
from test_inex_workflow import small_workflow as small_inex
from test_qc_hdag_workflow import small_workflow

from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.sources import ArrayKernelSource
from gramtile.workflows.recipes.wsd import learn
from gramtile.workflows.runner import load_workflow, run_workflow

#: result fields that are timings (they differ between any two runs)
TIMES = ("learn_seconds", "gram_seconds", "gram_cpu_seconds", "selection_seconds", "tiles_computed")

WSD = {
    "name": "wsd_parallel",
    "recipe": "gramtile.workflows.recipes.wsd:run",
    "data": "${SHARED}/senseval_hard_line_serve",
    "words": ["line"],
    "subsample": 150,
    "kernels": {
        "BOW": {"kind": "normalized", "kernel": {"kind": "bow", "rep": "seq", "on": "tokens"}},
        "K_Domain": {"kind": "domain", "dims": 20},
        "K_Select": {"select": [{"kind": "domain", "dims": 20},
                                {"kind": "normalized", "kernel": {"kind": "bow", "rep": "seq", "on": "tokens"}},
                                {"kind": "normalized", "kernel": {"kind": "sum", "kernels": [
                                    {"weight": 1, "kernel": {"kind": "domain", "dims": 20}},
                                    {"weight": 1, "kernel": {"kind": "normalized", "kernel": {
                                        "kind": "bow", "rep": "seq", "on": "tokens"}}}]}}]},
    },
    "protocol": {"folds": 3, "seed": 0, "C": [0.1, 1, 10], "inner_folds": 3, "inner_splits": 2},
}


def _untimed(path):
    rows = json.loads(path.read_text())
    for r in rows:
        for k in TIMES:
            r.pop(k, None)
    return rows


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    d = tmp_path_factory.mktemp("profiles")
    f = d / "cluster.yaml"
    f.write_text(yaml.safe_dump({"profiles": {"two": {"type": "local", "n_workers": 2, "memory_limit": "1.5GiB"}}}))
    return f


def test_wsd_results_on_threads_and_worker_processes_equal_the_serial_run(tmp_path, two):
    require_data("senseval_hard_line_serve")
    wf = tmp_path / "wsd.yaml"
    wf.write_text(yaml.safe_dump(WSD, sort_keys=False))
    out = tmp_path / "run"
    run_workflow(wf, out, cluster="sequential")
    serial = _untimed(out / "results.json")
    # the stores are reused: only the learning runs again, on each profile
    run_workflow(wf, out, cluster="threads")
    threads = _untimed(out / "results.json")
    run_workflow(wf, out, cluster=Runtime("two", two))
    procs = _untimed(out / "results.json")
    assert [r["kernel"] for r in serial] == ["BOW", "K_Domain", "K_Select"]
    sel = serial[-1]
    assert len(sel["alternative"]) == 3 and len(sel["C"]) == 3 and set(sel["C"]) <= {0.1, 1.0, 10.0}
    assert threads == serial
    assert procs == serial


def test_wsd_learn_equals_the_fold_by_fold_choice(tmp_path):
    """learn() (all fits as tasks, two waves) against the recipe's own serial choice, fold by fold."""
    from gramtile.workflows.recipes.wsd import choose

    rng = np.random.default_rng(3)
    labels = [str(v) for v in rng.integers(0, 3, 90)]
    X = rng.normal(size=(90, 6))
    X[:, 0] += np.array([float(v) for v in labels])
    noise = rng.normal(size=(90, 4))
    good, bad = ArrayKernelSource(X @ X.T), ArrayKernelSource(noise @ noise.T)  # bad knows nothing of the labels
    splits = stratified_kfold(labels, 3, 0)
    p = {"C": [0.1, 1.0, 10.0], "inner_folds": 3, "inner_splits": 2, "seed": 0, "class_weight": None,
         "multiclass": "ovr"}
    got = learn({"sel": [bad, good], "one": [good], "dup": [good, good]}, labels, splits, p, cluster="threads")
    assert got["dup"]["alternative"] == [0, 0, 0]  # a tie goes to the earlier alternative
    assert got["dup"]["accuracy"] == got["one"]["accuracy"]
    for f, sp in enumerate(splits):
        assert (got["sel"]["alternative"][f], got["sel"]["C"][f]) == choose([bad, good], labels, sp.train, p)
        assert got["one"]["C"][f] == choose([good], labels, sp.train, p)[1]
    assert got["one"]["accuracy"] > 0.5


def test_qc_hdag_results_on_worker_processes_equal_the_serial_run(tmp_path, two):
    path = small_workflow(tmp_path)
    run_workflow(load_workflow(path), tmp_path / "serial", cluster="sequential")
    run_workflow(load_workflow(path), tmp_path / "procs", cluster=Runtime("two", two))
    serial, procs = _untimed(tmp_path / "serial" / "results.json"), _untimed(tmp_path / "procs" / "results.json")
    assert [r["kernel"] for r in serial] == ["BOW", "HDAG", "HDAG (p=1)", "HDAG (p=2)"]
    assert procs == serial


def test_inex_selection_on_worker_processes_equals_the_serial_run(tmp_path, two):
    path = small_inex(tmp_path)
    run_workflow(load_workflow(path), tmp_path / "serial", cluster="sequential")
    run_workflow(load_workflow(path), tmp_path / "procs", cluster=Runtime("two", two))
    for f in ("results.json", "selection.json"):
        serial, procs = _untimed(tmp_path / "serial" / f), _untimed(tmp_path / "procs" / f)
        assert procs == serial, f
    assert len(serial) > 8 and any("valid_accuracy" in t for t in serial)  # selection.json: every trial
