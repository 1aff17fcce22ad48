"""The end-to-end demo job on the embedded demo corpus (``gramtile demo`` / ``make demo``).

Steps, each through the same code paths a cluster run uses:

1. ``prepare``: parse ``workflows/data/demo.tsv`` (300 labelled questions written for this
   project, 5 answer types) with spaCy into a sharded Zarr corpus store;
2. ``gram``: for each demo kernel, Dask tasks compute the tiles of K into a Zarr Gram store;
3. ``evaluate``: stratified 5-fold SVM reading only the chunks each fold needs;
4. a printed result table, ``results.md``/``results.json`` and a learning-curve plot.
"""
from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path

from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline import optional
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.crossval import evaluate, learning_curve
from gramtile.pipeline.learn.folds import load_or_make_folds
from gramtile.pipeline.learn.report import markdown_table, plot_learning_curve
from gramtile.pipeline.learn.sources import ViewKernelSource, store_labels
from gramtile.pipeline.parsing.parse import MODEL_STEP, default_model_name
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore

#: Base kernels computed tile by tile into Gram stores (unnormalised: normalisation and sums
#: are derived from the stored matrices and diagonals, never recomputed).
BASE_KERNELS = {
    "bow": {"kind": "bow", "on": "lemmas"},
    "sst": {"kind": "sst", "lam": 0.4},
    "pt": {"kind": "pt", "lam": 0.4, "mu": 0.4},
}

#: The kernels compared by the demo: (name, spec), each derived from the base stores.
DEMO_KERNELS = [
    ("bag of words (lemmas)", {"kind": "normalized", "kernel": BASE_KERNELS["bow"]}),
    ("SST (dependency tree)", {"kind": "normalized", "kernel": BASE_KERNELS["sst"]}),
    ("PT (dependency tree)", {"kind": "normalized", "kernel": BASE_KERNELS["pt"]}),
    ("SST + BOW", {"kind": "sum", "kernels": [
        {"weight": 1.0, "kernel": {"kind": "normalized", "kernel": BASE_KERNELS["sst"]}},
        {"weight": 1.0, "kernel": {"kind": "normalized", "kernel": BASE_KERNELS["bow"]}}]}),
]


def demo_corpus_path() -> Path:
    return Path(str(resources.files("gramtile.workflows") / "data" / "demo.tsv"))


def run_demo(out="demo-out", cluster: str = "local", folds: int = 5, seed: int = 0,
             tile: int = 64) -> list[dict]:
    """Run the demo end to end; returns the result rows (also written to ``out``). spaCy with an
    English model and matplotlib are checked first (extras ``text`` and ``plots``)."""

    optional.require("text", "plots", then=f", {MODEL_STEP}")
    default_model_name()  # raises, naming the fix, when no English model is installed
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    # one cluster for every step: workers stay warm (spaCy model, compiled kernels, shard cache)
    with Runtime.of(cluster) as rt:
        summary = prepare(demo_corpus_path(), "tsv", out / "corpus.zarr", shard_size=100, cluster=rt)
        print(summary.text())
        stores = {}
        for name, spec in BASE_KERNELS.items():
            st = run_gram(out / "corpus.zarr", spec, out / f"gram-{name}.zarr", tile=tile, cluster=rt)
            stores[st.kernel_hash] = GramStore.open(out / f"gram-{name}.zarr")
    labels = store_labels(next(iter(stores.values())))
    splits = load_or_make_folds(out, labels, folds, seed)
    rows, curves = [], []
    for i, (name, spec) in enumerate(DEMO_KERNELS):
        source = ViewKernelSource(ComposedView(spec_from_dict(spec), stores))
        ev = evaluate(source, labels, splits, model="svm", C=(1.0,), kernel=name)
        for r in ev.rows:
            r["chunks read"] = source.chunk_reads
        rows.extend(ev.rows)
        if name.startswith("SST ("):
            curves = learning_curve(source, labels, splits, fractions=(0.1, 0.25, 0.5, 1.0), kernel=name)
    cols = ["kernel", "model", "accuracy", "macro_f1", "chunks read"]
    table = markdown_table(rows, columns=[c for c in cols if all(c in r for r in rows)])
    (out / "results.md").write_text(table + "\n")
    (out / "results.json").write_text(json.dumps(rows, indent=2, default=str))
    if curves:
        plot_learning_curve(curves, out / "learning_curve.png", title="SST, 5-fold: accuracy vs training size")
    print(f"\n{folds}-fold SVM on the demo corpus ({len(labels)} questions, {len(set(labels))} classes), "
          f"read from the Gram stores in {out}/:\n")
    print(table)
    print(f"\nwrote {out / 'results.md'}, {out / 'results.json'}"
          + (f", {out / 'learning_curve.png'}" if curves else "")
          + f" in {time.perf_counter() - t0:.1f} s")
    return rows
