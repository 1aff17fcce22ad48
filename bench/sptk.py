"""SPTK against PT per evaluation on the same trees, and the size and build time of SPTK's
similarity table.

Trees: the first N (default 1,500) training questions of KeLP's TREC distribution in the GRCT
layout (``../shared/data/trec_qc_kelp_trees``); lexical nodes are the leaves (``LEX##lemma::p``),
same PoS required. Vectors: built here from the shared corpora (no outside vectors exist on this
machine), PPMI-SVD (``gramtile.pipeline.resources.vectors.train_vectors``, window 5, seed 0,
every word seen at least twice) over the lower-cased word tokens of the TREC questions, CoNLL-2000,
the senseval hard/line/serve contexts, MSRP, SICK and the TREC QA sentences, at each dimension
asked (default 100 and 300). Kernels: lam = mu = 0.4, terminal factor 5 (KeLP's PT on GRCT),
SPTK threshold 0.5. Timed: the square block of the N trees (N (N + 1) / 2 distinct pairs), best
of R runs, wall and process CPU time, compile time excluded by a warm-up call.

Table size: the cosine table (threshold 0.5, clipped at 0) of the W most frequent words of the
same vectors for each W asked (default 20,000 and 100,000; fewer when the corpora hold fewer
words, which the output says), its entries and bytes as CSR (int32 indices, float64 values,
int64 row pointers), and its build time.

Usage::

    .venv/bin/python bench/sptk.py [--n 1500] [--dims 100,300] [--words 20000,100000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import csv
import gzip
import itertools
import json
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from gramtile.kernels.sptk import SmoothedPartialTreeKernel
from gramtile.kernels.tree_kernels import PartialTreeKernel
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.resources.lexical import lexical_table
from gramtile.pipeline.resources.vectors import cosine_table, train_vectors, write_vectors_text

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|\d+")


def _words(text):
    return WORD.findall(text.lower())


def corpus_docs():
    """Sentences (token lists) of the shared corpora named in the module docstring."""
    docs = []
    for name in ("train.txt", "test.txt"):
        p = DATA / "trec_qc" / name
        if p.is_file():
            docs += [_words(ln.split(" ", 1)[1] if " " in ln else ln)
                     for ln in p.read_text(encoding="latin-1").splitlines()]
    for name in ("train.txt", "test.txt"):
        sent = []
        for ln in (DATA / "conll2000" / name).read_text(encoding="utf-8").splitlines():
            if not ln.strip():
                docs.append(sent)
                sent = []
            else:
                sent += _words(ln.split()[0])
    for name in ("hard.pos", "line.pos", "serve.pos"):
        text = (DATA / "senseval_hard_line_serve" / name).read_text(encoding="latin-1")
        for ln in text.splitlines():
            if ln.startswith("<"):
                continue
            toks = [t.rsplit("/", 1)[0] for t in ln.split()]
            docs.append(_words(" ".join(toks)))
    for p in sorted((DATA / "msrp").glob("*.tsv")) + sorted((DATA / "sick2014").glob("SICK_*.txt")):
        for ln in p.read_text(encoding="utf-8", errors="replace").splitlines()[1:]:
            docs.append(_words(ln))
    for p in sorted((DATA / "trec_qa_wang").glob("*.csv")):
        with open(p, encoding="utf-8", errors="replace", newline="") as f:
            for row in csv.reader(f):
                docs.append(_words(" ".join(row)))
    return [d for d in docs if d]


def grct_trees(n):
    path = DATA / "trec_qc_kelp_trees" / "train_5500.coarse.klp.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = list(itertools.islice(f, n))
    with tempfile.NamedTemporaryFile("w", suffix=".klp", delete=False, encoding="utf-8") as t:
        t.write("".join(lines))
    return [d.structures["grct"] for d in read(t.name, "kelp")]


def best(fn, repeat):
    wall = cpu = float("inf")
    out = None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        wall, cpu = min(wall, time.perf_counter() - t), min(cpu, time.process_time() - c)
    return wall, cpu, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--dims", default="100,300")
    ap.add_argument("--words", default="20000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    docs = corpus_docs()
    freq = Counter(w for d in docs for w in d)
    print(f"corpora: {len(docs):,} sentences, {sum(freq.values()):,} tokens, {len(freq):,} distinct words "
          f"({time.perf_counter() - t0:.1f} s to read)")
    trees = grct_trees(a.n)
    v = Vocabularies()
    X = encode(trees, v)
    pairs = a.n * (a.n + 1) // 2
    pt = PartialTreeKernel(lam=0.4, mu=0.4, terminal_factor=5.0)
    pt.block(encode(trees[:3], Vocabularies()))  # compile
    w_pt, c_pt, K_pt = best(lambda: pt.block(X), a.repeat)
    print(f"PT: {a.n} GRCT trees, {pairs:,} distinct pairs: {w_pt:.2f} s wall, {c_pt:.2f} s CPU, "
          f"{pairs / c_pt / 1e6:.3f} M evaluations/s of CPU time")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for dims in [int(x) for x in a.dims.split(",")]:
            t = time.perf_counter()
            words, V = train_vectors(docs, dims=dims, window=5, min_count=2, seed=0)
            t_train = time.perf_counter() - t
            path = Path(tmp) / f"vec{dims}.txt"
            write_vectors_text(path, words, V)
            spec = SmoothedPartialTreeKernel(lam=0.4, mu=0.4, terminal_factor=5.0, similarity="vectors",
                                             vectors=str(path), threshold=0.5, lexical="leaves")
            t = time.perf_counter()
            A = lexical_table(spec.resources()[0], v.sym.strings, trees)
            t_table = time.perf_counter() - t
            res = {spec.resources()[0]: A}
            small, vv = trees[:3], Vocabularies()
            name = spec.resources()[0]
            spec.block(encode(small, vv), resources={name: lexical_table(name, vv.sym.strings, small)})  # compile
            w_s, c_s, K = best(lambda: spec.block(X, resources=res), a.repeat)
            off = A.nnz - A.shape[0]
            more = int(np.sum(K > K_pt * (1 + 1e-12)))
            print(f"SPTK dim {dims}: vectors of {len(words):,} words trained in {t_train:.1f} s; corpus table "
                  f"{A.shape[0]:,} symbols, {off:,} off-diagonal entries, built in {t_table:.2f} s; "
                  f"{w_s:.2f} s wall, {c_s:.2f} s CPU, {pairs / c_s / 1e6:.3f} M evaluations/s; "
                  f"{c_s / c_pt:.2f}x PT's CPU time; {more:,} of {K.size:,} entries above PT")
            index = {w: k for k, w in enumerate(words)}
            ranked = [w for w, _ in freq.most_common() if w in index]
            for W in [int(x) for x in a.words.split(",")]:
                top = ranked[:W]
                M = V[[index[w] for w in top]]
                t = time.perf_counter()
                T = cosine_table(M, 0.5)
                t_cos = time.perf_counter() - t
                off = T.nnz - int(np.sum(T.diagonal() > 0))
                nbytes = T.indptr.astype(np.int64).nbytes + T.nnz * (4 + 8)
                print(f"  table of {len(top):,} words (asked {W:,}), dim {dims}, threshold 0.5: {off:,} off-diagonal "
                      f"entries ({off / max(len(top), 1):.1f} per word), {nbytes / 2**20:.1f} MiB, built in "
                      f"{t_cos:.1f} s")
                rows.append({"dims": dims, "words": len(top), "asked": W, "offdiag": off, "mib": nbytes / 2**20,
                             "seconds": t_cos})
    json.dump(rows, sys.stderr)
    print(file=sys.stderr)


if __name__ == "__main__":
    main()
