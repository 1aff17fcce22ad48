"""TREC coarse question classification with PT and SPTK on KeLP's GRCT and LCT trees
(the protocol of docs/results/tree-kernels-qc.md: train 5,452 -> TREC-10 500, normalised
kernels, one-vs-all SVMs, C = 3, class-balanced costs).

Vectors: no outside vectors exist here, so they are built from the shared corpora as in
bench/sptk.py (PPMI-SVD, 100 dimensions, window 5, words seen at least twice, seed 0) and
written to OUT/vectors100.txt; the workflow file OUT/trec_qc_sptk.yaml names them and is run
with ``gramtile run``. SPTK: lam = mu = 0.4, terminal factor 5 (KeLP's PT settings), threshold
0.5 (vectors) or 0 (WordNet synonymy), same PoS required.

Usage::

    .venv/bin/python bench/trec_qc_sptk.py OUT
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sptk import DATA, corpus_docs  # bench/sptk.py (bench/ is on sys.path)

from gramtile.pipeline.resources.vectors import train_vectors, write_vectors_text


def main(out):
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    vec = out / "vectors100.txt"
    if not vec.is_file():
        words, V = train_vectors(corpus_docs(), dims=100, window=5, min_count=2, seed=0)
        write_vectors_text(vec, words, V)
    pt = "{kind: pt, lam: 0.4, mu: 0.4, terminal_factor: 5, rep: %s}"
    sptk = ("{kind: sptk, lam: 0.4, mu: 0.4, terminal_factor: 5, similarity: %s, %sthreshold: %s, "
            "lexical: %s, rep: %s}")
    v = f"vectors: '{vec}', "
    kernels = {
        "PT_GRCT": pt % "grct",
        "SPTK_GRCT_vectors": sptk % ("vectors", v, 0.5, "leaves", "grct"),
        "SPTK_GRCT_wordnet": sptk % ("wordnet", "", 0.0, "leaves", "grct"),
        "PT_LCT": pt % "lct",
        "SPTK_LCT_vectors": sptk % ("vectors", v, 0.5, "prefix", "lct"),
        "SPTK_LCT_wordnet": sptk % ("wordnet", "", 0.0, "prefix", "lct"),
    }
    yaml = ["name: trec_qc_sptk",
            "description: 6 coarse classes, train_5500 -> TREC_10, PT / SPTK on GRCT and LCT, OvA C=3 balanced",
            "data:",
            f"  train: {DATA}/trec_qc_kelp_trees/train_5500.coarse.klp.gz",
            f"  test: {DATA}/trec_qc_kelp_trees/TREC_10.coarse.klp.gz",
            "  format: kelp",
            "  representations: [grct, lct]",
            "kernels:"]
    yaml += [f"  {k}: {{kind: normalized, kernel: {s}}}" for k, s in kernels.items()]
    yaml += ["protocol:", "  split: fixed", "  model: svm", "  C: 3", "  class_weight: balanced", "  multiclass: ovr",
             "report:", '  title: "TREC-10 coarse question classification: PT and SPTK on KeLP GRCT / LCT trees"']
    wf = out / "trec_qc_sptk.yaml"
    wf.write_text("\n".join(yaml) + "\n")
    gramtile = Path(sys.executable).with_name("gramtile")
    subprocess.run([str(gramtile), "run", str(wf), "--out", str(out / "run")], check=True)


if __name__ == "__main__":
    main(sys.argv[1])
