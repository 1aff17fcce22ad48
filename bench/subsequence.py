"""Benchmark: gap-weighted subsequence kernel evaluations per second on one core.

Two workloads on real data (one process, no Dask; Numba compilation excluded):

- WSD windows: +-3 tokens around the target of the senseval hard/line/serve instances (7 tokens,
  truncated at the context edges), n = 2, on word forms and on PoS tags; exact, WordNet soft and
  LSA soft (100 dimensions from the windows themselves).
  The data is lower-cased word forms without lemmas, so the "lemma" column holds the word.
- TREC QC: whole training questions (whitespace tokens), n = 3, exact, WordNet and LSA soft.

Usage: .venv/bin/python bench/subsequence.py [--rows N] [--cols N]
"""
from __future__ import annotations

import argparse
import os
import time
import xml.etree.ElementTree as ET
from pathlib import Path

# one core: BLAS threads (the LSA similarity tables) would hide CPU time from thread_time()
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402  (after the thread settings)

import gramtile.kernels.registry  # noqa: F401  (registers the kernels)
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.structures import TokenSeq
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.resources.similarity import similarity_resource

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def senseval_windows(width=3):
    """Windows of (word, PoS) from target - width to target + width in every instance."""
    out = []
    for word in ("hard", "line", "serve"):
        root = ET.parse(DATA / "senseval_hard_line_serve" / f"{word}.pos").getroot()
        for inst in root.iter("instance"):
            ctx = inst.find("context")
            toks, target = [], None
            for el in ctx:
                if el.tag == "head":
                    target = len(toks)
                    el = el.find("wf")
                if el is not None and el.tag == "wf":
                    toks.append(((el.text or "").strip(), el.get("pos")))
            lo, hi = max(0, target - width), min(len(toks), target + width + 1)
            w = toks[lo:hi]
            words = tuple(t for t, _ in w)
            out.append(TokenSeq(words, words, tuple(p for _, p in w)))
    return out


def trec_questions():
    with open(DATA / "trec_qc" / "train.txt", encoding="latin-1") as f:
        return [TokenSeq(tuple(line.split()[1:])) for line in f if line.strip()]


def rate(spec_dict, batch, rows, cols, resources=None):
    """Evaluations per second of one rows x cols rectangular block (after a warm-up).

    Returns (per second of CPU time of this thread, per second of wall time, share of non-zero
    entries). On a shared machine the CPU-time figure is the per-core rate; the wall-time one
    also counts time the thread waited for a core.
    """
    s = spec_from_dict(spec_dict)
    X, Y = batch.slice(0, rows), batch.slice(rows, rows + cols)
    kw = {"resources": resources} if resources else {}
    s.block(X.slice(0, 4), Y.slice(0, 4), **kw)  # compile
    c, t = time.thread_time(), time.perf_counter()
    K = s.block(X, Y, **kw)
    dc, dt = time.thread_time() - c, time.perf_counter() - t
    return rows * cols / dc, rows * cols / dt, float(np.mean(K > 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--cols", type=int, default=2000)
    args = ap.parse_args()

    for name, structs, n, ons in [("senseval +-3 windows", senseval_windows(), 2, ("lemmas", "pos")),
                                  ("TREC QC questions", trec_questions(), 3, ("tokens",))]:
        rng = np.random.default_rng(0)
        structs = [structs[i] for i in rng.permutation(len(structs))]
        v = Vocabularies()
        batch = encode(structs, v)
        sizes = batch.sizes()
        print(f"{name}: {batch.n} examples, mean length {sizes.mean():.1f}, vocabulary {len(v.sym)}")
        t = time.perf_counter()
        wordnet = {"similarity/wordnet": similarity_resource("similarity/wordnet", v.sym.strings)}
        print(f"  WordNet matrix: {wordnet['similarity/wordnet'].nnz} non-zeros, built in {time.perf_counter() - t:.1f} s")
        on0 = ons[0]
        t = time.perf_counter()
        lsa_name = f"similarity/lsa/{on0}"
        docs = [list(getattr(x, on0)) for x in structs]
        lsa = {lsa_name: similarity_resource(lsa_name, v.sym.strings, docs)}
        print(f"  LSA factor: {lsa[lsa_name].shape}, built in {time.perf_counter() - t:.1f} s")
        rows, cols = min(args.rows, batch.n // 2), min(args.cols, batch.n // 2)
        for on in ons:
            for sim in (None, "wordnet", "lsa"):
                if sim and on == "pos":
                    continue
                d = {"kind": "subsequence", "n": n, "lam": 0.5, "on": on, "similarity": sim}
                r, w, nz = rate(d, batch, rows, cols, {None: None, "wordnet": wordnet, "lsa": lsa}[sim])
                print(f"  n={n} on={on:6s} {'exact' if sim is None else 'soft ' + sim:13s} "
                      f"{r / 1e6:7.3f} M evaluations/s per core (CPU time; wall {w / 1e6:.3f})  "
                      f"({rows}x{cols} block, {nz:.0%} non-zero)")


if __name__ == "__main__":
    main()
