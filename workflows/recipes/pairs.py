"""Pair tasks (answer selection, relatedness, entailment, paraphrase) with pair kernels composed
from the Gram stores of field kernels.

The recipe behind ``workflows/trec_qa_answer_selection.yaml``, ``sick_relatedness.yaml``,
``sick_entailment.yaml`` and ``msrp_paraphrase.yaml`` (``recipe: gramtile.workflows.recipes.pairs:run``).
The data are examples of two texts (fields, e.g. ``question`` / ``answer`` or ``a`` / ``b``;
readers ``trec_qa_wang``, ``sick2014``, ``msrp``), parsed once into a corpus store (train part
first, then the test part). Then:

1. every kernel of ``kernels:`` is a *field kernel*: a base kernel whose ``rep`` names a
   representation (``tree``, ``seq``); it is read on each field (``a.tree``, ``b.tree``) and
   each of those is ONE Gram store over train + test, computed by the engine once (a rerun
   reuses every finished tile);
2. each pair construction of ``options.constructions`` composes a pair kernel from those stores
   without evaluating a pair again (:class:`~gramtile.pipeline.stores.gram_compose.ComposedView`),
   with N the cosine normalisation of a field kernel:

   - ``sum``: K(p1, p2) = N(K_f1)(p1, p2) + N(K_f2)(p1, p2) (summed over all fields),
   - ``product``: K(p1, p2) = N(K_f1)(p1, p2) * N(K_f2)(p1, p2),
   - a field name (e.g. ``answer``): N(K_field) alone;
   - ``within``: the within-pair similarity kernel s(p1) s(p2), s(p) = N(K)(p.f1, p.f2) (how much
     the two texts of an example share; :mod:`gramtile.kernels.within_pair`, its own Gram store);
   - ``X+within`` (e.g. ``product+within``): construction X plus the within-pair kernel;

3. every (field kernel, construction, learner) is one row: the learner's grid (C, epsilon) is
   chosen by nested cross-validation inside the training part only (the loop's
   ``select="nested"``, ``options.inner_folds``; group folds for ranking), refitted on the whole
   training part and scored once on the test part by the task's metrics;
4. ranking with ``svm`` (``options.learners.svm`` in a ranking task): the SVM is trained as a
   classifier of the 0/1 labels (C chosen by nested CV on its ``metric``), refitted with the
   chosen C and its decision values rank each group's candidates;
5. ``options.overlap`` (ranking only): the word-overlap baseline, no learning: a candidate's score
   is the number of distinct lower-cased question words, stop words and punctuation left out,
   that occur in it.

``options``::

    options:
      task: ranking            # ranking | regression | classification
      target: label            # label (the corpus labels) | target (the real-valued targets)
      constructions: [sum, answer]
      learners:                # learner -> its grid (lists are chosen by nested CV)
        rank: {C: [0.1, 1, 10]}
        svm: {C: [0.1, 1, 10], metric: f1}   # metric: what nested selection maximises
      inner_folds: 3
      seed: 0
      overlap: true
      published:               # the published figures, copied into results.md beside ours
        - {system: "Wang et al. 2007", setting: test, map: .603, mrr: .685}

Results: ``results.json`` (every row with its chosen grid point, scores and times) and
``results.md``.
"""
from __future__ import annotations

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
from gramtile.pipeline.learn.folds import fixed_split
from gramtile.pipeline.learn.learners.base import Point
from gramtile.pipeline.learn.learners.registry import LEARNERS, make
from gramtile.pipeline.learn.metrics import ranking_report
from gramtile.pipeline.learn.report import markdown_table
from gramtile.pipeline.learn.sources import ViewKernelSource
from gramtile.pipeline.representations.fields import field_key
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.recipes.inex import load_recipe_workflow, reject, store_time
from gramtile.workflows.runner import build_corpus

_OPTIONS = {"task", "target", "constructions", "learners", "inner_folds", "seed", "overlap", "published"}
_TASKS = ("ranking", "regression", "classification")
#: English function words the overlap baseline leaves out (an immutable constant)
STOPWORDS = frozenset(
    "a an the of in on at to for from by with and or but is are was were be been being do does did what which who "
    "whom whose when where why how this that these those it its as into than then there their they he she his her "
    "him we you i not no s 's".split())


