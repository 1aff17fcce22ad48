"""Scale benchmark: landmark Gram at M landmarks and 5-fold Nystroem evaluation
at n examples, with wall time and peak RSS per phase.

    python bench/scale.py --corpus /work/scale-data/all.zarr --sizes 50000,100000,200000 \\
        --landmarks 2000 --workdir /work/scale-data/scale --cluster threads

The corpus is the one ``bench/scale_corpus.py`` builds (the ~50,000 real sentences of the shared
corpora first, then the seeded synthetic trees); ``--rows 0:n`` takes its first n examples, so
n <= 50,068 is real sentences only. The kernel (``--kernel``, default SST lam 0.4 over the
``tree`` representation derived from the spaCy dependency parse) is normalised for learning.

Each phase runs in its own process (``python bench/scale.py --phase ...``), so its peak RSS
(``ru_maxrss`` from ``os.wait4``) is that phase's alone; with ``--cluster threads`` (default)
the kernel runs on threads of that one process, so the figure covers every thread that did
work. With a Dask profile (``local``) the workers are other processes: their peak RSS is
reported from the workers themselves (``--cluster local`` prints each worker's).

Phases per n:

1. ``gram``: ``run_gram(rows=0:n, landmarks=M)``: K(n, M) into a landmark store (resumable);
2. ``nystroem``: 5-fold stratified Nystroem evaluation from that store (landmarks of each
   training part, C = 1, linear SVM), pooled accuracy; each split's wall time, accuracy and
   the process's peak RSS so far go to stderr as it finishes.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from gramtile.pipeline.compute.runtime import Runtime

SST_TREE = {"kind": "sst", "lam": 0.4, "rep": "tree"}


def phase_gram(a):
    from gramtile.pipeline.compute.engine import run_gram

    peak = {}
    rt = Runtime(a.cluster)
    rt.__enter__()
    if a.range_cache_mb is not None:  # before/after comparisons: < 0 is the count-only bound of the earlier engine
        rt.cache.limit("ranges", nbytes=None if a.range_cache_mb < 0 else int(a.range_cache_mb * 2**20))
    t0 = time.perf_counter()
    st = run_gram(a.corpus, json.loads(a.kernel), a.out, rows=f"0:{a.n}", landmarks=a.landmarks,
                  landmark_seed=0, cluster=rt, tile=a.tile, dtype=a.dtype)
    wall = time.perf_counter() - t0
    client = getattr(rt.executor, "client", None)
    if client is not None:
        peak = client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    rt.close()
    return {"wall_s": round(wall, 1), "shape": list(st.shape), "complete": st.complete,
            "worker_peak_rss_mib": {k: round(v / 1024, 1) for k, v in peak.items()}}


def phase_nystroem(a):
    from gramtile.pipeline.learn.crossval import evaluate_nystroem
    from gramtile.pipeline.learn.folds import stratified_kfold
    from gramtile.pipeline.learn.nystroem import LandmarkSource
    from gramtile.pipeline.learn.sources import store_labels
    from gramtile.pipeline.stores.gram_store import GramStore

    t0 = time.perf_counter()
    st = GramStore.open(a.out)
    y = np.asarray([str(v) for v in store_labels(st)])
    src = LandmarkSource(st, normalized=True)
    splits = stratified_kfold(y, 5, seed=0)
    correct = tested = 0
    per = []
    for sp in splits:  # one split at a time, each printed when done (a killed run keeps its figures)
        t1 = time.perf_counter()
        r = evaluate_nystroem(src, y, [sp], m=0, C=(1.0,), landmarks=src.landmarks)[0]
        correct += r["accuracy"] * r["n_test"]
        tested += r["n_test"]
        ru = resource.getrusage(resource.RUSAGE_SELF)
        per.append({"split": sp.name, "wall_s": round(time.perf_counter() - t1, 1), "accuracy": r["accuracy"],
                    "rank": r["rank"], "m": r["landmarks_used_min"], "converged": r["converged"],
                    "iterations": r["iterations"], "cpu_s_so_far": round(ru.ru_utime + ru.ru_stime, 1),
                    "peak_rss_mib": round(ru.ru_maxrss / 1024, 1), "load": round(os.getloadavg()[0], 1)})
        print(json.dumps(per[-1]), file=sys.stderr, flush=True)
    wall = time.perf_counter() - t0
    return {"wall_s": round(wall, 1), "accuracy": correct / tested,
            "accuracy_std": float(np.std([p["accuracy"] for p in per], ddof=1)), "splits": per,
            "classes": int(np.unique(y).size)}


def run_phase(name, a, n, out):
    cmd = [sys.executable, __file__, "--phase", name, "--corpus", str(a.corpus), "--n", str(n), "--out", str(out),
           "--landmarks", str(a.landmarks), "--kernel", a.kernel, "--cluster", a.cluster, "--tile", str(a.tile),
           "--dtype", a.dtype] + ([] if a.range_cache_mb is None else ["--range-cache-mb", str(a.range_cache_mb)])
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    outtext = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status != 0:
        raise SystemExit(f"phase {name} n={n} failed (status {status})")
    res = json.loads(outtext.strip().splitlines()[-1])
    res.update(process_wall_s=round(wall, 1), peak_rss_mib=round(ru.ru_maxrss / 1024, 1),
               cpu_s=round(ru.ru_utime + ru.ru_stime, 1), load_before=[round(x, 2) for x in load0],
               load_after=[round(x, 2) for x in os.getloadavg()])
    return res


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True)
    p.add_argument("--sizes", default="50000")
    p.add_argument("--landmarks", type=int, default=2000)
    p.add_argument("--kernel", default=json.dumps(SST_TREE))
    p.add_argument("--cluster", default="threads")
    p.add_argument("--tile", type=int, default=1000)
    p.add_argument("--dtype", default="float64")
    p.add_argument("--workdir", default=None)
    p.add_argument("--range-cache-mb", type=float, default=None,
                   help="the gram phase's bound on the engine's assembled-range cache in MiB (default: the "
                        "engine's RANGE_CACHE_BYTES; -1: no byte bound, as the earlier engine)")
    p.add_argument("--phases", default="gram,nystroem", help="phases to run per n (default gram,nystroem)")
    p.add_argument("--phase", choices=("gram", "nystroem"), default=None, help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, default=None)
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    if a.phase:
        print(json.dumps((phase_gram if a.phase == "gram" else phase_nystroem)(a)), flush=True)
        return
    wd = Path(a.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    results = []
    for n in [int(x) for x in a.sizes.split(",")]:
        out = wd / f"lm-n{n}-m{a.landmarks}.zarr"
        for name in a.phases.split(","):
            r = {"n": n, "M": a.landmarks, "phase": name, **run_phase(name, a, n, out)}
            print(json.dumps(r), flush=True)
            results.append(r)
        (wd / f"scale-n{n}.json").write_text(json.dumps([r for r in results if r["n"] == n], indent=1))


if __name__ == "__main__":
    main()
