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
one task may use (:meth:`worker_memory_mb`: the profile's memory per worker process, the limit the
scheduler reports for its workers, or what this machine has free).
"""
from __future__ import annotations

import logging
import signal
import threading
from contextlib import ExitStack, contextmanager

import dask

from gramtile.pipeline import optional
from gramtile.pipeline.compute.cluster import (
    WORKER_TTL,
    Profile,
    get_profile,
    job_range,
    lost_scheduler,
    parse_memory_mb,
    slurm_cluster_options,
    start_jobs,
)
from gramtile.pipeline.compute.errors import ClusterConfigError
from gramtile.pipeline.compute.executors import DaskExecutor, Executor, SequentialExecutor, ThreadExecutor
from gramtile.pipeline.compute.jobwatch import JobWatch
from gramtile.pipeline.memory import available_memory_mb
from gramtile.pipeline.progress import log


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
    """

    def __init__(self, cluster="local", cluster_file=None, scheduler_file=None, client=None):
        self.client = client
        if client is not None:
            self.profile = Profile("client", "client", {}, "a connected Dask client")
        elif scheduler_file is not None:
            self.profile = Profile("scheduler-file", "scheduler", {"scheduler_file": str(scheduler_file)},
                                   "--scheduler-file")
        elif isinstance(cluster, Profile):
            self.profile = cluster
        else:
            self.profile = get_profile(cluster or "sequential", cluster_file)
        self._stack: ExitStack | None = None  # open while the Runtime is entered
        self._executor: Executor | None = None
        self._depth = 0  # nested ``with``: the outermost closes

    @classmethod
    def of(cls, cluster=None, cluster_file=None) -> Runtime:
        """``cluster`` as a Runtime: itself when it is one; else a profile name or address
        (None: ``sequential``)."""
        if isinstance(cluster, Runtime):
            return cluster
        return cls(cluster or "sequential", cluster_file)

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
        if self._executor is not None:
            return self._executor.slots
        if self.client is not None:
            return max(1, sum(self.client.nthreads().values()))
        p = self.profile
        if p.type == "slurm":  # a job's `cores` threads, over its processes
            return job_range(p)[0] * int(p.options.get("cores", 1))
        per = int(p.options.get("threads_per_worker", 1)) if p.type == "local" else 1
        return 1 if p.type == "sequential" else p.n_workers * per

    def worker_memory_mb(self) -> float:
        """Memory one worker process may use, in MB: what a task's plan (solver, caches, blocks)
        must fit. Profiles that name it (``local``'s ``memory_limit``, ``slurm``'s ``memory`` over
        its ``processes``) give it; a running scheduler reports its workers' limits (the smallest
        counts); in-process runs share what this machine has free among their threads."""
        p, o = self.profile, self.profile.options
        reported = self._reported_memory_mb()
        if reported:
            return reported
        free = available_memory_mb()
        if p.type == "local" and o.get("memory_limit", "auto") != "auto":
            return parse_memory_mb(o["memory_limit"], f"profile {p.name!r} memory_limit")
        if p.type == "slurm" and "memory" in o:
            return parse_memory_mb(o["memory"], f"profile {p.name!r} memory") / int(o.get("processes", 1))
        if p.type in ("local", "threads"):
            return free / max(1, p.n_workers)
        return free

    def _reported_memory_mb(self) -> float | None:
        client = self.client or getattr(self._executor, "client", None)
        if client is None:
            return None
        try:
            limits = [w.get("memory_limit") or 0 for w in client.scheduler_info(n_workers=-1)["workers"].values()]
        except (OSError, TimeoutError, KeyError):
            return None
        limits = [x for x in limits if x > 0]
        return min(limits) / 2**20 if limits else None

    # ---- opening and closing ----------------------------------------------------------------

    def __enter__(self) -> Runtime:
        if self._stack is None:
            self._stack = ExitStack()
        self._depth += 1
        return self

    def __exit__(self, *exc):
        self._depth -= 1
        if self._depth <= 0:
            self.close()
        return False

    def close(self):
        """Close the executor and the cluster this Runtime started (a given client stays open)."""
        stack, self._stack, self._executor, self._depth = self._stack, None, None, 0
        if stack is not None:
            stack.close()

    @contextmanager
    def session(self):
        """The executor for one step: the open one when the Runtime is entered (opened now if no
        step opened it yet, kept until the Runtime closes), else one opened for this step."""
        if self._stack is not None:
            if self._executor is None:
                self._executor = self._stack.enter_context(self._open())
            yield self._executor
            return
        with self._open() as ex:
            yield ex

    @property
    def executor(self) -> Executor | None:
        """The open executor, if a step opened one."""
        return self._executor

    @contextmanager
    def _open(self):
        p, o = self.profile, self.profile.options
        if p.type == "sequential":
            yield SequentialExecutor()
            return
        if p.type == "threads":
            yield ThreadExecutor(p.n_workers)
            return
        waits = {"worker_wait": float(o.get("worker_wait", 300)), "stall_timeout": float(o.get("stall_timeout", 1800))}
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
            with cluster, distributed.Client(cluster) as client:
                _announce(p, client)
                yield DaskExecutor(client, in_process=p.in_process, slots=p.n_workers, **waits)
        elif p.type == "scheduler":
            address, client = self._connect(p, distributed)
            with lost_scheduler(client, address):
                _announce(p, client)
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
            with cluster, distributed.Client(cluster) as client:
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
            with KubeCluster(**kube) as cluster, distributed.Client(cluster) as client:
                _announce(p, client)
                yield DaskExecutor(client, slots=p.n_workers, **waits)
        else:  # pragma: no cover  (profiles are validated)
            raise ClusterConfigError(f"profile {p.name!r}: unknown type {p.type!r}")

    @staticmethod
    def _connect(p: Profile, distributed):
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
    def _client_in_process(client) -> bool:
        cluster = getattr(client, "cluster", None)
        return bool(cluster is not None and getattr(cluster, "processes", True) is False)

    def __repr__(self):
        return f"Runtime({self.profile.name!r}, type={self.profile.type!r})"


def _announce(p: Profile, client, extra: str = ""):
    link = getattr(client, "dashboard_link", None)
    log.info(f"gramtile: Dask cluster {p.name!r}" + (f" ({extra})" if extra else "")
             + (f", dashboard {link}" if link else ""))


@contextmanager
def _sigint_ignored():
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
