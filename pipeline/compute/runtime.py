"""The run-time object: where and how a command runs its tasks.

A :class:`Runtime` is made once per command (by the CLI from ``--cluster``, ``--cluster-file`` and
``--scheduler-file``; in Python from a profile name, a scheduler address or a connected Dask client)
and passed down to everything that runs tasks: ``prepare``, the Gram engine, ``verify --repair``,
every fit of ``evaluate``/``train`` and the workflows. It resolves the cluster profile at once (a bad
profile fails before any work), opens the executor (:mod:`~gramtile.pipeline.compute.executors`)
the first time a step needs one and keeps it for the steps that follow, and closes it (and the
cluster it started) when the command ends::

    with Runtime.of("local") as rt:
        run_gram(corpus, spec, "k1.zarr", cluster=rt)   # starts the LocalCluster
        run_gram(corpus, spec2, "k2.zarr", cluster=rt)  # reuses it
    # cluster closed here

Without ``with``, each step opens and closes its own executor.

It also answers the planning questions that depend on where tasks run: how many run at once
(:attr:`slots`), whether they share the driver's memory (:attr:`in_process`) and how much memory
one task may plan to use (:meth:`task_memory`: from the profile's memory per worker process, the
limit the scheduler reports for its workers, or what this machine has available).

A Runtime owns the run's cache (:mod:`gramtile.pipeline.cache`, :attr:`Runtime.cache`): what its
tasks keep between them in one process (open stores, shards, assembled tile ranges, loaded
resources), made active while a step runs and emptied when the Runtime closes; each Dask worker
of the run has its own for the run's length.
"""
from __future__ import annotations

import copy
import logging
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dask

from gramtile.pipeline import optional
from gramtile.pipeline.cache import Cache, opened
from gramtile.pipeline.compute.cluster import (
    WORKER_TTL,
    Profile,
    connection_noise_quieted,
    get_profile,
    job_range,
    lost_scheduler,
    parse_memory_mb,
    slurm_cluster_options,
    start_jobs,
)
from gramtile.pipeline.compute.errors import ClusterConfigError
from gramtile.pipeline.compute.executors import (
    DaskExecutor,
    Executor,
    SequentialExecutor,
    ThreadExecutor,
    run_on_workers,
)
from gramtile.pipeline.compute.jobwatch import JobWatch
from gramtile.pipeline.memory import available_memory_mb, process_memory_mb
from gramtile.pipeline.progress import log

if TYPE_CHECKING:
    from distributed import Client

#: What a worker process holds before any task (MB): measured at 213 MB once the learners and the
#: tile task are imported; compiling their Numba cores adds to it. Used until the scheduler
#: reports more.
WORKER_BASE_MB = 300.0


@dataclass(frozen=True)
class TaskMemory:
    """The memory the tasks of one process may plan for (:meth:`Runtime.task_memory`)."""

    process_mb: float   # what the tasks running at once in one process may use together
    tasks: int          # tasks that run at once in one process
    where: str          # where the figure comes from, for plans and refusals
    on_workers: bool    # tasks run in worker processes whose limit pauses them when exceeded

    @property
    def per_task_mb(self) -> float:
        return self.process_mb / max(1, self.tasks)


class _OpenState:
    """What an entered Runtime holds open: its exit stack, the executor, the ``with`` depth."""

    def __init__(self) -> None:
        self.stack: ExitStack | None = None
        self.executor: Executor | None = None
        self.depth = 0  # nested ``with``: the outermost closes
        self.cache = Cache()  # what the run's tasks in this process keep between them


