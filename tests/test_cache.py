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