def check_options(wf, options) -> dict:
    """Validate the recipe's ``options`` (see the module docstring); returns them with defaults."""
    for k in options:
        if k not in _OPTIONS:
            reject(wf, f"options.{k}", options[k], f"unknown key; allowed keys are {sorted(_OPTIONS)}")
    task = options.get("task", "classification")
    if task not in _TASKS:
        reject(wf, "options.task", task, f"use one of {list(_TASKS)}")
    target = options.get("target", "target" if task == "regression" else "label")
    if target not in ("label", "target"):
        reject(wf, "options.target", target, "use 'label' (the corpus labels) or 'target' (the real targets)")
    cons = options.get("constructions", ["sum", "product"])
    if not isinstance(cons, list) or not cons or not all(isinstance(c, str) for c in cons):
        reject(wf, "options.constructions", cons, "a list of sum, product or field names, e.g. [sum, product]")
    learners = options.get("learners")
    if not isinstance(learners, dict) or not learners:
        reject(wf, "options.learners", learners, "a mapping learner -> grid, e.g. {svm: {C: [0.1, 1, 10]}}")
    grids = {}
    for name, g in learners.items():
        if name not in LEARNERS:
            reject(wf, f"options.learners.{name}", g, f"no such learner; use one of {sorted(LEARNERS)}")
        learner = make(name)
        g = dict(g or {})
        metric = g.pop("metric", None)
        kinds = learner.task_kinds
        if task not in kinds and not (task == "ranking" and "classification" in kinds):
            reject(wf, f"options.learners.{name}", learners[name], f"{name} learns {list(kinds)}, not {task}")
        scored_as = task if task in kinds else "classification"  # a classifier's scores rank a ranking task
        if metric is not None and metric not in selection.TASK_METRICS[scored_as]:
            reject(wf, f"options.learners.{name}.metric", metric, f"nested selection of {name} maximises one of "
                   f"{list(selection.TASK_METRICS[scored_as])}")
        params = {p.name for p in learner.params}
        for k, v in g.items():
            if k not in params:
                reject(wf, f"options.learners.{name}.{k}", v, f"{name} has no parameter {k!r}; it has "
                       f"{sorted(params)}")
            vals = v if isinstance(v, list) else [v]
            if not vals or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in vals):
                reject(wf, f"options.learners.{name}.{k}", v, "a positive number or a non-empty list of them")
        grids[name] = ({k: [float(x) for x in (v if isinstance(v, list) else [v])] for k, v in g.items()}, metric)
    folds = options.get("inner_folds", 3)
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        reject(wf, "options.inner_folds", folds, "must be an integer >= 2")
    seed = options.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        reject(wf, "options.seed", seed, "must be an integer")
    overlap = bool(options.get("overlap", False))
    if overlap and task != "ranking":
        reject(wf, "options.overlap", options["overlap"], "the word-overlap baseline scores a ranking task only")
    published = options.get("published") or []
    if not isinstance(published, list) or not all(isinstance(p, dict) and "system" in p for p in published):
        reject(wf, "options.published", published, "a list of mappings with 'system' and the published figures")
    for name, spec in wf.kernels.items():
        base = spec.base_specs()
        if len(base) != 1 or base[0].spec_hash != spec.spec_hash or not isinstance(getattr(spec, "rep", None), str):
            reject(wf, f"kernels.{name}", spec.to_dict(), "a field kernel is a base kernel with a 'rep' "
                   "(e.g. {kind: sst, rep: tree}); it is read on every field and normalised by the recipe")
    return {"task": task, "target": target, "constructions": cons, "learners": grids, "inner_folds": folds,
            "seed": seed, "overlap": overlap, "published": published}


def field_spec(spec, field: str):
    """The base kernel ``spec`` read on one field: its ``rep`` becomes ``<field>.<rep>``."""
    d = spec.to_dict()
    d["rep"] = field_key(field, d["rep"])
    return spec_from_dict(d)


def within_spec(spec, fields):
    """The within-pair similarity kernel of a field kernel over the first two fields."""
    d = spec.to_dict()
    return spec_from_dict({"kind": "within_pair", "kernel": d, "fields": list(fields[:2])})


