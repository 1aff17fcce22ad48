"""Executors: the one way every command runs independent tasks.

A run is a stream of ``(tag, args)`` items; an executor calls ``fn(*args)`` for each and yields
``(tag, result)`` in completion order (:meth:`Executor.imap`). The caller handles each result in
its own thread (the Gram engine records a tile, prepare writes a shard, a learner collects a fit)
and may add tasks while the run goes on (a :class:`TaskQueue` given as the stream: tasks pushed to
its front run next, e.g. a split's final fit as soon as its inner fits are in).

- :class:`SequentialExecutor` -- the reference: in this process, one task after the other.
- :class:`ThreadExecutor` -- worker threads of this process (every gramtile kernel core releases
  the GIL, so two threads compute two tiles at once; no cluster to start, nothing to pickle).
- :class:`DaskExecutor` -- tasks on a Dask cluster (a LocalCluster, a running scheduler,
  dask-jobqueue or Kubernetes workers), with deterministic keys, retries, and a :class:`Watchdog`
  that stops a run which can no longer progress instead of letting it wait forever.

At most ``window`` tasks are in flight, so the driver's memory does not grow with the number of
tasks. When the caller stops consuming (an error, Ctrl-C), tasks not yet started are cancelled;
running ones finish or are dropped with their worker. Every executor gives the same results for
the same tasks: an executor changes speed, never a number.
"""
from __future__ import annotations

import concurrent.futures
import contextvars
import logging
import time
import uuid
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from gramtile.pipeline import optional
from gramtile.pipeline.cache import PLUGIN, WorkerCache, clear_worker
from gramtile.pipeline.compute import interrupts
from gramtile.pipeline.compute.errors import ClusterLostError, RunStalledError, TaskLostError

_END = object()

#: Seconds between two looks of the watchdog while no task finishes.
POLL_SECONDS = 1.0
#: Seconds the first fetch of a finished task's result may take (doubled on each retry).
FETCH_SECONDS = 5.0


class TaskQueue:
    """A run's tasks as ``(tag, args)`` items, taken in order by an executor; items pushed to the
    front are taken next. Unlike a generator it may be read again after it ran dry: an executor
    asks for more after every result, so tasks added by the caller meanwhile still run."""

    def __init__(self, items=()):
        self._q = deque(items)

    def push(self, items):
        self._q.extend(items)

    def push_front(self, items):
        self._q.extendleft(reversed(list(items)))

    def __len__(self):
        return len(self._q)

    def __iter__(self):
        return self

    def __next__(self):
        if self._q:
            return self._q.popleft()
        raise StopIteration


class Executor:
    """Runs ``fn(*args)`` for a stream of ``(tag, args)`` items (see the module docstring)."""

    #: ``sequential``, ``threads`` or ``dask`` (recorded in logs)
    name = "sequential"
    #: tasks that run at once
    slots = 1
    #: whether the tasks run in this process (they may then share its memory and caches)
    in_process = True

    def imap(self, fn, items, *, window: int | None = None, key=None, retries: int = 0, status=None,
             what: str = "task", hint: str = ""):
        """Yield ``(tag, fn(*args))`` for every ``(tag, args)`` of ``items``, in completion order.

        Parameters
        ----------
        fn : picklable function
        items : iterable of (tag, args tuple); a :class:`TaskQueue` may grow while the run goes on
        window : int, optional
            Tasks in flight at most (default: twice :attr:`slots`).
        key : callable(tag) -> str, optional
            Deterministic task key (Dask); default a key unique to this call.
        retries : int
            Retries of a task whose worker failed (Dask).
        status : callable() -> str, optional
            How much of the run is done ("67/253 tiles done"), for the messages of a stopped run.
        what : str
            What a task is, for messages ("tile", "fit", "shard").
        hint : str
            The fix to suggest when a task is lost with its worker on every attempt.
        """
        raise NotImplementedError

    def clear_cache(self, namespaces) -> None:
        """Empty ``namespaces`` of the caches the executor's workers hold for the run (in this
        process the run's cache is the Runtime's: nothing to do here)."""

    def close(self):
        """Release what the executor holds (its cluster is closed by the run-time object)."""


#: Seconds a small call on every worker (a cache cleared, a memory reading) may take.
WORKER_CALL_SECONDS = 10.0


def run_on_workers(client, fn, *args, timeout: float = WORKER_CALL_SECONDS) -> dict:
    """``{worker address: fn(*args)}`` of every connected worker (``Client.run``; ``fn`` may take
    ``dask_worker``), bounded by ``timeout`` seconds: a worker that does not answer, or errs, is
    left out (``{}`` when none answers in time), so no caller waits on a stuck worker."""
    try:
        got = client.sync(client._run, fn, *args, on_error="return", callback_timeout=timeout)
    except (OSError, TimeoutError, RuntimeError, ValueError):
        return {}
    return {w: r for w, r in (got or {}).items() if not isinstance(r, BaseException)}


def _take(it):
    return next(it, _END)


