"""Product path against the pairwise cores for the kernels with an explicit feature map.

Workloads: the 5,483 NUM training trees (``trec_qc_num_constituency/NUM_train.dat``: ``tree``
and the derived ``ptree``) and the 5,952 TREC QC questions (KeLP's ``train_5500`` + ``TREC_10``:
the ``grct`` tree, the derived ``ptree`` and the ``bow`` bag; ``trec_qc/train.txt`` +
``test.txt`` parsed by spaCy for ``seq``) and, with ``--sets semeval``, the ``seq`` of the 8,000
SemEval-2010 task 8 training sentences (parsed by spaCy while read). For each mapped kernel, the full n x n matrix in one
process on one core:

- pairwise: ``spec.block(batch)`` (the core's upper triangle, mirrored) and ``spec.diag``;
- product: ``features(spec, batch)`` (map + corpus-level interning) and
  ``product.block(Phi, w, frequent features)``; the speed-up counts both.

Both K are compared (max relative error over the entries). With ``--engine`` the same pairs run
through ``run_gram`` (``--cluster sequential``, tile 1000) on a corpus store, ``--path
pairwise`` against ``--path product`` (the product run builds the feature set first; its time is
included). Prints markdown rows for BENCHMARKS.md, the load average before and after, and the
ns per unit the cost estimates of ``pipeline/compute/product.py`` use.

Usage::

    .venv/bin/python bench/features.py [--sets num,trec] [--kernels st,bow,route,ssk2,ssk3,ssk4] [--engine DIR]
"""
from __future__ import annotations

import argparse
import datetime
import itertools
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

import gramtile
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute import product
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.parsing.convert import complete
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.structures import Document
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.stores.corpus_store import CorpusStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

KERNELS = {
    "st": {"kind": "st", "lam": 0.4},
    "bow": {"kind": "bow"},
    "route": {"kind": "route", "lam": 0.5, "rep": "ptree"},
    "ssk2": {"kind": "subsequence", "n": 2, "lam": 0.5},
    "ssk3": {"kind": "subsequence", "n": 3, "lam": 0.5},
    "ssk4": {"kind": "subsequence", "n": 4, "lam": 0.5},
}


def load(name):
    """{rep: list of structures} of a data set."""
    if name == "num":
        trees = [d.structures["tree"] for d in read(DATA / "trec_qc_num_constituency" / "NUM_train.dat", "svmlighttk")]
        return {"tree": trees, "ptree": [complete({"tree": t}, ["ptree"])["ptree"] for t in trees]}
    if name == "semeval":
        docs = read(DATA / "semeval2010_task8_train" / "TRAIN_FILE.TXT", "semeval")
        return {"seq": [d.structures["seq"] for d in docs]}
    kelp = DATA / "trec_qc_kelp_trees"
    docs = list(itertools.chain(read(kelp / "train_5500.coarse.klp.gz", "kelp"), read(kelp / "TREC_10.coarse.klp.gz", "kelp")))
    text = [d.text for name in ("train.txt", "test.txt") for d in read(DATA / "trec_qc" / name, "trec")]
    seqs = [d.structures["seq"] for d in gramtile.parse(text, reps=["seq"])]
    trees = [d.structures["grct"] for d in docs]
    return {"tree": trees, "ptree": [complete({"tree": t}, ["ptree"])["ptree"] for t in trees],
            "bow": [d.structures["bow"] for d in docs], "seq": seqs}


def spec_for(key, name):
    d = dict(KERNELS[key])
    if key == "bow":
        d["rep"] = "bow" if name == "trec" else None
    if key == "st" and name == "trec":
        d["rep"] = "tree"
    return as_spec({k: v for k, v in d.items() if v is not None})


def max_rel(A, B):
    scale = np.maximum(np.abs(A), np.abs(B))
    return float(np.max(np.where(scale > 0, np.abs(A - B) / np.where(scale > 0, scale, 1), 0.0)))


def timed(f):
    t, c = time.perf_counter(), time.process_time()
    out = f()
    return out, time.perf_counter() - t, time.process_time() - c


