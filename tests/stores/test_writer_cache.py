"""The writer's cache of a store at a URL (pipeline/stores/storage.py, WriterCache): what it
remembers, and that its groups of writes land whole, in order, and stop at the first failure.

Real Zarr stores under it: a MemoryStore, and a LocalStore in a folder where one key cannot be
written (its parent is a file), the failure an object store gives as an error response.
"""
import numpy as np
import pytest
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import LocalStore, MemoryStore

from gramtile.pipeline.stores.storage import WriterCache


def _put(cache, key, data: bytes):
    sync(cache.set(key, default_buffer_prototype().buffer.from_bytes(data)))


def _get(store, key):
    v = sync(store.get(key, default_buffer_prototype()))
    return None if v is None else v.to_bytes()


def test_a_batch_lands_whole_before_the_write_after_it_and_reads_see_it_at_once():
    base = MemoryStore()
    cache = WriterCache(base)
    g = zarr.open_group(cache, mode="w")
    sub = g.require_group("shard")
    cache.assume_empty(["shard"])  # known to hold nothing: no existence check goes to the store
    with cache.batch():
        for i in range(10):
            sub.create_array(f"a{i}", data=np.arange(i + 1), chunks=(i + 1,))
        # inside the batch nothing is sent, but the writer reads what it wrote
        assert _get(base, "shard/a3/zarr.json") is None and _get(base, "shard/a3/c/0") is None
        assert np.array_equal(sub["a3"][:], np.arange(4))
    g.attrs["done"] = True  # the "done" flag: a group of its own, after the batch
    cache.drain()
    for i in range(10):
        assert np.array_equal(zarr.open_array(base, path=f"shard/a{i}", mode="r")[:], np.arange(i + 1))
    assert zarr.open_group(base, mode="r").attrs["done"] is True
    cache.close()


def test_metadata_already_seen_costs_no_request():
    base = MemoryStore()
    cache = WriterCache(base)
    g = zarr.open_group(cache, mode="w")
    g.require_group("reps").require_group("tree")
    cache.drain()
    sync(base.delete("reps/tree/zarr.json"))  # behind the writer's back: it does not ask again
    assert sync(cache.exists("reps/tree/zarr.json"))
    cache.assume_empty(["reps/tree/0"])
    assert not sync(cache.exists("reps/tree/0/offsets/zarr.json"))
    assert sync(cache.is_empty("reps/tree/0"))
    cache.close()


def test_a_failed_group_stops_the_sending_and_is_raised(tmp_path):
    (tmp_path / "blocker").write_text("a file where a folder is needed")
    base = LocalStore(str(tmp_path))
    cache = WriterCache(base)
    _put(cache, "first", b"1")
    _put(cache, "blocker/x", b"cannot land")
    _put(cache, "after", b"must not land after a failure")
    with pytest.raises(OSError):
        cache.drain()
    assert (tmp_path / "first").read_bytes() == b"1"
    assert not (tmp_path / "after").exists()
    with pytest.raises(OSError):  # and the writer's next write raises it too
        _put(cache, "later", b"x")
    assert not (tmp_path / "later").exists()


def test_a_batch_that_raises_sends_nothing_and_is_forgotten():
    base = MemoryStore()
    cache = WriterCache(base)
    _put(cache, "kept", b"k")
    with pytest.raises(RuntimeError, match="stop"):
        with cache.batch():
            _put(cache, "dropped", b"d")
            raise RuntimeError("stop")
    cache.drain()
    assert _get(base, "kept") == b"k"
    assert _get(base, "dropped") is None and _get(cache, "dropped") is None
    cache.close()
