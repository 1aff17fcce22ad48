"""Relation-subtree kernel throughput on random relation examples of 5-15 nodes, per core.

Real relation examples (CoNLL04 entity pairs) are built in a later task; until then this
bench uses seeded random relation examples of realistic size (5-15 nodes, a root "Sentence"
node, shallow-parse types and classes, roles mostly "none", head texts from a vocabulary of
``--texts`` words: fewer words, more matching pairs), so the figures say how fast the cores
are, not how a real corpus behaves.
One process, no Dask: time ``RelationSubtreeKernel.block`` on a square block (reported per
computed pair, i <= j) and on a rectangular block. Wall-clock rates are printed with the rate
per second of process CPU time, which is the better figure while other jobs share the CPU.

    .venv/bin/python bench/relation_subtree.py [--n 2000] [--mode sparse|contiguous] [--lam 0.5]
"""
from __future__ import annotations

import argparse
import random
import time

from gramtile.kernels.relation_subtree import RelationSubtreeKernel
from gramtile.pipeline.encode import encode
from gramtile.pipeline.relation import RelationExample
from gramtile.pipeline.vocab import Vocabularies

TYPES = ["PNP", "ONP", "LNP", "Person", "Organization", "Location", "Verb", "Prep", "BNP", "Punc", "Adj"]
ROLES = ["none"] * 8 + ["member", "affiliation"]


def random_example(rng, texts):
    """A relation example of 5-15 nodes: a Sentence root over a shallow random tree."""
    n = rng.randint(5, 15)
    kids = [[] for _ in range(n)]
    for v in range(1, n):
        # shallow parses are wide and shallow: attach mostly to the root or its first children
        kids[rng.choice(range(min(v, 4))) if rng.random() < 0.8 else rng.randrange(v)].append(v)

    def build(u):
        if u == 0:
            return RelationExample("Sentence", "none", None, tuple(build(c) for c in kids[u]))
        text = rng.choice(texts) if rng.random() < 0.9 else None
        return RelationExample(rng.choice(TYPES), rng.choice(ROLES), text, tuple(build(c) for c in kids[u]))

    return build(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="examples per side of the block")
    ap.add_argument("--mode", default="sparse", choices=("sparse", "contiguous"))
    ap.add_argument("--lam", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--texts", type=int, default=30, help="size of the head-text vocabulary")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    texts = [f"w{i}" for i in range(args.texts)]
    xs = [random_example(rng, texts) for _ in range(2 * args.n)]
    v = Vocabularies()
    X = encode(xs[:args.n], v)
    Y = encode(xs[args.n:], v)
    spec = RelationSubtreeKernel(mode=args.mode, lam=args.lam)
    spec.block(X.slice(0, 5))  # compile (or load the Numba cache)
    spec.block(X.slice(0, 5), Y.slice(0, 5))
    nx, ny = X.n, Y.n
    best_sq = best_rect = cpu_sq = cpu_rect = float("inf")
    for _ in range(args.repeat):
        t, c = time.perf_counter(), time.process_time()
        K = spec.block(X)
        best_sq = min(best_sq, time.perf_counter() - t)
        cpu_sq = min(cpu_sq, time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        spec.block(X, Y)
        best_rect = min(best_rect, time.perf_counter() - t)
        cpu_rect = min(cpu_rect, time.process_time() - c)
    pairs_sq = nx * (nx + 1) // 2
    print(f"relation_subtree kernel, RANDOM relation examples (5-15 nodes, seed {args.seed}; not real data), "
          f"{args.texts} head texts, mode={args.mode}, lam={args.lam}, mean nodes {X.sizes().mean():.1f}, "
          f"nonzero entries {(K != 0).mean():.0%}")
    print(f"square {nx}x{nx}: {pairs_sq / best_sq / 1e6:.2f} M evaluations/s per core "
          f"({pairs_sq} distinct pairs in {best_sq:.3f} s; {pairs_sq / cpu_sq / 1e6:.2f} M/s of process CPU time)")
    print(f"rectangular {nx}x{ny}: {nx * ny / best_rect / 1e6:.2f} M evaluations/s per core "
          f"({nx * ny} pairs in {best_rect:.3f} s; {nx * ny / cpu_rect / 1e6:.2f} M/s of process CPU time)")


if __name__ == "__main__":
    main()
