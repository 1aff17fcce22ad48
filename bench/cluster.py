"""The same SST Gram under every executor of this machine; prints markdown for BENCHMARKS.md.

The first ``--n`` trees of the PTB WSJ sample (``../shared/data/ptb_wsj_sample``), SST (lam 0.4),
tile ``--tile``, each run a fresh ``gramtile gram`` command timed from start to exit:

- ``sequential``: in-process, one tile at a time (the reference);
- ``threads``: 2 worker threads of the driver;
- ``local``: a Dask LocalCluster of 2 worker processes;
- ``slurm``: 2 SLURM jobs of one core (dask-jobqueue), walltime 10 minutes;
- ``slurm, replaced``: the same with a walltime of 1 minute and workers retiring after
  ``--lifetime`` seconds (stagger 5 s), so that their jobs are replaced during the run.

Every K is checked bitwise against the sequential one. The overhead of each profile is its time
over that of ``threads`` (the fastest way to use the machine's cores). The SLURM rows need the
single-node SLURM of ``tests/cluster/services/slurm.sh`` (its ``$GRAMTILE_SERVICES/slurm.env``);
without it they are skipped. The machine's load average is printed with each run: these are
wall-clock times, and another process on the machine shows in them.

Usage::

    .venv/bin/python bench/cluster.py                 # n 3900, tile 150, 1 repeat
    .venv/bin/python bench/cluster.py --n 1000 --repeat 3
"""
from __future__ import annotations

import argparse
import itertools
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from gramtile.pipeline.stores.gram_store import GramStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SST = '{"kind": "sst", "lam": 0.4}'
SERVICES = Path(os.environ.get("GRAMTILE_SERVICES", "/tmp/gramtile-services"))
GRAMTILE = str(Path(sys.executable).with_name("gramtile"))


def corpus(work: Path, n: int) -> Path:
    from gramtile.pipeline.parsing.formats import read
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    out = work / f"ptb{n}.zarr"
    docs = list(itertools.islice(read(DATA / "ptb_wsj_sample" / "combined", "ptb"), n))
    if len(docs) < n:
        sys.exit(f"the PTB sample holds only {len(docs)} trees; use --n {len(docs)} or less")
    cs = CorpusStore.create(out, shard_size=250)
    for k in range(0, n, 250):
        cs.write_shard(k // 250, docs[k:k + 250])
    cs.finish()
    cs.close()
    return out


def slurm_env() -> dict | None:
    f = SERVICES / "slurm.env"
    if not f.is_file():
        return None
    return dict(line.split("=", 1) for line in f.read_text().splitlines() if "=" in line)


def profiles(work: Path, slurm: dict | None, lifetime: int) -> Path:
    p = {"threads": {"type": "threads", "n_workers": 2},
         "local": {"type": "local", "n_workers": 2, "threads_per_worker": 1, "memory_limit": "2GiB",
                   "dashboard_address": ":0"}}
    if slurm:
        base = {"type": "slurm", "cores": 1, "processes": 1, "memory": "2GiB", "queue": slurm["SLURM_PARTITION"],
                "min_jobs": 2, "max_jobs": 2, "python": sys.executable, "interface": "lo",
                "local_directory": str(work / "worker-space"), "log_directory": str(work / "job-logs"),
                "scheduler_options": {"host": "127.0.0.1", "dashboard_address": ":0"}, "worker_wait": 120}
        p["slurm"] = {**base, "walltime": "00:10:00", "job_name": "bench-slurm"}
        p["slurm-replaced"] = {**base, "walltime": "00:01:00", "lifetime": f"{lifetime}s", "lifetime_stagger": "5s",
                               "job_name": "bench-replaced"}
    f = work / "cluster.yaml"
    f.write_text(yaml.safe_dump({"profiles": p}, sort_keys=False))
    return f


def run(work: Path, corpus_path: Path, cfile: Path, profile: str, tile: int, tag: str, env: dict) -> tuple:
    out = work / f"{tag}.zarr"
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    r = subprocess.run([GRAMTILE, "gram", "--corpus", str(corpus_path), "--kernel", SST, "--out", str(out),
                        "--tile", str(tile), "--cluster", profile, "--cluster-file", str(cfile), "--no-progress", "-q"],
                       capture_output=True, text=True, env=env, timeout=1800)
    took = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"{profile}: exit {r.returncode}: {r.stderr}")
    return took, load, out


def jobs_of(work: Path, name: str) -> int:
    return len(list((work / "job-logs").glob(f"{name}-*.out")))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3900, help="PTB trees (default 3900: about a minute sequential on one core)")
    ap.add_argument("--tile", type=int, default=150)
    ap.add_argument("--repeat", type=int, default=1, help="runs per profile; the fastest is reported")
    ap.add_argument("--lifetime", type=int, default=15, help="worker lifetime of the replaced run, seconds")
    ap.add_argument("--work", default=None, help="work folder (default: a temporary one)")
    args = ap.parse_args(argv)
    work = Path(args.work or tempfile.mkdtemp(prefix="gramtile-bench-cluster-"))
    work.mkdir(parents=True, exist_ok=True)
    slurm = slurm_env()
    env = dict(os.environ)
    if slurm:
        env["SLURM_CONF"] = slurm["SLURM_CONF"]
    c = corpus(work, args.n)
    cfile = profiles(work, slurm, args.lifetime)
    names = ["sequential", "threads", "local"] + (["slurm", "slurm-replaced"] if slurm else [])
    best: dict = {}
    replaced_jobs = 0
    for rep in range(args.repeat):
        for name in names:
            before = jobs_of(work, "bench-replaced")
            took, load, out = run(work, c, cfile, name, args.tile, f"{name}-{rep}", env)
            n_jobs = jobs_of(work, "bench-replaced") - before
            print(f"# {name} (run {rep + 1}): {took:.1f} s, load average {load:.1f}", file=sys.stderr, flush=True)
            if name not in best or took < best[name][0]:
                best[name] = (took, load, out)
                if name == "slurm-replaced":
                    replaced_jobs = n_jobs
    ref = GramStore.open(best["sequential"][2]).view().block()
    for name, (_, _, out) in best.items():
        assert np.array_equal(GramStore.open(out).view().block(), ref), name
        assert GramStore.open(out).view().block().tobytes() == ref.tobytes(), name
    pairs = args.n * (args.n + 1) // 2
    threads = best["threads"][0]
    print(f"SST (lam 0.4), the first {args.n} PTB WSJ sample trees ({pairs:,} pairs), tile {args.tile}; "
          f"{os.cpu_count()} cores, {platform.python_version()}; fastest of {args.repeat} run(s) each, a fresh "
          "`gramtile gram` timed from start to exit; every K bitwise equal to sequential.\n")
    print("| profile | workers | wall s | against threads | load average at start |")
    print("|---|---|---|---|---|")
    workers = {"sequential": "1 (driver)", "threads": "2 threads", "local": "2 processes",
               "slurm": "2 jobs", "slurm-replaced": "2 at a time"}
    for name, (took, load, _) in best.items():
        rel = f"{took / threads:.2f}x ({took - threads:+.1f} s)" if name != "threads" else "1.00x"
        label = name
        if name == "slurm-replaced":
            label = f"slurm, walltime 1 min, lifetime {args.lifetime} s ({replaced_jobs} jobs)"
        print(f"| {label} | {workers[name]} | {took:.1f} | {rel} | {load:.1f} |")
    if slurm:
        extra = best["slurm-replaced"][0] - best["slurm"][0]
        print(f"\nJobs replaced on walltime: {extra:+.1f} s against the same run on jobs that last it out.")


if __name__ == "__main__":
    main()
