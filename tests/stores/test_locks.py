"""The one-writer lock of local stores: no two holders in any race, dead and zombie holders
release it, empty or garbage lock files do not lock a store for good."""
import json
import multiprocessing
import os
import time

import pytest

from gramtile.pipeline.stores.errors import StoreLockedError
from gramtile.pipeline.stores.locks import StoreLock

FORK = multiprocessing.get_context("fork")


def _contend(lock_path, marker, start, die, violations, takes):
    """Wait for the start signal, try to take the lock once, check nobody else holds it."""
    start.wait()
    lock = StoreLock(lock_path, "test store")
    try:
        lock.acquire()
    except StoreLockedError:
        os._exit(0)
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.close(fd)
    except FileExistsError:
        violations.value += 1
        os._exit(0)
    with takes.get_lock():
        takes.value += 1
    time.sleep(0.005)
    os.unlink(marker)
    if die:
        os._exit(0)  # killed while holding: the lock file stays behind
    lock.release()
    os._exit(0)


def test_three_way_races_with_stale_takeover_never_give_two_holders(tmp_path):
    lock_path, marker = tmp_path / "gramtile.lock", tmp_path / "holder"
    violations, takes = FORK.Value("i", 0), FORK.Value("i", 0)
    rounds = 60
    for r in range(rounds):
        start = FORK.Event()
        procs = [FORK.Process(target=_contend, args=(lock_path, marker, start, r % 2 == 0, violations, takes))
                 for _ in range(3)]
        for p in procs:
            p.start()
        start.set()
        for p in procs:
            p.join(30)
            assert p.exitcode == 0
        if r % 2 == 0:
            assert lock_path.exists()  # every even round ends with a holder killed: a stale lock file
    assert violations.value == 0
    # every round had a holder: the stale lock of the round before was always taken over
    assert takes.value >= rounds


def test_a_zombie_holder_does_not_keep_the_lock(tmp_path):
    lock_path = tmp_path / "gramtile.lock"
    ready = FORK.Event()

    def hold_and_exit():
        StoreLock(lock_path, "test store").acquire()
        ready.set()
        os._exit(0)

    child = FORK.Process(target=hold_and_exit)
    child.start()
    assert ready.wait(30)
    time.sleep(0.2)  # the child has exited; it is not reaped yet, so it is a zombie
    with open(f"/proc/{child.pid}/stat") as f:
        assert f.read().split(") ", 1)[1][0] == "Z"
    with StoreLock(lock_path, "test store") as lock:
        assert json.loads(lock_path.read_text())["pid"] == os.getpid() and lock.held
    child.join()


@pytest.mark.parametrize("content", ["", "garbage", "[1, 2]", "{\"pid\": "])
def test_empty_or_garbage_lock_files_are_not_a_lock(tmp_path, content):
    lock_path = tmp_path / "gramtile.lock"
    lock_path.write_text(content)
    with StoreLock(lock_path, "test store"):
        assert json.loads(lock_path.read_text())["pid"] == os.getpid()
    assert not lock_path.exists()


def test_a_held_lock_names_its_holder_or_says_it_has_not_written_it(tmp_path):
    lock_path = tmp_path / "gramtile.lock"
    with StoreLock(lock_path, "test store"):
        with pytest.raises(StoreLockedError, match=f"locked by process {os.getpid()}"):
            StoreLock(lock_path, "test store").acquire()
        lock_path.write_text("")  # a holder between taking the lock and writing its identity
        with pytest.raises(StoreLockedError, match="has not written its identity"):
            StoreLock(lock_path, "test store").acquire()
