"""Linear learning on explicit features at scale: for each n, the corpus of the
first n examples of the generated corpus, its feature store under normalised ST (lam 0.4, the
tree representation), and 5-fold linear evaluation, each step one `gramtile` command measured
as a child process (wall, CPU = user + system, peak RSS: the largest resident set of the
command and of any process it waited for).

    python bench/scale_corpus.py generate --corpus SCALE/all2.zarr --real 50068 --n 1000000 \\
        --seed 0 --out SCALE/linear/all1m.jsonl
    python bench/linear_scale.py --jsonl SCALE/linear/all1m.jsonl --work SCALE/linear \\
        --n 100000,300000,1000000 [--solver auto|liblinear|sgd] [--C 1] [--folds 5] [--real 50068]

Per n: ``head -n`` of the JSON lines (the generator's output is sequential: its first 200,000
lines are the 200,000-example corpus of SCALE/all2.zarr), ``gramtile prepare --reps tree``
(skipped when the corpus store exists), ``gramtile features``, ``gramtile evaluate --features
--model linear`` (``--reuse-features``: an existing feature store of that n is reused, and its
step reported as 0). ``--real N`` also evaluates rows 0:N (the real sentences) of the first
feature store with the folds ``gramtile evaluate`` makes for them (stratified, ``--fold-seed``),
for the comparison with the kernel SVM on the same folds. Prints one markdown row per run and
writes ``linear_scale.json`` into ``--work``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from _timing import run_measured

NST = json.dumps({"kind": "normalized", "kernel": {"kind": "st", "lam": 0.4}})


def gramtile():
    return [sys.executable, "-m", "gramtile"]


def measured(cmd) -> dict:
    wall, ru, err = run_measured([str(c) for c in cmd])
    return {"wall_s": round(wall, 1), "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
            "peak_rss_mb": round(ru.ru_maxrss / 1024, 1), "stderr_tail": err.strip().splitlines()[-3:]}


def load() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def one(n: int, jsonl: Path, work: Path, a) -> dict:
    tag = f"{n // 1000}k" if n < 1_000_000 else f"{n // 1_000_000}m"
    src, corpus = work / f"all{tag}.jsonl", work / f"c{tag}.zarr"
    feats, ev = work / f"f{tag}.zarr", work / f"ev{tag}-{a.solver}"
    row = {"n": n, "solver": a.solver, "C": a.C, "folds": a.folds, "load_start": load()}
    if not corpus.exists():
        if not src.exists():
            with open(jsonl, encoding="utf-8") as f, open(src, "w", encoding="utf-8") as g:
                for k, line in enumerate(f):
                    if k == n:
                        break
                    g.write(line)
        row["prepare"] = measured(gramtile() + ["-q", "prepare", "--input", src, "--format", "jsonl", "--reps", "tree",
                                                "--out", corpus, "--cluster", "sequential"])
    if not (a.reuse_features and feats.exists()):
        shutil.rmtree(feats, ignore_errors=True)
        row["features"] = measured(gramtile() + ["-q", "features", "--corpus", corpus, "--kernel", NST, "--out",
                                                 feats])
    meta = json.loads((feats / "zarr.json").read_text())["attributes"]["gramtile_feature_store"]
    row.update(n_features=meta["n_features"], nnz=meta["nnz"])
    shutil.rmtree(ev, ignore_errors=True)
    row["evaluate"] = measured(gramtile() + ["-q", "evaluate", "--features", feats, "--model", "linear", "--folds",
                                             a.folds, "--C", a.C, "--linear-solver", a.solver, "--cluster", a.cluster,
                                             "--out", ev, "--no-progress"])
    res = json.loads((ev / "results.json").read_text())
    row["used"] = res["solver"]["used"]
    row["accuracy"] = {f"{r['C']:g}": r["accuracy"] for r in res["rows"]}
    row["accuracy_std"] = {f"{r['C']:g}": r["accuracy_std"] for r in res["rows"]}
    row["load_end"] = load()
    if a.predict and not a.done_predict:
        a.done_predict = True
        row.update(predict_step(n, feats, jsonl, work, tag, a))
    if a.real and not a.done_real:
        a.done_real = True
        rev = work / f"ev-real{a.real}-{a.solver}"
        shutil.rmtree(rev, ignore_errors=True)
        row["real_evaluate"] = measured(gramtile() + ["-q", "evaluate", "--features", feats, "--model", "linear",
                                                      "--rows", f"0:{a.real}", "--folds", a.folds, "--fold-seed",
                                                      a.fold_seed, "--C", a.C, "--linear-solver", a.solver,
                                                      "--cluster", a.cluster, "--folds-dir", rev, "--out", rev,
                                                      "--no-progress"])
        rres = json.loads((rev / "results.json").read_text())
        row["real_accuracy"] = {f"{r['C']:g}": r["accuracy"] for r in rres["rows"]}
        row["real_per_fold"] = {f"{r['C']:g}": [f["accuracy"] for f in rres["fold_rows"] if f["C"] == r["C"]]
                                for r in rres["rows"]}
        row["real_used"] = rres["solver"]["used"]
    return row


def predict_step(n, feats, jsonl, work, tag, a) -> dict:
    """Train on every row, predict the next ``a.predict`` examples of the JSON lines (unseen), and
    check the model's decision on the first ``a.predict`` training examples, read from the JSON
    lines (their ``tree`` derived from ``dep`` as prepare derives it), against the stored rows."""
    import numpy as np

    from gramtile.pipeline.learn.linear_models import LinearModel
    from gramtile.pipeline.learn.models import read_documents
    from gramtile.pipeline.stores.feature_store import FeatureStore

    model, new, seen = work / f"m{tag}-{a.solver}", work / f"new{tag}.jsonl", work / f"seen{tag}.jsonl"
    shutil.rmtree(model, ignore_errors=True)
    out = {"train": measured(gramtile() + ["-q", "train", "--features", feats, "--model", "linear", "--C", a.C.split(",")[0],
                                            "--linear-solver", a.solver, "--out", model])}
    with open(jsonl, encoding="utf-8") as f, open(new, "w", encoding="utf-8") as g, \
            open(seen, "w", encoding="utf-8") as h:
        for k, text in enumerate(f):
            if k < a.predict:
                h.write(text)
            elif n <= k < n + a.predict:
                g.write(text)
            elif k >= n + a.predict:
                break
    preds = work / f"pred{tag}-{a.solver}.json"
    preds.unlink(missing_ok=True)
    out["predict"] = measured(gramtile() + ["-q", "predict", "--model-dir", model, "--input", new, "--out", preds])
    out["model_mb"] = round(sum(p.stat().st_size for p in model.iterdir()) / 1e6, 1)
    got = json.loads(preds.read_text())
    out["predict_accuracy"] = float(np.mean([g["predicted"] == g["gold"] for g in got]))
    m = LinearModel.load(model)
    docs = read_documents(seen, "jsonl")
    fs = FeatureStore(feats)
    diff = np.abs(m.decision_function(docs) - m.decision_function(fs.rows(np.arange(len(docs)))))
    out["max_abs_diff_docs_vs_rows"] = float(diff.max())
    return out


def line(r) -> str:
    f, e = r.get("features", {"wall_s": 0, "cpu_s": 0, "peak_rss_mb": 0}), r["evaluate"]
    acc = ", ".join(f"C={float(c):g}: {v:.4f}" for c, v in r["accuracy"].items())
    prep = f"{r['prepare']['wall_s']:.0f} ({r['prepare']['cpu_s']:.0f})" if "prepare" in r else "-"
    return (f"| {r['n']:,} | {r['n_features']:,} | {r['nnz']:,} | {prep} | {f['wall_s']:.0f} ({f['cpu_s']:.0f}) | "
            f"{f['peak_rss_mb']:,.0f} | {r['used']} | {e['wall_s']:.0f} ({e['cpu_s']:.0f}) | "
            f"{e['peak_rss_mb']:,.0f} | {acc} | {r['load_start']} / {r['load_end']} |")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jsonl", required=True, help="the generated corpus (scale_corpus.py generate)")
    p.add_argument("--work", required=True, help="folder for corpus and feature stores, results")
    p.add_argument("--n", default="100000,300000,1000000")
    p.add_argument("--solver", default="auto", choices=("auto", "liblinear", "sgd"))
    p.add_argument("--C", default="1")
    p.add_argument("--folds", default="5")
    p.add_argument("--fold-seed", default="0")
    p.add_argument("--cluster", default="sequential")
    p.add_argument("--reuse-features", action="store_true",
                   help="reuse an existing feature store of the same n (its features step is then not measured)")
    p.add_argument("--predict", type=int, default=0,
                   help="also train on every row of the first n, predict the next PREDICT examples of --jsonl "
                        "with `gramtile predict`, and compare the model's decision on the first PREDICT training "
                        "examples read from --jsonl with that on the stored rows")
    p.add_argument("--real", type=int, default=0, help="also evaluate rows 0:REAL of the first store")
    a = p.parse_args(argv)
    a.done_real = a.done_predict = False
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    print("| n | features | non-zeros | prepare s wall (CPU) | features s wall (CPU) | features peak RSS MB | solver | "
          "evaluate s wall (CPU) | evaluate peak RSS MB | accuracy | load start / end |")
    print("|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---|")
    for n in (int(v) for v in a.n.split(",")):
        r = one(n, Path(a.jsonl), work, a)
        rows.append(r)
        print(line(r), flush=True)
        if "real_accuracy" in r:
            print(f"real rows 0:{a.real} ({r['real_used']}): {r['real_accuracy']} per fold {r['real_per_fold']}; "
                  f"{r['real_evaluate']['wall_s']} s wall, {r['real_evaluate']['cpu_s']} s CPU, "
                  f"{r['real_evaluate']['peak_rss_mb']} MB", flush=True)
        if "train" in r:
            print(f"train {r['train']['wall_s']} s wall ({r['train']['cpu_s']} CPU, {r['train']['peak_rss_mb']} MB), "
                  f"model {r['model_mb']} MB; predict {a.predict} unseen: {r['predict']['wall_s']} s wall "
                  f"({r['predict']['cpu_s']} CPU, {r['predict']['peak_rss_mb']} MB), accuracy {r['predict_accuracy']:.4f}; "
                  f"decision from examples vs stored rows: max abs diff {r['max_abs_diff_docs_vs_rows']:.2e}",
                  flush=True)
        (work / f"linear_scale-{a.solver}.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
