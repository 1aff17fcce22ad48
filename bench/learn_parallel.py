"""Serial against parallel learning (issue 15, 5c): `gramtile evaluate` on the 5,483 NUM training
trees (SST, lam 0.4, normalised), 10 folds x the C grid 0.1,1,10,100 (nested 3-fold C selection in
each training part), run in one session as

- sequential (the default: one process, one fit after another),
- ``--cluster threads`` (2 threads of the command's process),
- ``--cluster local`` (a LocalCluster of 2 worker processes, started by the command),

each as a child process (wall, user + system CPU of the command and its children, from
``os.wait4``), alternating the variants for ``--repeats`` rounds, with the load average before each
run. The results.json of every parallel run is checked equal to the serial one (the solver's
budget aside). The Gram store is computed once into WORKDIR and reused.

    .venv/bin/python bench/learn_parallel.py --workdir WORKDIR [--repeats 2] [--solver libsvm]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from _timing import run_measured

ROOT = Path(__file__).resolve().parents[1]
NUM = ROOT.parent / "shared" / "data" / "trec_qc_num_constituency" / "NUM_train.dat"


def build(workdir: Path) -> Path:
    from gramtile.pipeline.compute.engine import run_gram
    from gramtile.pipeline.compute.prepare import prepare

    gram = workdir / "num-sst.zarr"
    if not (gram / "zarr.json").exists():
        corpus = workdir / "num.zarr"
        if not corpus.exists():
            prepare(NUM, "svmlighttk", corpus, cluster="sequential", progress=False)
        run_gram(corpus, {"kind": "sst", "lam": 0.4}, gram, tile=1000, cluster="threads", progress=False)
    return gram


def run(gram: Path, out: Path, extra: list) -> dict:
    cmd = [sys.executable, "-m", "gramtile", "evaluate", "--gram", str(gram), "--folds", "10", "--C",
           "0.1,1,10,100", "--normalized", "--no-progress", "--out", str(out), *extra]
    load = os.getloadavg()[0]
    wall, ru, _ = run_measured(cmd)
    res = json.loads((out / "results.json").read_text())
    res.pop("solver", None)
    # the workers of a LocalCluster are grandchildren: their CPU is not in ru (wall is the figure)
    return {"wall": wall, "cpu": ru.ru_utime + ru.ru_stime, "load": load, "res": res}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--solver", default="libsvm")
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    gram = build(a.workdir)
    variants = {"sequential": [], "threads (2)": ["--cluster", "threads"], "local (2 processes)": ["--cluster", "local"]}
    got = {k: [] for k in variants}
    ref = None
    for r in range(a.repeats):
        for name, extra in variants.items():
            m = run(gram, a.workdir / f"out-{r}-{name.split()[0]}", ["--solver", a.solver, *extra])
            if ref is None:
                ref = m["res"]
            assert m["res"] == ref, f"{name}: results.json differs from the serial run"
            got[name].append(m)
            print(f"round {r + 1} {name}: wall {m['wall']:.1f} s (load {m['load']:.2f})", flush=True)
    print(f"\naccuracy {ref['rows'][0]['accuracy']:.4f}, C chosen {ref['rows'][0]['C_chosen']}; every parallel "
          "results.json equal to the serial one\n")
    print("| variant | wall s (best) | wall s (all rounds) | speed-up vs sequential (best) | load (1 min) at start |")
    print("|---|---:|---|---:|---|")
    base = min(m["wall"] for m in got["sequential"])
    for name, ms in got.items():
        best = min(m["wall"] for m in ms)
        walls = ", ".join(f"{m['wall']:.1f}" for m in ms)
        loads = ", ".join(f"{m['load']:.1f}" for m in ms)
        print(f"| {name} | {best:.1f} | {walls} | {base / best:.2f}x | {loads} |")


if __name__ == "__main__":
    main()
