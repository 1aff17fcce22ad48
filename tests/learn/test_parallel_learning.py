"""Learning fits as tasks on a cluster (issue 15): `gramtile evaluate` / `train` on the threads
pool and on a LocalCluster of worker processes give the serial run's results exactly (same C
chosen, same predictions, same results.json), for both solvers; a worker killed during a fit
costs a retry, not a different result; bad caches, unfinished and recreated stores are clear
errors, and a failed `train` leaves no model directory behind. Real NUM trees and TREC QC
questions, real Gram stores, real Dask."""
import itertools
import json
import os
import shutil
import threading
import time

import numpy as np
import pytest
import yaml
from conftest import corpus_store_of, num_trees, require_data

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.crossval import evaluate
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.models import SavedModel
from gramtile.pipeline.learn.parallel import source_ref
from gramtile.pipeline.learn.sources import open_gram_source, store_labels
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.cli import main

SST = {"kind": "sst", "lam": 0.4}
ST = {"kind": "st", "lam": 0.4}
SUM = {"kind": "sum", "kernels": [{"weight": 0.5, "kernel": {"kind": "normalized", "kernel": SST}},
                                  {"weight": 2.0, "kernel": {"kind": "normalized", "kernel": ST}}]}
GRCT = {"kind": "sst", "lam": 0.4, "rep": "grct"}


@pytest.fixture(scope="module")
def num(tmp_path_factory):
    every = num_trees(5483)
    docs = [every[i] for i in np.random.default_rng(0).permutation(len(every))[:500]]  # the file is class-sorted
    d = tmp_path_factory.mktemp("num")
    corpus = corpus_store_of(d / "c.zarr", docs, 100)
    for name, spec in (("sst", SST), ("st", ST)):
        run_gram(corpus, json.dumps(spec), d / f"{name}.zarr", tile=100, cluster="sequential")
    (d / "cluster.yaml").write_text(yaml.safe_dump({"profiles": {"two": {"type": "local", "n_workers": 2,
                                                                         "memory_limit": "1.5GiB"}}}))
    return d


@pytest.fixture(scope="module")
def qc(tmp_path_factory):
    docs = list(itertools.islice(read(require_data("trec_qc_kelp_trees") / "train_5500.coarse.klp.gz", "kelp"),
                                 2000))
    docs = [docs[i] for i in np.random.default_rng(1).permutation(len(docs))[:300]]
    for doc in docs:
        doc.structures = {"grct": doc.structures["grct"]}
    d = tmp_path_factory.mktemp("qc")
    corpus = corpus_store_of(d / "c.zarr", docs, 100)
    run_gram(corpus, json.dumps(GRCT), d / "g.zarr", tile=100, cluster="sequential")
    return d


def _evaluate(num, out, *extra):
    args = ["evaluate", "--gram", str(num / "sst.zarr"), "--gram", str(num / "st.zarr"), "--kernel", json.dumps(SUM),
            "--folds", "4", "--C", "0.1,1,10", "--inner-folds", "2", "--out", str(out), "--no-progress", *extra]
    assert main(args) == 0
    return json.loads((out / "results.json").read_text())


@pytest.mark.parametrize("solver", ["libsvm", "smo"])
def test_evaluate_on_threads_and_on_worker_processes_equals_the_serial_run(num, tmp_path, solver, capsys):
    extra = ["--solver", solver] + (["--cache-mb", "2"] if solver == "smo" else [])
    serial = _evaluate(num, tmp_path / "serial", *extra)
    assert f"solver {solver}" in capsys.readouterr().err
    assert serial["solver"]["used"] == solver and serial["rows"][0]["C_chosen"]
    threads = _evaluate(num, tmp_path / "threads", *extra, "--cluster", "threads")
    procs = _evaluate(num, tmp_path / "procs", *extra, "--cluster", "two", "--cluster-file", str(num / "cluster.yaml"))
    for res in (threads, procs):
        # the budget is measured at start (and split among threads), and the learning phase's wall
        # time: the only fields that may differ
        assert res.pop("solver")["used"] == serial["solver"]["used"]
        assert res.pop("timing")["learn_seconds"] > 0
    serial.pop("solver")
    serial.pop("timing")
    assert threads == serial
    assert procs == serial