class Runtime:
    """Where a command runs its tasks (see the module docstring).

    Parameters
    ----------
    cluster : str or Profile
        A profile name of cluster.yaml (``sequential``, ``threads``, ``local``, ``slurm``, ...) or
        a scheduler address (``tcp://host:8786``).
    cluster_file : path, optional
        The cluster.yaml to read profiles from.
    scheduler_file : path, optional
        A scheduler file written by ``dask scheduler --scheduler-file``: connect to that scheduler
        (``cluster`` is then ignored).
    client : distributed.Client, optional
        An already connected client to run on (never closed here).

    Other Parameters
    ----------------
    progress : bool
        Progress bars (tiles, shards, fits; a plain line every few seconds off a terminal).
        Messages (plans, summaries) go to the ``gramtile`` logger either way. This and the
        following keyword-only arguments are the run's settings, read by every step instead of
        travelling through their signatures.
    memory_mb : float, optional
        The learners' memory budget per process (default: from where the fits run,
        :meth:`task_memory`).
    cache_mb : float, optional
        smo's kernel-row cache per process (default: a share of the budget per fit).
    scratch : path, optional
        Local folder for smo's kernel row file (default: the system's temporary folder).
    """

    def __init__(self, cluster: str | Profile | None = "local", cluster_file: str | os.PathLike[str] | None = None,
                 scheduler_file: str | os.PathLike[str] | None = None, client: Client | None = None, *,
                 progress: bool = True, memory_mb: float | None = None, cache_mb: float | None = None,
                 scratch: str | os.PathLike[str] | None = None) -> None:
        self.client = client
        self.progress, self.memory_mb, self.cache_mb = bool(progress), memory_mb, cache_mb
        self.scratch = None if scratch is None else str(scratch)
        if client is not None:
            self.profile = Profile("client", "client", {}, "a connected Dask client")
        elif scheduler_file is not None:
            self.profile = Profile("scheduler-file", "scheduler", {"scheduler_file": str(scheduler_file)},
                                   "--scheduler-file")
        elif isinstance(cluster, Profile):
            self.profile = cluster
        else:
            self.profile = get_profile(cluster or "sequential", cluster_file)
        self._state = _OpenState()  # shared with the copies of :meth:`with_settings`

    @classmethod
    def of(cls, cluster: str | Profile | Runtime | Client | None = None,
           cluster_file: str | os.PathLike[str] | None = None, **settings: Any) -> Runtime:
        """``cluster`` as a Runtime: itself when it is one; a connected ``distributed.Client``
        (run there, never closed here); else a profile name or address (None: ``sequential``),
        with ``settings`` (``progress``, ``memory_mb``, ...). Anything else is a
        :class:`ClusterConfigError` naming what is accepted."""
        if isinstance(cluster, Runtime):
            return cluster
        if cluster is None or isinstance(cluster, (str, Profile)):
            return cls(cluster or "sequential", cluster_file, **settings)
        if callable(getattr(cluster, "submit", None)) and callable(getattr(cluster, "scheduler_info", None)):
            return cls(client=cluster, **settings)
        raise ClusterConfigError(f"cluster={cluster!r}: pass a cluster profile name (e.g. 'threads', 'local'), a "
                                 "scheduler address (tcp://HOST:8786), a distributed.Client or a gramtile Runtime")

    def with_settings(self, **settings: Any) -> Runtime:
        """This Runtime with other settings (e.g. ``progress=False`` for a step that runs beside
        others): the same profile and the same open executor, opened and closed once for both."""
        other = copy.copy(self)
        for k, v in settings.items():
            if k not in ("progress", "memory_mb", "cache_mb", "scratch"):
                raise TypeError(f"with_settings(): unknown setting {k!r}")
            setattr(other, k, v)
        return other

    # ---- what planning needs to know -------------------------------------------------------

    @property
    def name(self) -> str:
        """The profile's name (recorded in logs and manifests)."""
        return self.profile.name

    @property
    def kind(self) -> str:
        """``sequential``, ``threads`` or ``dask``: the executor this run uses."""
        t = self.profile.type
        return t if t in ("sequential", "threads") else "dask"

    @property
    def in_process(self) -> bool:
        """Tasks run in this process (they share its memory; stores in memory:// are visible)."""
        if self.client is not None:
            return self._client_in_process(self.client)
        return self.profile.type == "sequential" or self.profile.in_process

    @property
    def slots(self) -> int:
        """Tasks that run at once (the expected count while a cluster is still starting)."""
        if self._state.executor is not None:
            return self._state.executor.slots
        if self.client is not None:
            nthreads: dict[str, int] = self.client.nthreads()
            return max(1, sum(nthreads.values()))
        p = self.profile
        if p.type == "slurm":  # a job's `cores` threads, over its processes
            jobs: int = job_range(p)[0]
            return jobs * int(p.options.get("cores", 1))
        per = int(p.options.get("threads_per_worker", 1)) if p.type == "local" else 1
        return 1 if p.type == "sequential" else p.n_workers * per

    def worker_memory_mb(self) -> float:
        """Memory limit of one worker process, in MB: the limit the scheduler reports for its
        workers (the smallest counts), else the profile's (``local``'s ``memory_limit``,
        ``slurm``'s ``memory`` over its ``processes``); in-process runs have what this machine
        has available now, shared among their threads."""
        p, o = self.profile, self.profile.options
        reported = self._worker_metrics()
        if reported and reported["limit_mb"]:
            limit: float = reported["limit_mb"]
            return limit
        free = available_memory_mb()
        if p.type == "local" and o.get("memory_limit", "auto") != "auto":
            return parse_memory_mb(o["memory_limit"], f"profile {p.name!r} memory_limit")
        if p.type == "slurm" and "memory" in o:
            return parse_memory_mb(o["memory"], f"profile {p.name!r} memory") / int(o.get("processes", 1))
        if p.type in ("local", "threads"):
            return free / max(1, p.n_workers)
        return free

    def task_memory(self, share: float) -> TaskMemory:
        """What the tasks of one process may plan to use (solver choice, row caches, blocks).

        In this process: ``share`` of the memory available now (or ``memory_mb``), split among the
        tasks that run at once (``memory_mb`` of the Runtime, when set, replaces the figure of
        one process). In worker processes: the worker's limit up to the fraction where
        Dask pauses it (``distributed.worker.memory.pause``), less what the worker already holds
        (reported by the scheduler; at least :data:`WORKER_BASE_MB`), split among its threads; a
        plan over that would pause the worker for good, so it is refused before it starts. An
        entered Runtime of a running scheduler is connected first, to read its workers' limits.
        """
        p, o, memory_mb = self.profile, self.profile.options, self.memory_mb
        if self.in_process:
            tasks = self.slots if self.kind != "sequential" else 1
            if memory_mb is not None:
                return TaskMemory(float(memory_mb), tasks, "--memory-mb", False)
            avail = available_memory_mb()
            return TaskMemory(share * avail, tasks, f"{share:.0%} of the {avail:,.0f} MB available", False)
        if self._state.stack is not None and self._state.executor is None and self.client is None:
            self._state.executor = self._state.stack.enter_context(self._open())
        metrics = self._worker_metrics()
        tasks = (metrics or {}).get("threads") or (
            int(o.get("threads_per_worker", 1)) if p.type == "local"
            else max(1, int(o.get("cores", 1)) // int(o.get("processes", 1))) if p.type == "slurm" else 1)
        if memory_mb is not None:
            return TaskMemory(float(memory_mb), tasks, "--memory-mb", True)
        limit = self.worker_memory_mb()
        pause = dask.config.get("distributed.worker.memory.pause", 0.8)
        pause = float(pause) if pause else float(dask.config.get("distributed.worker.memory.terminate", 0.95) or 1.0)
        held = max(WORKER_BASE_MB, (metrics or {}).get("held_mb") or 0.0)
        where = (f"a worker of profile {p.name!r} ({limit:,.0f} MB limit, paused at {pause:.0%}, "
                 f"{held:,.0f} MB held by the worker itself)")
        return TaskMemory(max(0.0, pause * limit - held), tasks, where, True)

    def _worker_metrics(self) -> dict[str, Any] | None:
        """The connected workers' smallest memory limit, largest memory in use and most threads."""
        client = self.client or getattr(self._state.executor, "client", None)
        if client is None:
            return None
        try:
            workers = list(client.scheduler_info(n_workers=-1)["workers"].values())
        except (OSError, TimeoutError, KeyError):
            return None
        if not workers:
            return None
        limits = [w.get("memory_limit") or 0 for w in workers]
        limits = [x for x in limits if x > 0]
        # what the workers hold now, asked of them: the scheduler's figure is their last heartbeat,
        # which may date from the fits of the step before (their blocks since released)
        now = [mb for mb in run_on_workers(client, process_memory_mb).values() if mb is not None]
        held = max(now) if now else max((w.get("metrics") or {}).get("memory", 0) for w in workers) / 1e6
        return {"limit_mb": min(limits) / 1e6 if limits else None, "held_mb": held,
                "threads": max(int(w.get("nthreads") or 1) for w in workers)}

    # ---- opening and closing ----------------------------------------------------------------

    def __enter__(self) -> Runtime:
        if self._state.stack is None:
            self._state.stack = ExitStack()
        self._state.depth += 1
        return self

    def __exit__(self, *exc: Any) -> bool | None:
        self._state.depth -= 1
        if self._state.depth <= 0:
            return self.close(*exc)
        return False

    def close(self, *exc: Any) -> bool | None:
        """Close the executor and the cluster this Runtime started (a given client stays open).
        An exception the command ends with passes through what was opened, which may put it in
        its own words (a lost scheduler becomes one :class:`ClusterLostError` line)."""
        st = self._state
        stack, st.stack, st.executor, st.depth = st.stack, None, None, 0
        st.cache.clear()
        if stack is None:
            return False
        return stack.__exit__(*(exc or (None, None, None)))

    def release(self, *namespaces: str) -> None:
        """Empty ``namespaces`` of the run's cache here and in the workers of the open executor."""
        for ns in namespaces:
            self.cache.clear(ns)
        if self._state.executor is not None:
            self._state.executor.clear_cache(namespaces)

    @property
    def cache(self) -> Cache:
        """The run's cache (:mod:`gramtile.pipeline.cache`): the one a caller opened around the run,
        else this Runtime's own, emptied when it closes."""
        return opened() or self._state.cache

    @contextmanager
    def session(self) -> Iterator[Executor]:
        """The executor for one step: the open one when the Runtime is entered (opened now if no
        step opened it yet, kept until the Runtime closes), else one opened for this step."""
        with self.cache.active():  # the tasks run in this process use the run's cache
            if self._state.stack is not None:
                if self._state.executor is None:
                    self._state.executor = self._state.stack.enter_context(self._open())
                yield self._state.executor
                return
            with self._open() as ex:
                yield ex

    @property
    def executor(self) -> Executor | None:
        """The open executor, if a step opened one."""
        return self._state.executor

    @contextmanager
    def _open(self) -> Iterator[Executor]:
        with self._opened() as ex:
            try:
                yield ex
            finally:
                ex.close()

    @contextmanager
    def _opened(self) -> Iterator[Executor]:
        p, o = self.profile, self.profile.options
        if p.type == "sequential":
            yield SequentialExecutor()
            return
        if p.type == "threads":
            yield ThreadExecutor(p.n_workers)
            return
        waits: dict[str, Any] = {"worker_wait": float(o.get("worker_wait", 300)),
                                 "stall_timeout": float(o.get("stall_timeout", 1800))}
        if self.client is not None:
            yield DaskExecutor(self.client, in_process=self.in_process, **waits)
            return
        distributed = optional.distributed()
        if p.type == "local":
            # a worker silent for worker_ttl seconds (stopped, hung, its machine asleep) is removed by
            # the scheduler and its tasks go to the others; Dask's default waits 5 minutes
            with dask.config.set({"distributed.scheduler.worker-ttl": f"{float(o.get('worker_ttl', WORKER_TTL))}s"}), \
                    _sigint_ignored():  # worker processes started now inherit it: Ctrl-C reaches the driver only
                cluster = distributed.LocalCluster(
                    n_workers=o.get("n_workers", 2), threads_per_worker=o.get("threads_per_worker", 1),
                    memory_limit=o.get("memory_limit", "auto"), processes=o.get("processes", True),
                    dashboard_address=o.get("dashboard_address", ":0"), silence_logs=logging.CRITICAL)
            # a cluster closed mid-run (Ctrl-C, SIGTERM) logs its streams' closed connections: the run says it in one line
            with connection_noise_quieted(), cluster, distributed.Client(cluster) as client:
                _announce(p, client, level=logging.DEBUG)
                yield DaskExecutor(client, in_process=p.in_process, slots=p.n_workers, **waits)
        elif p.type == "scheduler":
            address, client = self._connect(p, distributed)
            with lost_scheduler(client, address):
                # the scheduler is the user's (its dashboard too): only -v says where we connected
                log.debug(f"gramtile: connected to the Dask scheduler at {address} (profile {p.name!r})")
                yield DaskExecutor(client, slots=None, **waits)
        elif p.type == "slurm":
            SLURMCluster = optional.dask_jobqueue().SLURMCluster
            try:
                # its scheduler runs in this process: its log (workers lost at their time limit, results
                # fetched again) is the run's business, reported in one line when it cannot go on
                cluster = SLURMCluster(silence_logs=logging.CRITICAL, **slurm_cluster_options(p))
            except (OSError, ValueError, RuntimeError) as e:
                raise ClusterConfigError(f"profile {p.name!r}: cannot start the SLURM cluster ({e}). Fix: check the "
                                         "profile's keys (`gramtile profiles --job-script NAME` shows the job "
                                         "script) and that sbatch works here") from None
            with connection_noise_quieted(), cluster, distributed.Client(cluster) as client:
                low, high = start_jobs(p, cluster)
                watch = JobWatch(cluster, low, high, per_job=int(o.get("processes", 1)))
                _announce(p, client, f"{low}-{high} job(s)" if low != high else f"{low} job(s)")
                # a job runs `cores` threads (over its processes): the run keeps them all busy
                threads = int(o.get("cores", 1))
                yield DaskExecutor(client, slots=low * threads, capacity=high * threads, jobs=watch, **waits)
        elif p.type == "kubernetes":
            try:
                KubeCluster = optional.dask_kubernetes_operator().KubeCluster
            except ImportError:
                raise ClusterConfigError(f"profile {p.name!r} needs dask-kubernetes. "
                                         "Fix: pip install dask-kubernetes, or use another profile") from None
            kube = {k: v for k, v in o.items() if k not in ("worker_wait", "stall_timeout")}
            with connection_noise_quieted(), KubeCluster(**kube) as cluster, distributed.Client(cluster) as client:
                _announce(p, client)
                yield DaskExecutor(client, slots=p.n_workers, **waits)
        else:  # pragma: no cover  (profiles are validated)
            raise ClusterConfigError(f"profile {p.name!r}: unknown type {p.type!r}")

    @staticmethod
    def _connect(p: Profile, distributed: Any) -> tuple[str, Client]:
        o = p.options
        timeout = o.get("timeout", 10)
        if "scheduler_file" in o:
            where = f"the scheduler file {o['scheduler_file']}"
            try:
                client = distributed.Client(scheduler_file=o["scheduler_file"], timeout=timeout)
            except (OSError, TimeoutError, ValueError) as e:
                raise ClusterConfigError(
                    f"cannot reach the Dask scheduler of {where} ({' '.join(str(e).split())}). Fix: start "
                    f"`dask scheduler --scheduler-file {o['scheduler_file']}` and its workers first") from None
            return client.scheduler.address, client
        from gramtile.pipeline.compute.cluster import scheduler_address
        address = scheduler_address(p)
        try:
            client = distributed.Client(address, timeout=timeout)
        except (OSError, TimeoutError) as e:
            raise ClusterConfigError(
                f"profile {p.name!r}: cannot reach the Dask scheduler at {address} ({e}). Fix: start "
                f"`dask scheduler` and `dask worker {address}`, or set $GRAMTILE_SCHEDULER") from None
        return address, client

    @staticmethod
    def _client_in_process(client: Any) -> bool:
        cluster = getattr(client, "cluster", None)
        return bool(cluster is not None and getattr(cluster, "processes", True) is False)

    def __repr__(self) -> str:
        return f"Runtime({self.profile.name!r}, type={self.profile.type!r})"


def _announce(p: Profile, client: Any, extra: str = "", level: int = logging.INFO) -> None:
    """The cluster a run started, and its dashboard: said for batch clusters (their jobs take time
    to start), a debugging line (``-v``) for a LocalCluster."""
    link = getattr(client, "dashboard_link", None)
    log.log(level, f"gramtile: Dask cluster {p.name!r}" + (f" ({extra})" if extra else "")
             + (f", dashboard {link}" if link else ""))


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while worker processes start, so that they inherit it (Python keeps an
    ignored SIGINT at start-up): a Ctrl-C in the terminal then interrupts the driver alone, which
    closes the cluster, instead of printing every worker's KeyboardInterrupt traceback."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
