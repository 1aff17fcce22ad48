"""Capacity model: what a corpus of 10^6 or 10^7 examples costs, from costs measured here.

Measured on one corpus (NUM_train.dat's constituency trees, 5,483 questions) on this machine:

1. per kernel (ST, SST, PT), the one-core cost of one pair, kernel only, on a seeded random
   sample of pairs (``--sample`` examples against ``--sample`` others);
2. a fixed cost per command (interpreter, imports, store creation, executor start and stop):
   the wall time of a ``gramtile gram`` of ``--tiny`` examples;
3. ``gramtile gram --cluster threads`` (``--workers`` threads) at two sizes: the model
   ``T(n) = T_fixed + pairs(n) * c / workers`` is checked against the measured wall times, and
   their ratio at the larger size is the engine's overhead factor (1 = the kernel alone);
   stored bytes per pair and the command's peak memory come from the same runs;
4. per learner (exact SVM in memory, smo through a row cache, Nystroem), ``gramtile evaluate``
   (one C, ``--folds`` folds) at the same two sizes: the exponent of n between them.

The examples of each size are a seeded random subset of the file (which is sorted by class).

It prints one markdown section: the measured figures, the check at two sizes, and the
extrapolation to 10^6 and 10^7 examples (core-hours, memory per worker, storage per kernel and
learner). docs/running.md ("Capacity") explains the model and quotes the table.

Usage::

    .venv/bin/python bench/capacity.py                  # sizes 2000,5000
    .venv/bin/python bench/capacity.py --sizes 1000,2000 --kernels sst
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
GRAMTILE = str(Path(sys.executable).parent / "gramtile")
KERNELS = {"st": {"kind": "st", "lam": 0.4}, "sst": {"kind": "sst", "lam": 0.4},
           "pt": {"kind": "pt", "lam": 0.4, "mu": 0.4}}
TARGETS = (10**6, 10**7)


def pairs(n: int) -> int:
    return n * (n + 1) // 2


def run(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds of one command and the largest peak RSS (MB) of any child so far."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e3


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def pair_cost(corpus: Path, spec: dict, sample: int, seed: int) -> float:
    """One-core seconds per pair, kernel only, on ``sample`` x ``sample`` random examples."""
    from gramtile.kernels.registry import as_spec
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    cs = CorpusStore.open(corpus)
    X = cs.load("tree", 0, cs.n)
    rng = np.random.default_rng(seed)
    a, b = (np.sort(rng.choice(cs.n, sample, replace=False)) for _ in range(2))
    s = as_spec(spec)
    A, B = X.take(a), X.take(b)
    s.block(A.slice(0, 20), B.slice(0, 20))  # compile / load the cores outside the timing
    c0 = time.process_time()
    s.block(A, B)
    return (time.process_time() - c0) / (A.n * B.n)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="2000,5000", help="the two sizes of the check")
    ap.add_argument("--kernels", default="st,sst,pt")
    ap.add_argument("--sample", type=int, default=400)
    ap.add_argument("--tiny", type=int, default=50)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--landmarks", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args(argv)
    n1, n2 = (int(x) for x in args.sizes.split(","))
    work = Path(args.workdir or tempfile.mkdtemp(prefix="gramtile-capacity-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "cluster.yaml").write_text(f"profiles:\n  threads: {{type: threads, n_workers: {args.workers}}}\n")
    corpus = work / "num.zarr"
    if not (corpus / "zarr.json").exists():
        subprocess.run([GRAMTILE, "-q", "prepare", "--input", str(DATA / "trec_qc_num_constituency" / "NUM_train.dat"),
                        "--format", "svmlighttk", "--out", str(corpus), "--cluster", "sequential"], check=True)
    # the examples of each size: a seeded random subset (the file is sorted by class)
    order = np.random.default_rng(args.seed).permutation(5483)
    for n in (args.tiny, n1, n2):
        (work / f"rows-{n}.txt").write_text("\n".join(str(i) for i in np.sort(order[:n])) + "\n")
    common = ["--cluster", "threads", "--cluster-file", str(work / "cluster.yaml"), "--no-progress"]
    load = os.getloadavg()[0]
    rows = {}
    for name in args.kernels.split(","):
        spec = KERNELS[name]
        c = pair_cost(corpus, spec, args.sample, args.seed)
        stores = {}
        times = {}
        for n in (args.tiny, args.tiny, n1, n2):  # the tiny run twice: the first fills the compile cache
            out = work / f"{name}-{n}.zarr"
            if out.exists():
                subprocess.run(["rm", "-rf", str(out)], check=True)
            times[n], rss = run([GRAMTILE, "-q", "gram", "--corpus", str(corpus), "--kernel", json.dumps(spec),
                                 "--rows", f"@{work / f'rows-{n}.txt'}", "--out", str(out), *common])
            stores[n] = (out, rss)
        fixed = times[args.tiny]
        pred = {n: fixed + pairs(n) * c / args.workers for n in (n1, n2)}
        factor = (times[n2] - fixed) * args.workers / (pairs(n2) * c)
        bpp = du(stores[n2][0] / "K") / pairs(n2)
        learn = {}
        for model, extra in (("libsvm", ["--model", "svm", "--solver", "libsvm"]),
                             ("smo", ["--model", "svm", "--solver", "smo", "--cache-mb", "100"]),
                             ("nystroem", ["--model", "nystroem", "--landmarks", str(args.landmarks)])):
            t = {}
            for n in (args.tiny, n1, n2):
                res = work / f"res-{name}-{model}-{n}"
                subprocess.run(["rm", "-rf", str(res)], check=True)
                res.mkdir()
                t[n], _ = run([GRAMTILE, "-q", "evaluate", "--gram", str(stores[n][0]), "--normalized", "--folds",
                               str(args.folds), "--C", "1", "--out", str(res), *extra, *common])
            # the exponent of n in the learner's own time: the tiny run's wall time (start-up) taken off
            own = {n: max(t[n] - t[args.tiny], 1e-3) for n in (n1, n2)}
            learn[model] = (t, np.log(own[n2] / own[n1]) / np.log(n2 / n1))
        rows[name] = dict(c=c, fixed=fixed, times=times, pred=pred, factor=factor, bpp=bpp,
                          rss=stores[n2][1], learn=learn)
    report(rows, args, n1, n2, load)


def report(rows, args, n1, n2, load):
    print(f"## Capacity model — `bench/capacity.py --sizes {n1},{n2}`\n")
    print(f"NUM_train.dat constituency trees; `gramtile gram`/`evaluate` with `--cluster threads` ({args.workers} "
          f"threads); load average {load:.1f} at the start. Per-pair cost: one core, kernel only, "
          f"{args.sample} x {args.sample} seeded random examples. Check: T(n) = T_fixed + pairs(n) x c / "
          f"{args.workers}, T_fixed the wall time of a {args.tiny}-example command.\n")
    print(f"| kernel | c (us/pair) | T_fixed (s) | n = {n1}: measured / model (s) | n = {n2}: measured / model (s) "
          "| overhead factor | K bytes/pair | peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|---|")
    for k, r in rows.items():
        print(f"| {k} | {r['c'] * 1e6:.2f} | {r['fixed']:.1f} | {r['times'][n1]:.1f} / {r['pred'][n1]:.1f} | "
              f"{r['times'][n2]:.1f} / {r['pred'][n2]:.1f} | {r['factor']:.2f} | {r['bpp']:.2f} | {r['rss']:.0f} |")
    print(f"\nLearners, `evaluate --folds {args.folds} --C 1 --normalized` wall seconds at n = {n1} / {n2} and the "
          f"exponent b of n between them (of the time beyond a {args.tiny}-example command's):\n")
    print(f"| kernel | libsvm | smo (100 MB cache) | nystroem (M = {args.landmarks}) |")
    print("|---|---|---|---|")
    for k, r in rows.items():
        cells = [f"{t[n1]:.1f} / {t[n2]:.1f} s, b = {b:.2f}" for t, b in (r["learn"][m] for m in
                                                                          ("libsvm", "smo", "nystroem"))]
        print(f"| {k} | " + " | ".join(cells) + " |")
    print("\nExtrapolated (Gram: pairs x c x overhead factor; storage: stored bytes per pair as measured; "
          "Nystroem's landmark Gram: n x M pairs at M = 2,000):\n")
    print("| kernel | n | full Gram core-hours | full K storage | K in memory (libsvm, per fit) | "
          "landmark Gram core-hours | landmark K storage |")
    print("|---|---|---|---|---|---|---|")
    for k, r in rows.items():
        for n in TARGETS:
            ch = pairs(n) * r["c"] * r["factor"] / 3600
            lch = n * 2000 * r["c"] * r["factor"] / 3600
            print(f"| {k} | 10^{int(np.log10(n))} | {ch:,.0f} | {pairs(n) * r['bpp'] / 1e12:,.1f} TB | "
                  f"{8 * n * n / 1e12:,.0f} TB | {lch:,.1f} | {n * 2000 * r['bpp'] / 1e9:,.0f} GB |")


if __name__ == "__main__":
    main()
