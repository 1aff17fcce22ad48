"""Cluster profiles: lookup, validation, clients (LocalCluster and a real `dask scheduler`), SLURM scripts."""
import logging
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gramtile.pipeline.compute.cluster import (
    get_profile,
    lifetime,
    load_profiles,
    packaged_cluster_file,
    scheduler_address,
    slurm_job_script,
)
from gramtile.pipeline.compute.errors import ClusterConfigError
from gramtile.pipeline.compute.executors import DaskExecutor, SequentialExecutor, ThreadExecutor
from gramtile.pipeline.compute.runtime import Runtime

REPO_CLUSTER_FILE = Path(__file__).resolve().parents[2] / "cluster.yaml"


def test_builtin_profiles_without_a_file(no_env):
    # every profile of the repository's cluster.yaml ships with the package (issue 16: outside a
    # checkout `--cluster scheduler` was "unknown cluster profile 'scheduler'")
    profiles = load_profiles()
    assert set(profiles) == {"sequential", "local", "threads", "scheduler", "slurm", "kubernetes"}
    assert packaged_cluster_file().read_text() == REPO_CLUSTER_FILE.read_text()  # one source: the top-level file
    assert profiles["local"].options["n_workers"] == 2 and profiles["local"].type == "local"
    assert profiles["local"].source == f"built-in ({packaged_cluster_file()})"
    assert get_profile("scheduler").options["address"] == "tcp://127.0.0.1:8786"
    assert get_profile("slurm").type == "slurm"
    assert profiles["threads"].type == "threads" and profiles["threads"].options == {"n_workers": 2}
    assert profiles["threads"].in_process and not profiles["local"].in_process
    assert profiles["threads"].n_workers == 2


def test_repository_cluster_file(no_env):
    profiles = load_profiles(REPO_CLUSTER_FILE)
    assert {"sequential", "local", "threads", "scheduler", "slurm", "kubernetes"} <= set(profiles)
    assert profiles["threads"].in_process and profiles["threads"].type == "threads"
    assert profiles["local"].options == {"n_workers": 2, "threads_per_worker": 1, "memory_limit": "2GiB", "worker_ttl": 60}
    slurm = profiles["slurm"]
    assert slurm.n_workers == slurm.options["min_jobs"] and slurm.options["max_jobs"] >= slurm.options["min_jobs"]
    assert "jobs" not in slurm.options and slurm.options["worker_wait"] > 0
    life, stagger = lifetime(slurm)  # workers retire before the walltime, their jobs are replaced
    assert life + stagger < 7200


def test_lookup_order(no_env, monkeypatch):
    (no_env / "cluster.yaml").write_text("profiles:\n  mine: {type: local, n_workers: 3}\n")
    assert get_profile("mine").options["n_workers"] == 3  # ./cluster.yaml
    env_file = no_env / "env.yaml"
    env_file.write_text("profiles:\n  mine: {type: local, n_workers: 4}\n")
    monkeypatch.setenv("GRAMTILE_CLUSTER_FILE", str(env_file))
    assert get_profile("mine").options["n_workers"] == 4  # the environment beats ./cluster.yaml
    explicit = no_env / "explicit.yaml"
    explicit.write_text("profiles:\n  mine: {type: local, n_workers: 5}\n")
    assert get_profile("mine", explicit).options["n_workers"] == 5  # --cluster-file beats both
    assert get_profile("sequential", explicit).type == "sequential"  # built-ins stay available


def test_unknown_profile_lists_known_ones(no_env):
    with pytest.raises(ClusterConfigError, match=r"unknown cluster profile 'gpu'.*\['kubernetes', 'local', "
                       r"'scheduler', 'sequential', 'slurm', 'threads'\].*gramtile profiles"):
        get_profile("gpu")


