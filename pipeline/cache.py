"""The run's cache: what the tasks of a run keep in memory between tasks of the same process.

A tile task opens the corpus store, loads shards, assembles the examples of a tile row, loads the
corpus resources its kernel names; a learning task opens Gram stores and keeps its blocks for the
next fit of the same part. Each of these is worth keeping for the next task that runs in the same
process, and none of it may outlive the run or grow without bound. So all of it lives in one
:class:`Cache`, in **namespaces** (:data:`LIMITS`), each bounded by a count of entries and, where
the entries are large, by their bytes, least recently used first out.

Who owns it: the :class:`~gramtile.pipeline.compute.runtime.Runtime` of a command owns one cache for
its process, made when the Runtime is made and emptied when it closes; its executors make it the
*active* cache of every task they run in this process (the sequential and thread executors), and
the tasks of its Dask workers use the cache of their worker (:class:`WorkerCache`, a worker plugin
the Dask executor installs for the run and removes at its end, which empties it). Code reaches the
active cache through :func:`current`. A caller may open a cache of its own around several runs
(``with Cache().active(): ...``): runs started inside use it instead of their own, so what one run
loaded serves the next. Outside any of these, :func:`current` gives a fresh, empty cache each time
(nothing is kept). One way empties it: :meth:`Runtime.release(*namespaces)
<gramtile.pipeline.compute.runtime.Runtime.release>` here and on the run's workers (an evaluation
drops its blocks so), and closing the Runtime empties all of it.

Each namespace counts its hits and loads (:meth:`Cache.counts`); tests read them to check, e.g.,
that workers load stored resources and never build them.
"""
from __future__ import annotations

import ctypes
import gc
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

#: namespace -> (most entries, most bytes or None); a namespace not listed keeps at most 64 entries
LIMITS = MappingProxyType({
    "corpora": (16, None),       # open corpus stores, by (path, content hash)
    "specs": (256, None),        # parsed kernel specs, by their JSON
    "shards": (16, None),        # loaded corpus shards (one Batch per representation)
    # the examples of a tile row or column, assembled from shards. Bytes as well as a count: a
    # count alone let it grow with the corpus (64 ranges of 1,000 examples are every row of a
    # 50,000-row landmark run, each used by one tile row only); an evicted range is assembled
    # again from the cached shards in milliseconds, against a tile's seconds of kernel work
    "ranges": (64, 64 * 2**20),
    "resources": (16, None),     # corpus resources loaded from a corpus store (similarity tables, spaces)
    "feature-meta": (16, None),  # feature-set vocabularies and metadata of a corpus store
    "feature-rows": (64, None),  # feature rows of a shard (CSR)
    "gram-K": (16, None),        # open K arrays of Gram stores, by (path, uid)
    "feature-stores": (4, None),  # open feature stores of the linear learners
    "chunks": (None, 0),         # checked Gram-store chunks (off unless a budget is set)
    "sources": (16, None),       # kernel sources opened by learning tasks, by thread and store identities
    "fit-blocks": (None, None),  # the blocks of a learning task's part, per thread (for its next fit)
    "announced": (None, None),   # kernels whose first-compile notice was given
})
DEFAULT_ITEMS = 64
#: the Dask worker plugin's name
PLUGIN = "gramtile-cache"

_SAME = object()
_ACTIVE: ContextVar[Cache | None] = ContextVar("gramtile_cache", default=None)


class _Space:
    """One namespace: an LRU of entries with their sizes, and its counters."""

    def __init__(self, items: int | None, nbytes: int | None):
        self.max_items, self.max_bytes = items, nbytes
        self.entries: OrderedDict = OrderedDict()
        self.nbytes = 0
        self.counts = {"hits": 0, "loads": 0}

    def trim(self) -> None:
        """Evict the least recently used entries over the limits; the newest entry stays even when
        it alone is over the byte limit (a tile range larger than the budget still serves its
        tile row), unless the limit is 0 (the namespace is off)."""
        while self.entries and ((self.max_items is not None and len(self.entries) > self.max_items)
                                or (self.max_bytes is not None and self.nbytes > self.max_bytes
                                    and (len(self.entries) > 1 or self.max_bytes == 0))):
            _, (_, size) = self.entries.popitem(last=False)
            self.nbytes -= size


