"""gramtile on a real single-node SLURM (tests/cluster/services/slurm.sh) and real Dask schedulers,
through the real CLI: results equal the sequential reference bitwise, worker jobs that outlive
their walltime are replaced, a run whose jobs are all cancelled or whose scheduler has no worker
ends with one line instead of hanging, Ctrl-C and SIGTERM give one line and 130 / 143 under every
profile, and `gramtile profiles --job-script` shows the script SLURM really runs.

Every test has a hard timeout (pytest-timeout, and a bound on each command it runs), so that a
run which hangs fails the test instead of the CI job. The SLURM jobs a test submits carry a job
name of their own and are cancelled (by id) when the test ends.
"""
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_verify import verify as verify_store

HERE = Path(__file__).resolve().parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# the helpers of tests/conftest.py (shared data) and tests/cluster/conftest.py (services), by path:
# both files are named conftest
_data = _load("gramtile_test_data", HERE.parent / "conftest.py")
_services = _load("gramtile_test_services", HERE / "conftest.py")
num_trees, corpus_store_of = _data.num_trees, _data.corpus_store_of

BIN = Path(sys.executable).parent
GRAMTILE = [str(BIN / "gramtile")] if (BIN / "gramtile").exists() else [sys.executable, "-m", "gramtile"]
DASK = str(BIN / "dask")
SST = '{"kind": "sst", "lam": 0.4}'
ST = '{"kind": "st", "lam": 0.4}'
RESUME = "rerun the same command to resume"
WORKER_WAIT = 20


# ---- the SLURM service, profiles, jobs ------------------------------------------------------------

@pytest.fixture(scope="module")
def slurm():
    """The running SLURM's settings; its SLURM_CONF exported for this process and the commands."""
    env = _services.service("slurm")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = env["SLURM_CONF"]
    r = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.strip() in ("idle", "mix", "alloc"), \
        f"SLURM does not answer (sinfo: {r.stdout.strip()!r} {r.stderr.strip()!r}); see {env.get('SLURM_LOG_DIR')}"
    yield env
    if old is None:
        os.environ.pop("SLURM_CONF", None)
    else:
        os.environ["SLURM_CONF"] = old


def job_ids(name: str, states=None) -> list:
    """Ids of the jobs named ``name`` that SLURM still lists (optionally only in ``states``)."""
    r = subprocess.run(["squeue", "-h", "-n", name, "-o", "%i %T"], capture_output=True, text=True, timeout=30)
    rows = [line.split() for line in r.stdout.splitlines() if line.strip()]
    return [i for i, st in rows if states is None or st in states]


def _node_free(timeout: float = 120):
    """Wait (bounded) until the single node runs no job: a test's jobs must not queue behind the
    ending jobs of the test before it (they would count against its worker_wait)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        r = subprocess.run(["squeue", "-h", "-o", "%i"], capture_output=True, text=True, timeout=30)
        if not r.stdout.strip():
            return
        time.sleep(1)
    pytest.fail(f"SLURM still runs jobs {timeout:g} s after the previous test: {r.stdout.split()}")


@pytest.fixture
def jobs(slurm, request):
    """A job name of this test's own, on a node no other job holds; its jobs still queued or
    running at the end are cancelled."""
    _node_free()
    name = "gt-" + re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:40] + f"-{os.getpid()}"
    yield name
    left = job_ids(name)
    if left:
        subprocess.run(["scancel", *left], capture_output=True, timeout=30)


def slurm_profile(tmp: Path, slurm: dict, job_name: str, **over) -> dict:
    """A slurm profile sized for this machine: 2 jobs of one core and one worker process, the test
    environment's python, everything on 127.0.0.1."""
    p = {"type": "slurm", "cores": 1, "processes": 1, "memory": "1GiB", "walltime": "00:10:00",
         "queue": slurm["SLURM_PARTITION"], "min_jobs": 2, "max_jobs": 2, "job_name": job_name,
         "python": sys.executable, "interface": "lo",
         "local_directory": str(tmp / "worker-space"), "log_directory": str(tmp / "job-logs"),
         "scheduler_options": {"host": "127.0.0.1", "dashboard_address": ":0"},
         "worker_wait": 180, "stall_timeout": 300}
    p.update(over)
    return p


