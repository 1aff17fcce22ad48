"""Route kernel throughput on INEX 2005 trees: kernel evaluations per second on one core.

One process, no Dask: encode the training trees once, then time ``RouteKernel.block`` on a
square block (the symmetric path computes i <= j, so it is reported per computed pair) and on
a rectangular block (every entry computed). The time includes the per-block feature interning.

    .venv/bin/python bench/route.py [--n 2000] [--variant label|production] [--degree 1]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from _timing import best_block_times

from gramtile.kernels.route import RouteKernel
from gramtile.pipeline.readers.inex import read_inex
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "inex2005" / "inex05.train.elastic.tree"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="trees per side of the block")
    ap.add_argument("--variant", default="label", choices=("label", "production"))
    ap.add_argument("--lam", type=float, default=0.5)
    ap.add_argument("--degree", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    docs = list(read_inex(DATA))
    trees = [d.structures["ptree"] for d in docs[:2 * args.n]]
    v = Vocabularies()
    X = encode(trees[:args.n], v)
    Y = encode(trees[args.n:2 * args.n], v)
    spec = RouteKernel(lam=args.lam, variant=args.variant, degree=args.degree)
    spec.block(X.slice(0, 5))  # compile (or load the Numba cache)
    spec.block(X.slice(0, 5), Y.slice(0, 5))
    nx, ny = X.n, Y.n
    best_sq, cpu_sq, best_rect, cpu_rect, _ = best_block_times(spec, X, Y, args.repeat)
    pairs_sq = nx * (nx + 1) // 2
    print(f"route kernel, INEX 2005 train, variant={args.variant}, lam={args.lam}, degree={args.degree}, "
          f"mean nodes/tree {X.sizes().mean():.1f}")
    print(f"square {nx}x{nx}: {pairs_sq / best_sq / 1e6:.2f} M evaluations/s per core wall, "
          f"{pairs_sq / cpu_sq / 1e6:.2f} M per CPU second ({pairs_sq} distinct pairs in {best_sq:.3f} s)")
    print(f"rectangular {nx}x{ny}: {nx * ny / best_rect / 1e6:.2f} M evaluations/s per core wall, "
          f"{nx * ny / cpu_rect / 1e6:.2f} M per CPU second ({nx * ny} pairs in {best_rect:.3f} s)")


if __name__ == "__main__":
    main()
