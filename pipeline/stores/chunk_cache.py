"""Checked Gram-store chunks kept in memory for the block readers of one process (a bounded LRU).

A k-fold evaluation with nested C selection reads K(train, train) and K(test, train) of every
training part: on the 5,483 NUM trees (10 folds, 3 inner folds) that is 40 pairs of blocks, each
touching every one of the store's 21 stored chunks, i.e. 840 chunk reads of 21 chunks. Zarr v3
decodes every chunk on its one event-loop thread (the crc32c check runs there, holding the GIL),
so two learning threads reading at once got 1.14x the speed of one (bench/learn_parallel.py,
BENCHMARKS.md). With a budget set, readers of :meth:`~gramtile.pipeline.stores.gram_store.GramView.blocks` keep
the chunks they read, checked (finite, manifest checksum) and read-only, in this process-wide cache
up to :func:`budget_mb` megabytes, least recently used first out. Only stores whose chunks all
fit the budget are cached (a learner sweeps every chunk of a training part in turn, so a smaller
LRU would evict each chunk before its next use): a larger store is read as before, with no
memory beside the learner's blocks.

A cached chunk is keyed by the store's path and identity (uid), the tile, and the chunk file's
``stat`` (inode, size, modification time): a tile rewritten since (recomputed, repaired, swapped)
is read again, so the cache never serves what the file no longer holds. Stores at a URL are not
cached (no cheap ``stat``). Streaming readers that touch every chunk once (the row file, export,
the Dask array) bypass the cache.

``GRAMTILE_CHUNK_CACHE_MB`` sets the budget; the default is :data:`DEFAULT_MB` = 0, off. Since
local chunk files are read directly (:mod:`.chunk_files`: GIL-free, 2.45x on two threads), the
operating system's page cache serves repeated reads nearly as fast: on that NUM evaluation the
cache saved 1.1 s of 16.7 s serial, both variants reached 1.74x on two threads, and it cost
138 MB of peak RSS (677 against 539 MB) beside the learner's one copy of K(train, train) and one
fold's block, which is all the in-memory path is meant to hold (bench/learn_memory.py,
BENCHMARKS.md). Set it (say ``1024``) to trade that memory for the second. Each process has its own cache;
a process with a memory limit of its own (a Dask worker: ``memory_limit`` of its profile) caps it
with :func:`cap_budget` (the learners' tasks cap it at an eighth of the worker's limit).
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict

import numpy as np

from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.storage import LocalLocation
from gramtile.pipeline.stores.tiles import Tile

#: The cache's default size in MB: off (see the module docstring); a budget set through
#: ``$GRAMTILE_CHUNK_CACHE_MB`` is used as given.
DEFAULT_MB = 0
ENV = "GRAMTILE_CHUNK_CACHE_MB"


_cap_mb: float | None = None


def cap_budget(mb: float | None) -> None:
    """Cap this process's cache at ``mb`` MB from now on (None: no cap), below the budget of
    :func:`budget_mb`; a cache already over it is emptied on its next use."""
    global _cap_mb
    _cap_mb = None if mb is None else max(0.0, float(mb))


def budget_mb() -> float:
    """The cache's size in MB: ``$GRAMTILE_CHUNK_CACHE_MB``, else :data:`DEFAULT_MB`; either at most
    this process's cap (:func:`cap_budget`)."""
    mb = _budget_mb()
    return mb if _cap_mb is None else min(mb, _cap_mb)


def _budget_mb() -> float:
    raw = os.environ.get(ENV)
    if raw is None or not raw.strip():
        return float(DEFAULT_MB)
    try:
        mb = float(raw)
    except ValueError:
        mb = -1.0
    if not mb >= 0:
        raise StoreError(f"{ENV}={raw!r}: give the chunk cache's size in MB as a number >= 0 (0 turns it off), "
                         f"or unset it for the default ({DEFAULT_MB} MB, off)")
    return mb


class ChunkCache:
    """A thread-safe LRU of read-only arrays, bounded by their total bytes."""

    def __init__(self, mb: float):
        self.limit = int(mb * 1e6)
        self.nbytes = 0
        self.hits = self.misses = 0
        self._items: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            got = self._items.get(key)
            if got is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return got

    def put(self, key, arr: np.ndarray) -> np.ndarray:
        """Keep ``arr`` (made read-only) unless it alone exceeds the budget; evict the least recently
        used until the rest fits. Returns ``arr``."""
        arr.flags.writeable = False
        size = arr.nbytes
        if size > self.limit:
            return arr
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self.nbytes -= old.nbytes
            self._items[key] = arr
            self.nbytes += size
            while self.nbytes > self.limit:
                _, ev = self._items.popitem(last=False)
                self.nbytes -= ev.nbytes
        return arr

    def clear(self):
        with self._lock:
            self._items.clear()
            self.nbytes = 0


_cache: ChunkCache | None = None
_cache_lock = threading.Lock()


def chunk_cache() -> ChunkCache | None:
    """This process's cache (None when the budget is 0); made at first use, remade when the budget
    of ``$GRAMTILE_CHUNK_CACHE_MB`` changes."""
    global _cache
    mb = budget_mb()
    with _cache_lock:
        if mb <= 0:
            _cache = None
        elif _cache is None or _cache.limit != int(mb * 1e6):
            _cache = ChunkCache(mb)
        return _cache


def clear_chunk_cache() -> None:
    """Drop every cached chunk of this process (a learning run calls it when it ends)."""
    with _cache_lock:
        if _cache is not None:
            _cache.clear()


def chunk_key(store, a: int, b: int):
    """The cache key of tile (a, b)'s chunk of a local ``store`` (None: not cacheable, e.g. a URL
    store or a chunk file that cannot be ``stat``-ed)."""
    if not isinstance(store.loc, LocalLocation):
        return None
    try:
        st = os.stat(store.chunk_path(Tile(a, b)))
    except OSError:
        return None
    return (str(store.path), str(store.meta.get("uid")), a, b, st.st_ino, st.st_size, st.st_mtime_ns)
