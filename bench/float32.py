"""float32 against float64 Gram stores: the largest difference of K and of
accuracy, and the stores' sizes on disk.

    python bench/float32.py --workdir WORKDIR [--folds 10] [--cluster threads]

Two tasks, each computed twice (``--dtype float64`` and ``--dtype float32``, same corpus store),
then scored with SVC(kernel="precomputed") on the normalised kernel:

- NUM (TREC questions, NUM against the rest): SST (lam 0.4) over the 5,483 + 500 gold
  constituency trees of ``trec_qc_num_constituency``; the standard split (train 0:5483, test
  5483:5983) and ``--folds``-fold cross-validation over all 5,983;
- TREC QC, 6 coarse classes: bag of words (``bow``) and SST over the KeLP files of
  ``trec_qc_kelp_trees`` (5,452 training + 500 test questions, ``grct`` trees); the standard
  split.

Printed per store pair: max |K32 - K64| over the normalised matrix (absolute), max relative
|K32 - K64| / |K64| of the raw one, disk bytes of K, and per evaluation the two accuracies, their
difference and the share of identical test predictions.
"""
from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import time
from pathlib import Path

import numpy as np

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.learn.crossval import evaluate
from gramtile.pipeline.learn.folds import parse_split, stratified_kfold
from gramtile.pipeline.learn.sources import open_gram_source
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.gram_store import GramStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def corpus(path, docs, shard=1000):
    if path.exists():
        return path
    cs = CorpusStore.create(path, shard_size=shard)
    for k in range(0, len(docs), shard):
        cs.write_shard(k // shard, docs[k:k + shard])
    cs.finish()
    cs.close()
    return path


def disk(path):
    return sum(f.stat().st_size for f in (Path(path) / "K").rglob("*") if f.is_file())


def compare(cs, spec, name, wd, cluster, split, folds, y):
    out = {}
    stores = {}
    for dt in ("float64", "float32"):
        p = wd / f"{name}-{dt}.zarr"
        t0 = time.perf_counter()
        run_gram(cs, spec, p, cluster=cluster, dtype=dt, tile=1000)
        out[f"gram_s_{dt}"] = round(time.perf_counter() - t0, 1)
        stores[dt] = GramStore.open(p)
        out[f"disk_bytes_{dt}"] = disk(p)
    v64, v32 = stores["float64"].view(), stores["float32"].view()
    n = stores["float64"].shape[0]
    dk_norm = dk_rel = 0.0
    for a in range(0, n, 1000):
        r = np.arange(a, min(a + 1000, n))
        k64, k32 = v64.block(r), v32.block(r).astype(np.float64)
        dk_rel = max(dk_rel, float(np.max(np.abs(k32 - k64) / np.maximum(np.abs(k64), 1e-300))))
        n64, n32 = v64.block(r, normalized=True), v32.block(r, normalized=True).astype(np.float64)
        dk_norm = max(dk_norm, float(np.max(np.abs(n32 - n64))))
    out["max_abs_diff_K_normalized"] = dk_norm
    out["max_rel_diff_K"] = dk_rel
    protos = {"split": [parse_split(split, n)]}
    if folds:
        protos[f"{folds}-fold"] = stratified_kfold(y, folds, seed=0)
    for pname, splits in protos.items():
        res = {}
        for dt in ("float64", "float32"):
            ev = evaluate(open_gram_source(stores[dt].path, normalized=True), y, splits, C=(1.0,))
            res[dt] = (ev.rows[0]["accuracy"], ev.predictions["svm C=1"][1])
        out[f"{pname}_accuracy_float64"] = res["float64"][0]
        out[f"{pname}_accuracy_float32"] = res["float32"][0]
        out[f"{pname}_accuracy_diff"] = abs(res["float64"][0] - res["float32"][0])
        out[f"{pname}_same_predictions"] = float(np.mean(res["float64"][1] == res["float32"][1]))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", required=True)
    p.add_argument("--folds", type=int, default=10)
    p.add_argument("--cluster", default="threads")
    p.add_argument("--only", choices=("num", "trec"), default=None)
    a = p.parse_args(argv)
    wd = Path(a.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    results = {}
    sst = {"kind": "sst", "lam": 0.4}
    if a.only in (None, "num"):
        d = DATA / "trec_qc_num_constituency"
        docs = list(read(d / "NUM_train.dat", "svmlighttk")) + list(read(d / "NUM_test.dat", "svmlighttk"))
        cs = corpus(wd / "num.corpus.zarr", docs)
        y = np.array([x.label for x in docs])
        results["NUM sst"] = compare(cs, sst, "num-sst", wd, a.cluster, "train:0:5483,test:5483:5983", a.folds, y)
        print(json.dumps({"NUM sst": results["NUM sst"]}), flush=True)
    if a.only in (None, "trec"):
        d = DATA / "trec_qc_kelp_trees"
        docs = list(itertools.chain(read(d / "train_5500.coarse.klp.gz", "kelp"), read(d / "TREC_10.coarse.klp.gz", "kelp")))
        n_train = sum(1 for _ in read(d / "train_5500.coarse.klp.gz", "kelp"))
        cs = corpus(wd / "trec.corpus.zarr", docs)
        y = np.array([x.label for x in docs])
        split = f"train:0:{n_train},test:{n_train}:{len(docs)}"
        for name, spec in (("bow", {"kind": "bow", "rep": "bow", "binary": False}), ("sst", {**sst, "leaves": True, "rep": "grct"})):
            results[f"TREC {name}"] = compare(cs, spec, f"trec-{name}", wd, a.cluster, split, 0, y)
            print(json.dumps({f"TREC {name}": results[f"TREC {name}"]}), flush=True)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    (wd / "float32.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
