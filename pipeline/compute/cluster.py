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
    No Dask: tasks run in-process, one after the other (the reference).
threads
    ``n_workers`` worker threads of the driver process (no ``distributed``, no event loop, no
    cluster to start).
local
    ``distributed.LocalCluster(n_workers, threads_per_worker, memory_limit, processes)``.
scheduler
    A running ``dask scheduler`` at ``address`` (``tcp://host:8786``; ``--cluster tcp://...``
    makes such a profile) or named by its ``scheduler_file``, with workers started by
    ``dask worker``; ``timeout`` seconds to connect.

Every Dask profile also takes ``worker_wait`` (seconds without any worker before a run stops,
default 300) and ``stall_timeout`` (seconds without a finished task while workers are connected,
default 1800): :class:`~gramtile.pipeline.compute.executors.Watchdog`. The executors are opened
from a profile by :class:`~gramtile.pipeline.compute.runtime.Runtime`.
slurm
    ``dask_jobqueue.SLURMCluster(**kwargs)`` with ``jobs`` jobs (or adaptively between
    ``min_jobs`` and ``max_jobs``); workers retire after a ``lifetime`` shorter than the
    ``walltime`` and their jobs are replaced; :func:`slurm_job_script` shows the job script.
kubernetes
    ``dask_kubernetes.operator.KubeCluster(**kwargs)`` (only if dask-kubernetes is installed).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path

import yaml
from dask.utils import parse_bytes, parse_timedelta

from gramtile.pipeline import optional
from gramtile.pipeline.compute.errors import ClusterConfigError, ClusterLostError

TYPES = ("sequential", "threads", "local", "scheduler", "slurm", "kubernetes")


_POS_INT = "a positive integer"
#: Seconds of silence after which the scheduler of a ``local`` profile drops a worker.
WORKER_TTL = 60
# key -> (check, what it must be); None check = any value
_SECONDS = "a positive number of seconds"
_TIME = "a duration such as '40s', '55m' or '01:55:00'"
# keys every Dask profile takes: how long a run waits for workers and for progress (watchdog)
_WAITS = {"worker_wait": ("posnum", _SECONDS + " (default 300)"),
          "stall_timeout": ("posnum", _SECONDS + " (default 1800)")}
_KEYS = {
    "sequential": {},
    "threads": {"n_workers": ("posint", _POS_INT)},
    "local": {"n_workers": ("posint", _POS_INT), "threads_per_worker": ("posint", _POS_INT),
              "memory_limit": ("mem", "a size such as 2GiB, a number of bytes, or 'auto'"),
              "processes": ("bool", "true or false"),
              "dashboard_address": ("str", "an address such as ':8787' (default ':0': any free port)"),
              "worker_ttl": ("posnum", "a positive number of seconds (default 60)"), **_WAITS},
    "scheduler": {"address": ("addr", "an address such as tcp://127.0.0.1:8786"),
                  "scheduler_file": ("str", "the path of a file written by `dask scheduler --scheduler-file`"),
                  "timeout": ("posnum", "a positive number of seconds"), **_WAITS},
    "slurm": {"cores": ("posint", _POS_INT), "processes": ("posint", _POS_INT),
              "memory": ("mem", "a size such as 16GiB"), "walltime": ("timestr", "a time such as '02:00:00'"),
              "queue": ("str", "a partition name"), "account": ("str", "an account name"),
              "jobs": ("posint", _POS_INT), "min_jobs": ("posint", _POS_INT), "max_jobs": ("posint", _POS_INT),
              "lifetime": ("time", _TIME), "lifetime_stagger": ("time", _TIME),
              "job_extra_directives": ("strlist", "a list of strings"),
              "job_script_prologue": ("strlist", "a list of shell lines"),
              "worker_extra_args": ("strlist", "a list of strings"),
              "scheduler_options": ("dict", "a mapping of Dask scheduler options"),
              "log_directory": ("str", "a directory"), "local_directory": ("str", "a directory"),
              "interface": ("str", "a network interface name such as ib0"), "python": ("str", "a python path"),
              "job_name": ("str", "a job name"), "shebang": ("str", "a shebang line"), **_WAITS},
    "kubernetes": None,  # passed to KubeCluster as they are (its options evolve quickly)
}


