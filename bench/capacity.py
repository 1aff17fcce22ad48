"""Capacity model: what a corpus of 10^6 or 10^7 examples costs, from costs measured here.

Measured on one corpus (NUM_train.dat's constituency trees, 5,483 questions) on this machine, in
CPU seconds (what a cluster bills, and robust to other work on the machine):

1. per kernel (ST, SST, PT), the one-core cost of one pair, kernel only, on a seeded random
   sample of pairs (``--sample`` examples against ``--sample`` others);
2. ``gramtile gram --cluster threads`` at two sizes: the CPU seconds of its tile tasks (from the
   store's log) per pair is the engine's cost per pair (the product path of a kernel with an
   explicit feature map makes it lower than the kernel alone); the model -- CPU = pairs(n) x the
   per-pair cost measured at the smaller size -- is checked against the larger; stored bytes per
   pair and the command's peak memory come from the same runs;
3. per learner (exact SVM in memory, smo through a 100 MB row cache, Nystroem), ``gramtile
   evaluate`` (one C, ``--folds`` folds) at the same two sizes: its CPU seconds beyond those of
   a ``--tiny``-example command, and the exponent b of n between the two sizes.

It prints one markdown section: the measured figures, the check, and the extrapolation to 10^6
and 10^7 examples (core-hours, storage, memory per fit). docs/running.md ("Capacity") explains
the model and quotes the table.

The examples of each size are a seeded random subset of the file (which is sorted by class).

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


def run(cmd: list[str]) -> tuple[float, float, float]:
    """Wall and CPU seconds of one command, and the largest peak RSS (MB) of any child so far."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return wall, cpu, r1.ru_maxrss / 1e3


def tile_cpu(store: Path) -> float:
    """CPU seconds of the tile tasks of a Gram store's runs (its log)."""
    from gramtile.pipeline.stores.gram_store import GramStore

    return sum(r["cpu_seconds"] for r in GramStore.open(store).read_log() if r.get("event") == "tile")


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
        cpu, rss, stores = {}, 0.0, {}
        for n in (args.tiny, n1, n2):
            out = work / f"{name}-{n}.zarr"
            subprocess.run(["rm", "-rf", str(out)], check=True)
            _, _, rss = run([GRAMTILE, "-q", "gram", "--corpus", str(corpus), "--kernel", json.dumps(spec),
                             "--rows", f"@{work / f'rows-{n}.txt'}", "--out", str(out), *common])
            cpu[n], stores[n] = tile_cpu(out), out
        e1, e2 = cpu[n1] / pairs(n1), cpu[n2] / pairs(n2)
        learn = {}
        for model, extra in (("libsvm", ["--model", "svm", "--solver", "libsvm"]),
                             ("smo", ["--model", "svm", "--solver", "smo", "--cache-mb", "100"]),
                             ("nystroem", ["--model", "nystroem", "--landmarks", str(args.landmarks)])):
            t = {}
            for n in (args.tiny, n1, n2):
                res = work / f"res-{name}-{model}-{n}"
                subprocess.run(["rm", "-rf", str(res)], check=True)
                _, t[n], _ = run([GRAMTILE, "-q", "evaluate", "--gram", str(stores[n]), "--normalized", "--folds",
                                  str(args.folds), "--C", "1", "--out", str(res), *extra, *common])
            # the learner's own CPU: the tiny command's (start-up, imports) taken off
            own = {n: max(t[n] - t[args.tiny], 1e-3) for n in (n1, n2)}
            learn[model] = (own, np.log(own[n2] / own[n1]) / np.log(n2 / n1))
        rows[name] = dict(c=c, e1=e1, e2=e2, cpu=cpu, pred=e1 * pairs(n2), bpp=du(stores[n2] / "K") / pairs(n2),
                          rss=rss, learn=learn)
    report(rows, args, n1, n2, load)


def report(rows, args, n1, n2, load):
    print(f"## Capacity model — `bench/capacity.py --sizes {n1},{n2}`\n")
    print(f"NUM_train.dat constituency trees, seeded random subsets; `gramtile gram`/`evaluate` with `--cluster "
          f"threads` ({args.workers} threads); load average {load:.1f} at the start; CPU seconds throughout. c: one "
          f"core, kernel only, {args.sample} x {args.sample} random examples; e(n): the tile tasks' CPU per pair of "
          f"a Gram of n examples (the engine, and the product path where the kernel has a feature map). Check: "
          f"CPU(n = {n2}) predicted as e({n1}) x pairs({n2}).\n")
    print(f"| kernel | c (us/pair) | e({n1}) (us/pair) | e({n2}) (us/pair) | tile CPU at n = {n2}: measured / "
          "predicted (s) | K bytes/pair | peak RSS (MB) |")
    print("|---|---|---|---|---|---|---|")
    for k, r in rows.items():
        print(f"| {k} | {r['c'] * 1e6:.3f} | {r['e1'] * 1e6:.3f} | {r['e2'] * 1e6:.3f} | {r['cpu'][n2]:.1f} / "
              f"{r['pred']:.1f} | {r['bpp']:.2f} | {r['rss']:.0f} |")
    print(f"\nLearners, `evaluate --folds {args.folds} --C 1 --normalized`: CPU seconds beyond a "
          f"{args.tiny}-example command's at n = {n1} / {n2}, and the exponent b of n between them:\n")
    print(f"| kernel | libsvm | smo (100 MB cache) | nystroem (M = {args.landmarks}) |")
    print("|---|---|---|---|")
    for k, r in rows.items():
        cells = [f"{t[n1]:.1f} / {t[n2]:.1f} s, b = {b:.2f}" for t, b in (r["learn"][m] for m in
                                                                          ("libsvm", "smo", "nystroem"))]
        print(f"| {k} | " + " | ".join(cells) + " |")
    print(f"\nExtrapolated from n = {n2} (Gram: pairs(n) x e({n2}); storage: stored bytes per pair as measured; "
          "libsvm holds K(train, train) of a fit; Nystroem's landmark Gram: n x M pairs at M = 2,000):\n")
    print("| kernel | n | full Gram core-hours | full K storage | K(train, train) in memory (libsvm) | "
          "landmark Gram core-hours | landmark K storage |")
    print("|---|---|---|---|---|---|---|")
    for k, r in rows.items():
        for n in TARGETS:
            print(f"| {k} | 10^{int(np.log10(n))} | {pairs(n) * r['e2'] / 3600:,.0f} | "
                  f"{pairs(n) * r['bpp'] / 1e12:,.1f} TB | {8 * (0.8 * n) ** 2 / 1e12:,.1f} TB | "
                  f"{n * 2000 * r['e2'] / 3600:,.2f} | {n * 2000 * r['bpp'] / 1e9:,.0f} GB |")


if __name__ == "__main__":
    main()