def test_the_solvers_agree_through_the_command(num, tmp_path):
    lib = _evaluate(num, tmp_path / "lib", "--solver", "libsvm")
    smo = _evaluate(num, tmp_path / "smo", "--solver", "smo")
    assert lib["rows"][0]["C_chosen"] == smo["rows"][0]["C_chosen"]
    (key, a), = lib["predictions"].items()
    b = smo["predictions"][key]
    assert np.mean(np.array(a["predicted"]) == np.array(b["predicted"])) >= 0.999
    assert lib["rows"][0]["accuracy"] == smo["rows"][0]["accuracy"]


def test_auto_takes_smo_when_the_training_block_exceeds_the_budget(num, tmp_path, capsys):
    res = _evaluate(num, tmp_path / "auto", "--memory-mb", "1", "--cache-mb", "2")
    err = capsys.readouterr().err
    assert res["solver"]["requested"] == "auto" and res["solver"]["used"] == "smo"
    assert "solver smo (auto)" in err and "over the 1 MB budget" in err
    res = _evaluate(num, tmp_path / "auto2")
    assert res["solver"]["used"] == "libsvm"


def test_train_one_vs_rest_smo_in_parallel_equals_serial_and_predicts_as_libsvm(qc, tmp_path):
    base = ["train", "--corpus", str(qc / "c.zarr"), "--gram", str(qc / "g.zarr"), "--kernel", json.dumps(GRCT),
            "--C", "1"]
    assert main(base + ["--solver", "smo", "--cache-mb", "1", "--out", str(tmp_path / "serial")]) == 0
    assert main(base + ["--solver", "smo", "--cache-mb", "1", "--cluster", "threads",
                        "--out", str(tmp_path / "threads")]) == 0
    assert main(base + ["--solver", "libsvm", "--out", str(tmp_path / "lib")]) == 0
    a, b = (json.loads((tmp_path / n / "model.json").read_text()) for n in ("serial", "threads"))
    assert a["functions"] == b["functions"] and a["support_ids"] == b["support_ids"]
    assert a["scheme"] == "ovr" and len(a["classes"]) == 6 and a["params"]["solver"]["used"] == "smo"
    smo, lib = SavedModel.load(tmp_path / "serial"), SavedModel.load(tmp_path / "lib")
    test = [d for d in read(require_data("trec_qc_kelp_trees") / "TREC_10.coarse.klp.gz", "kelp")][:200]
    p_smo, p_lib = smo.predict(test), lib.predict(test)
    assert np.mean(p_smo == p_lib) >= 0.995  # tol 1e-3 on both sides (a test question may sit on a boundary)
    gold = np.array([d.label for d in test])
    assert abs(np.mean(p_smo == gold) - np.mean(p_lib == gold)) <= 0.005


def test_a_worker_killed_during_a_fit_is_retried_with_identical_results(num, tmp_path):
    distributed = pytest.importorskip("distributed")
    src = open_gram_source(num / "sst.zarr", normalized=True)
    labels = store_labels(src.store)
    folds = stratified_kfold(labels, 6, seed=0)
    kw = dict(C=[0.1, 1.0, 10.0], select="nested", inner_folds=2, solver="smo")
    serial = evaluate(src, labels, folds, cluster=Runtime("sequential", cache_mb=2.0), **kw)
    killed = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  memory_limit="1.5GiB") as cluster, distributed.Client(cluster) as client:
        pids = client.run(os.getpid)
        stop = threading.Event()

        def kill_one():
            while not stop.is_set() and not killed:
                busy = [w for w, tasks in client.processing().items() if tasks]
                if busy:  # a fit is running there
                    os.kill(pids[busy[0]], 9)
                    killed.append(busy[0])
                time.sleep(0.01)

        t = threading.Thread(target=kill_one, daemon=True)
        t.start()
        try:
            par = evaluate(src, labels, folds, cluster=Runtime(client=client, cache_mb=2.0), **kw)
        finally:
            stop.set()
            t.join()
    assert killed, "no worker was killed: the test did not exercise the fault"
    assert par.rows == serial.rows and par.fold_rows == serial.fold_rows
    for key, (idx, pred) in serial.predictions.items():
        assert np.array_equal(par.predictions[key][0], idx) and np.array_equal(par.predictions[key][1], pred)