def pair_spec(spec, fields, construction: str):
    """The pair kernel of a field kernel: ``sum`` or ``product`` of its normalised field kernels,
    the normalised kernel of one field (``construction`` a field name), the within-pair
    similarity kernel (``within``), or one of those plus it (``sum+within``, ...)."""
    base, plus, extra = construction.partition("+")
    if plus:
        return spec_from_dict({"kind": "sum", "kernels": [{"weight": 1.0, "kernel": pair_spec(spec, fields, base).to_dict()},
                                                          {"weight": 1.0, "kernel": pair_spec(spec, fields, extra).to_dict()}]})
    if construction == "within":
        return within_spec(spec, fields)
    norm = [Normalized(kernel=field_spec(spec, f)) for f in fields]
    if construction == "sum":
        return spec_from_dict({"kind": "sum", "kernels": [{"weight": 1.0, "kernel": n.to_dict()} for n in norm]})
    if construction == "product":
        return spec_from_dict({"kind": "product", "kernels": [n.to_dict() for n in norm]})
    return norm[list(fields).index(construction)]


def describe(construction: str, fields) -> str:
    """The formula of a construction, for the results."""
    base, plus, extra = construction.partition("+")
    if plus:
        return f"{describe(base, fields)} + {describe(extra, fields)}"
    if construction == "within":
        return f"s(p1) s(p2), s(p) = K({fields[0]},{fields[1]})"
    if construction == "sum":
        return " + ".join(f"K({f}1,{f}2)" for f in fields)
    if construction == "product":
        return " * ".join(f"K({f}1,{f}2)" for f in fields)
    return f"K({construction}1,{construction}2)"


def overlap_scores(docs, first: str, second: str) -> np.ndarray:
    """The word overlap of each example: distinct lower-cased words of field ``first`` (stop words
    and tokens without a letter or digit left out) that occur in field ``second``."""
    def words(text):
        return {w for w in text.lower().split() if w not in STOPWORDS and any(c.isalnum() for c in w)}

    return np.asarray([len(words(d.fields[first]) & words(d.fields[second])) for d in docs], dtype=np.float64)


def run(raw, path, out, cluster="local", tile=None) -> list:
    """Run the pair-task protocol of a workflow file; writes ``out/results.json`` and ``results.md``.

    Parameters
    ----------
    raw : dict
        The workflow file's mapping (``recipe: gramtile.workflows.recipes.pairs:run``).
    path : path
        The workflow file (for messages).
    out : path
        Output folder; its corpus and Gram stores are reused by a rerun.
    cluster, tile : as for :func:`~gramtile.pipeline.compute.engine.run_gram`; the learning fits
        run on the same Runtime.

    Returns
    -------
    list of dict
        One row per (field kernel, construction, learner), and the overlap baseline's.
    """
    with Runtime.of(cluster) as rt:
        return _run(raw, path, out, rt, tile)


