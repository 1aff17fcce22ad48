"""Throughput of the ST, SST and PT Numba cores on real constituency trees (one core, no Dask).

Workload: the 5,483 training trees of ``data/trec_qc_num_constituency/NUM_train.dat``; the full
upper triangle of the Gram matrix (n (n+1) / 2 = 15.03 M evaluations, computed in row blocks of
tiles i <= j, as the tiled pipeline does) plus the diagonal, then the normalised row sums, which
are checked against SVM-Light-TK's printed values. Prints a markdown table for BENCHMARKS.md.

Usage::

    .venv/bin/python bench/tree_kernels.py [--n N] [--tile T] [--kernels st,sst,pt]

Compile time is excluded (one warm-up call on a few trees). The CPU time column is the process
time, which is what matters when other processes share the machine.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

from gramtile.kernels.composite import normalize_block
from gramtile.kernels.tree_kernels import PartialTreeKernel, SubsetTreeKernel, SubtreeKernel
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec_qc_num_constituency"

#: name, spec, SVM-Light-TK reference file, SVM-Light-TK throughput (M evaluations/s, README)
KERNELS = {
    "st": (SubtreeKernel(lam=0.4), "svmlighttk_rowsums_F0.txt", 1.51),
    "sst": (SubsetTreeKernel(lam=0.4), "svmlighttk_rowsums_F1.txt", 1.48),
    # SVM-Light-TK caps PT child subsequences at 5 (MAX_CHILDREN); the row sums depend on it
    "pt": (PartialTreeKernel(lam=0.4, mu=0.4, max_length=5), "svmlighttk_rowsums_F3.txt", 0.35),
    "pt-unlimited": (PartialTreeKernel(lam=0.4, mu=0.4), "svmlighttk_rowsums_F3.txt", 0.35),
}


def read_trees(path):
    trees = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            a, b = line.index("|BT|"), line.index("|ET|")
            trees.append(parse_tree(line[a + 4:b]))
    return trees


def upper_triangle_rowsums(spec, X, tile):
    """Normalised row sums from the tiles i <= j; returns (row sums, diag, wall s, cpu s)."""
    n = X.n
    w0, c0 = time.perf_counter(), time.process_time()
    d = spec.diag(X)
    parts = [X.slice(a, min(a + tile, n)) for a in range(0, n, tile)]
    rows = np.zeros(n)
    for bi, A in enumerate(parts):
        a = bi * tile
        for bj in range(bi, len(parts)):
            b = bj * tile
            K = spec.block(A) if bi == bj else spec.block(A, parts[bj])
            N = normalize_block(K, d[a:a + A.n], d[b:b + parts[bj].n])
            rows[a:a + A.n] += N.sum(axis=1)
            if bj != bi:
                rows[b:b + parts[bj].n] += N.sum(axis=0)
    return rows, d, time.perf_counter() - w0, time.process_time() - c0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=None, help="use the first N trees (default: all 5,483)")
    p.add_argument("--tile", type=int, default=1024)
    p.add_argument("--kernels", default="st,sst,pt,pt-unlimited")
    args = p.parse_args(argv)

    trees = read_trees(DATA / "NUM_train.dat")
    n = len(trees) if args.n is None else args.n
    X = encode(trees[:n], Vocabularies())
    evals = n * (n + 1) // 2
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), platform.processor())
    print(f"# Tree kernels, {n:,} NUM_train trees, {evals:,} evaluations (upper triangle incl. diagonal)\n")
    print(f"- machine: {os.cpu_count()} cores (`nproc`), CPU {cpu}, load {os.getloadavg()[0]:.2f}")
    print(f"- date: {datetime.datetime.now().isoformat(timespec='seconds')}")
    print(f"- command: `{' '.join([Path(sys.executable).name, *sys.argv])}`\n")
    print("| kernel | wall s | CPU s | M evals/s (wall) | M evals/s (CPU) | SVM-Light-TK M/s | max rel. err. of row sums |")
    print("|---|---|---|---|---|---|---|")
    for name in args.kernels.split(","):
        spec, ref_file, tk = KERNELS[name]
        spec.block(X.slice(0, min(n, 8)))  # compile / load the cache outside the timing
        rows, _, wall, cpu_s = upper_triangle_rowsums(spec, X, args.tile)
        err = "n/a (subset)"
        if n == len(trees):
            ref = np.loadtxt(DATA / ref_file)
            err = f"{np.max(np.abs(rows - ref) / np.abs(ref)):.1e}"
        print(f"| {name} `{spec.to_json()}` | {wall:.2f} | {cpu_s:.2f} | {evals / wall / 1e6:.2f} | "
              f"{evals / cpu_s / 1e6:.2f} | {tk} | {err} |", flush=True)


if __name__ == "__main__":
    main()