@dataclass(frozen=True)
class Profile:
    """A validated cluster profile: ``name``, ``type``, ``options`` and where it came from."""

    name: str
    type: str
    options: dict = field(default_factory=dict)
    source: str = "built-in"
    #: fsspec options of the object stores a run under this profile opens (``storage_options:`` in
    #: any profile; :func:`gramtile.pipeline.stores.storage.set_storage_options`), kept apart from
    #: the options that start its workers
    storage_options: dict = field(default_factory=dict)

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
            return job_range(self)[0] * int(o.get("processes", 1))
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
    storage = opts.pop("storage_options", None) or {}
    if not isinstance(storage, dict) or not all(isinstance(k, str) for k in storage):
        raise ClusterConfigError(f"{where}: storage_options = {storage!r} is not a mapping of fsspec options. "
                                 "Fix: e.g. storage_options: {endpoint_url: 'http://127.0.0.1:9000', profile: lab}")
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
    if ptype == "scheduler" and "address" not in opts and "scheduler_file" not in opts \
            and not os.environ.get("GRAMTILE_SCHEDULER"):
        raise ClusterConfigError(f"{where}: a scheduler profile needs 'address' or 'scheduler_file' "
                                 "(or $GRAMTILE_SCHEDULER)")
    if ptype == "slurm":
        if "jobs" in opts and ({"min_jobs", "max_jobs"} & set(opts)):
            raise ClusterConfigError(f"{where}: give either 'jobs' (a fixed number) or 'min_jobs'/'max_jobs' "
                                     "(adaptive), not both")
        if opts.get("min_jobs", 1) > opts.get("max_jobs", max(opts.get("min_jobs", 1), 1)):
            raise ClusterConfigError(f"{where}: min_jobs = {opts['min_jobs']} is above max_jobs = "
                                     f"{opts['max_jobs']}. Fix: swap them")
        if "walltime" in opts and "lifetime" in opts and seconds(opts["lifetime"]) \
                + seconds(opts.get("lifetime_stagger", 0) or 0) >= seconds(opts["walltime"]):
            raise ClusterConfigError(
                f"{where}: lifetime {opts['lifetime']} (+ stagger {opts.get('lifetime_stagger', 0)}) reaches the "
                f"walltime {opts['walltime']}: SLURM would kill the workers before they retire. Fix: a lifetime "
                "a few minutes (or a tenth) shorter than the walltime")
    return Profile(name, ptype, opts, str(path), storage)


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
    if check == "dict":
        return isinstance(v, dict)
    if check == "timestr" and not isinstance(v, str):
        return False
    if check in ("time", "timestr"):
        try:
            return isinstance(v, (str, int, float)) and not isinstance(v, bool) and seconds(v) > 0
        except ValueError:
            return False
    if check == "addr":
        return isinstance(v, str) and "://" in v
    return True


def get_profile(name: str = "local", cluster_file=None) -> Profile:
    """The profile ``name``; an unknown name raises :class:`ClusterConfigError` listing the known ones.
    A scheduler address (``tcp://host:8786``) is a ``scheduler`` profile of that address."""
    if isinstance(name, str) and "://" in name:
        return Profile(name, "scheduler", {"address": name}, "--cluster")
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
def connection_noise_quieted() -> Iterator[None]:
    """While open, the tracebacks Dask logs when a connection closes under it (a lost scheduler, a
    cluster closed by Ctrl-C or SIGTERM while its streams still send) are dropped: the run says
    what happened in one line of its own."""
    quiet = _ConnectionNoise()
    # the loggers that report a closed connection, and the handler distributed gives its records
    noisy = [logging.getLogger(f"distributed.{n}") for n in ("client", "batched", "core", "comm", "utils")]
    noisy += logging.getLogger("distributed").handlers
    for x in noisy:
        x.addFilter(quiet)
    try:
        yield
    finally:
        for x in noisy:
            x.removeFilter(quiet)


@contextmanager
def lost_scheduler(client, address: str):
    """Close ``client`` on exit; a run that loses its scheduler ends with :class:`ClusterLostError`
    (one line, with the fix) instead of the connection errors of the Dask client."""
    with connection_noise_quieted(), client:
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