class Cache:
    """A thread-safe cache in namespaces, each an LRU bounded by entries and bytes (see the module
    docstring). Values are shared, never copied: what is put in must not be changed after."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._spaces: dict[str, _Space] = {}
        self._loading: dict = {}  # (namespace, key) -> Event set when its load ends

    def _space(self, ns: str) -> _Space:
        sp = self._spaces.get(ns)
        if sp is None:
            items, nbytes = LIMITS.get(ns, (DEFAULT_ITEMS, None))
            sp = self._spaces[ns] = _Space(items, nbytes)
        return sp

    def get(self, ns: str, key: Any, default: Any = None) -> Any:
        """The value under ``key`` (counted as a hit), else ``default``."""
        with self._lock:
            sp = self._space(ns)
            got = sp.entries.get(key)
            if got is None:
                return default
            sp.entries.move_to_end(key)
            sp.counts["hits"] += 1
            return got[0]

    def put(self, ns: str, key: Any, value: Any, nbytes: int = 0) -> Any:
        """Keep ``value`` (``nbytes`` of memory) under ``key``, evicting the least recently used
        entries over the namespace's limits (:meth:`_Space.trim`). Returns ``value``."""
        with self._lock:
            sp = self._space(ns)
            old = sp.entries.pop(key, None)
            if old is not None:
                sp.nbytes -= old[1]
            if sp.max_bytes == 0 or (sp.max_items == 0):
                return value
            sp.entries[key] = (value, int(nbytes))
            sp.nbytes += int(nbytes)
            sp.trim()
            return value

    def load(self, ns: str, key: Any, loader: Callable[[], Any], nbytes: Callable[[Any], int] | None = None) -> Any:
        """The value under ``key``; on a miss ``loader()`` makes it and it is kept with
        ``nbytes(value)`` bytes. One thread loads a key at a time: another thread asking for it
        meanwhile waits for that load instead of repeating it (and loads it itself if it failed)."""
        while True:
            with self._lock:
                got = self.get(ns, key, _MISSING)
                if got is not _MISSING:
                    return got
                busy = self._loading.get((ns, key))
                if busy is None:
                    mine = self._loading[(ns, key)] = threading.Event()
            if busy is None:
                break
            busy.wait()
        try:
            value = loader()
            with self._lock:
                self._space(ns).counts["loads"] += 1
                return self.put(ns, key, value, nbytes(value) if nbytes is not None else 0)
        finally:
            with self._lock:
                del self._loading[(ns, key)]
            mine.set()

    def discard(self, ns: str, key: Any) -> None:
        with self._lock:
            sp = self._space(ns)
            old = sp.entries.pop(key, None)
            if old is not None:
                sp.nbytes -= old[1]

    def count(self, ns: str, what: str, n: int = 1) -> None:
        """Add ``n`` to a counter of ``ns`` (besides its hits and loads, e.g. ``built``)."""
        with self._lock:
            c = self._space(ns).counts
            c[what] = c.get(what, 0) + n

    def counts(self, ns: str) -> dict:
        """A copy of the counters of ``ns``: ``hits``, ``loads`` and any :meth:`count` added."""
        with self._lock:
            return dict(self._space(ns).counts)

    def limit(self, ns: str, *, nbytes: Any = _SAME, items: Any = _SAME) -> None:
        """Set the byte and / or entry limit of ``ns`` (None: unbounded; e.g. the chunk budget of a
        run), evicting what no longer fits."""
        with self._lock:
            sp = self._space(ns)
            if nbytes is not _SAME:
                sp.max_bytes = None if nbytes is None else max(0, int(nbytes))
            if items is not _SAME:
                sp.max_items = None if items is None else max(0, int(items))
            sp.trim()

    def max_bytes(self, ns: str) -> int | None:
        with self._lock:
            return self._space(ns).max_bytes

    def size(self, ns: str) -> tuple[int, int]:
        """(entries, bytes) held in ``ns``."""
        with self._lock:
            sp = self._space(ns)
            return len(sp.entries), sp.nbytes

    def clear(self, ns: str | None = None) -> None:
        """Drop every entry (of ``ns``, or of all namespaces); counters stay."""
        with self._lock:
            for name, sp in self._spaces.items():
                if ns is None or name == ns:
                    sp.entries.clear()
                    sp.nbytes = 0

    @contextmanager
    def active(self) -> Iterator[Cache]:
        """Make this the cache :func:`current` gives in this thread (and in the thread executor's
        tasks started inside) until the block ends."""
        token = _ACTIVE.set(self)
        try:
            yield self
        finally:
            _ACTIVE.reset(token)

    def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` with this cache active (what an executor's task runs)."""
        token = _ACTIVE.set(self)
        try:
            return fn(*args)
        finally:
            _ACTIVE.reset(token)


_MISSING = object()


def opened() -> Cache | None:
    """The cache a caller opened around this code (:meth:`Cache.active`), if any."""
    return _ACTIVE.get()


def current() -> Cache:
    """The active cache: the one set by the executor running this task or by a caller, else the
    cache of the Dask worker running it, else a fresh one that keeps nothing beyond the call."""
    c = _ACTIVE.get()
    if c is not None:
        return c
    c = worker_cache()
    return c if c is not None else Cache()


def worker_cache() -> Cache | None:
    """The cache of the Dask worker running this code (None outside a worker, or a worker of a run
    that installed none)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        worker = distributed.get_worker()
    except ValueError:
        return None
    plugin = getattr(worker, "plugins", {}).get(PLUGIN)
    return getattr(plugin, "cache", None)


class WorkerCache:
    """The Dask worker plugin holding a worker's :class:`Cache` for one run (``setup`` makes it,
    ``teardown`` empties it). Duck-typed to ``distributed.WorkerPlugin``, whose import this module
    avoids."""

    name = PLUGIN

    def __init__(self) -> None:
        self.cache: Cache | None = None

    def setup(self, worker: Any) -> None:
        self.cache = Cache()

    def teardown(self, worker: Any) -> None:
        if self.cache is not None:
            self.cache.clear()
        self.cache = None

    def __getstate__(self) -> dict:
        return {"cache": None}  # sent to workers empty


def clear_worker(namespaces, dask_worker=None) -> int:
    """Empty ``namespaces`` of the cache of the Dask worker this runs on (``Client.run`` passes the
    worker), then hand the freed memory back to the operating system (a worker's memory plan reads
    what the process holds: memory freed into the C allocator but kept by it would count as
    held, Dask's "unmanaged memory"); returns how many namespaces it emptied (0: the worker has no
    cache of the run)."""
    cache = getattr(getattr(dask_worker, "plugins", {}).get(PLUGIN), "cache", None)
    if cache is None:
        return 0
    for ns in namespaces:
        cache.clear(ns)
    gc.collect()
    trim_memory()
    return len(namespaces)


def trim_memory() -> bool:
    """``malloc_trim(0)`` of glibc: return the free memory at the top of the heap and in the
    allocator's arenas to the operating system (what Dask's documentation advises for unmanaged
    memory); False where the C library has no such call."""
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def worker_memory_limit() -> int | None:
    """The memory limit in bytes of the Dask worker running this code (None outside a worker, or a
    worker without a limit)."""
    distributed = sys.modules.get("distributed")
    if distributed is None:
        return None
    try:
        limit = distributed.get_worker().memory_manager.memory_limit
    except (ValueError, AttributeError):
        return None
    return int(limit) if limit else None


def nbytes_of(arrays: Any) -> int:
    """Total bytes of the NumPy arrays in ``arrays`` (None entries skipped)."""
    return int(sum(a.nbytes for a in arrays if a is not None))
