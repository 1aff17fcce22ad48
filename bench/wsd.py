"""Benchmark: syntagmatic and domain kernel evaluations per second on one core.

Real data: the senseval hard/line/serve instances read by the ``senseval`` reader (target
sentence as the WSD instance, WordNet lemmas), shuffled with a fixed seed; one rows x cols
rectangular block per kernel, timed after a warm-up (Numba compilation excluded), one process,
no Dask. One syntagmatic evaluation is one pair of instances, i.e. 2n subsequence kernels plus
their normalisation (windows +-3, n = 2 unless given).

Usage: .venv/bin/python bench/wsd.py [--rows N] [--cols N] [--n N]
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

# one core: BLAS threads (LSA tables, domain products) would hide CPU time from thread_time()
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402  (after the thread settings)

import gramtile.kernels.registry  # noqa: F401,E402  (registers the kernels)
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.readers.senseval import read_senseval  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "senseval_hard_line_serve"


def rate(spec, X, Y, resources):
    """(evaluations per CPU second of this thread, per wall second, share of non-zero entries)."""
    kw = {"resources": resources} if spec.resources() else {}
    spec.block(X.slice(0, 4), Y.slice(0, 4), **kw)  # compile
    c, t = time.thread_time(), time.perf_counter()
    K = spec.block(X, Y, **kw)
    dc, dt = time.thread_time() - c, time.perf_counter() - t
    n = X.n * Y.n
    return n / dc, n / dt, float(np.mean(K > 0))


def main():
    from gramtile.workflows.recipes.wsd import corpus_data

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--cols", type=int, default=2000)
    ap.add_argument("--n", type=int, default=2)
    args = ap.parse_args()
    docs = [d for w in ("hard", "line", "serve") for d in read_senseval(DATA / f"{w}.pos")]
    docs = [docs[i] for i in np.random.default_rng(0).permutation(len(docs))]
    specs = {
        "syntagmatic exact": {"kind": "syntagmatic", "n": args.n},
        "syntagmatic WordNet": {"kind": "syntagmatic", "n": args.n, "similarity": "wordnet"},
        "syntagmatic LSA": {"kind": "syntagmatic", "n": args.n, "similarity": "lsa"},
        "collocation only (exact)": {"kind": "syntagmatic", "n": args.n, "components": "coll"},
        "domain (100 dims)": {"kind": "domain", "dims": 100},
    }
    specs = {k: spec_from_dict(v) for k, v in specs.items()}
    t = time.perf_counter()
    data = corpus_data(docs, specs.values())
    print(f"senseval hard+line+serve: {len(docs)} instances; corpus data and resources built in "
          f"{time.perf_counter() - t:.1f} s")
    rows, cols = min(args.rows, len(docs) // 2), min(args.cols, len(docs) // 2)
    for name, s in specs.items():
        B = data[s.rep_name]
        X, Y = B.slice(0, rows), B.slice(rows, rows + cols)
        r, w, nz = rate(s, X, Y, {k: data[k] for k in s.resources()})
        print(f"  {name:26s} {r / 1e6:7.3f} M evaluations/s per core (CPU time; wall {w / 1e6:.3f})  "
              f"({rows}x{cols} block, {nz:.0%} non-zero)")


if __name__ == "__main__":
    main()
