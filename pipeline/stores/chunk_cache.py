"""Checked Gram-store chunks kept in memory for the block readers of a run (a bounded LRU).

A k-fold evaluation with nested C selection reads K(train, train) and K(test, train) of every
training part: on the 5,483 NUM trees (10 folds, 3 inner folds) that is 40 pairs of blocks, each
touching every one of the store's 21 stored chunks, i.e. 840 chunk reads of 21 chunks. Zarr v3
decodes every chunk on its one event-loop thread (the crc32c check runs there, holding the GIL),
so two learning threads reading at once got 1.14x the speed of one (bench/learn_parallel.py,
BENCHMARKS.md). With a budget set, readers of :meth:`~gramtile.pipeline.stores.gram_view.GramView.blocks` keep
the chunks they read, checked (finite, manifest checksum) and read-only, in the run's cache
(:mod:`gramtile.pipeline.cache`, namespace ``chunks``) up to :func:`budget_mb` megabytes, least
recently used first out. Only stores whose chunks all
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
BENCHMARKS.md). Set it (say ``1024``) to trade that memory for the second. Each process of a run
has its own cache; on a Dask worker with a memory limit (``memory_limit`` of its profile) it takes
at most :data:`WORKER_SHARE` of that limit.
"""
from __future__ import annotations

import os

import numpy as np

from gramtile.pipeline.cache import Cache, current, worker_memory_limit
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.storage import LocalLocation
from gramtile.pipeline.stores.tiles import Tile

#: The cache's default size in MB: off (see the module docstring); a budget set through
#: ``$GRAMTILE_CHUNK_CACHE_MB`` is used as given.
DEFAULT_MB = 0
ENV = "GRAMTILE_CHUNK_CACHE_MB"
#: Share of a Dask worker's memory limit its chunk cache may take (the rest is its tasks').
WORKER_SHARE = 1 / 8
#: the namespace of the run's cache (:mod:`gramtile.pipeline.cache`) holding the chunks
NAMESPACE = "chunks"


def budget_mb() -> float:
    """The cache's size in MB: ``$GRAMTILE_CHUNK_CACHE_MB``, else :data:`DEFAULT_MB`; on a Dask
    worker with a memory limit, at most :data:`WORKER_SHARE` of it."""
    raw = os.environ.get(ENV)
    if raw is None or not raw.strip():
        mb = float(DEFAULT_MB)
    else:
        try:
            mb = float(raw)
        except ValueError:
            mb = -1.0
        if not mb >= 0:
            raise StoreError(f"{ENV}={raw!r}: give the chunk cache's size in MB as a number >= 0 (0 turns it off), "
                             f"or unset it for the default ({DEFAULT_MB} MB, off)")
    limit = worker_memory_limit()
    return mb if not limit else min(mb, limit * WORKER_SHARE / 1e6)


class ChunkCache:
    """The run cache's chunk namespace as the block readers use it: read-only arrays by chunk key,
    bounded by :attr:`limit` bytes, least recently used first out."""

    def __init__(self, cache: Cache, limit: int):
        self.cache, self.limit = cache, limit

    def get(self, key):
        return self.cache.get(NAMESPACE, key)

    def put(self, key, arr: np.ndarray) -> np.ndarray:
        """Keep ``arr`` (made read-only); returns it."""
        arr.flags.writeable = False
        return self.cache.put(NAMESPACE, key, arr, arr.nbytes)

    @property
    def nbytes(self) -> int:
        return self.cache.size(NAMESPACE)[1]

    def __len__(self) -> int:
        return self.cache.size(NAMESPACE)[0]


def chunk_cache() -> ChunkCache | None:
    """The chunks of the run's cache, bounded by :func:`budget_mb` (None when it is 0)."""
    limit = int(budget_mb() * 1e6)
    if limit <= 0:
        return None
    cache = current()
    if cache.max_bytes(NAMESPACE) != limit:
        cache.limit(NAMESPACE, nbytes=limit)
    return ChunkCache(cache, limit)


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