@pytest.mark.parametrize("body, message", [
    ("profiles:\n  local: {n_workers: 0}\n", r"profile 'local': n_workers = 0 is not a positive integer"),
    ("profiles:\n  local: {workers: 2}\n", r"unknown key 'workers' for a local profile"),
    ("profiles:\n  threads: {processes: true}\n", r"unknown key 'processes' for a threads profile"),
    ("profiles:\n  x: {type: mesos}\n", r"profile 'x': type 'mesos' is unknown"),
    ("profiles:\n  scheduler: {address: localhost}\n", r"address = 'localhost' is not an address"),
    ("profiles:\n  slurm: {cores: 4, walltime: 3}\n", r"walltime = 3 is not a time"),
    ("profiles: [1, 2]\n", r"'profiles' must map names"),
    ("local: {}\n", r"single key 'profiles'"),
    ("profiles:\n  local: {n_workers: [\n", r"not valid YAML"),
])
def test_bad_profiles_name_file_profile_key_and_value(no_env, body, message):
    f = no_env / "bad.yaml"
    f.write_text(body)
    with pytest.raises(ClusterConfigError, match=message) as e:
        load_profiles(f)
    assert str(f) in str(e.value)


def test_missing_cluster_files(no_env, monkeypatch):
    with pytest.raises(ClusterConfigError, match="does not exist"):
        load_profiles(no_env / "nope.yaml")
    monkeypatch.setenv("GRAMTILE_CLUSTER_FILE", str(no_env / "gone.yaml"))
    with pytest.raises(ClusterConfigError, match=r"\$GRAMTILE_CLUSTER_FILE=.*gone.yaml does not exist"):
        load_profiles()


def test_scheduler_address_env_override(no_env, monkeypatch):
    p = get_profile("scheduler", REPO_CLUSTER_FILE)
    assert scheduler_address(p) == "tcp://127.0.0.1:8786"
    monkeypatch.setenv("GRAMTILE_SCHEDULER", "tcp://10.0.0.5:9000")
    assert scheduler_address(p) == "tcp://10.0.0.5:9000"


def test_slurm_job_script_is_the_clusters_own(no_env):
    f = no_env / "c.yaml"
    f.write_text("profiles:\n  hpc:\n    type: slurm\n    cores: 4\n    memory: 8GiB\n    walltime: '01:30:00'\n"
                 "    queue: short\n    account: nlp\n    jobs: 3\n    processes: 1\n")
    script = slurm_job_script("hpc", f)
    assert "#SBATCH -p short" in script
    assert "#SBATCH -A nlp" in script
    assert "#SBATCH -t 01:30:00" in script
    assert "#SBATCH --cpus-per-task=4" in script
    assert "--nthreads 4" in script and "--memory-limit 8.00GiB" in script
    assert "#SBATCH -J gramtile" in script
    # asked of the SLURMCluster a run starts: its scheduler's real address, workers that retire
    # before the walltime (90 min less a tenth and a stagger of 270 s)
    assert "tcp://SCHEDULER" not in script and "tcp://" in script
    assert "--lifetime 4590s --lifetime-stagger 270s" in script
    with pytest.raises(ClusterConfigError, match="needs a slurm profile"):
        slurm_job_script("local", f)


