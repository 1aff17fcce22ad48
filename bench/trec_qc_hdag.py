"""HDAG kernel throughput on real HDAGs: spaCy parses of TREC questions (one core, no Dask).

The questions of ``data/trec_qc/train.txt`` are parsed with spaCy (entities included) and built
into chunked HDAGs by :func:`gramtile.pipeline.parsing.parse.hdag_from_doc` (words with form / PoS /
NE attributes inside NP / VP / PP / entity chunks, chunks linked by dependencies). The kernel is
timed on a square block (i <= j pairs computed) and a rectangular block, in wall and CPU seconds
(the CPU figure is the fair one on a shared machine).

    .venv/bin/python bench/trec_qc_hdag.py [--n 300] [--p 3] [--lam 0.5] [--exact]

Measured (per CPU second, p = 3, n = 300, 13.7 nodes per HDAG): 99-115 k evaluations before the
attribute index and non-zero flags of the core (commit 44a89f6), see BENCHMARKS.md for after.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from _timing import best_block_times

from gramtile.kernels.hdag import HDAGKernel
from gramtile.pipeline.parsing.parse import hdag_from_doc, load_model_ner
from gramtile.pipeline.readers.plain import read_trec
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec_qc" / "train.txt"


def question_hdags(n: int) -> list:
    """HDAGs of the first ``n`` training questions (parsed as given, one word per token)."""
    from itertools import islice

    from spacy.tokens import Doc

    nlp = load_model_ner()
    texts = [d.text for d in islice(read_trec(DATA), n)]
    return [hdag_from_doc(doc) for doc in nlp.pipe(Doc(nlp.vocab, words=t.split()) for t in texts)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="HDAGs per side of the block")
    ap.add_argument("--p", type=int, default=3)
    ap.add_argument("--lam", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--exact", action="store_true", help="docs/kernels.md's HDAG exact variant (length p only)")
    args = ap.parse_args()
    hs = question_hdags(2 * args.n)
    v = Vocabularies()
    X, Y = encode(hs[:args.n], v), encode(hs[args.n:], v)
    spec = HDAGKernel(lam=args.lam, p=args.p, exact=args.exact)
    spec.block(X.slice(0, 3))  # compile (or load the Numba cache)
    spec.block(X.slice(0, 3), Y.slice(0, 3))
    best_sq, cpu_sq, best_rect, cpu_rect, _ = best_block_times(spec, X, Y, args.repeat)
    nodes = sum(len(h) for h in hs[:args.n]) / args.n
    words = sum(1 for h in hs[:args.n] for v in range(len(h)) if not any(p == v for p in h.parent)) / args.n
    pairs_sq, nx, ny = args.n * (args.n + 1) // 2, X.n, Y.n
    print(f"HDAG kernel, spaCy HDAGs of TREC questions, p={args.p}, lam={args.lam}, exact={args.exact}: mean {nodes:.1f} nodes "
          f"({words:.1f} terminated) per HDAG")
    print(f"square {nx}x{nx}: {pairs_sq / best_sq:,.0f} evaluations/s per core wall, "
          f"{pairs_sq / cpu_sq:,.0f} per CPU second ({pairs_sq} distinct pairs in {best_sq:.2f} s)")
    print(f"rectangular {nx}x{ny}: {nx * ny / best_rect:,.0f} evaluations/s per core wall, "
          f"{nx * ny / cpu_rect:,.0f} per CPU second ({nx * ny} pairs in {best_rect:.2f} s)")


if __name__ == "__main__":
    main()
