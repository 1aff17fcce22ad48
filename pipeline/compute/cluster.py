"""Named cluster profiles (``cluster.yaml``) and Dask clients made from them.

A profile holds resources only — how many workers, how much memory, where the scheduler
is — never a parameter that changes a stored number. ``cluster.yaml`` looks like::

    profiles:
      local: {n_workers: 2, threads_per_worker: 1, memory_limit: 2GiB}
      scheduler: {address: "tcp://127.0.0.1:8786"}
      big: {type: local, n_workers: 16}

A profile's ``type`` (``sequential``, ``threads``, ``local``, ``scheduler``, ``slurm``,
``kubernetes``) defaults to its name. The file is looked up in this order: an explicit ``cluster_file``
(``--cluster-file``), ``$GRAMTILE_CLUSTER_FILE``, ``./cluster.yaml``. The built-in profiles
(``sequential``, ``local``, ``threads``, ``scheduler``, ``slurm``, ``kubernetes``) are those of the
repository's top-level ``cluster.yaml``, shipped inside the package as ``gramtile/cluster.yaml``
(:func:`packaged_cluster_file`); they are always available unless the user's file redefines them.
``$GRAMTILE_SCHEDULER`` overrides the address of a ``scheduler`` profile.

Profile types
-------------
sequential
    No Dask: callers run their tasks in-process (:func:`open_client` yields None).
threads
    ``n_workers`` worker threads of the driver process. The Gram engine runs its tile tasks on a
    plain thread pool (:func:`~gramtile.pipeline.compute.executors.run_threads`: no ``distributed``, no
    event loop, no cluster to start); callers that need a Dask client (``gramtile prepare``,
    recipes sharing one cluster) get a ``LocalCluster(processes=False)`` of as many threads.
local
    ``distributed.LocalCluster(n_workers, threads_per_worker, memory_limit, processes)``.
scheduler
    A running ``dask scheduler`` at ``address`` (``tcp://host:8786``), with workers started
    by ``dask worker ADDRESS``; ``timeout`` seconds to connect.
slurm
    ``dask_jobqueue.SLURMCluster(**kwargs)`` scaled to ``jobs`` jobs;
    :func:`slurm_job_script` shows the job script without SLURM.
kubernetes
    ``dask_kubernetes.operator.KubeCluster(**kwargs)`` (only if dask-kubernetes is installed).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path

import dask
import yaml

from gramtile.pipeline import optional
from gramtile.pipeline.compute.errors import ClusterConfigError, ClusterLostError

TYPES = ("sequential", "threads", "local", "scheduler", "slurm", "kubernetes")


_POS_INT = "a positive integer"
#: Seconds of silence after which the scheduler of a ``local`` profile drops a worker.
WORKER_TTL = 60
# key -> (check, what it must be); None check = any value
_KEYS = {
    "sequential": {},
    "threads": {"n_workers": ("posint", _POS_INT)},
    "local": {"n_workers": ("posint", _POS_INT), "threads_per_worker": ("posint", _POS_INT),
              "memory_limit": ("mem", "a size such as 2GiB, a number of bytes, or 'auto'"),
              "processes": ("bool", "true or false"),
              "dashboard_address": ("str", "an address such as ':8787' (default ':0': any free port)"),
              "worker_ttl": ("posnum", "a positive number of seconds (default 60)")},
    "scheduler": {"address": ("addr", "an address such as tcp://127.0.0.1:8786"),
                  "timeout": ("posnum", "a positive number of seconds")},
    "slurm": {"cores": ("posint", _POS_INT), "processes": ("posint", _POS_INT),
              "memory": ("mem", "a size such as 16GiB"), "walltime": ("str", "a time such as '02:00:00'"),
              "queue": ("str", "a partition name"), "account": ("str", "an account name"),
              "jobs": ("posint", _POS_INT), "job_extra_directives": ("strlist", "a list of strings"),
              "job_script_prologue": ("strlist", "a list of shell lines"),
              "worker_extra_args": ("strlist", "a list of strings"),
              "log_directory": ("str", "a directory"), "local_directory": ("str", "a directory"),
              "interface": ("str", "a network interface name such as ib0"), "python": ("str", "a python path"),
              "job_name": ("str", "a job name"), "shebang": ("str", "a shebang line")},
    "kubernetes": None,  # passed to KubeCluster as they are (its options evolve quickly)
}


@dataclass(frozen=True)
class Profile:
    """A validated cluster profile: ``name``, ``type``, ``options`` and where it came from."""

    name: str
    type: str
    options: dict = field(default_factory=dict)
    source: str = "built-in"

    @property
    def in_process(self) -> bool:
        """Workers are threads of the driver's process (a ``threads`` profile, or a ``local`` one with
        ``processes: false``)."""
        return self.type == "threads" or (self.type == "local" and self.options.get("processes", True) is False)

    @property
    def n_workers(self) -> int:
        """Expected number of worker processes (1 for sequential; a guide for read-ahead)."""
        o = self.options
        if self.type in ("local", "threads"):
            return int(o.get("n_workers", 2))
        if self.type == "slurm":
            return int(o.get("jobs", 1)) * int(o.get("processes", 1))
        if self.type == "kubernetes":
            return int(o.get("n_workers", 1))
        return 1 if self.type == "sequential" else 2


def find_cluster_file(cluster_file=None):
    """The cluster file to use (see module docstring), or None for the built-in profiles."""
    if cluster_file is not None:
        p = Path(cluster_file)
        if not p.is_file():
            raise ClusterConfigError(f"cluster file {p} does not exist. Fix: check --cluster-file")
        return p
    env = os.environ.get("GRAMTILE_CLUSTER_FILE")
    if env:
        p = Path(env)
        if not p.is_file():
            raise ClusterConfigError(f"$GRAMTILE_CLUSTER_FILE={env} does not exist. Fix: unset it or correct it")
        return p
    p = Path("cluster.yaml")
    return p if p.is_file() else None


def packaged_cluster_file():
    """The built-in profiles' file: ``cluster.yaml`` inside the installed package (a link to the
    repository's top-level ``cluster.yaml`` in a checkout, a copy of it in a wheel)."""
    p = Path(str(files("gramtile").joinpath("cluster.yaml")))
    if not p.is_file():
        raise ClusterConfigError(f"the built-in cluster profiles file {p} is missing from the installation. "
                                 "Fix: reinstall gramtile")
    return p