def seconds(v) -> float:
    """A duration in seconds: a number, ``"40s"``/``"55m"``/``"2h"`` (Dask's notation) or SLURM's
    ``[D-]HH:MM:SS`` / ``MM:SS``; ValueError otherwise."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    v = str(v).strip()
    if ":" in v or "-" in v:
        days, _, rest = v.rpartition("-")
        parts = [float(x) for x in rest.split(":")]
        if not 1 <= len(parts) <= 3:
            raise ValueError(v)
        sec = 0.0
        for x in (parts if len(parts) == 3 else [0.0] * (3 - len(parts)) + parts):
            sec = sec * 60 + x
        return sec + (float(days) * 86400 if days else 0.0)
    return float(parse_timedelta(v, default="s"))


def parse_memory_mb(v, what: str) -> float:
    """A memory size (``2GiB``, ``600MiB``, bytes) in MB (10**6 bytes, as every memory figure here)."""
    try:
        return float(parse_bytes(v)) / 1e6
    except (ValueError, TypeError):
        raise ClusterConfigError(f"{what} = {v!r} is not a memory size. Fix: write it as 2GiB, 600MiB or bytes") \
            from None


def job_range(profile: Profile) -> tuple:
    """(min_jobs, max_jobs) of a slurm profile: ``jobs`` sets both; default 1."""
    o = profile.options
    if "jobs" in o:
        return int(o["jobs"]), int(o["jobs"])
    low = int(o.get("min_jobs", 1))
    return low, int(o.get("max_jobs", low))


def lifetime(profile: Profile) -> tuple:
    """(lifetime, stagger) in seconds of a slurm profile's workers, or (None, None) without a walltime.

    A worker retires (hands its work back and exits) after its lifetime, before SLURM kills its
    job at the walltime, and its job is replaced (:mod:`~gramtile.pipeline.compute.jobwatch`).
    Default: the walltime less a margin of a tenth (at most 15 minutes), staggered by a twentieth
    (at most 5 minutes) so that the workers do not all leave at once."""
    o = profile.options
    if "lifetime" in o:
        return seconds(o["lifetime"]), seconds(o.get("lifetime_stagger", 0) or 0)
    if "walltime" not in o:
        return None, None
    w = seconds(o["walltime"])
    stagger = o.get("lifetime_stagger")
    stagger = seconds(stagger) if stagger is not None else min(w / 20, 300.0)
    return max(w - min(w / 10, 900.0) - stagger, w / 2), stagger


#: Keys of a slurm profile that gramtile handles itself (the others go to SLURMCluster).
_GRAMTILE_SLURM_KEYS = ("jobs", "min_jobs", "max_jobs", "lifetime", "lifetime_stagger", "worker_wait",
                        "stall_timeout")


def slurm_cluster_options(profile: Profile) -> dict:
    """The keyword arguments of ``dask_jobqueue.SLURMCluster`` for a slurm profile: its keys, the
    job name ``gramtile`` unless set, and the workers' ``--lifetime``/``--lifetime-stagger``."""
    o = {k: v for k, v in profile.options.items() if k not in _GRAMTILE_SLURM_KEYS}
    o.setdefault("job_name", "gramtile")
    life, stagger = lifetime(profile)
    extra = list(o.pop("worker_extra_args", []))
    if life is not None and "--lifetime" not in extra:
        extra += ["--lifetime", f"{int(life)}s", "--lifetime-stagger", f"{int(stagger)}s"]
    if extra:
        o["worker_extra_args"] = extra
    return o


#: Dask's adaptive target_duration for slurm profiles with min_jobs < max_jobs.
ADAPT_TARGET = "1s"


def start_jobs(profile: Profile, cluster) -> tuple:
    """Ask a dask-jobqueue cluster for the profile's jobs: a fixed number (``jobs``, or equal
    ``min_jobs``/``max_jobs``) or adaptively between ``min_jobs`` and ``max_jobs``."""
    low, high = job_range(profile)
    if low == high:
        cluster.scale(jobs=low)
    else:
        # Dask asks for workers to finish the queued work within target_duration: a run keeps only a
        # window of its tasks queued (twice the threads of max_jobs), so the default of 5 s would
        # never add a job for tasks shorter than a few seconds
        cluster.adapt(minimum_jobs=low, maximum_jobs=high, target_duration=ADAPT_TARGET)
    return low, high


def slurm_job_script(profile, cluster_file=None) -> str:
    """The job script a ``slurm`` profile submits for each worker job, asked of the
    ``dask_jobqueue.SLURMCluster`` the run would start (its scheduler is started and closed; no
    job is submitted).

    Parameters
    ----------
    profile : str or Profile
    """
    profile = profile if isinstance(profile, Profile) else get_profile(profile, cluster_file)
    if profile.type != "slurm":
        raise ClusterConfigError(f"profile {profile.name!r} has type {profile.type!r}; a job script needs a "
                                 "slurm profile")
    try:
        SLURMCluster = optional.dask_jobqueue().SLURMCluster
    except ImportError:
        raise ClusterConfigError("dask-jobqueue is not installed. Fix: pip install 'gramtile[slurm]'") from None
    opts = slurm_cluster_options(profile)
    # the scheduler started for this look serves no dashboard (a run's would warn that port 8787 is taken)
    opts["scheduler_options"] = {**opts.get("scheduler_options", {}), "dashboard": False}
    with SLURMCluster(**opts) as cluster:
        return cluster.job_script()
