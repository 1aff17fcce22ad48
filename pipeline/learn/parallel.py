"""Independent fits as tasks on a cluster profile, each reading its own blocks from the store.

A learning run (``gramtile evaluate``, ``train``, a workflow's learn steps) is a list of fits
that do not depend on each other. :func:`run_tasks` runs such a list on the run's cluster
profile (``sequential`` in-process, the ``threads`` pool, a LocalCluster, a running scheduler,
SLURM; see :mod:`gramtile.pipeline.compute.cluster`) or on a given Dask client, and returns the
results *in task order*, so a parallel run assembles exactly what the serial one does.

A task never carries kernel values: it carries a :class:`SourceRef` (the Gram store paths, their
identities, the composite spec) and index arrays, and the worker opens the stores itself and
reads only the blocks its fit needs. An in-memory source (a matrix given in Python) is passed as
it is (fine for the in-process profiles; pickled to worker processes otherwise).

Faults: a Dask task whose worker dies is rerun elsewhere (Dask reschedules it, and ``retries``
covers errors raised by a dying worker's I/O); a fit is a pure function of its task, so a rerun
returns the same numbers. A task lost more often than the scheduler allows
(``distributed.scheduler.allowed-failures``) is an :class:`EvaluationError` naming the fix.
"""
from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict, deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import numpy as np

from gramtile.kernels.registry import as_spec
from gramtile.pipeline import optional
from gramtile.pipeline.compute.cluster import get_profile, open_client
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.sources import StoreKernelSource, ViewKernelSource
from gramtile.pipeline.progress import progress_bar
from gramtile.pipeline.stores.chunk_cache import cap_budget
from gramtile.pipeline.stores.errors import IncompleteTileError
from gramtile.pipeline.stores.gram_store import ComposedView, GramStore, GramView

#: Sources opened per process (per thread for the threads pool), by store identities.
OPEN_SOURCES = 4
#: How often a Dask task is retried after an error (a worker lost mid-task is rescheduled besides).
RETRIES = 2


@dataclass(frozen=True)
class StoreRef:
    """A Gram store as a task names it: path and identity (uid, row selection hash)."""

    path: str
    uid: str
    rows_sha256: str

    @classmethod
    def of(cls, store: GramStore) -> StoreRef:
        return cls(str(store.path), str(store.meta.get("uid")), str(store.meta.get("rows_sha256")))

    def open(self) -> GramStore:
        st = GramStore.open(self.path)
        if str(st.meta.get("uid")) != self.uid or str(st.meta.get("rows_sha256")) != self.rows_sha256:
            raise EvaluationError(
                f"Gram store {self.path} is not the store this run started from (uid {self.uid[:8]}, now "
                f"{str(st.meta.get('uid'))[:8]}): it was recreated since, so its rows are no longer the training "
                "examples and their labels. Fix: rerun the evaluation on the store as it is now")
        return st


@dataclass
class SourceRef:
    """What a worker needs to open a kernel source itself.

    ``stores`` and ``spec_json`` describe a store source (one store's own kernel, optionally
    normalised, or a composite spec over several stores), ``idx`` an optional renumbering of its
    examples; ``local`` is an in-memory source passed as it is, named in :attr:`key` by
    ``local_id`` (drawn when the ref is made: a copy unpickled on a worker keeps it).
    """

    stores: tuple = ()
    spec_json: str | None = None
    normalized: bool = False
    idx: np.ndarray | None = None
    n: int | None = None
    local: object = None
    local_id: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def key(self) -> tuple:
        if self.local is not None:
            return ("local", self.local_id)
        idx = None if self.idx is None else hashlib.sha256(np.ascontiguousarray(self.idx).tobytes()).hexdigest()
        return (self.stores, self.spec_json, self.normalized, idx, self.n)

    def open(self):
        """The kernel source (cached per process and thread: a worker opens each store once)."""
        if self.local is not None:
            return self.local
        cache = _opened()
        got = cache.get(self.key)
        if got is not None:
            cache.move_to_end(self.key)
            return got
        stores = [s.open() for s in self.stores]
        if self.spec_json is None:
            src = StoreKernelSource(stores[0], normalized=self.normalized)
        else:
            src = ViewKernelSource(ComposedView(as_spec(self.spec_json), stores), idx=self.idx, n=self.n)
        cache[self.key] = src
        if len(cache) > OPEN_SOURCES:
            cache.popitem(last=False)
        return src

    def check_complete(self):
        """Raise :class:`IncompleteTileError` naming ``gramtile gram`` unless every store is complete."""
        check_complete([GramStore.open(s.path) for s in self.stores])


