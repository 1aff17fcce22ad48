"""TREC question classification with the HDAG kernel beside sequence, tree and bag kernels.

The recipe behind ``workflows/trec_qc_hdag.yaml`` (``recipe: gramtile.workflows.recipes.qc_hdag:run``),
after Suzuki et al. (2003): questions are parsed once by spaCy with entities (``prepare`` with
the ``hdag`` representation: token sequence, dependency tree, dependency-derived tree,
positional tree and the chunked HDAG of :mod:`gramtile.pipeline.parsing.hdag_build`), then for every
kernel:

1. each base kernel of its grid (``options.grid``: lists of parameter values, e.g. the HDAG's
   ``p`` and ``lam``) is ONE Gram store over train + test, computed by the engine;
2. the grid point and C are chosen by stratified k-fold cross-validation on the training
   questions only (``options.folds``); the test questions are never looked at;
3. the chosen setting is refitted on all training questions and scored on the test questions
   (one-vs-all SVMs);
4. the mean reciprocal rank of same-class neighbours (:func:`~gramtile.pipeline.learn.crossval.source_mrr`,
   the paper's similarity-measure evaluation) of the chosen kernel over the test questions,
   each ranked against the other test questions.

Every kernel is normalised (cosine), as in the paper. ``options``::

    options:
      folds: 5                  # CV folds on train
      seed: 0
      grid: {HDAG: {p: [1, 2, 3, 4, 5], lam: [0.25, 0.5, 1.0]}}
      first: {HDAG: {p: 3}}     # optional, two stages: lam (and C) by CV at p = 3 only, then
                                # p = 1..5 at that lam (7 Gram stores instead of 15)
      per: {HDAG: p}            # also one row per p, each at its CV-best lam and C

The kernel's reported choice is the CV-best among all evaluated grid points.
"""
from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

from gramtile.kernels.composite import Normalized
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.crossval import evaluate, source_mrr
from gramtile.pipeline.learn.folds import fixed_split, stratified_kfold
from gramtile.pipeline.learn.learners.registry import make
from gramtile.pipeline.learn.report import markdown_table
from gramtile.pipeline.learn.sources import ViewKernelSource
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.recipes.inex import load_recipe_workflow, reject, store_time
from gramtile.workflows.runner import build_corpus

_OPTIONS = {"folds", "seed", "grid", "per", "first"}


def check_options(wf, options) -> dict:
    """Validate the recipe's ``options`` (see the module docstring); returns them with defaults."""
    for k in options:
        if k not in _OPTIONS:
            reject(wf, f"options.{k}", options[k], f"unknown key; allowed keys are {sorted(_OPTIONS)}")
    folds = options.get("folds", 5)
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        reject(wf, "options.folds", folds, "must be an integer >= 2")
    seed = options.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        reject(wf, "options.seed", seed, "must be an integer")
    grid = options.get("grid") or {}
    if not isinstance(grid, dict):
        reject(wf, "options.grid", grid, "a mapping kernel name -> {parameter: [values, ...]}")
    for name, g in grid.items():
        if name not in wf.kernels:
            reject(wf, f"options.grid.{name}", g, f"no kernel of that name; the kernels are {sorted(wf.kernels)}")
        base = wf.kernels[name].base_specs()
        if not isinstance(g, dict) or len(base) != 1:
            reject(wf, f"options.grid.{name}", g, "a mapping parameter -> list of values, for a kernel with one base")
        for k, v in g.items():
            if not hasattr(base[0], k):
                reject(wf, f"options.grid.{name}.{k}", v, f"kernel {base[0].kind!r} has no parameter {k!r}")
            if not isinstance(v, list) or not v:
                reject(wf, f"options.grid.{name}.{k}", v, "a non-empty list of values")
    per = options.get("per") or {}
    if not isinstance(per, dict):
        reject(wf, "options.per", per, "a mapping kernel name -> grid parameter, e.g. {HDAG: p}")
    for name, k in per.items():
        if k not in (grid.get(name) or {}):
            reject(wf, f"options.per.{name}", k, "name a parameter swept in options.grid for that kernel")
    first = options.get("first") or {}
    if not isinstance(first, dict):
        reject(wf, "options.first", first, "a mapping kernel name -> {parameter: value}, e.g. {HDAG: {p: 3}}")
    for name, fixed in first.items():
        g = grid.get(name) or {}
        if not isinstance(fixed, dict) or not fixed:
            reject(wf, f"options.first.{name}", fixed, "a non-empty mapping parameter -> one value of its grid, "
                  "e.g. {p: 3}")
        for k, v in fixed.items():
            if v not in (g.get(k) or []):
                reject(wf, f"options.first.{name}.{k}", v, f"name a value of options.grid.{name}.{k} "
                      f"({g.get(k)})")
        if set(fixed) == set(g):
            reject(wf, f"options.first.{name}", fixed, "leave at least one grid parameter free (it is chosen "
                  "in the first stage)")
    return {"folds": folds, "seed": seed, "grid": grid, "per": per, "first": first}


