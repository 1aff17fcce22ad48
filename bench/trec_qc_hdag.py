"""HDAG kernel throughput on real HDAGs: spaCy parses of TREC questions (one core, no Dask).

The questions of ``data/trec_qc/train.txt`` are parsed with spaCy (entities included) and built
into chunked HDAGs by :func:`gramtile.pipeline.parsing.parse.hdag_from_doc` (words with form / PoS /
NE attributes inside NP / VP / PP / entity chunks, chunks linked by dependencies). The kernel is
timed on a square block (i <= j pairs computed) and a rectangular block, in wall and CPU seconds
(the CPU figure is the fair one on a shared machine).

    .venv/bin/python bench/trec_qc_hdag.py [--n 300] [--p 3] [--lam 0.5] [--exact]
    .venv/bin/python bench/trec_qc_hdag.py --compare [--ps 1,2,3,4,5] [--repeat 3]

``--compare`` times, in this one process and alternately, the dense table recursion of the core
up to commit ff36637 (``tests/reference/hdag_dense.py``, kept verbatim) and the current sparse
core on the same rectangular n x n block, best CPU time of ``--repeat`` rounds each, and reports
the speed-up and the largest relative difference of K (and whether K is bitwise equal); it also
counts, per evaluation, node pairs, pairs with Gamma > 0 and active pairs (H non-zero possible).

Measured (per CPU second, p = 3, n = 300, 13.7 nodes per HDAG): 99-115 k evaluations before the
attribute index and non-zero flags of the core (commit 44a89f6), 155-157 k after it; the sparse
core over the active node pairs: see BENCHMARKS.md, "The HDAG core: sparse over the active node pairs".
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from _timing import best_block_times

from gramtile.kernels.hdag import HDAGKernel
from gramtile.pipeline.parsing.parse import hdag_from_doc, load_model_ner
from gramtile.pipeline.readers.plain import read_trec
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from reference.hdag_dense import dense_block  # noqa: E402  (the dense core before the sparse one, verbatim)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec_qc" / "train.txt"


def question_hdags(n: int) -> list:
    """HDAGs of the first ``n`` training questions (parsed as given, one word per token)."""
    from itertools import islice

    from spacy.tokens import Doc

    nlp = load_model_ner()
    texts = [d.text for d in islice(read_trec(DATA), n)]
    return [hdag_from_doc(doc) for doc in nlp.pipe(Doc(nlp.vocab, words=t.split()) for t in texts)]


def pair_counts(hs):
    """Per evaluation over all pairs of ``hs``: node pairs, pairs with Gamma > 0, active pairs."""
    deep = []
    for h in hs:
        d = [set(a) for a in h.attrs]
        for v in range(len(h.attrs)):
            c = h.parent[v]
            while c >= 0:
                d[c] |= set(h.attrs[v])
                c = h.parent[c]
        deep.append(d)
    n = len(hs)
    tot = np.zeros(3)
    for x in range(n):
        for y in range(n):
            a, b = hs[x].attrs, hs[y].attrs
            tot += (len(a) * len(b), sum(1 for s in a for t in b if set(s) & set(t)),
                    sum(1 for s in deep[x] for t in deep[y] if s & t))
    return tot / n / n


def compare(args, X, Y, hs):
    """Old (dense) and new (sparse) core alternately in this process, best CPU time each."""
    node_pairs, matched, active = pair_counts(hs[:100])
    print(f"per evaluation (first 100 HDAGs, all pairs): {node_pairs:.1f} node pairs, {matched:.1f} with "
          f"Gamma > 0, {active:.1f} active")
    n = X.n * Y.n
    for p in [int(q) for q in args.ps.split(",")]:
        spec = HDAGKernel(lam=args.lam, p=p, exact=args.exact)
        old = lambda: dense_block(X, Y, args.lam, p, args.exact)  # noqa: E731
        old(), spec.block(X, Y)  # compile (or load the Numba cache)
        best = {"old": float("inf"), "new": float("inf")}
        K = {}
        for _ in range(args.repeat):
            for name, f in (("old", old), ("new", lambda: spec.block(X, Y))):
                c = time.process_time()
                K[name] = f()
                best[name] = min(best[name], time.process_time() - c)
        rel = float(np.max(np.abs(K["new"] - K["old"]) / np.where(K["old"] > 0, K["old"], 1.0)))
        print(f"p={p}: old {n / best['old']:,.0f} / new {n / best['new']:,.0f} evaluations per CPU second "
              f"({1e6 * best['old'] / n:.2f} / {1e6 * best['new'] / n:.2f} us each), speed-up "
              f"{best['old'] / best['new']:.2f}x; max relative difference {rel:.1e}, bitwise equal "
              f"{bool(np.array_equal(K['new'], K['old']))}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=300, help="HDAGs per side of the block")
    ap.add_argument("--p", type=int, default=3)
    ap.add_argument("--lam", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--exact", action="store_true", help="docs/kernels.md's HDAG exact variant (length p only)")
    ap.add_argument("--compare", action="store_true", help="time the dense core before the sparse one against the current one")
    ap.add_argument("--ps", default="1,2,3,4,5", help="with --compare: the values of p")
    args = ap.parse_args()
    hs = question_hdags(2 * args.n)
    v = Vocabularies()
    X, Y = encode(hs[:args.n], v), encode(hs[args.n:], v)
    if args.compare:
        return compare(args, X, Y, hs)
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