def test_profiles_job_script_prints_what_slurmcluster_gives(no_env, capsys):
    # `gramtile profiles --job-script NAME`: the script of the SLURMCluster a run starts (before,
    # slurm_job_script() wrote its own text, which differed from what dask-jobqueue submitted)
    from dask_jobqueue import SLURMCluster

    from gramtile.pipeline.compute.cluster import slurm_cluster_options
    from gramtile.workflows.cli import main

    f = no_env / "c.yaml"
    f.write_text("profiles:\n  hpc:\n    type: slurm\n    cores: 2\n    memory: 3GiB\n    walltime: '00:30:00'\n"
                 "    queue: short\n    min_jobs: 1\n    max_jobs: 3\n    job_name: nlp-gram\n"
                 "    scheduler_options: {host: 127.0.0.1}\n")
    assert main(["profiles", "--job-script", "hpc", "--cluster-file", str(f)]) == 0
    out, err = capsys.readouterr()
    assert err == ""  # no dashboard warning
    opts = slurm_cluster_options(get_profile("hpc", f))
    opts["scheduler_options"] = {**opts["scheduler_options"], "dashboard": False}
    with SLURMCluster(**opts) as cluster:
        own = cluster.job_script()

    def same(script):  # the scheduler's port differs between two clusters
        import re
        return re.sub(r"tcp://127\.0\.0\.1:\d+", "tcp://127.0.0.1:PORT", script).strip()
    assert same(out) == same(own)
    assert "#SBATCH -J nlp-gram" in out and "--lifetime 1530s --lifetime-stagger 90s" in out
    assert main(["profiles", "--job-script", "local", "--cluster-file", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs a slurm profile" in err


def test_lifetime_defaults_from_the_walltime_and_checks(no_env):
    f = no_env / "c.yaml"
    f.write_text("profiles:\n  a: {type: slurm, walltime: '02:00:00'}\n  b: {type: slurm, walltime: '00:01:00', "
                 "lifetime: 40s, lifetime_stagger: 5s}\n  c: {type: slurm}\n")
    life, stagger = lifetime(get_profile("a", f))
    assert stagger == 300 and life + stagger == 7200 - 720  # a tenth of 2 h is 12 min
    assert lifetime(get_profile("b", f)) == (40.0, 5.0)
    assert lifetime(get_profile("c", f)) == (None, None)
    f.write_text("profiles:\n  bad: {type: slurm, walltime: '00:01:00', lifetime: 58s, lifetime_stagger: 5s}\n")
    with pytest.raises(ClusterConfigError, match="reaches the walltime"):
        get_profile("bad", f)
    f.write_text("profiles:\n  bad: {type: slurm, jobs: 2, max_jobs: 4}\n")
    with pytest.raises(ClusterConfigError, match="either 'jobs'"):
        get_profile("bad", f)
    f.write_text("profiles:\n  bad: {type: local, worker_wait: -1}\n")
    with pytest.raises(ClusterConfigError, match="worker_wait"):
        get_profile("bad", f)


def test_an_address_is_a_scheduler_profile(no_env):
    p = get_profile("tcp://127.0.0.1:9999")
    assert (p.type, p.options["address"]) == ("scheduler", "tcp://127.0.0.1:9999")


def test_in_process_runtimes_start_no_cluster(no_env):
    with Runtime("sequential") as rt, rt.session() as ex:
        assert isinstance(ex, SequentialExecutor) and rt.in_process
    with Runtime("threads") as rt, rt.session() as ex:
        assert isinstance(ex, ThreadExecutor) and ex.slots == 2 and rt.in_process
        assert not hasattr(ex, "client")


def test_threads_profile_runs_tasks_on_threads_of_this_process(no_env):
    f = no_env / "c.yaml"
    f.write_text("profiles:\n  three: {type: threads, n_workers: 3}\n")
    import os
    import threading

    with Runtime("three", f) as rt, rt.session() as ex:
        assert ex.slots == 3
        got = dict(ex.imap(lambda: (os.getpid(), threading.current_thread().name), ((i, ()) for i in range(6))))
    assert {pid for pid, _ in got.values()} == {os.getpid()}
    assert all(name.startswith("gramtile-task") for _, name in got.values())


def test_local_profile_runs_tasks_in_worker_processes(no_env):
    f = no_env / "c.yaml"
    f.write_text("profiles:\n  one: {type: local, n_workers: 1, threads_per_worker: 1, memory_limit: 1GiB}\n")
    import os

    with Runtime("one", f) as rt, rt.session() as ex:
        assert isinstance(ex, DaskExecutor) and not rt.in_process
        info = ex.client.scheduler_info()["workers"]
        assert len(info) == 1
        assert ex.client.submit(os.getpid).result() != os.getpid()
        assert rt.worker_memory_mb() == 2**30 / 1e6  # the worker's limit, not the driver's memory
        mem = rt.task_memory(0.6)
        assert mem.on_workers and mem.tasks == 1
        held = max(w["metrics"]["memory"] for w in info.values()) / 1e6
        assert mem.process_mb == pytest.approx(0.8 * 2**30 / 1e6 - max(300.0, held), rel=0.05)
        with rt.session() as again:
            assert again is ex  # an entered Runtime keeps its executor for the next step
        # while the cluster is open (and closing), the traceback Dask logs for a stream that closes
        # under it (a run stopped by Ctrl-C or SIGTERM) is dropped: the run says it in one line
        assert not logging.getLogger("distributed.batched").filter(_closed_comm_record())
    assert logging.getLogger("distributed.batched").filter(_closed_comm_record())  # and only then


def _closed_comm_record():
    from distributed.comm.core import CommClosedError

    err = CommClosedError()
    return logging.LogRecord("distributed.batched", logging.INFO, __file__, 0, "Batched Comm Closed", None,
                             (type(err), err, None))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_scheduler_profile_with_a_real_scheduler(no_env, monkeypatch):
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    bindir = Path(sys.executable).parent
    procs = [subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", ":0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        procs.append(subprocess.Popen([str(bindir / "dask"), "worker", address, "--nthreads", "1", "--nworkers", "1",
                                       "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        monkeypatch.setenv("GRAMTILE_SCHEDULER", address)  # the file's address (port 8786) is overridden
        f = no_env / "c.yaml"
        f.write_text("profiles:\n  scheduler: {address: 'tcp://127.0.0.1:8786', timeout: 30}\n")
        with Runtime("scheduler", f) as rt, rt.session() as ex:
            client = ex.client
            client.wait_for_workers(1, timeout=60)
            assert client.scheduler.address == address
            assert client.submit(sum, [1, 2, 3]).result(timeout=60) == 6
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)


def test_unreachable_scheduler(no_env):
    f = no_env / "c.yaml"
    f.write_text(f"profiles:\n  scheduler: {{address: 'tcp://127.0.0.1:{_free_port()}', timeout: 1}}\n")
    t = time.monotonic()
    with pytest.raises(ClusterConfigError, match="cannot reach the Dask scheduler"):
        with Runtime("scheduler", f) as rt, rt.session():
            pass
    assert time.monotonic() - t < 60  # fails, does not hang


def test_fits_plan_for_the_memory_of_one_worker_not_the_driver(no_env):
    """Workers of 600 MiB: auto picks the bounded-memory solver a worker can hold, sizes its cache
    from the worker, and a solver that cannot fit is refused before any fit starts, with figures."""
    from gramtile.pipeline.learn.crossval import plan_solver
    from gramtile.pipeline.learn.errors import EvaluationError
    from gramtile.pipeline.learn.parallel import fit_memory

    f = no_env / "c.yaml"
    f.write_text("profiles:\n  small: {type: local, n_workers: 1, threads_per_worker: 1, memory_limit: 600MiB}\n")
    with Runtime("small", f) as rt:
        mem = fit_memory(rt)
        assert mem.on_workers and 100 < mem.per_task_mb < 0.8 * 600 * 2**20 / 1e6
        plan = plan_solver("auto", 6000, 1500, rt)  # K(train, train) alone: 288 MB, over a worker
        assert plan.used == "smo" and plan.cache_mb + 8 * 8 * 6000 / 1e6 <= mem.per_task_mb
        here = plan_solver("auto", 6000, 1500, "sequential")
        assert here.memory_mb > 10 * mem.per_task_mb  # the driver's budget would have chosen differently
        with pytest.raises(EvaluationError, match=r"libsvm .* needs [\d,]+ MB per fit, but a worker of profile "
                                                  r"'small' \(629 MB limit, paused at 80%.*Fix: --solver smo"):
            plan_solver("libsvm", 6000, 1500, rt)
        with pytest.raises(EvaluationError, match="Fix: a smaller --cache-mb"):
            plan_solver("smo", 6000, 1500, rt.with_settings(cache_mb=5000))
    # in this process, a solver asked for is used as asked
    assert plan_solver("libsvm", 6000, 1500, Runtime("sequential", memory_mb=10.0)).used == "libsvm"


def test_tiles_are_sized_from_the_memory_of_one_worker(no_env):
    """A new store's tile edge follows the profile's memory per worker process, not the driver's."""
    from gramtile.pipeline.compute.engine import TILE_BUDGET, tile_budget
    from gramtile.pipeline.stores.tiles import choose_tile

    f = no_env / "c.yaml"
    f.write_text("profiles:\n  small: {type: local, n_workers: 1, memory_limit: 600MiB}\n"
                 "  jobs: {type: slurm, cores: 2, processes: 2, memory: 1GiB, walltime: '01:00:00'}\n")
    assert tile_budget(Runtime("sequential")) == TILE_BUDGET  # this machine: the default
    assert tile_budget(Runtime("small", f)) == 600 * 2**20 // 4
    assert tile_budget(Runtime("jobs", f)) == 2**30 // 2 // 4  # memory per job over its processes
    big, small = (choose_tile(20_000, 20_000, tile_budget(Runtime(p, f))) for p in ("sequential", "small"))
    assert small < big and 8 * small * small * 6 <= 600 * 2**20 // 4