def _run(raw, path, out, rt, tile):
    wf, options = load_recipe_workflow(raw, path)
    opts = check_options(wf, options)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    say = (lambda s: print(f"pairs: {s}", file=sys.stderr, flush=True)) if rt.progress else (lambda s: None)
    t_start = time.perf_counter()
    corpus, parts = build_corpus(wf, out / "corpus.zarr", rt)
    if "test" not in parts:
        reject(wf, "data.test", None, "this protocol trains on data.train and scores on data.test")
    fields = corpus.fields
    if len(fields) < 2:
        reject(wf, "data.format", wf.data["format"], "a pair task needs examples of several texts (fields)")
    for c in opts["constructions"]:
        if any(part not in ("sum", "product", "within") and part not in fields for part in c.split("+")) \
                or c.count("+") > 1 or c.startswith("within+"):
            reject(wf, "options.constructions", c, f"use sum, product, within, a field name ({list(fields)}) or one "
                   "of those but within plus within (e.g. product+within)")
    n = corpus.n
    (a, b), (c, d) = parts["train"], parts["test"]
    train, test = np.arange(a, b), np.arange(c, d)
    split = fixed_split(train, test, n)
    if opts["target"] == "target":
        if corpus.targets is None:
            reject(wf, "options.target", "target", "this corpus has no real-valued targets; use label")
        y = np.asarray(corpus.targets, dtype=np.float64)
    else:
        y = np.asarray([str(v) for v in corpus.labels])
    groups = None
    if opts["task"] == "ranking":
        if corpus.groups is None:
            reject(wf, "options.task", "ranking", "this corpus has no group ids to rank within")
        # a group is named by its part too, so that a question of both parts is two groups
        part = np.where(np.arange(n) < b, "train", "test")
        groups = np.asarray([f"{p}:{g}" for p, g in zip(part, corpus.groups)])
    rows = []

    # 1. the field Gram stores: one per (field kernel, field), computed once, reused by every construction
    stores, gram_times = {}, {}
    def compute(name, what, bs, p, where):
        t1 = time.perf_counter()
        run_gram(corpus, bs, p, tile=tile, cluster=rt.with_settings(progress=False))
        stores[bs.spec_hash] = GramStore.open(p)
        wall, cpu = store_time(stores[bs.spec_hash])
        gram_times[(name, what)] = {"store": p.name, "seconds": round(wall, 1), "cpu_seconds": round(cpu, 1)}
        say(f"Gram store {name} {where} ({bs.to_json()}): {time.perf_counter() - t1:.1f} s this run, "
            f"{wall:.1f} s when computed")

    for name, spec in wf.kernels.items():
        for f in fields:
            bs = field_spec(spec, f)
            compute(name, f, bs, out / f"gram-{bs.kind}-{f}-{bs.spec_hash[:12]}.zarr", f"on {f}")
        if any("within" in c.split("+") for c in opts["constructions"]):
            ws = within_spec(spec, fields)
            compute(name, "within", ws, out / f"gram-within-{ws.spec_hash[:12]}.zarr", "within pairs")

    # 2. rows: field kernel x construction x learner
    for name, spec in wf.kernels.items():
        for cons in opts["constructions"]:
            ps = pair_spec(spec, fields, cons)
            src = ViewKernelSource(ComposedView(ps, stores), np.arange(n))
            used = [u for part in cons.split("+")
                     for u in (fields if part in ("sum", "product") else ("within",) if part == "within" else (part,))]
            for lname, (grid, metric) in opts["learners"].items():
                t0 = time.perf_counter()
                row = {"kernel": name, "construction": cons, "pair_kernel": describe(cons, fields), "learner": lname}
                if opts["task"] == "ranking" and "ranking" not in make(lname).task_kinds:
                    row.update(_classifier_ranking(lname, src, y, groups, split, grid, metric, opts, wf, rt, name))
                else:
                    ev = selection.evaluate(make(lname), src, y if opts["task"] == "classification" else
                                            y.astype(np.float64), [split], grid, kernel=name, select="nested",
                                            inner_folds=opts["inner_folds"], inner_seed=opts["seed"],
                                            metric=metric, task=opts["task"], groups=groups,
                                            class_weight=wf.protocol["class_weight"],
                                            multiclass=wf.protocol["multiclass"], cluster=rt)
                    r = ev.rows[0]
                    row["chosen"] = _chosen(ev, grid)
                    row.update({k: r[k] for k in _SCORES[opts["task"]] if k in r})
                row.update({"gram_seconds": sum(gram_times[(name, f)]["seconds"] for f in used),
                            "gram_cpu_seconds": round(sum(gram_times[(name, f)]["cpu_seconds"] for f in used), 1),
                            "learn_seconds": round(time.perf_counter() - t0, 1), "spec": ps.to_dict(),
                            "n_train": int(train.size), "n_test": int(test.size), "grid": grid,
                            "inner_folds": opts["inner_folds"]})
                rows.append(row)
                say(f"{name} {cons} {lname}: {row.get('chosen')} -> "
                    + ", ".join(f"{k} {row[k]:.4f}" for k in _SCORES[opts["task"]] if isinstance(row.get(k), float)))
                _write(out, wf, rows, opts, gram_times, train.size, test.size, t_start)

    # 3. the word-overlap baseline (no learning)
    if opts["overlap"]:
        docs = corpus.documents(c, d)
        s = overlap_scores(docs, fields[0], fields[1])
        rep = ranking_report(y[test].astype(np.float64), s, groups[test])
        rows.append({"kernel": "word overlap", "construction": "-", "pair_kernel": f"|words({fields[0]}) & "
                     f"words({fields[1]})|", "learner": "none", "chosen": {},
                     **{k: rep[k] for k in _SCORES["ranking"]}, "n_train": int(train.size), "n_test": int(test.size)})
    _write(out, wf, rows, opts, gram_times, train.size, test.size, t_start)
    return rows