def test_a_cache_smaller_than_two_rows_is_refused_naming_the_option(num, tmp_path, capsys):
    args = ["evaluate", "--gram", str(num / "sst.zarr"), "--folds", "4", "--solver", "smo", "--cache-mb", "0.005",
            "--no-progress"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--cache-mb" in err and "fewer than two kernel rows" in err and "or more" in err


def test_an_unfinished_store_is_refused_naming_gramtile_gram(num, tmp_path, capsys):
    corpus = num / "c.zarr"
    st = run_gram(corpus, json.dumps(SST), tmp_path / "part.zarr", tile=100, cluster="sequential")
    st = GramStore.open(st.path, mode="r+")
    st.clear_done([next(t for t in st.grid().tiles() if t.i == 1 and t.j == 3)])
    for cmd in (["evaluate", "--gram", str(st.path), "--folds", "4", "--no-progress"],
                ["train", "--corpus", str(corpus), "--gram", str(st.path), "--kernel", json.dumps(SST), "--solver",
                 "smo", "--out", str(tmp_path / "m")]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert "is incomplete" in err and "`gramtile gram`" in err and "gramtile status" in err
    assert not (tmp_path / "m").exists()  # nothing written for the failed train


def test_a_store_recreated_under_a_running_evaluation_is_refused(num, tmp_path):
    corpus = num / "c.zarr"
    path = tmp_path / "g.zarr"
    run_gram(corpus, json.dumps(SST), path, tile=100, cluster="sequential")
    ref = source_ref(open_gram_source(path))  # what the driver sends with every task
    shutil.rmtree(path)
    run_gram(corpus, json.dumps(ST), path, tile=100, cluster="sequential")
    with pytest.raises(EvaluationError, match="not the store this run started from.*recreated since"):
        ref.open()  # what a worker does


def test_a_model_directory_appears_only_complete(qc, tmp_path):
    base = ["train", "--corpus", str(qc / "c.zarr"), "--gram", str(qc / "g.zarr"), "--kernel", json.dumps(GRCT)]
    out = tmp_path / "model"
    assert main(base + ["--solver", "smo", "--cache-mb", "0.001", "--out", str(out)]) == 2  # fails before saving
    assert not out.exists() and not list(tmp_path.iterdir())
    assert main(base + ["--out", str(out)]) == 0
    first = (out / "model.json").read_text()
    assert main(base + ["--C", "10", "--out", str(out)]) == 2  # an existing model is kept without --overwrite
    assert (out / "model.json").read_text() == first
    assert main(base + ["--C", "10", "--out", str(out), "--overwrite"]) == 0  # a model is replaced whole
    assert (out / "model.json").read_text() != first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temporary directory left
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    assert main(base + ["--out", str(other)]) == 2
    assert main(base + ["--out", str(other), "--overwrite"]) == 2  # never into a folder that is not a model's
    assert (other / "keep.txt").read_text() == "mine"


# ---- every fit a task (session 7) ------------------------------------------------------------------

def _same(a, b):
    assert a.rows == b.rows and a.fold_rows == b.fold_rows
    assert a.predictions.keys() == b.predictions.keys()
    for key, (idx, pred) in a.predictions.items():
        assert np.array_equal(b.predictions[key][0], idx) and np.array_equal(b.predictions[key][1], pred)


@pytest.fixture(scope="module")
def client(num):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  memory_limit="1.5GiB") as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.mark.parametrize("solver", ["libsvm", "smo"])
@pytest.mark.parametrize("select", ["test", "nested"])
@pytest.mark.parametrize("fixed", [True, False], ids=["fixed-split", "k-fold"])
def test_fits_on_threads_and_worker_processes_equal_the_serial_run(num, client, solver, select, fixed):
    from gramtile.pipeline.learn.folds import fixed_split

    src = open_gram_source(num / "sst.zarr", normalized=True)
    labels = store_labels(src.store)
    splits = [fixed_split(np.arange(0, 350), np.arange(350, 500), 500)] if fixed else \
        stratified_kfold(labels, 3, seed=1)
    kw = dict(C=[0.1, 1.0, 10.0], select=select, inner_folds=3, solver=solver)
    serial = evaluate(src, labels, splits, cluster=Runtime("sequential", cache_mb=2.0), **kw)
    _same(serial, evaluate(src, labels, splits, cluster=Runtime("threads", cache_mb=2.0), **kw))
    _same(serial, evaluate(src, labels, splits, cluster=Runtime(client=client, cache_mb=2.0), **kw))
    if select == "nested":
        assert len(serial.rows) == 1 and len(serial.rows[0]["C_chosen"].split(",")) == len(splits)
    else:
        assert [r["C"] for r in serial.rows] == [0.1, 1.0, 10.0]


def test_a_fixed_split_is_many_tasks_each_naming_the_store_not_its_values(num, monkeypatch):
    """One split with 3 C and nested 3-fold selection: 9 inner fits, then 1 added when they are in
    (libsvm: one task per
    fit, its classes inside SVC); smo: one task per (split, one-vs-rest class) along the C grid.
    A task pickles to a few kB (indices and store paths), far below its blocks. With enough
    training parts for the workers (4 folds, 2 threads), the fits of one part are one task."""
    import pickle

    from gramtile.pipeline.learn import fits as fits_module
    from gramtile.pipeline.learn.folds import fixed_split

    src = open_gram_source(num / "sst.zarr", normalized=True)
    labels = store_labels(src.store)
    split = [fixed_split(np.arange(0, 350), np.arange(350, 500), 500)]
    waves, real = [], fits_module.run_tasks

    def spy(fn, tasks, **kw):
        # the tasks given, then the ones on_done adds as results come in (the split's final fit,
        # once its inner fits are in), as a second list
        waves.append(list(tasks))
        on_done = kw.pop("on_done")

        def added(i, r):
            more = on_done(i, r)
            if more:
                if len(waves) < 2:
                    waves.append([])
                waves[1].extend(more)
            return more

        return real(fn, tasks, on_done=added, **kw)

    monkeypatch.setattr(fits_module, "run_tasks", spy)
    for solver, want in (("libsvm", [9, 1]), ("smo", [3, 1])):
        waves.clear()
        evaluate(src, labels, split, C=[0.1, 1.0, 10.0], select="nested", solver=solver,
                 cluster=Runtime("threads", cache_mb=2.0))
        assert [len(w) for w in waves] == want
        for t in waves[0] + waves[1]:
            assert t.ref.local is None and t.ref.stores[0].path == str(src.store.path)
            assert len(pickle.dumps(t)) < 20_000 < 8 * t.train.size ** 2
    waves.clear()
    evaluate(src, labels, split, C=[0.1, 1.0, 10.0, 100.0], solver="libsvm", cluster="threads")
    assert [len(w) for w in waves] == [4]  # select=test: one fit per C
    waves.clear()
    evaluate(src, labels, stratified_kfold(labels, 4, seed=0), C=[0.1, 1.0, 10.0], solver="libsvm",
             cluster="threads")
    assert [len(w) for w in waves] == [4] and all(len(t.fits) == 3 for t in waves[0])  # packed per fold


def test_the_progress_bar_counts_every_fit(num, monkeypatch):
    from gramtile.pipeline.learn import selection as crossval

    bars = []
    real = crossval.progress_bar

    def record(total, unit, desc, **kw):
        pb = real(total, unit, desc, **kw)
        bars.append((total, unit, pb))
        return pb

    monkeypatch.setattr(crossval, "progress_bar", record)
    src = open_gram_source(num / "sst.zarr", normalized=True)
    labels = store_labels(src.store)
    folds = stratified_kfold(labels, 4, seed=0)
    evaluate(src, labels, folds, C=[0.1, 1.0, 10.0], select="nested", inner_folds=2, cluster="threads")
    (total, unit, pb), = bars
    assert unit == "fit" and total == 4 * 2 * 3 + 4 and pb.n == total


def test_one_vs_rest_smo_chains_on_worker_processes_equal_the_serial_run(qc, client):
    src = open_gram_source(qc / "g.zarr", normalized=True)
    labels = store_labels(src.store)
    folds = stratified_kfold(labels, 3, seed=0)
    kw = dict(C=[1.0, 10.0], select="nested", inner_folds=2, solver="smo")
    serial = evaluate(src, labels, folds, cluster=Runtime("sequential", cache_mb=1.0), **kw)
    assert len(set(labels)) == 6
    _same(serial, evaluate(src, labels, folds, cluster=Runtime(client=client, cache_mb=1.0), **kw))
