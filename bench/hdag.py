"""HDAG kernel throughput: kernel evaluations per second on one core (one process, no Dask).

Synthetic HDAGs sized like TREC questions (``bench/trec_qc_hdag.py`` times real spaCy-built
ones; this one needs no spaCy model): the words (lower-cased) and lengths of the first questions of
``data/trec_qc/train.txt``; each word carries 3 attributes (word, a random PoS tag out of 12,
a random NE type out of 4 or none); consecutive words are grouped into chunks of 1-3 words
(chain edges inside, one chunk label attribute out of 6); the chunks of a question are linked
by a random dependency tree (head -> dependent) in the top graph. The structure of docs/kernels.md (HDAG kernel)
section 1 / the paper's Figure 1.

    .venv/bin/python bench/hdag.py [--n 400] [--p 3] [--lam 0.5]
"""
from __future__ import annotations

import argparse
import random
from pathlib import Path

from _timing import best_block_times

from gramtile.kernels.hdag import HDAGKernel
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.hdag import HDAG
from gramtile.pipeline.representations.vocab import Vocabularies

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec_qc" / "train.txt"
POS = ["NN", "NNS", "NNP", "VB", "VBD", "VBZ", "IN", "DT", "JJ", "WP", "WRB", "RB"]
NE = ["PERSON", "GPE", "ORG", "DATE"]
CHUNK = ["NP", "VP", "PP", "ADVP", "WHNP", "NE"]


def question_hdag(words, rng):
    attrs, parent, edges, chunks = [], [], [], []
    i = 0
    while i < len(words):
        size = min(rng.choice((1, 1, 2, 2, 3)), len(words) - i)
        c = len(attrs)
        attrs.append([rng.choice(CHUNK)])
        parent.append(-1)
        chunks.append(c)
        for k in range(size):
            w = len(attrs)
            a = [words[i + k].lower(), rng.choice(POS)]
            if rng.random() < 0.2:
                a.append(rng.choice(NE))
            attrs.append(sorted(set(a)))
            parent.append(c)
            if k:
                edges.append((w - 1, w))
        i += size
    for k in range(1, len(chunks)):
        edges.append((chunks[rng.randrange(k)], chunks[k]))
    return HDAG(attrs, parent, edges)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400, help="HDAGs per side of the block")
    ap.add_argument("--p", type=int, default=3)
    ap.add_argument("--lam", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = random.Random(0)
    with open(DATA, encoding="latin-1") as f:
        questions = [line.split(" ", 1)[1].split() for _, line in zip(range(2 * args.n), f)]
    hs = [question_hdag(q, rng) for q in questions]
    v = Vocabularies()
    X, Y = encode(hs[:args.n], v), encode(hs[args.n:], v)
    spec = HDAGKernel(lam=args.lam, p=args.p)
    spec.block(X.slice(0, 3))  # compile (or load the Numba cache)
    spec.block(X.slice(0, 3), Y.slice(0, 3))
    best_sq, cpu_sq, best_rect, cpu_rect, _ = best_block_times(spec, X, Y, args.repeat)
    nodes = [len(h) for h in hs]
    pairs_sq = X.n * (X.n + 1) // 2
    print(f"HDAG kernel, synthetic TREC-sized HDAGs, p={args.p}, lam={args.lam}, "
          f"mean nodes {sum(nodes) / len(nodes):.1f} (words + chunks), max {max(nodes)}")
    print(f"square {X.n}x{X.n}: {pairs_sq / best_sq:,.0f} evaluations/s per core wall, "
          f"{pairs_sq / cpu_sq:,.0f} per CPU second ({pairs_sq} distinct pairs in {best_sq:.3f} s)")
    print(f"rectangular {X.n}x{Y.n}: {X.n * Y.n / best_rect:,.0f} evaluations/s per core wall, "
          f"{X.n * Y.n / cpu_rect:,.0f} per CPU second ({X.n * Y.n} pairs in {best_rect:.3f} s)")


if __name__ == "__main__":
    main()