def profiles_file(tmp: Path, **profiles) -> Path:
    f = tmp / "cluster.yaml"
    f.write_text(yaml.safe_dump({"profiles": profiles}, sort_keys=False))
    return f


# ---- commands -------------------------------------------------------------------------------------

def gram_argv(corpus, out, cluster, cfile=None, *extra, kernel=SST, tile=20):
    argv = GRAMTILE + ["gram", "--corpus", str(corpus), "--kernel", kernel, "--out", str(out), "--tile", str(tile),
                       "--no-progress", "-q"]
    argv += ["--cluster", cluster] if cluster else []
    argv += ["--cluster-file", str(cfile)] if cfile else []
    return argv + list(extra)


def start(argv, cwd) -> subprocess.Popen:
    """A command in a session of its own (a process group, as a shell runs it), SIGINT at default."""
    return subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def finish(p: subprocess.Popen, timeout: float, what: str):
    """(stdout, stderr) of ``p`` once it ended; a command still running after ``timeout`` s hangs:
    it is killed and the test fails."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"{what} still running after {timeout:g} s (a hang); stderr:\n{err[-3000:]}")


def run(argv, cwd, timeout: float, what: str):
    p = start(argv, cwd)
    out, err = finish(p, timeout, what)
    return p.returncode, out, err


def chunks_done(out: Path) -> int:
    d = out / "K" / "c"
    return sum(len(f) for _, _, f in os.walk(d)) if d.is_dir() else 0


def wait_for_tiles(out: Path, p, at_least: int, timeout: float = 180):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout and p.poll() is None:
        if chunks_done(out) >= at_least:
            return
        time.sleep(0.2)
    if p.poll() is not None:
        pytest.fail(f"the run ended (exit {p.returncode}) before {at_least} tiles were stored: the test did not "
                    f"exercise what it meant to; stderr:\n{p.stderr.read()[-3000:]}")
    pytest.fail(f"fewer than {at_least} tiles stored after {timeout:g} s")


def wait_for_jobs(name: str, n: int, timeout: float = 120) -> list:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        ids = job_ids(name, {"RUNNING"})
        if len(ids) >= n:
            return ids
        time.sleep(0.5)
    pytest.fail(f"fewer than {n} jobs named {name} running after {timeout:g} s: {job_ids(name)}")


def K(path) -> np.ndarray:
    return GramStore.open(path).view().block()


def log_records(store) -> list:
    return [json.loads(x) for x in (Path(store) / "log" / "records.jsonl").read_text().splitlines() if x.strip()]


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, f"expected one line on stderr, got {len(lines)}:\n{err}"
    return lines[0]


# ---- corpora and their sequential references ------------------------------------------------------

@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """400 NUM trees, both classes interleaved (the file is sorted by label), and their SST matrix
    computed by the sequential reference."""
    every = num_trees(6000)
    pos, neg = [d for d in every if d.label == "1"][:100], [d for d in every if d.label != "1"][:300]
    docs = [d for pair in zip(neg[:100], pos) for d in pair] + neg[100:]
    d = tmp_path_factory.mktemp("labelled")
    corpus = corpus_store_of(d / "c.zarr", docs, 100)
    r = subprocess.run(gram_argv(corpus, d / "ref.zarr", "sequential"), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return corpus, d / "ref.zarr"


@pytest.fixture(scope="module")
def num700(tmp_path_factory):
    """700 NUM trees (630 tiles of 20: 15-30 s on two workers) and their sequential SST matrix."""
    d = tmp_path_factory.mktemp("num700")
    corpus = corpus_store_of(d / "c.zarr", num_trees(700), 175)
    r = subprocess.run(gram_argv(corpus, d / "ref.zarr", "sequential"), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return corpus, d / "ref.zarr"


# ---- results under slurm equal the sequential reference -------------------------------------------

@pytest.mark.timeout(600)
def test_gram_and_evaluate_under_slurm_equal_sequential_bitwise(slurm, jobs, labelled, tmp_path):
    corpus, ref = labelled
    cfile = profiles_file(tmp_path, hpc=slurm_profile(tmp_path, slurm, jobs))
    out = tmp_path / "g.zarr"
    t0 = time.monotonic()
    rc, _, err = run(gram_argv(corpus, out, "hpc", cfile, tile=25), tmp_path, 240, "gram --cluster hpc")
    assert rc == 0, err
    assert K(out).tobytes() == K(ref).tobytes()
    workers = {r["worker"] for r in log_records(out) if r.get("event") == "tile"}
    assert len(workers) >= 1 and all(w != "driver" for w in workers)
    print(f"gram under slurm: {time.monotonic() - t0:.1f} s, workers {sorted(workers)}")

    results = {}
    for cluster in ("sequential", "hpc"):
        res = tmp_path / f"ev-{cluster}"
        rc, _, err = run(GRAMTILE + ["evaluate", "--gram", str(ref), "--folds", "3", "--C", "0.1,1", "--out", str(res),
                                     "--cluster", cluster, "--cluster-file", str(cfile), "--no-progress", "-q"],
                         tmp_path, 300, f"evaluate --cluster {cluster}")
        assert rc == 0, err
        results[cluster] = json.loads((res / "results.json").read_text())
    seq, hpc = results["sequential"], results["hpc"]
    for key in ("rows", "fold_rows", "reports", "predictions", "splits", "C_selection", "kernel"):
        assert hpc[key] == seq[key], key
    assert not job_ids(jobs, {"RUNNING", "PENDING"}) or _jobs_end(jobs, 60)


def _jobs_end(name, timeout) -> bool:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not job_ids(name, {"RUNNING", "PENDING"}):
            return True
        time.sleep(1)
    return False


@pytest.mark.timeout(300)
def test_min_and_max_jobs_scale_up_while_tasks_wait(slurm, jobs, num700, tmp_path):
    """min_jobs 1, max_jobs 2: the run starts one job and asks for the second while its tasks wait
    (before, a run kept 4 tasks queued and Dask's adaptive target of 5 s never asked for a second
    job: every run stayed on min_jobs)."""
    corpus, ref = num700
    cfile = profiles_file(tmp_path, grow=slurm_profile(tmp_path, slurm, jobs, min_jobs=1, max_jobs=2))
    out = tmp_path / "g.zarr"
    rc, _, err = run(gram_argv(corpus, out, "grow", cfile, tile=100), tmp_path, 240, "gram on min 1, max 2 jobs")
    assert rc == 0, err
    submitted = list((tmp_path / "job-logs").glob(f"{jobs}-*.out"))
    workers = {r["worker"] for r in log_records(out) if r.get("event") == "tile"}
    assert len(submitted) == 2 and len(workers) == 2, (submitted, workers)
    assert K(out).tobytes() == K(ref).tobytes()


# ---- walltime: jobs replaced before SLURM kills them ----------------------------------------------

def job_state(job_id: str) -> str:
    r = subprocess.run(["scontrol", "show", "job", "-o", job_id], capture_output=True, text=True, timeout=30)
    m = re.search(r"JobState=(\S+)", r.stdout)
    return m.group(1) if m else "unknown"


@pytest.mark.timeout(1200)  # idle: about 210 s of run plus the corpus and the reference
@pytest.mark.parametrize("ending", ["retired", "killed"])
def test_a_run_longer_than_the_walltime_finishes_on_replacement_jobs(slurm, jobs, tmp_path, ending):
    """Walltime 1 minute on two jobs. ``retired``: a run of about 2 minutes, workers retiring at
    40-45 s (their lifetime) and their jobs replaced. ``killed``: workers that outlive the
    walltime, killed by SLURM at their time limit (state TIMEOUT), their jobs replaced. Before,
    either run waited forever once its first jobs ended.

    K is checked bitwise against the sequential reference on the first row of every row of
    tiles, over the columns the symmetric run computes (i <= j): every stored tile."""
    # killed: about 3.5 minutes of tiles on two one-core jobs, idle, since SLURM acts on a time limit
    # up to ~30 s late (2,400 trees finished in 76 s, its jobs 16 s past their limit and still alive);
    # retired: workers leave at 40-45 s whatever the run's length, so 2,400 trees (about 2 minutes,
    # 4 jobs replaced) exercise it
    n = 4000 if ending == "killed" else 2400
    d = tmp_path
    corpus = corpus_store_of(d / "c.zarr", num_trees(n), 200)
    life = ({"lifetime": "40s", "lifetime_stagger": "5s"} if ending == "retired"
            else {"worker_extra_args": ["--lifetime", "600s"]})  # past the walltime: SLURM ends the jobs
    cfile = profiles_file(d, short=slurm_profile(d, slurm, jobs, walltime="00:01:00", worker_wait=90, **life))
    out = d / "g.zarr"
    t0 = time.monotonic()
    rc, _, err = run(gram_argv(corpus, out, "short", cfile), d, 900, "gram with a walltime of 1 minute")
    took = time.monotonic() - t0
    assert rc == 0, err
    assert verify_store(out).ok
    workers = {r["worker"] for r in log_records(out) if r.get("event") == "tile"}
    submitted = sorted({p.stem.rsplit("-", 1)[-1] for p in (d / "job-logs").glob(f"{jobs}-*.out")}, key=int)
    states = {i: job_state(i) for i in submitted}
    print(f"run {took:.0f} s; jobs {states}; tiles computed by {len(workers)} workers")
    assert len(submitted) >= 4 and len(workers) >= 4, (states, workers)  # each of the 2 jobs replaced
    if ending == "killed":
        assert list(states.values()).count("TIMEOUT") >= 2, states
    assert took > 65, "the run did not outlive its first jobs' walltime: the test exercised nothing"

    rows = list(range(0, n, 20))  # the first row of each row of tiles
    (d / "rows.txt").write_text("".join(f"{r}\n" for r in rows))
    rc, _, err = run(GRAMTILE + ["gram", "--corpus", str(corpus), "--kernel", SST, "--out", str(d / "ref.zarr"),
                                 "--rows", "@" + str(d / "rows.txt"), "--cols", f"0:{n}", "--tile", "20",
                                 "--cluster", "sequential", "--no-progress", "-q"], d, 300, "the sequential reference")
    assert rc == 0, err
    ref, got = K(d / "ref.zarr"), K(out)
    for k, r in enumerate(rows):
        assert ref[k, r:].tobytes() == got[r, r:].tobytes(), f"row {r}"


# ---- every job cancelled: one line within worker_wait + 30 s, and the rerun resumes ---------------

@pytest.mark.timeout(600)
def test_every_job_cancelled_ends_the_run_with_one_line_and_the_rerun_resumes_bitwise(slurm, jobs, num700,
                                                                                       tmp_path):
    corpus, ref = num700
    cfile = profiles_file(tmp_path, hpc=slurm_profile(tmp_path, slurm, jobs, worker_wait=WORKER_WAIT))
    out = tmp_path / "g.zarr"
    p = start(gram_argv(corpus, out, "hpc", cfile), tmp_path)
    ids = wait_for_jobs(jobs, 2)
    wait_for_tiles(out, p, at_least=20)
    if p.poll() is not None:
        pytest.fail("the run ended before its jobs were cancelled")
    t0 = time.monotonic()
    subprocess.run(["scancel", *ids], check=True, timeout=30)
    _, err = finish(p, WORKER_WAIT + 90, "gram whose jobs were all cancelled")
    took = time.monotonic() - t0
    line = one_line(err)
    assert p.returncode == 2, err
    assert took <= WORKER_WAIT + 30, f"ended {took:.0f} s after the jobs were cancelled"
    assert f"no Dask worker connected for {WORKER_WAIT} s" in line and RESUME in line, line
    for i in ids:
        assert f"{i} CANCELLED" in line, line
    assert re.search(r"\d+/630 tiles done", line), line
    assert verify_store(out).ok and not GramStore.open(out).complete
    done_before = GramStore.open(out).tiles_done()[0]
    print(f"ended {took:.1f} s after scancel: {line}")

    rc, _, err = run(gram_argv(corpus, out, "hpc", cfile), tmp_path, 300, "the rerun")
    assert rc == 0, err
    assert K(out).tobytes() == K(ref).tobytes()
    computed = [r for r in log_records(out) if r.get("event") == "end"][-1]["tiles_computed"]
    assert computed == 630 - done_before  # resumed: only the missing tiles


# ---- Ctrl-C and SIGTERM: one line, 130 / 143, under every profile ---------------------------------

@pytest.mark.timeout(300)
@pytest.mark.parametrize("cluster", ["hpc", "local", "threads", "sequential"])
def test_ctrl_c_exits_130_with_one_line_under_every_profile(slurm, jobs, num700, tmp_path, cluster):
    """Ctrl-C as a terminal sends it: SIGINT to the command's whole process group (its local worker
    processes too). Before, under slurm the run exited 0 with no message and logged a normal end;
    under local, 69 lines with the workers' KeyboardInterrupt tracebacks."""
    corpus, _ = num700
    cfile = profiles_file(tmp_path, hpc=slurm_profile(tmp_path, slurm, jobs))
    out = tmp_path / "g.zarr"
    # tiles of 5: about 10,000 of them, 40 s or more under any profile, so that the run cannot end
    # between the 20th tile and the signal however long this process waits to be scheduled
    p = start(gram_argv(corpus, out, cluster, cfile, tile=5), tmp_path)
    wait_for_tiles(out, p, at_least=20)
    os.killpg(p.pid, signal.SIGINT)
    _, err = finish(p, 90, f"gram --cluster {cluster} after Ctrl-C")
    if p.returncode == 0:
        pytest.fail("the run finished before Ctrl-C reached it: the test did not exercise the interrupt")
    assert p.returncode == 130, err
    assert one_line(err) == f"gramtile gram: interrupted; {RESUME}"
    assert log_records(out)[-1].get("stopped") == "SIGINT", log_records(out)[-1]
    assert verify_store(out).ok and not GramStore.open(out).complete
    if cluster == "hpc":
        assert _jobs_end(jobs, 30), f"worker jobs left behind: {job_ids(jobs)}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("cluster", ["hpc", "local"])