def load_profiles(cluster_file=None) -> dict:
    """All profiles by name, validated; the user's file's profiles override the built-in ones
    (:func:`packaged_cluster_file`)."""
    builtin = packaged_cluster_file()
    profiles = {n: replace(p, source=f"built-in ({builtin})") for n, p in read_profiles(builtin).items()}
    path = find_cluster_file(cluster_file)
    if path is not None and path.resolve() != packaged_cluster_file().resolve():
        profiles.update(read_profiles(path))
    return profiles


def read_profiles(path) -> dict:
    """The validated profiles of one cluster file, by name."""
    profiles = {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ClusterConfigError(f"{path}: not valid YAML ({e}). Fix: correct the syntax") from None
    if not isinstance(data, dict) or set(data) - {"profiles"}:
        raise ClusterConfigError(f"{path}: expected a mapping with the single key 'profiles', got "
                                 f"{sorted(data) if isinstance(data, dict) else type(data).__name__}. "
                                 "Fix: put every profile under 'profiles:'")
    entries = data.get("profiles") or {}
    if not isinstance(entries, dict):
        raise ClusterConfigError(f"{path}: 'profiles' must map names to settings")
    for name, opts in entries.items():
        profiles[str(name)] = _validate(str(name), opts, path)
    return profiles


def _validate(name, opts, path) -> Profile:
    where = f"{path}, profile {name!r}"
    opts = {} if opts is None else opts
    if not isinstance(opts, dict):
        raise ClusterConfigError(f"{where}: settings must be a mapping, got {opts!r}")
    opts = dict(opts)
    ptype = opts.pop("type", name)
    if ptype not in TYPES:
        raise ClusterConfigError(f"{where}: type {ptype!r} is unknown. Fix: set 'type' to one of {list(TYPES)}")
    allowed = _KEYS[ptype]
    if allowed is not None:
        for key, value in opts.items():
            if key not in allowed:
                raise ClusterConfigError(f"{where}: unknown key {key!r} for a {ptype} profile. "
                                         f"Fix: use only {sorted(allowed) or 'no keys'}")
            check, what = allowed[key]
            if not _ok(check, value):
                raise ClusterConfigError(f"{where}: {key} = {value!r} is not {what}. Fix: correct it")
    if ptype == "scheduler" and "address" not in opts and not os.environ.get("GRAMTILE_SCHEDULER"):
        raise ClusterConfigError(f"{where}: a scheduler profile needs 'address' (or $GRAMTILE_SCHEDULER)")
    return Profile(name, ptype, opts, str(path))


def _ok(check, v) -> bool:
    if check == "posint":
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1
    if check == "posnum":
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
    if check == "bool":
        return isinstance(v, bool)
    if check == "str":
        return isinstance(v, str) and bool(v)
    if check == "stropt":
        return v is None or isinstance(v, str)
    if check == "strlist":
        return isinstance(v, list) and all(isinstance(x, str) for x in v)
    if check == "mem":
        return (isinstance(v, int) and not isinstance(v, bool) and v > 0) or (isinstance(v, str) and bool(v))
    if check == "addr":
        return isinstance(v, str) and "://" in v
    return True


def get_profile(name: str = "local", cluster_file=None) -> Profile:
    """The profile ``name``; an unknown name raises :class:`ClusterConfigError` listing the known ones."""
    profiles = load_profiles(cluster_file)
    p = profiles.get(name)
    if p is None:
        src = find_cluster_file(cluster_file)
        where = f"{src} and the built-in {packaged_cluster_file()}" if src else f"built-in {packaged_cluster_file()}"
        raise ClusterConfigError(f"unknown cluster profile {name!r}; known profiles: {sorted(profiles)} "
                                 f"(from {where}; `gramtile profiles` lists them). "
                                 "Fix: pick one or add it to ./cluster.yaml (or --cluster-file)")
    return p


def scheduler_address(profile: Profile) -> str:
    return os.environ.get("GRAMTILE_SCHEDULER") or profile.options["address"]


class _ConnectionNoise(logging.Filter):
    """Drops the client's own tracebacks of a lost scheduler connection (the run reports it once)."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, (OSError, asyncio.CancelledError, concurrent.futures.CancelledError)):
            return False
        # "Failed to reconnect to scheduler after 10.00 seconds, closing client" (no exception attached)
        return not (record.name == "distributed.client" and "reconnect" in record.getMessage())


@contextmanager
def _lost_scheduler(client, address: str):
    """Close ``client`` on exit; a run that loses its scheduler ends with :class:`ClusterLostError`
    (one line, with the fix) instead of the connection errors of the Dask client."""
    quiet = _ConnectionNoise()
    # the loggers that report a closed connection, and the handler distributed gives its records
    noisy = [logging.getLogger(f"distributed.{n}") for n in ("client", "batched", "core", "comm", "utils")]
    noisy += logging.getLogger("distributed").handlers
    for x in noisy:
        x.addFilter(quiet)
    try:
        with client:
            try:
                yield client
            except (OSError, TimeoutError, asyncio.CancelledError, concurrent.futures.CancelledError) as e:
                comm_closed = optional.distributed().comm.CommClosedError
                if not isinstance(e, comm_closed) and client.status == "running":
                    raise  # a file error of the driver, or a cancelled task of a live scheduler
                raise ClusterLostError(
                    f"lost the Dask scheduler at {address} during the run ({type(e).__name__}: {' '.join(str(e).split())}); the tiles "
                    "finished before are kept. Fix: restart `dask scheduler` (and its workers), then rerun the same "
                    "command: it resumes") from None
    finally:
        for x in noisy:
            x.removeFilter(quiet)


@contextmanager
def open_client(profile_name="local", cluster_file=None):
    """A Dask ``distributed.Client`` for a profile, closed (with its cluster) on exit.

    Parameters
    ----------
    profile_name : str or Profile
    cluster_file : path, optional

    Yields
    ------
    distributed.Client or None
        None for a ``sequential`` profile: the caller runs in-process.
    """
    profile = profile_name if isinstance(profile_name, Profile) else get_profile(profile_name, cluster_file)
    if profile.type == "sequential":
        yield None
        return
    Client = optional.distributed().Client

    o = dict(profile.options)
    if profile.type == "threads":
        o = {"n_workers": o.get("n_workers", 2), "threads_per_worker": 1, "processes": False}
    if profile.type in ("local", "threads"):
        LocalCluster = optional.distributed().LocalCluster

        # a worker silent for worker_ttl seconds (stopped, hung, its machine asleep) is removed by
        # the scheduler and its tasks go to the others; Dask's default waits 5 minutes
        with dask.config.set({"distributed.scheduler.worker-ttl": f"{float(o.get('worker_ttl', WORKER_TTL))}s"}):
            cluster = LocalCluster(n_workers=o.get("n_workers", 2), threads_per_worker=o.get("threads_per_worker", 1),
                                   memory_limit=o.get("memory_limit", "auto"), processes=o.get("processes", True),
                                   dashboard_address=o.get("dashboard_address", ":0"), silence_logs=logging.CRITICAL)
        with cluster, Client(cluster) as client:
            yield client
    elif profile.type == "scheduler":
        address = scheduler_address(profile)
        try:
            client = Client(address, timeout=o.get("timeout", 10))
        except OSError as e:
            raise ClusterConfigError(
                f"profile {profile.name!r}: cannot reach the Dask scheduler at {address} ({e}). Fix: start "
                f"`dask scheduler` and `dask worker {address}`, or set $GRAMTILE_SCHEDULER") from None
        with _lost_scheduler(client, address):
            yield client
    elif profile.type == "slurm":
        try:
            SLURMCluster = optional.dask_jobqueue().SLURMCluster
        except ImportError:
            raise ClusterConfigError(f"profile {profile.name!r} needs dask-jobqueue. "
                                     "Fix: pip install 'gramtile[slurm]'") from None
        jobs = o.pop("jobs", 1)
        with SLURMCluster(**o) as cluster:
            cluster.scale(jobs=jobs)
            with Client(cluster) as client:
                yield client
    elif profile.type == "kubernetes":
        try:
            KubeCluster = optional.dask_kubernetes_operator().KubeCluster
        except ImportError:
            raise ClusterConfigError(f"profile {profile.name!r} needs dask-kubernetes. "
                                     "Fix: pip install dask-kubernetes, or use another profile") from None
        with KubeCluster(**o) as cluster, Client(cluster) as client:
            yield client


@contextmanager
def shared_client(cluster: str, cluster_file=None, client=None):
    """``(profile name, client)`` for a recipe that runs many engine jobs on one cluster.

    A LocalCluster per Gram store costs seconds each, so a recipe opens one here and passes it to
    every :func:`~gramtile.pipeline.compute.engine.run_gram`. A given ``client`` is used as it is;
    ``sequential`` (or a profile whose client is None) yields ``("sequential", None)``, and a
    ``threads`` profile ``(name, None)``: its engine runs need no cluster.
    """
    if client is not None:
        yield cluster, client
    elif cluster == "sequential":
        yield "sequential", None
    elif get_profile(cluster, cluster_file).type == "threads":
        yield cluster, None
    else:
        with open_client(cluster, cluster_file) as c:
            yield ("sequential" if c is None else cluster), c


def slurm_job_script(profile, cluster_file=None) -> str:
    """The SLURM job script dask-jobqueue would submit for a ``slurm`` profile.

    Built from dask-jobqueue's job class alone, so no SLURM and no scheduler are needed; the
    scheduler address in the script is a placeholder (``tcp://SCHEDULER:8786``).

    Parameters
    ----------
    profile : str or Profile
    """
    profile = profile if isinstance(profile, Profile) else get_profile(profile, cluster_file)
    if profile.type != "slurm":
        raise ClusterConfigError(f"profile {profile.name!r} has type {profile.type!r}; a job script needs a "
                                 "slurm profile")
    try:
        SLURMJob = optional.load("dask_jobqueue.slurm", "dask-jobqueue").SLURMJob
    except ImportError:
        raise ClusterConfigError("dask-jobqueue is not installed. Fix: pip install 'gramtile[slurm]'") from None
    o = {k: v for k, v in profile.options.items() if k != "jobs"}
    o.setdefault("job_name", "gramtile")
    return SLURMJob(scheduler="tcp://SCHEDULER:8786", name="gramtile-worker", **o).job_script()