def staged(vs, fixed, best) -> list:
    """Grid points of the second stage of ``options.first``.

    Parameters
    ----------
    vs : list of (spec, params)
        Every grid point (:func:`variants`).
    fixed : dict
        ``options.first.<kernel>``: the values the first stage held fixed (e.g. ``{p: 3}``).
    best : dict
        The parameters the first stage chose by CV.

    Returns
    -------
    list of (spec, params)
        The points that keep the first stage's choice of every free parameter (e.g. lam) and
        vary the fixed ones (e.g. p = 1..5), minus those already evaluated.
    """
    free = [k for k in best if k not in fixed]
    return [(s, q) for s, q in vs if all(q[k] == best[k] for k in free) and any(q[k] != v for k, v in fixed.items())]


def variants(spec, g) -> list:
    """(normalised spec, swept parameters) for every point of a kernel's grid."""

    base = spec.base_specs()[0]
    keys = list(g)
    out = []
    for values in itertools.product(*[g[k] for k in keys]):
        d = base.to_dict()
        d.update(dict(zip(keys, values)))
        b = spec_from_dict(d)
        out.append((Normalized(kernel=b), dict(zip(keys, values))))
    return out or [(spec if spec.kind == "normalized" else Normalized(kernel=spec), {})]


def run(raw, path, out, cluster="local", tile=None) -> list:
    """Run the TREC QC HDAG protocol of a workflow file; writes ``out/results.*``.

    Parameters
    ----------
    raw : dict
        The workflow file's mapping (``recipe: gramtile.workflows.recipes.qc_hdag:run``).
    path : path
        The workflow file (for messages).
    out : path
        Output folder; its corpus and Gram stores are reused by a rerun.
    cluster, tile : as for :func:`~gramtile.pipeline.compute.engine.run_gram`;
        the learning fits (each fold x C of a grid point, and the final fit) run on the same cluster
        or profile, with the serial run's results

    Returns
    -------
    list of dict
        One row per kernel: CV-chosen parameters and C, CV accuracy, test accuracy, MRR.
    """

    with Runtime.of(cluster) as rt:
        return _run(raw, path, out, rt, tile)