def check_complete(stores):
    """Raise :class:`IncompleteTileError` naming ``gramtile gram`` unless every GramStore of ``stores``
    (objects, or a kernel source whose stores to check) has all its tiles done."""
    if not isinstance(stores, (list, tuple)):
        stores = stores_of(stores)
    for st in stores:
        done, total = st.tiles_done()
        if done != total:
            mask = st.done_mask()
            a, b = next((t.i, t.j) for t in st.grid().tiles() if not mask[t.i, t.j])
            raise IncompleteTileError(
                f"Gram store {st.path} is incomplete: tile {(a, b)} is not computed yet ({done} of {total} tiles "
                f"done), and learning reads K(train, train) from it. Fix: finish it by rerunning the same "
                f"`gramtile gram` command (it resumes; `gramtile status {st.path}` shows what is left)")


def stores_of(source) -> list:
    """The GramStores a kernel source reads (none for an in-memory one), without opening any."""
    if isinstance(source, StoreKernelSource):
        return [source.store]
    view = getattr(source, "view", None) if isinstance(source, ViewKernelSource) else None
    if isinstance(view, ComposedView):
        return [v.store for v in view.views.values()]
    if isinstance(view, GramView):
        return [view.store]
    if view is not None:
        return stores_of(view)
    return []


_local = threading.local()


def _opened() -> OrderedDict:
    c = getattr(_local, "sources", None)
    if c is None:
        c = _local.sources = OrderedDict()
    return c


def source_ref(source) -> SourceRef:
    """A :class:`SourceRef` for a kernel source: store-backed sources by path and identity, any other
    source (an in-memory matrix) as it is."""
    if isinstance(source, StoreKernelSource):
        return SourceRef(stores=(StoreRef.of(source.store),), normalized=source.normalized)
    if isinstance(source, ViewKernelSource):
        view = source.view
        if isinstance(view, ComposedView):
            stores = tuple(StoreRef.of(v.store) for v in view.views.values())
            return SourceRef(stores=stores, spec_json=view.spec.to_json(), idx=source.idx,
                             n=None if source.idx is not None else source.n)
        if isinstance(view, GramView):
            st = view.store
            spec = as_spec(st.meta["kernel"]).to_json()
            return SourceRef(stores=(StoreRef.of(st),), spec_json=spec, idx=source.idx,
                             n=None if source.idx is not None else source.n)
    return SourceRef(local=source)


def in_process(cluster, cluster_file=None, client=None) -> int:
    """How many fits of a run share one process: the threads of an in-process profile (1 otherwise)."""
    if client is not None or cluster in (None, "sequential"):
        return 1
    profile = get_profile(cluster, cluster_file)
    return profile.n_workers if profile.in_process else 1


def n_slots(cluster, cluster_file=None, client=None) -> int:
    """How many tasks a run executes at once: the client's worker threads, a profile's workers
    (times ``threads_per_worker`` of a ``local`` one), 1 in this process."""
    if client is not None:
        return max(1, sum(client.nthreads().values()))
    if cluster in (None, "sequential"):
        return 1
    profile = get_profile(cluster, cluster_file)
    per = int(profile.options.get("threads_per_worker", 1)) if profile.type == "local" else 1
    return profile.n_workers * per


