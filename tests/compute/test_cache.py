"""The run's cache (gramtile.pipeline.cache): namespaces bounded by entries and bytes, one load per
key however many threads ask, the cache a run makes active reaching its tasks on every executor,
and nothing kept outside a run."""
import threading
import time

import numpy as np
import pytest

from gramtile.pipeline.cache import LIMITS, Cache, current, opened
from gramtile.pipeline.compute.executors import SequentialExecutor, ThreadExecutor
from gramtile.pipeline.compute.runtime import Runtime


def test_a_namespace_keeps_its_most_recent_entries_within_its_limits():
    c = Cache()
    c.limit("t", items=3)
    for k in range(5):
        c.put("t", k, str(k))
    assert c.size("t") == (3, 0) and c.get("t", 0) is None and c.get("t", 4) == "4"
    c.get("t", 2)  # used: now the most recent
    c.put("t", 5, "5")
    assert c.get("t", 2) == "2" and c.get("t", 3) is None
    c.limit("b", nbytes=100, items=None)
    for k in range(4):
        c.put("b", k, k, nbytes=40)
    assert c.size("b") == (2, 80)  # 40 + 40 <= 100 < 120
    c.put("b", "big", "x", nbytes=500)  # alone over the limit: kept alone (it serves its user)
    assert c.size("b") == (1, 500) and c.get("b", "big") == "x"
    c.limit("b", nbytes=0)  # 0: the namespace is off
    assert c.size("b") == (0, 0)
    c.put("b", "y", "y", nbytes=1)
    assert c.get("b", "y") is None
    c.clear()
    assert c.size("t") == (0, 0) and c.counts("t")["hits"] == 3  # counters stay


def test_the_declared_limits_bound_the_large_namespaces():
    assert LIMITS["ranges"][1] == 64 * 2**20 and LIMITS["shards"][0] == 16
    c = Cache()
    for k in range(LIMITS["shards"][0] + 5):
        c.put("shards", k, np.zeros(1))
    assert c.size("shards")[0] == LIMITS["shards"][0]


def test_one_thread_loads_a_key_and_the_others_wait_for_it():
    c = Cache()
    calls = []

    def slow():
        calls.append(threading.get_ident())
        time.sleep(0.2)
        return np.arange(3)

    got = []
    threads = [threading.Thread(target=lambda: got.append(c.load("s", "k", slow))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(calls) == 1 and len(got) == 4 and all(g is got[0] for g in got)
    assert c.counts("s") == {"hits": 3, "loads": 1}


def test_a_failed_load_is_not_kept_and_the_next_caller_loads_again():
    c = Cache()

    def bad():
        raise OSError("disk gone")

    with pytest.raises(OSError):
        c.load("s", "k", bad)
    assert c.load("s", "k", lambda: 7) == 7 and c.counts("s")["loads"] == 1


def _current_id(_=None):
    return id(current())


def test_an_active_cache_reaches_the_tasks_of_the_sequential_and_thread_executors():
    c = Cache()
    items = [(i, (i,)) for i in range(6)]
    with c.active():
        assert current() is c and opened() is c
        seq = {r for _, r in SequentialExecutor().imap(_current_id, items)}
        thr = {r for _, r in ThreadExecutor(2).imap(_current_id, items)}
    assert seq == thr == {id(c)}
    assert opened() is None and current() is not current()  # outside: a fresh cache each time, nothing kept


def test_a_runtime_uses_a_cache_opened_around_it_and_otherwise_its_own():
    rt = Runtime("threads")
    with rt.session() as ex:
        inside = {r for _, r in ex.imap(_current_id, [(0, (0,)), (1, (1,))])}
    assert inside == {id(rt.cache)}
    mine = Cache()
    with mine.active():
        assert rt.cache is mine
        with rt.session() as ex:
            assert {r for _, r in ex.imap(_current_id, [(0, (0,))])} == {id(mine)}
    assert rt.cache is not mine


@pytest.mark.timeout(300)
def test_an_evaluation_empties_the_blocks_its_fits_kept_on_the_workers(tmp_path):
    """Each worker thread keeps its training part's blocks for its next fit; when the evaluation
    ends they are dropped on the workers too (a worker's memory plan counts what it holds)."""
    import distributed
    from conftest import corpus_store_of, num_trees

    from gramtile.pipeline.cache import PLUGIN
    from gramtile.pipeline.compute.engine import run_gram
    from gramtile.pipeline.learn.folds import stratified_kfold
    from gramtile.pipeline.learn.learners.registry import make
    from gramtile.pipeline.learn.selection import evaluate
    from gramtile.pipeline.learn.sources import open_gram_source

    every = num_trees(5483)  # class-sorted: a seeded sample of both classes
    docs = [every[i] for i in np.random.default_rng(0).permutation(len(every))[:120]]
    corpus = corpus_store_of(tmp_path / "c.zarr", docs, 60)
    run_gram(corpus, {"kind": "sst", "lam": 0.4}, tmp_path / "g.zarr", tile=60, cluster="sequential")
    src = open_gram_source(tmp_path / "g.zarr", normalized=True)
    labels = [d.label for d in docs]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  memory_limit="1GiB") as lc, distributed.Client(lc) as client, \
            Runtime(client=client) as rt:
        def kept(dask_worker):
            return dask_worker.plugins[PLUGIN].cache.size("fit-blocks")[0]

        ev = evaluate(make("svm"), src, labels, stratified_kfold(labels, 4, 0), {"C": [0.5, 1.0]}, cluster=rt)
        assert ev.rows and sum(client.run(kept).values()) == 0  # released at the end of the evaluation
        # while fits run, the workers do keep them: a task that looks from inside a fit's thread
        from gramtile.pipeline.learn.fits import fit_blocks
        from gramtile.pipeline.learn.parallel import source_ref

        ref = source_ref(src)
        got = client.submit(lambda: (fit_blocks(ref, "r", np.arange(60), np.arange(60, 120), "t"), None)[1],
                            pure=False).result(timeout=60)
        assert got is None and sum(client.run(kept).values()) == 1
        rt.release("fit-blocks")
        assert sum(client.run(kept).values()) == 0
