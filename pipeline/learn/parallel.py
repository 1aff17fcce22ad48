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
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.cache import current
from gramtile.pipeline.compute.errors import TaskLostError
from gramtile.pipeline.compute.executors import SequentialExecutor, TaskQueue
from gramtile.pipeline.compute.runtime import Runtime, TaskMemory
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.sources import StoreKernelSource, ViewKernelSource
from gramtile.pipeline.progress import progress_bar
from gramtile.pipeline.stores.errors import IncompleteTileError
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_view import GramView
from gramtile.pipeline.stores.storage import absolute

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
        # absolute before the task leaves the driver: a worker started elsewhere resolves it the same way
        return cls(absolute(store.path), str(store.meta.get("uid")), str(store.meta.get("rows_sha256")))

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
    examples and ``scale`` a divisor of its values (:class:`ViewKernelSource`); ``local`` is an
    in-memory source passed as it is, named in :attr:`key` by ``local_id`` (drawn when the ref is
    made: a copy unpickled on a worker keeps it).
    """

    stores: tuple = ()
    spec_json: str | None = None
    normalized: bool = False
    idx: np.ndarray | None = None
    n: int | None = None
    local: object = None
    local_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    scale: float | None = None

    @property
    def key(self) -> tuple:
        if self.local is not None:
            return ("local", self.local_id)
        idx = None if self.idx is None else hashlib.sha256(np.ascontiguousarray(self.idx).tobytes()).hexdigest()
        return (self.stores, self.spec_json, self.normalized, idx, self.n, self.scale)

    def open(self):
        """The kernel source, kept per thread in the run's cache (namespace ``sources``): a worker
        opens each store once per run."""
        if self.local is not None:
            return self.local
        return current().load("sources", (threading.get_ident(), self.key), self._open)

    def _open(self):
        stores = [s.open() for s in self.stores]
        if self.spec_json is None:
            return StoreKernelSource(stores[0], normalized=self.normalized)
        return ViewKernelSource(ComposedView(as_spec(self.spec_json), stores), idx=self.idx, n=self.n, scale=self.scale)

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
                             n=None if source.idx is not None else source.n, scale=source.scale)
        if isinstance(view, GramView):
            st = view.store
            spec = as_spec(st.meta["kernel"]).to_json()
            return SourceRef(stores=(StoreRef.of(st),), spec_json=spec, idx=source.idx,
                             n=None if source.idx is not None else source.n, scale=source.scale)
    return SourceRef(local=source)


#: Share of the memory available now that fits running in this process plan for by default.
MEMORY_SHARE = 0.6


def fit_memory(cluster) -> TaskMemory:
    """The memory a run's fits plan for where they run (:meth:`Runtime.task_memory`): the
    Runtime's ``memory_mb`` (``--memory-mb``, for one process) when set, else
    :data:`MEMORY_SHARE` of what this machine has available for in-process runs, or what one
    worker process may hold."""
    rt = Runtime.of(cluster)
    v = rt.memory_mb
    if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, np.number)) or not v > 0
                          or not np.isfinite(v)):
        raise EvaluationError(f"--memory-mb {v!r} must be a positive number of megabytes, e.g. --memory-mb 2000")
    return rt.task_memory(MEMORY_SHARE)


def too_big(what: str, need_mb: float, memory: TaskMemory, fix: str) -> EvaluationError:
    """The refusal of a task that cannot fit one worker, with the figures and the fix."""
    return EvaluationError(f"{what} needs {need_mb:,.0f} MB per fit, but {memory.where} leaves "
                           f"{memory.per_task_mb:,.0f} MB per fit ({memory.tasks} at once); the worker would "
                           f"pause and the run stall. Fix: {fix}, or give the workers more memory (the "
                           "profile's memory / memory_limit)")


def runs_here(cluster) -> bool:
    """Whether ``cluster`` runs its tasks in this process, one after the other (``sequential``):
    in-memory sources are then used as they are."""
    return Runtime.of(cluster).kind == "sequential"


def n_slots(cluster) -> int:
    """How many tasks a run executes at once (:attr:`Runtime.slots`)."""
    return Runtime.of(cluster).slots


def run_tasks(fn, tasks, cluster=None, desc: str = "fits", bar: bool = False, on_done=None,
              key_prefix: str = "gramtile-fit"):
    """``[fn(t) for t in tasks]``, run on the run's executor, results in task order.

    Parameters
    ----------
    fn : picklable function of one task
    tasks : list
    cluster : str, Runtime or None
        Where the tasks run (:class:`~gramtile.pipeline.compute.runtime.Runtime`); None or
        ``"sequential"``: in this process, one after another.
    bar : bool or progress bar
        Show a progress bar over the tasks; or a bar (:func:`~gramtile.pipeline.progress.progress_bar`)
        to advance by one per task, left open (one bar over several calls).
    on_done : callable(i, result), optional
        Called in the driver as each task finishes (in completion order). It may return a list of
        further tasks: they get the next indices (after every task so far) and run before the
        tasks still waiting, so work that needs some results (a split's final fit after its inner
        C selection) neither waits for all of them nor piles up at the end; their results follow
        in the returned list.
    """
    rt = Runtime.of(cluster)
    tasks = list(tasks)
    out = [None] * len(tasks)
    own = not hasattr(bar, "update")
    pb = progress_bar(len(tasks), "fit", desc, disable=not bar or len(tasks) < 2) if own else bar
    queue = TaskQueue((i, (fn, t)) for i, t in enumerate(tasks))
    token = uuid.uuid4().hex[:12]
    try:
        with rt.cache.active(), \
                (nullcontext(SequentialExecutor()) if len(tasks) < 2 and on_done is None else rt.session()) as ex:
            for i, r in ex.imap(call, queue, key=lambda i: f"{key_prefix}-{token}-{i}", retries=RETRIES,
                                what="fit", hint=_FIT_HINT):
                out[i] = r
                pb.update(1)
                more = on_done(i, r) if on_done is not None else None
                if more:
                    first = len(tasks)
                    tasks.extend(more)
                    out.extend([None] * len(more))
                    queue.push_front((first + j, (fn, t)) for j, t in enumerate(more))
    except TaskLostError as e:
        raise EvaluationError(str(e)) from None
    finally:
        if own:
            pb.close()
    return out


_FIT_HINT = ("lower --memory-mb or --cache-mb (so the fits read kernel rows through the cache), give the workers "
             "more memory, or use fewer workers per machine")


def call(fn, task):
    """``fn(task)``: what the executor runs for each task (``fn`` travels with the task)."""
    return fn(task)