def test_sigterm_exits_143_with_one_line(slurm, jobs, num700, tmp_path, cluster):
    corpus, _ = num700
    cfile = profiles_file(tmp_path, hpc=slurm_profile(tmp_path, slurm, jobs))
    out = tmp_path / "g.zarr"
    p = start(gram_argv(corpus, out, cluster, cfile, tile=5), tmp_path)  # a long run, as above
    wait_for_tiles(out, p, at_least=20)
    p.terminate()  # the driver alone, as `kill` or a batch system does
    _, err = finish(p, 90, f"gram --cluster {cluster} after SIGTERM")
    if p.returncode == 0:
        pytest.fail("the run finished before SIGTERM reached it")
    assert p.returncode == 143, err
    assert one_line(err) == f"gramtile gram: interrupted by SIGTERM; {RESUME}"
    assert log_records(out)[-1].get("stopped") == "SIGTERM", log_records(out)[-1]
    if cluster == "hpc":
        assert _jobs_end(jobs, 30), f"worker jobs left behind: {job_ids(jobs)}"


# ---- real Dask schedulers: none of its workers, an address, a scheduler file ----------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scheduler(tmp: Path, port: int, *extra) -> subprocess.Popen:
    return subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard", *extra],
                            stdout=open(tmp / "scheduler.log", "w"), stderr=subprocess.STDOUT)