#: the columns of the results, by task kind
_SCORES = {"ranking": ("map", "mrr", "p_at_1", "ndcg", "n_groups"),
           "regression": ("pearson", "spearman", "mse"),
           "classification": ("accuracy", "precision", "recall", "f1", "macro_f1")}


def _chosen(ev, grid) -> dict:
    """The grid point nested selection chose (the one point of a grid of single values)."""
    if ev.chosen:
        return ev.chosen[0].as_dict()
    return {k: v[0] for k, v in grid.items()}


def _classifier_ranking(lname, src, y, groups, split, grid, metric, opts, wf, rt, name) -> dict:
    """A classifier's decision values as ranking scores: C chosen by nested CV on the training
    part (classification of the labels, ``metric``), refitted with it, the test part's groups ranked."""
    learner = make(lname)
    labels = np.asarray([str(v) for v in y])
    ev = selection.evaluate(learner, src, labels, [split], grid, kernel=name, select="nested",
                            inner_folds=opts["inner_folds"], inner_seed=opts["seed"], metric=metric,
                            class_weight=wf.protocol["class_weight"], cluster=rt)
    chosen = _chosen(ev, grid)
    point = Point(tuple((p.name, chosen.get(p.name, p.default)) for p in learner.params))
    problem = selection.problem_of(labels[split.train], class_weight=wf.protocol["class_weight"])
    est = learner.estimator(point, problem)
    est.fit(src.block(split.train, split.train), labels[split.train])
    scores = np.asarray(est.decision_function(src.block(split.test, split.train)), dtype=np.float64)
    if list(est.classes_)[-1] != problem.positive:  # decision values speak for classes_[1]
        scores = -scores
    rep = ranking_report(y[split.test].astype(np.float64), scores, groups[split.test])
    r = ev.rows[0]
    return {"chosen": chosen, **{k: rep[k] for k in _SCORES["ranking"]},
            "classifier_accuracy": r["accuracy"], "classifier_f1": r.get("f1")}


def _write(out, wf, rows, opts, gram_times, n_train, n_test, t_start):
    """results.json and results.md (our rows, the field Gram stores, the published figures)."""
    (out / "results.json").write_text(json.dumps({"rows": rows, "gram_stores": [
        {"kernel": k, "field": f, **v} for (k, f), v in gram_times.items()], "published": opts["published"],
        "seconds": round(time.perf_counter() - t_start, 1)}, indent=1, default=str))
    scores = list(_SCORES[opts["task"]])
    if opts["task"] == "ranking":
        scores.append("classifier_f1")
    table = [{**{k: r.get(k, "") for k in ("kernel", "construction", "pair_kernel", "learner")},
              "chosen": ", ".join(f"{k}={v:g}" for k, v in (r.get("chosen") or {}).items()) or "-",
              **{k: r.get(k, "") for k in scores}, "gram_seconds": r.get("gram_seconds", ""),
              "learn_seconds": r.get("learn_seconds", "")} for r in rows]
    title = wf.report.get("title") or wf.name
    md = [f"# {title}\n",
          f"Workflow `{wf.path.name}`: train {n_train} -> test {n_test} ({opts['task']}); field kernels "
          f"normalised, pair kernels composed from their Gram stores; grid chosen by nested "
          f"{opts['inner_folds']}-fold CV inside the training part; {time.perf_counter() - t_start:.0f} s in all.\n",
          markdown_table(table, columns=["kernel", "construction", "pair_kernel", "learner", "chosen", *scores,
                                         "gram_seconds", "learn_seconds"], floatfmt=".4g"), ""]
    if opts["published"]:
        cols = list(dict.fromkeys(k for p in opts["published"] for k in p))
        md += ["Published figures (as the data's README gives them):\n",
               markdown_table([{k: p.get(k, "") for k in cols} for p in opts["published"]], columns=cols,
                              floatfmt=".4g"), ""]
    (out / "results.md").write_text("\n".join(md))