def run_tasks(fn, tasks, cluster=None, cluster_file=None, client=None, desc: str = "fits", bar: bool = False,
              on_done=None, key_prefix: str = "gramtile-fit"):
    """``[fn(t) for t in tasks]``, run on a cluster profile or client, results in task order.

    Parameters
    ----------
    fn : picklable function of one task
    tasks : list
    cluster : str or None
        Profile of cluster.yaml; None or ``"sequential"``: in this process, one after another;
        ``threads``: the driver's thread pool; others: a Dask client opened for this call.
    client : distributed.Client, optional
        Run on it (``cluster`` is then ignored).
    bar : bool or progress bar
        Show a progress bar over the tasks; or a bar (:func:`~gramtile.pipeline.progress.progress_bar`)
        to advance by one per task, left open (one bar over several calls).
    on_done : callable(i, result), optional
        Called in the driver as each task finishes (in completion order). It may return a list of
        further tasks: they get the next indices (after every task so far) and run on the same
        workers before the tasks still waiting, so work that needs some results (a split's final
        fit after its inner C selection) neither waits for all of them nor piles up at the end;
        their results follow in the returned list.
    """
    tasks = list(tasks)
    out = [None] * len(tasks)
    own = not hasattr(bar, "update")
    pb = progress_bar(len(tasks), "fit", desc, disable=not bar or len(tasks) < 2) if own else bar

    def done(i, r) -> range:
        out[i] = r
        pb.update(1)
        more = on_done(i, r) if on_done is not None else None
        if not more:
            return range(0)
        tasks.extend(more)
        out.extend([None] * len(more))
        return range(len(tasks) - len(more), len(tasks))

    def serial():
        i = 0
        while i < len(tasks):  # tasks added by on_done run after the others
            done(i, fn(tasks[i]))
            i += 1

    try:
        profile = None if client is not None or cluster in (None, "sequential") else get_profile(cluster, cluster_file)
        if client is not None:
            _run_dask(fn, tasks, client, done, key_prefix)
        elif profile is None or profile.type == "sequential" or len(tasks) < 2:
            serial()
        elif profile.type == "threads":
            # one task per worker in flight, the rest waiting here, tasks added by on_done first
            waiting, pending = deque(range(len(tasks))), {}
            with ThreadPoolExecutor(max_workers=profile.n_workers, thread_name_prefix="gramtile-fit") as ex:
                while waiting or pending:
                    while waiting and len(pending) < profile.n_workers:
                        j = waiting.popleft()
                        pending[ex.submit(fn, tasks[j])] = j
                    finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for f in finished:
                        waiting.extendleft(reversed(done(pending.pop(f), f.result())))
        else:
            with open_client(profile, cluster_file) as c:
                if c is None:
                    serial()
                else:
                    _run_dask(fn, tasks, c, done, key_prefix)
    finally:
        if own:
            pb.close()
    return out


#: Share of a Dask worker's memory limit its chunk cache may take (the rest is its fits').
CACHE_SHARE = 1 / 8


def on_worker(fn, task):
    """``fn(task)`` on a Dask worker, its chunk cache (:mod:`~gramtile.pipeline.stores.chunk_cache`)
    capped at :data:`CACHE_SHARE` of the worker's memory limit when it has one."""
    try:
        limit = optional.distributed().get_worker().memory_manager.memory_limit
    except (ValueError, AttributeError):  # not on a worker (a client with processes=False runs here too)
        limit = None
    if limit:
        cap_budget(limit * CACHE_SHARE / 1e6)
    return fn(task)


def _run_dask(fn, tasks, client, done, key_prefix):
    distributed = optional.distributed()
    token = hashlib.sha256(np.random.default_rng().bytes(16)).hexdigest()[:12]

    def submit(i, priority=0):
        f = client.submit(on_worker, fn, tasks[i], key=f"{key_prefix}-{token}-{i}", retries=RETRIES, pure=False,
                          priority=priority)
        index[f.key] = i
        futs.append(f)
        return f

    futs, index = [], {}
    for i in range(len(tasks)):
        submit(i)
    try:
        pending = distributed.as_completed(list(futs))
        for f in pending:
            for j in done(index[f.key], f.result()):
                pending.add(submit(j, priority=1))  # before the tasks still waiting
    except distributed.KilledWorker as e:
        raise EvaluationError(
            f"a fit task was lost with its worker more often than the scheduler allows ({e}); a worker that dies "
            "on every attempt usually runs out of memory. Fix: lower --memory-mb or --cache-mb (so the fits read "
            "kernel rows through the cache), give the workers more memory, or use fewer workers per machine") \
            from None
    finally:
        for f in futs:
            f.release()