class SequentialExecutor(Executor):
    """The reference executor: every task in this process, one after the other, in stream order."""

    name = "sequential"

    def imap(self, fn, items, **_):
        it = iter(items)
        while (x := _take(it)) is not _END:
            interrupts.check()
            tag, args = x
            yield tag, fn(*args)


class ThreadExecutor(Executor):
    """``n`` worker threads of this process.

    When a task or the caller raises, tasks not yet started are cancelled and running ones finish
    (a compiled kernel cannot be interrupted; a tile they write is not marked done, so a rerun
    computes it again), then the exception propagates.
    """

    name = "threads"

    def __init__(self, n: int):
        self.slots = max(1, int(n))

    def imap(self, fn, items, *, window=None, **_):
        window = window or 2 * self.slots
        it = iter(items)
        pending: dict = {}
        with ThreadPoolExecutor(self.slots, thread_name_prefix="gramtile-task") as pool:
            try:
                while True:
                    while len(pending) < window and (x := _take(it)) is not _END:
                        tag, args = x
                        # each task runs in a copy of the caller's context: the run's cache
                        # (gramtile.pipeline.cache.current) is the caller's
                        pending[pool.submit(contextvars.copy_context().run, fn, *args)] = tag
                    if not pending:
                        return
                    finished, _ = wait(pending, timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                    interrupts.check()
                    for f in finished:
                        yield pending.pop(f), f.result()
            finally:
                for f in pending:
                    f.cancel()


class Watchdog:
    """Stops a Dask run that can no longer progress, with one line saying why.

    - no worker connected for ``worker_wait`` seconds (all jobs ended, cancelled, hit their time
      limit, or are still queued; a scheduler nobody started workers for);
    - workers connected, but no task finished for ``stall_timeout`` seconds (workers paused at their
      memory limit, a hung task).

    ``jobs`` (optional) is the cluster's job watch (:class:`~gramtile.pipeline.compute.cluster.JobWatch`):
    each look lets it replace jobs lost to their time limit and describes the jobs for the message.
    """

    def __init__(self, client, worker_wait: float, stall_timeout: float, jobs=None, clock=time.monotonic):
        self.client, self.worker_wait, self.stall_timeout, self.jobs = client, float(worker_wait), \
            float(stall_timeout), jobs
        self.clock = clock
        self.last_worker = self.last_progress = clock()
        self._last_look = float("-inf")

    def progressed(self):
        self.last_progress = self.clock()

    def look(self, status=None, what: str = "task"):
        """:meth:`check`, at most every :data:`POLL_SECONDS` (a run may call it after every result)."""
        now = self.clock()
        if now - self._last_look >= POLL_SECONDS:
            self._last_look = now
            self.check(status, what)

    def check(self, status=None, what: str = "task"):
        """Raise :class:`ClusterLostError` or :class:`RunStalledError` when the run cannot progress."""
        now = self.clock()
        workers = self._workers()
        if self.jobs is not None:
            self.jobs.tick(len(workers))
        done = f"; {status()}" if status is not None else ""
        resume = "rerun the same command to resume"
        if workers:
            self.last_worker = now
            if now - self.last_progress > self.stall_timeout:
                paused = [a for a, w in workers.items() if w.get("status") == "paused"]
                why = (f"{len(paused)} of {len(workers)} worker(s) paused at their memory limit" if paused
                       else "a task is hung or far slower than expected")
                raise RunStalledError(
                    f"the run stalled: no {what} finished for {self.stall_timeout:g} s ({why}){done}. Fix: "
                    + ("give the workers more memory (the profile's memory per worker) or lower the run's own "
                       "(--memory-mb, --cache-mb), then " if paused else "raise the profile's stall_timeout if "
                       "tasks are this slow, or ")
                    + resume)
            return
        if now - self.last_worker > self.worker_wait:
            jobs = f" ({self.jobs.describe()})" if self.jobs is not None else ""
            raise ClusterLostError(
                f"no Dask worker connected for {self.worker_wait:g} s{jobs}{done}. The store keeps what is done. "
                f"Fix: check the cluster (its jobs, the scheduler's workers), then {resume}")

    def _workers(self) -> dict:
        try:
            return dict(self.client.scheduler_info(n_workers=-1).get("workers", {}))
        except (OSError, TimeoutError):
            return {}


class _OrphanedWaits(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" for the Dask client's internal ``AllExit``:
    a fetch given up on (:data:`FETCH_SECONDS`) leaves the client's inner wait behind, which ends
    with that exception when the client closes. It is no error of the run."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return type(exc).__name__ != "AllExit"


_ORPHANS = _OrphanedWaits()


class DaskExecutor(Executor):
    """Tasks on a Dask cluster through ``client``.

    Parameters
    ----------
    client : distributed.Client
    in_process : bool
        The workers are threads of this process (``LocalCluster(processes=False)``).
    worker_wait, stall_timeout : seconds (see :class:`Watchdog`)
    jobs : JobWatch, optional
        The job watch of a dask-jobqueue cluster.
    slots : int, optional
        Tasks at once, when no worker is connected yet (jobs still queued); default 1.
    capacity : int, optional
        Tasks at once when the cluster is at its largest (an adaptive dask-jobqueue cluster's
        ``max_jobs``): the default window keeps twice that many in flight, so that the cluster's
        adaptive scaling sees the work waiting and asks for more jobs.
    """

    name = "dask"

    def __init__(self, client, *, in_process: bool = False, worker_wait: float = 300.0,
                 stall_timeout: float = 1800.0, jobs=None, slots: int | None = None, capacity: int | None = None):
        self.client, self.in_process = client, in_process
        logging.getLogger("asyncio").addFilter(_ORPHANS)  # once per logger: filters are a set
        self.worker_wait, self.stall_timeout, self.jobs = worker_wait, stall_timeout, jobs
        self._slots, self.capacity = slots, capacity
        self._cache_installed = self._install_cache()

    def _install_cache(self) -> bool:
        """Give every worker of the run (those that join later too) a cache of its own for the
        run's tasks (:class:`~gramtile.pipeline.cache.WorkerCache`); False when the cluster refused
        it (its tasks then keep nothing between them: slower, never wrong)."""
        WorkerPlugin = optional.distributed().diagnostics.plugin.WorkerPlugin
        plugin = type("GramtileWorkerCache", (WorkerCache, WorkerPlugin), {})()
        try:
            self.client.register_plugin(plugin, name=PLUGIN)
            return True
        except (OSError, TimeoutError, RuntimeError) as e:
            logging.getLogger("gramtile").debug(f"gramtile: no worker cache on this cluster ({e})")
            return False

    def clear_cache(self, namespaces) -> None:
        """Empty ``namespaces`` of every worker's cache of the run (e.g. the blocks an evaluation
        kept: the next one reads others, and a worker's memory plan counts what it holds)."""
        if self._cache_installed:
            run_on_workers(self.client, clear_worker, list(namespaces))  # a worker gone took its cache

    def close(self):
        """Remove the run's worker caches (emptying them)."""
        if self._cache_installed:
            self._cache_installed = False
            try:
                self.client.unregister_worker_plugin(PLUGIN)
            except (OSError, TimeoutError, RuntimeError, ValueError):
                pass  # the cluster is gone or going: so are its caches

    @property
    def slots(self) -> int:
        try:
            n = sum(self.client.nthreads().values())
        except (OSError, TimeoutError):
            n = 0
        return n or self._slots or 1

    def imap(self, fn, items, *, window=None, key=None, retries=0, status=None, what="task", hint=""):
        distributed = optional.distributed()
        # the window follows the workers as they come and go (jobs start late, are replaced, scale)
        fixed, window, sized = window, 4, float("-inf")
        token = uuid.uuid4().hex[:12]
        it = iter(items)
        pending: dict = {}
        fetch: dict = {}  # future -> seconds its next fetch may take
        count = 0
        watch = Watchdog(self.client, self.worker_wait, self.stall_timeout, self.jobs)
        try:
            while True:
                if not fixed and time.monotonic() - sized >= POLL_SECONDS:
                    window, sized = max(4, 2 * max(self.slots, self.capacity or 0)), time.monotonic()
                while len(pending) < (fixed or window) and (x := _take(it)) is not _END:
                    tag, args = x
                    k = key(tag) if key is not None else f"gramtile-{what}-{token}-{count}"
                    count += 1
                    pending[self.client.submit(fn, *args, key=k, retries=retries, pure=False)] = tag
                if not pending:
                    return
                try:
                    finished, _ = distributed.wait(list(pending), timeout=POLL_SECONDS, return_when=FIRST_COMPLETED)
                except (TimeoutError, distributed.TimeoutError):
                    finished = ()
                interrupts.check()
                watch.look(status, what)
                for f in finished:
                    try:
                        # bounded: a result lost with its worker between the wait and this fetch (a job
                        # ended at its time limit) is computed again only when a worker comes, and an
                        # unbounded fetch would wait for that without the watchdog looking
                        res = f.result(timeout=fetch.get(f, FETCH_SECONDS))
                    except (TimeoutError, distributed.TimeoutError):
                        if f.status == "finished":  # still there: a large result, given longer next time
                            fetch[f] = min(2 * fetch.get(f, FETCH_SECONDS), 300.0)
                        break  # lost (computed again when a worker comes): the watchdog looks, then wait again
                    except distributed.KilledWorker as e:
                        raise TaskLostError(
                            f"a {what} task was lost with its worker more often than the scheduler allows ({e}); a "
                            "worker that dies on every attempt usually runs out of memory. Fix: "
                            + (hint or "give the workers more memory, or use fewer workers per machine")
                            + ", then rerun the same command") from None
                    tag = pending.pop(f)
                    fetch.pop(f, None)
                    watch.progressed()
                    f.release()
                    yield tag, res
        finally:
            for f in pending:  # leave no task of this run behind on a shared scheduler
                try:
                    f.cancel()
                except (OSError, RuntimeError, concurrent.futures.CancelledError):
                    pass
