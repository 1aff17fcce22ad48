"""The run's chunk cache behind GramView.blocks, and dependent tasks in run_tasks: a chunk
read once serves later blocks, a chunk file changed since is read (and checked) again, the budget
bounds it, and tasks that on_done adds run on every profile with results in index order. Real
NUM trees, real SST kernel, real Zarr stores."""
import shutil

import numpy as np
import pytest
from conftest import corpus_store_of, num_trees

import gramtile
from gramtile.pipeline.cache import Cache
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.learn.parallel import run_tasks
from gramtile.pipeline.stores import chunk_cache as cc
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.tiles import Tile

N = 150
SST = '{"kind": "sst", "lam": 0.4}'


@pytest.fixture(scope="module")
def docs():
    return num_trees(N)


@pytest.fixture(scope="module")
def store(docs, tmp_path_factory):
    d = tmp_path_factory.mktemp("cache")
    corpus = corpus_store_of(d / "c.zarr", docs, 50)
    run_gram(corpus, SST, d / "g.zarr", tile=50, cluster="sequential")
    return d / "g.zarr"


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setenv(cc.ENV, "1024")  # the cache is off unless a budget is set
    with Cache().active() as run:  # the run's cache, as an executor makes it active
        yield run


def test_a_chunk_read_once_serves_later_blocks_read_only(store, docs, fresh):
    full = gramtile.gram(SST, docs)
    v = GramStore.open(store).view()
    rows = np.arange(0, N, 3)
    a = v.block(rows, rows)
    assert fresh.size(cc.NAMESPACE)[0] == 6 and fresh.counts(cc.NAMESPACE)["hits"] == 0  # 6 tiles stored
    b = GramStore.open(store).view().block(rows, rows)  # another reader of the same store, same process
    assert fresh.size(cc.NAMESPACE)[0] == 6 and fresh.counts(cc.NAMESPACE)["hits"] == 6
    np.testing.assert_array_equal(a, full[np.ix_(rows, rows)])
    np.testing.assert_array_equal(b, a)
    b[0, 0] = -1.0  # a block is the caller's own array; the cached chunks are not writable
    cached = [fresh.get(cc.NAMESPACE, cc.chunk_key(GramStore.open(store), i, j)) for i in range(3) for j in range(i, 3)]
    assert all(arr is not None and not arr.flags.writeable for arr in cached)
    np.testing.assert_array_equal(GramStore.open(store).view().block(rows, rows), a)


def test_a_chunk_file_changed_since_is_read_and_checked_again(store, tmp_path, fresh):
    copy = tmp_path / "g.zarr"
    shutil.copytree(store, copy)
    st = GramStore.open(copy)
    v = st.view()
    v.block(np.arange(50), np.arange(50, 100))  # caches tile (0, 1)
    # another tile's chunk copied over it: the cache key (the file's stat) changes, so the chunk is
    # read again and its recorded checksum refuses it
    shutil.copyfile(st.chunk_path(Tile(0, 2)), st.chunk_path(Tile(0, 1)))
    with pytest.raises(StoreCorruptError, match="checksum"):
        GramStore.open(copy).view().block(np.arange(50), np.arange(50, 100))


def test_the_budget_bounds_the_cache_and_zero_turns_it_off(store, docs, tmp_path, monkeypatch):
    full = gramtile.gram(SST, docs)
    chunk = 50 * 50 * 8  # the store holds 6 chunks (3 x 3 tiles, symmetric)
    other = tmp_path / "g.zarr"
    shutil.copytree(store, other)
    # a store whose chunks do not all fit is not cached (a sweep would evict every chunk unused)
    monkeypatch.setenv(cc.ENV, str(5.5 * chunk / 1e6))
    with Cache().active() as run:
        np.testing.assert_array_equal(GramStore.open(store).view().block(), full)
        assert run.size(cc.NAMESPACE) == (0, 0)
        # one store fits: cached; a second one evicts the first's chunks, least recently used first
        monkeypatch.setenv(cc.ENV, str(8.5 * chunk / 1e6))
        np.testing.assert_array_equal(GramStore.open(store).view().block(), full)
        assert run.size(cc.NAMESPACE) == (6, 6 * chunk)
        np.testing.assert_array_equal(GramStore.open(other).view().block(), full)
        assert run.size(cc.NAMESPACE) == (8, 8 * chunk) and 8 * chunk <= cc.chunk_cache().limit
        kept = [run.get(cc.NAMESPACE, cc.chunk_key(GramStore.open(other), i, j)) for i in range(3) for j in range(i, 3)]
        assert all(k is not None for k in kept)  # the newest store's chunks all kept
        monkeypatch.setenv(cc.ENV, "0")
        assert cc.chunk_cache() is None
        v = GramStore.open(store).view()
        np.testing.assert_array_equal(v.block(), full)
        assert v.chunk_reads == 6
    monkeypatch.setenv(cc.ENV, "lots")
    with pytest.raises(StoreError, match=cc.ENV):
        cc.chunk_cache()
    monkeypatch.setenv(cc.ENV, "-5")
    with pytest.raises(StoreError, match="0 turns it off"):
        cc.budget_mb()
    monkeypatch.delenv(cc.ENV)
    assert cc.budget_mb() == 0 and cc.chunk_cache() is None  # off by default


def test_a_worker_caps_its_chunk_cache_at_a_share_of_its_memory_limit(monkeypatch):
    distributed = pytest.importorskip("distributed")
    monkeypatch.setenv(cc.ENV, "100000")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, memory_limit="800MB",
                                  dashboard_address=":0") as lc, distributed.Client(lc) as client:
        got = client.submit(cc.budget_mb, pure=False).result(timeout=60)
    assert got == pytest.approx(800e6 * cc.WORKER_SHARE / 1e6)
    assert cc.budget_mb() == 100000  # outside a worker: the budget as given


def _square(x):
    return x * x


@pytest.mark.parametrize("cluster", ["sequential", "threads", "local"])
def test_tasks_added_by_on_done_run_and_come_back_at_their_indices(cluster):
    """Every finished task i < 4 adds task 10 + i, which adds nothing: the added tasks get indices
    4.. in the order they were added (completion order), and each result sits at its task's index."""
    seen, added = [], []

    def on_done(i, r):
        seen.append(i)
        if i < 4:
            added.append(10 + i)
            return [10 + i]
        return None

    got = run_tasks(_square, [0, 1, 2, 3], cluster=cluster, on_done=on_done)
    assert got[:4] == [0, 1, 4, 9]
    assert sorted(added) == [10, 11, 12, 13] and got[4:] == [t * t for t in added]
    assert sorted(seen) == list(range(8))
