"""Shared test helpers: where the real data lives.

The data sets sit beside the repository in ``../shared/data`` and are never copied into it.
A missing data set is a hard failure, not a skip: a test that silently skips cannot fail.
"""
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def require_data(name: str) -> Path:
    """Path of data set ``name`` under :data:`SHARED_DATA`; fails the test if it is missing."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.fail(f"data set {name!r} not found at {path}; the tests need ../shared/data beside the repository",
                    pytrace=False)
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The root of the shared data sets (fails when it is missing)."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data directory not found at {SHARED_DATA}", pytrace=False)
    return SHARED_DATA


def num_trees(n: int) -> list:
    """The first ``n`` Documents of the NUM training trees (SVM-Light-TK format)."""
    import itertools

    from gramtile.pipeline.readers import read

    path = require_data("trec_qc_num_constituency") / "NUM_train.dat"
    return list(itertools.islice(read(path, "svmlighttk"), n))


def corpus_store_of(path, docs, shard_size: int):
    """Write ``docs`` into a new corpus store at ``path`` in shards of ``shard_size``; returns path."""
    from gramtile.pipeline.corpus_store import CorpusStore

    cs = CorpusStore.create(path, shard_size=shard_size)
    for k in range(0, len(docs), shard_size):
        cs.write_shard(k // shard_size, docs[k:k + shard_size])
    cs.finish()
    cs.close()
    return path


@contextmanager
def lock_holder(store):
    """A live process holding the writer lock of the Gram store at ``store`` (path or URL) for
    the block; killed at its end, so the lock it leaves is stale."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import time\nfrom gramtile.pipeline.gram_store import store_lock\n"
         f"with store_lock({str(store)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def stop_after(k: int):
    """An ``on_tile`` callback that raises after ``k`` recorded tiles, and the list of their tiles."""
    seen = []

    def on_tile(res):
        seen.append(res.tile)
        if len(seen) == k:
            raise RuntimeError("stop here")

    return on_tile, seen