def _run(raw, path, out, cluster, tile):

    wf, options = load_recipe_workflow(raw, path)
    opts = check_options(wf, options)
    if "hdag" not in (wf.data["representations"] or ()):
        reject(wf, "data.representations", wf.data["representations"], "list hdag (and the others the kernels "
              "read), e.g. [seq, dep, tree, ptree, hdag]: it makes prepare build the HDAGs")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    progress = cluster.progress
    say = (lambda s: print(f"qc_hdag: {s}", file=sys.stderr, flush=True)) if progress else (lambda s: None)
    t_start = time.perf_counter()
    corpus, parts = build_corpus(wf, out / "corpus.zarr", cluster)
    if "test" not in parts:
        reject(wf, "data.test", None, "this protocol needs data.train and data.test")
    (a, b), (c, d) = parts["train"], parts["test"]
    y = np.asarray([str(v) for v in corpus.labels])
    train, test = np.arange(a, b), np.arange(c, d)
    folds = stratified_kfold(y[train], opts["folds"], opts["seed"])
    Cs = [1.0] if wf.protocol["C"] == "svmlight" else wf.protocol["C"]
    stores, rows = {}, []

    # every (fold, C) fit of a grid point is a task on the run's profile (the serial run's numbers)
    learn = dict(cluster=cluster)

    for name, spec in wf.kernels.items():
        vs = variants(spec, opts["grid"].get(name, {}))
        t0 = time.perf_counter()
        gram = 0.0
        scored, cv = [], []

        def score(points):
            """CV accuracy of every (grid point, C) on the training part: the Gram stores the points
            need (computed once; a rerun reuses them), then one run of the selection loop over the
            points' kernels as alternatives (rows in grid order, C fastest)."""
            nonlocal gram
            for s, _ in points:
                for bs in s.base_specs():
                    if bs.spec_hash not in stores:
                        t1 = time.perf_counter()
                        p = out / f"gram-{bs.kind}-{bs.spec_hash[:12]}.zarr"
                        run_gram(corpus, bs, p, tile=tile, cluster=cluster.with_settings(progress=False))
                        stores[bs.spec_hash] = GramStore.open(p)
                        gram += time.perf_counter() - t1
                        say(f"Gram store {bs.to_json()}: {time.perf_counter() - t1:.1f} s")
            views = [ViewKernelSource(ComposedView(s, stores), n=train.size) for s, _ in points]
            ev = selection.evaluate(make("svm"), views, y[train], folds, {"C": list(Cs)},
                                    class_weight=wf.protocol["class_weight"], multiclass=wf.protocol["multiclass"],
                                    kernel=name, **learn)
            for pt, r in zip(ev.points, ev.rows):
                s, params = points[pt.get("alternative", 0)]
                cv.append({**params, "C": r["C"], "cv_accuracy": r["accuracy"]})
                scored.append({"cv_accuracy": r["accuracy"], "spec": s, "params": params, "C": r["C"]})

        fixed = opts["first"].get(name)
        if fixed is None:
            score(vs)
        else:
            # two stages (options.first): the free parameters (e.g. lam) by CV at the fixed values
            # (e.g. p = 3), then the fixed ones swept (p = 1..5) at that choice
            score([(s, q) for s, q in vs if all(q[k] == v for k, v in fixed.items())])
            chosen = selection.pick(scored, "cv_accuracy")["params"]
            say(f"{name}: first stage at {fixed} chose {chosen}")
            score(staged(vs, fixed, chosen))
        # the kernel's CV choice among every point evaluated (the highest CV accuracy, ties to the first
        # in grid order); then (options.per) one row per value of a swept parameter, each at the CV-best
        # setting of the other parameters
        picks = [(name, selection.pick(scored, "cv_accuracy"))]
        k = opts["per"].get(name)
        if k is not None:
            for v in opts["grid"][name][k]:
                some = [e for e in scored if e["params"][k] == v]
                if some:  # (options.first may leave values of other parameters unevaluated)
                    picks.append((f"{name} ({k}={v})", selection.pick(some, "cv_accuracy")))
        # what the kernel's stores cost when they were computed (read from their logs: a rerun reuses them)
        mine = {bs.spec_hash for e in scored for bs in e["spec"].base_specs()}
        gram_wall = sum(store_time(stores[h])[0] for h in mine)
        gram_cpu = sum(store_time(stores[h])[1] for h in mine)
        for label, best in picks:
            acc_cv, s, params, C = best["cv_accuracy"], best["spec"], best["params"], best["C"]
            view = ComposedView(s, stores)
            ev = evaluate(ViewKernelSource(view, np.arange(corpus.n)), y, [fixed_split(train, test, corpus.n)], model="svm",
                          C=[C], class_weight=wf.protocol["class_weight"], multiclass=wf.protocol["multiclass"],
                          kernel=label, **learn)
            mrr = source_mrr(ViewKernelSource(view, test), y[test])
            row = {"kernel": label, "params": params, "C": C, "cv_accuracy": round(acc_cv, 4),
                   "accuracy": round(ev.rows[0]["accuracy"], 4), "macro_f1": round(ev.rows[0]["macro_f1"], 4),
                   "mrr": round(mrr, 4), "spec": s.to_dict(), "grid": cv, "n_train": int(train.size),
                   "n_test": int(test.size), "folds": opts["folds"], "gram_seconds": round(gram_wall, 1),
                   "gram_cpu_seconds": round(gram_cpu, 1),
                   "learn_seconds": round(time.perf_counter() - t0 - gram, 1)}
            rows.append(row)
            say(f"{label}: {params} C={C:g} cv {acc_cv:.4f} -> test accuracy {row['accuracy']:.4f}, MRR {mrr:.4f}")
        _write(out, wf, rows, train.size, test.size, opts, Cs, t_start)
    return rows


def _write(out, wf, rows, n_train, n_test, opts, Cs, t_start):

    (out / "results.json").write_text(json.dumps(rows, indent=1))
    table = [{**{k: r[k] for k in ("kernel", "C", "cv_accuracy", "accuracy", "macro_f1", "mrr", "gram_seconds",
                                    "gram_cpu_seconds")},
              "parameters": ", ".join(f"{k}={v}" for k, v in r["params"].items()) or "-"} for r in rows]
    title = wf.report.get("title") or wf.name
    md = [f"# {title}\n",
          f"Workflow `{wf.path.name}`: train {n_train} -> test {n_test}; parameters and C (grid {Cs}) chosen by "
          f"{opts['folds']}-fold CV on train; normalised kernels, one-vs-all SVMs; MRR of same-class "
          f"neighbours among the test questions; {time.perf_counter() - t_start:.0f} s in all.\n",
          *[f"{name}: two-stage grid (options.first): the other parameters and C chosen by CV at "
            f"{', '.join(f'{k}={v}' for k, v in fixed.items())}, then {', '.join(fixed)} swept at that choice.\n"
            for name, fixed in opts["first"].items()],
          markdown_table(table, columns=["kernel", "parameters", "C", "cv_accuracy", "accuracy", "macro_f1", "mrr",
                                         "gram_seconds", "gram_cpu_seconds"], floatfmt=".4g"), ""]
    (out / "results.md").write_text("\n".join(md))