def kernel_level(spec, structs):
    b = encode(structs, Vocabularies()).readonly()
    spec.block(b.slice(0, 4))  # compile / load the cores
    phi4, w4, _ = product.features(spec, b.slice(0, 4))
    product.block(phi4, w4, np.arange(1))  # compile the sparse core outside the timing
    K0, w0, c0 = timed(lambda: (spec.block(b), spec.diag(b)))
    (phi, w, fv), wf, cf = timed(lambda: product.features(spec, b))
    df = np.diff(phi.tocsc().indptr)
    dense = np.flatnonzero(df >= product.dense_threshold() * b.n)[:product.MAX_DENSE]
    (K1, d1, _), wp, cp = timed(lambda: product.block(phi, w, dense))
    err = max(max_rel(K1, K0[0]), max_rel(d1, K0[1]))
    sizes = b.sizes()
    return {"n": b.n, "pair_wall": w0, "pair_cpu": c0, "feat_wall": wf, "feat_cpu": cf, "prod_wall": wp,
            "prod_cpu": cp, "err": err, "features": len(fv), "nnz": phi.nnz, "dense": len(dense),
            "rare_df2": float((df.astype(float) ** 2).sum() - (df[dense].astype(float) ** 2).sum()),
            "mean_size": float(sizes.mean())}


def engine_level(spec, structs_by_rep, workdir: Path, tag: str):
    corpus = workdir / f"{tag}.corpus.zarr"
    if not corpus.exists():
        n = len(next(iter(structs_by_rep.values())))
        docs = [Document(id=str(i), structures={r: v[i] for r, v in structs_by_rep.items()}) for i in range(n)]
        cs = CorpusStore.create(corpus, shard_size=1000)
        for k in range(0, n, 1000):
            cs.write_shard(k // 1000, docs[k:k + 1000])
        cs.finish()
        cs.close()
    out = {}
    for path in ("pairwise", "product", "auto"):
        shutil.rmtree(corpus / "features", ignore_errors=True)
        g = workdir / f"{tag}-{spec.kind}-{path}.zarr"
        shutil.rmtree(g, ignore_errors=True)
        st, wall, cpu = timed(lambda: run_gram(corpus, spec, g, tile=1000, cluster="sequential",
                                               path=path))
        out[path] = (wall, cpu, st.view().to_numpy())
        if path == "auto":
            chosen = [p["path"] for r in st.read_log() if r.get("event") == "tile" for p in r.get("paths", [])]
            out["chose"] = {c: chosen.count(c) for c in sorted(set(chosen))}
    return out["pairwise"][0], out["product"][0], out["pairwise"][1], out["product"][1], \
        max_rel(out["product"][2], out["pairwise"][2]), out["auto"][0], out["chose"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="num,trec", help="num, trec, semeval")
    ap.add_argument("--kernels", default="st,bow,route,ssk2,ssk3")
    ap.add_argument("--engine", default=None, help="scratch folder: also time run_gram on both paths")
    a = ap.parse_args()
    print(f"# bench/features.py {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
          f"load {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}, python {sys.version.split()[0]}")
    print("| set | kernel | n | features (dense) | pairwise s (CPU) | features s | product s | "
          "speed-up (CPU) | max rel err | ns/eval pairwise | ns per rare multiply-add |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in a.sets.split(","):
        data = load(name)
        for key in a.kernels.split(","):
            spec = spec_for(key, name)
            if spec.rep_name not in data:
                continue
            r = kernel_level(spec, data[spec.rep_name])
            n = r["n"]
            tot_w, tot_c = r["feat_wall"] + r["prod_wall"], r["feat_cpu"] + r["prod_cpu"]
            print(f"| {name} | {spec.to_json()} | {n:,} | {r['features']:,} ({r['dense']}) | {r['pair_wall']:.2f} "
                  f"({r['pair_cpu']:.2f}) | {r['feat_wall']:.2f} | {r['prod_wall']:.2f} | {r['pair_wall'] / tot_w:.1f}x "
                  f"({r['pair_cpu'] / tot_c:.1f}x) | {r['err']:.1e} | {r['pair_cpu'] * 1e9 / (n * (n + 1) / 2):.0f} "
                  f"(mean size {r['mean_size']:.1f}) | {r['prod_cpu'] * 1e9 / max(r['rare_df2'], 1):.1f} |", flush=True)
            if a.engine:
                Path(a.engine).mkdir(parents=True, exist_ok=True)
                wp, wq, cp, cq, err, wa, chose = engine_level(spec, {spec.rep_name: data[spec.rep_name]},
                                                              Path(a.engine), f"{name}-{spec.rep_name}")
                print(f"| {name} | engine `run_gram` sequential, tile 1000 | {n:,} | | {wp:.2f} ({cp:.2f}) | | "
                      f"{wq:.2f} ({cq:.2f}) incl. feature build | {wp / wq:.1f}x ({cp / cq:.1f}x) | {err:.1e} | "
                      f"auto {wa:.2f} s, tiles {chose} | |", flush=True)
    print(f"# load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
