"""Where the ST/SST core's time goes on real trees: matching against the sums.

Workload: the first ``--n`` of the 5,483 NUM training trees, the upper triangle of their Gram
matrix in tiles (as ``bench/tree_kernels.py``). Three compiled loops over the same pairs, each
timed as the best of ``--repeat`` CPU times:

- *loop*: the pair loop and the key table marks alone (what every evaluation pays);
- *match*: plus ``_match``, which lists the matching node pairs (the core's join);
- *core*: the whole ``_block_sst`` (matching, then Delta over the matching pairs).

Printed per evaluation: the matching node pairs (``need``: the pairs of equal productions, the
Delta values the recursion must compute), the X nodes with a partner, and the CPU time of each
stage; the sums' cost per matching pair is (core - match) / pairs. The lower bound that follows:
any exact core computes one Delta per matching pair (each reads its children's Deltas), so it
costs at least the join plus those products; ``--kernels`` also accepts ``st``.

Usage::

    .venv/bin/python bench/tree_profile.py [--n 2000] [--tile 500] [--kernels sst,st] [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from numba import njit
from tree_kernels import DATA, read_trees  # bench/tree_kernels.py (bench/ is on sys.path)

from gramtile.kernels import tree_kernels as tk
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies


@njit(cache=True, nogil=True)
def _loop_only(X, Y, sym):
    nx = X[0].shape[0] - 1
    ny = Y[0].shape[0] - 1
    table, work, memo = tk._scratch(X, Y)
    acc = 0
    for i in range(nx):
        tk._mark(i, X, table, True)
        for j in range(i if sym else 0, ny):
            acc += i ^ j
        tk._mark(i, X, table, False)
    return acc


@njit(cache=True, nogil=True)
def _match_only(X, Y, sym):
    """(evaluations, X nodes with a partner, matching node pairs) over the pairs."""
    nx = X[0].shape[0] - 1
    ny = Y[0].shape[0] - 1
    table, work, memo = tk._scratch(X, Y)
    mnode, mgrp, base, slot = work
    ev = 0
    nodes = 0
    pairs = 0
    for i in range(nx):
        tk._mark(i, X, table, True)
        for j in range(i if sym else 0, ny):
            cnt, need = tk._match(i, X, j, Y, table, mnode, mgrp, slot)
            ev += 1
            nodes += cnt
            pairs += need
        tk._mark(i, X, table, False)
    return ev, nodes, pairs


def best(fn, repeat):
    out, t = None, float("inf")
    for _ in range(repeat):
        c = time.process_time()
        out = fn()
        t = min(t, time.process_time() - c)
    return out, t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--tile", type=int, default=500)
    ap.add_argument("--kernels", default="sst,st")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    batch = encode(read_trees(DATA / "NUM_train.dat")[:a.n], Vocabularies())
    n = batch.n
    tiles = [(lo, min(lo + a.tile, n)) for lo in range(0, n, a.tile)]
    blocks = []  # (ix, iy, symmetric) per tile i <= j
    for bi, (r0, r1) in enumerate(tiles):
        for c0, c1 in tiles[bi:]:
            X, Y = batch.take(np.arange(r0, r1)), batch.take(np.arange(c0, c1))
            if (r0, r1) == (c0, c1):
                ix, = tk._compact_keys(tk._index(X, "prod"))
                blocks.append((ix, ix, True))
            else:
                ix, iy = tk._compact_keys(tk._index(X, "prod"), tk._index(Y, "prod"))
                blocks.append((ix, iy, False))
    lx = tk._NO_LEAVES
    print(f"load before: {os.getloadavg()[0]:.2f}; {n} NUM trees, {len(blocks)} blocks of tile {a.tile}")
    print("| kernel | evaluations | matching pairs / eval | X nodes with a partner / eval | loop ns/eval | "
          "match ns/eval | core ns/eval | sums ns per matching pair |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in a.kernels.split(","):
        st = name == "st"
        # warm-up (compiles or loads the three loops)
        ix, iy, sym = blocks[0]
        _loop_only(ix, iy, sym)
        _match_only(ix, iy, sym)
        tk._block_sst(ix, iy, lx, lx, tk._SYM if sym else tk._FULL, 0.4, False, st, False)
        _, t_loop = best(lambda: [_loop_only(x, y, s) for x, y, s in blocks], a.repeat)
        counts, t_match = best(lambda: [_match_only(x, y, s) for x, y, s in blocks], a.repeat)
        _, t_core = best(lambda: [tk._block_sst(x, y, lx, lx, tk._SYM if s else tk._FULL, 0.4, False, st, False)
                                  for x, y, s in blocks], a.repeat)
        ev = sum(c[0] for c in counts)
        nodes = sum(c[1] for c in counts)
        pairs = sum(c[2] for c in counts)
        print(f"| {name} | {ev:,} | {pairs / ev:.2f} | {nodes / ev:.2f} | {t_loop / ev * 1e9:.1f} | "
              f"{t_match / ev * 1e9:.1f} | {t_core / ev * 1e9:.1f} | {(t_core - t_match) / pairs * 1e9:.1f} |",
              flush=True)
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