def _stop(*procs):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


@pytest.mark.timeout(180)
def test_a_scheduler_without_workers_ends_with_one_line_within_worker_wait(labelled, tmp_path):
    """Before, the run waited forever at "13/36 tiles"."""
    corpus, _ = labelled
    port = _free_port()
    sched = _scheduler(tmp_path, port)
    try:
        cfile = profiles_file(tmp_path, shared={"type": "scheduler", "address": f"tcp://127.0.0.1:{port}",
                                                "timeout": 30, "worker_wait": 10})
        t0 = time.monotonic()
        rc, _, err = run(gram_argv(corpus, tmp_path / "g.zarr", "shared", cfile), tmp_path, 120,
                         "gram on a scheduler without workers")
        took = time.monotonic() - t0
    finally:
        _stop(sched)
    line = one_line(err)
    assert rc == 2 and "no Dask worker connected for 10 s" in line and RESUME in line, err
    assert took < 10 + 30, f"took {took:.0f} s"


@pytest.mark.timeout(300)
def test_a_scheduler_address_and_a_scheduler_file_give_the_sequential_matrix(labelled, tmp_path):
    corpus, ref = labelled
    port = _free_port()
    sfile = tmp_path / "scheduler.json"
    sched = _scheduler(tmp_path, port, "--scheduler-file", str(sfile))
    worker = subprocess.Popen([DASK, "worker", f"tcp://127.0.0.1:{port}", "--nworkers", "2", "--nthreads", "1",
                               "--host", "127.0.0.1", "--no-dashboard"],
                              stdout=open(tmp_path / "worker.log", "w"), stderr=subprocess.STDOUT)
    try:
        from distributed import Client
        t0 = time.monotonic()
        while not sfile.exists() and time.monotonic() - t0 < 60:
            time.sleep(0.2)
        with Client(scheduler_file=str(sfile), timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
        for how, argv in (("address", ["--cluster", f"tcp://127.0.0.1:{port}"]),
                          ("file", ["--scheduler-file", str(sfile)])):
            out = tmp_path / f"g-{how}.zarr"
            rc, _, err = run(gram_argv(corpus, out, None, None, *argv), tmp_path, 240, f"gram by scheduler {how}")
            assert rc == 0, err
            assert K(out).tobytes() == K(ref).tobytes(), how
            workers = {r["worker"] for r in log_records(out) if r.get("event") == "tile"}
            assert len(workers) == 2, workers  # the scheduler's two workers computed it
    finally:
        _stop(worker, sched)


# ---- memory per worker ----------------------------------------------------------------------------

@pytest.mark.timeout(900)
def test_evaluate_solver_auto_plans_for_workers_of_600_mib(slurm, jobs, tmp_path):
    """5,400 examples, 5 folds: K(train, train) in memory needs ~390 MB per fit, which the driver's
    memory allows but a 600 MiB worker does not (before, workers paused at their memory limit and
    the run made no progress). The plan must size itself from the worker and the run finish."""
    corpus = corpus_store_of(tmp_path / "c.zarr", num_trees(5400), 600)
    rc, _, err = run(GRAMTILE + ["gram", "--corpus", str(corpus), "--kernel", ST, "--out", str(tmp_path / "st.zarr"),
                                 "--cluster", "threads", "--no-progress", "-q"], tmp_path, 300, "the ST gram")
    assert rc == 0, err
    cfile = profiles_file(tmp_path, small=slurm_profile(tmp_path, slurm, jobs, memory="600MiB", stall_timeout=180))
    res = tmp_path / "ev"
    t0 = time.monotonic()
    rc, _, err = run(GRAMTILE + ["evaluate", "--gram", str(tmp_path / "st.zarr"), "--folds", "5", "--solver", "auto",
                                 "--out", str(res), "--cluster", "small", "--cluster-file", str(cfile),
                                 "--no-progress", "-q"], tmp_path, 780, "evaluate on 600 MiB workers")
    print(f"evaluate on 600 MiB workers: exit {rc} in {time.monotonic() - t0:.0f} s")
    assert rc == 0, err
    plan = json.loads((res / "results.json").read_text())["solver"]
    assert plan["memory_mb"] <= 600 * 2**20 / 1e6 + 1, plan  # the worker's memory, not the driver's


# ---- the job script shown is the one SLURM runs ---------------------------------------------------

@pytest.mark.timeout(300)
def test_profiles_job_script_is_the_script_slurm_runs(slurm, jobs, num700, tmp_path):
    corpus, _ = num700
    cfile = profiles_file(tmp_path, hpc=slurm_profile(tmp_path, slurm, jobs, walltime="00:20:00"))
    r = subprocess.run(GRAMTILE + ["profiles", "--job-script", "hpc", "--cluster-file", str(cfile)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    shown = r.stdout
    p = start(gram_argv(corpus, tmp_path / "g.zarr", "hpc", cfile), tmp_path)
    try:
        ids = wait_for_jobs(jobs, 1)
        real = subprocess.run(["scontrol", "write", "batch_script", ids[0], "-"], capture_output=True, text=True,
                              timeout=30)
        assert real.returncode == 0, real.stderr
    finally:
        os.killpg(p.pid, signal.SIGINT)
        finish(p, 90, "gram after Ctrl-C")

    def same(script):  # what differs from run to run: the scheduler's port and the worker's name
        script = re.sub(r"tcp://127\.0\.0\.1:\d+", "tcp://127.0.0.1:PORT", script)
        return re.sub(r"--name \S+", "--name NAME", script).strip()
    assert same(real.stdout) == same(shown)
    assert f"#SBATCH -J {jobs}" in shown and "--lifetime" in shown and sys.executable in shown
