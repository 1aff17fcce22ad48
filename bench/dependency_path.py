"""Dependency-path kernel throughput on spaCy parses of TREC QC questions, per core.

One process, no Dask: parse the first 2n training questions with ``gramtile.pipeline.parsing.parse``
(spaCy, pre-tokenised), encode them once, then time ``DependencyPathKernel.block`` on a square
block (the symmetric path computes i <= j, so it is reported per computed pair) and on a
rectangular block (every entry computed). Wall-clock rates are printed with the rate per second of process
CPU time, which is the better figure while other jobs share the CPU. Block times include the per-batch preparation.

    .venv/bin/python bench/dependency_path.py [--n 2000] [--alpha 0.25] [--match word|lemma]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from _timing import best_block_times, print_rates

from gramtile.kernels.dependency_path import DependencyPathKernel
from gramtile.pipeline.parsing.parse import load_model, parse_deps
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec_qc" / "train.txt"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="questions per side of the block")
    ap.add_argument("--alpha", type=float, default=0.25)
    ap.add_argument("--match", default="word", choices=("word", "lemma"))
    ap.add_argument("--model", default=None, help="spaCy model (default: the first installed)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    lines = DATA.read_text(encoding="latin-1").splitlines()[:2 * args.n]
    nlp = load_model(args.model)
    t = time.perf_counter()
    trees = parse_deps([ln.split(" ", 1)[1] for ln in lines], nlp=nlp, pretokenized=True)
    t_parse = time.perf_counter() - t
    v = Vocabularies()
    X = encode(trees[:args.n], v)
    Y = encode(trees[args.n:2 * args.n], v)
    spec = DependencyPathKernel(alpha=args.alpha, match=args.match)
    spec.block(X.slice(0, 5))  # compile (or load the Numba cache)
    spec.block(X.slice(0, 5), Y.slice(0, 5))
    nx, ny = X.n, Y.n
    times = best_block_times(spec, X, Y, args.repeat)[:4]
    print(f"dependency_path kernel, TREC QC train parsed by {nlp.meta.get('lang')}_{nlp.meta.get('name')} "
          f"({len(trees)} questions in {t_parse:.1f} s), alpha={args.alpha}, match={args.match}, "
          f"mean words/question {X.sizes().mean():.1f}")
    print_rates(nx, nx, ny, *times)


if __name__ == "__main__":
    main()
