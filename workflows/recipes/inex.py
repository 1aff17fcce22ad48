"""INEX 2005 tree classification, the protocol of Aiolli, Da San Martino & Sperduti (ICML 2009).

The recipe behind ``workflows/inex2005.yaml`` (``recipe: gramtile.workflows.recipes.inex:run``):

1. one corpus store over the 4,820 training and 4,811 test trees (``inex`` reader: ordered
   ``tree`` for ST/SST/PT, positional ``ptree`` for the route kernels);
2. ONE symmetric Gram store per base kernel and parameter value (every lam, and mu for PT) over
   all 9,631 trees, through the engine -- the train/validation/test blocks are read from it;
3. hyper-parameter selection: every variant (lam, mu, polynomial degree, normalised or not) is
   derived from the stored base matrices (``spec.combine``, as :class:`ComposedView`), and each
   (variant, C) is fitted on ``fit`` training trees (3,397) and scored on the rest (1,423): the
   grid costs SVM fits, not kernel evaluations. Each variant's C grid is one run of the
   selection loop (:func:`~gramtile.pipeline.learn.selection.evaluate` on the split fit ->
   validation, one-vs-all SVMs; on a cluster profile, or the threads pool, each C is a task that
   reads its blocks from the stores on the worker, with the serial run's scores). The fit part
   is drawn stratified by class with a seed (``split: stratified``, the default; scikit-learn
   ``train_test_split``), so a file sorted by class still validates on every class; ``split:
   shuffled`` draws it unstratified, ``split: first`` takes the first ``fit`` trees in file order.
   Any split warns when a class of the training part is missing from the fit or the validation
   part. The validation scores are kept in ``selection-cache.json`` (one entry per variant, split
   and C, written after each variant), so a rerun resumes the selection without refitting;
4. the best (variant, C) by validation accuracy (ties: first in grid order,
   :func:`~gramtile.pipeline.learn.selection.pick`) is refitted on all training trees and scored
   on the test trees with one-vs-all SVMs.

Unnormalised variants are divided by the mean training self-kernel before the SVM; that only
reparametrises the C grid (an SVM with kernel s K and cost C equals one with K and cost s C), so
the grid is relative to SVM-Light's default C = 1 / mean K(x, x), and huge unnormalised tree
kernel values stay in a range libsvm handles. Polynomial variants are (K + offset)^degree of
the (normalised or raw) base kernel.

``options`` of the workflow file::

    options:
      fit: 3397                 # N training examples fit, the rest of train validates
      split: stratified         # how the N are drawn: stratified (default), shuffled or first
      seed: 0                   # seed of the stratified / shuffled draw
      offset: 1                 # polynomial offset
      grid:                     # one entry per kernel name of `kernels:`; lists are swept
        PT: {lam: [0.1, 0.4], mu: [0.4], degree: [1], normalized: [true, false]}
      paper: {PT: 2.96}         # published test error (%) printed beside ours
      paper_valid: {PT: 2.96}   # published validation error (%) of the selected setting
"""
from __future__ import annotations

import hashlib
import itertools
import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from gramtile.kernels.composite import Normalized, Polynomial
from gramtile.kernels.registry import as_spec, spec_from_dict
from gramtile.pipeline import optional
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import Split
from gramtile.pipeline.learn.learners.registry import make
from gramtile.pipeline.learn.parallel import StoreRef, run_tasks
from gramtile.pipeline.learn.report import markdown_table
from gramtile.pipeline.learn.sources import ViewKernelSource
from gramtile.pipeline.progress import log
from gramtile.pipeline.stores.errors import StoreLockedError
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.errors import WorkflowError
from gramtile.workflows.runner import build_corpus, load_workflow

_GRID_KEYS = {"lam", "mu", "degree", "normalized"}
_OPTIONS = {"fit", "split", "seed", "offset", "grid", "paper", "paper_valid"}
SPLITS = ("stratified", "shuffled", "first")


def reject(wf, key, value, fix):
    raise WorkflowError(f"{wf.path}: key '{key}' = {value!r}: {fix}")


def load_recipe_workflow(raw: dict, path):
    """The declarative part of a recipe workflow file, validated like any workflow.

    Returns
    -------
    (Workflow, dict)
        The workflow without ``recipe`` and ``options`` (data, kernels, protocol, report), and
        the ``options`` mapping (validated by the recipe).
    """



    path = Path(path)
    rest = {k: v for k, v in raw.items() if k not in ("recipe", "options")}
    options = raw.get("options") or {}
    if not isinstance(options, dict):
        raise WorkflowError(f"{path}: key 'options' = {options!r}: a mapping of the recipe's options")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / path.name
        tmp.write_text(yaml.safe_dump(rest, sort_keys=False), encoding="utf-8")
        try:
            wf = load_workflow(tmp)
        except WorkflowError as e:
            # name the user's file, not the temporary copy
            raise WorkflowError(str(e).replace(str(tmp), str(path))) from None
    wf.path = path
    return wf, options


def check_options(wf, options) -> dict:
    """Validate the recipe's ``options`` (see the module docstring); returns them with defaults."""
    o = dict(options)
    for k in o:
        if k not in _OPTIONS:
            reject(wf, f"options.{k}", o[k], f"unknown key; allowed keys are {sorted(_OPTIONS)}")
    fit = o.get("fit")
    if isinstance(fit, bool) or not isinstance(fit, int) or fit < 2:
        reject(wf, "options.fit", fit, "give the number of training examples to fit on (the rest validate), "
              "e.g. 3397")
    split = o.get("split", "stratified")
    if split not in SPLITS:
        reject(wf, "options.split", split, f"one of {list(SPLITS)}")
    seed = o.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        reject(wf, "options.seed", seed, "an integer >= 0")
    off = o.get("offset", 1)
    if isinstance(off, bool) or not isinstance(off, (int, float)) or off < 0:
        reject(wf, "options.offset", off, "must be a number >= 0")
    grid = o.get("grid") or {}
    if not isinstance(grid, dict):
        reject(wf, "options.grid", grid, "a mapping kernel name -> {lam: [...], mu: [...], degree: [...], "
              "normalized: [...]}")
    for name, g in grid.items():
        if name not in wf.kernels:
            reject(wf, f"options.grid.{name}", g, f"no kernel of that name; the kernels are {sorted(wf.kernels)}")
        if not isinstance(g, dict):
            reject(wf, f"options.grid.{name}", g, "a mapping of lists, e.g. {lam: [0.1, 0.5]}")
        for k, v in g.items():
            if k not in _GRID_KEYS:
                reject(wf, f"options.grid.{name}.{k}", v, f"unknown key; allowed keys are {sorted(_GRID_KEYS)}")
            if not isinstance(v, list) or not v:
                reject(wf, f"options.grid.{name}.{k}", v, "a non-empty list")
        for k in ("lam", "mu"):
            if k in g and not hasattr(wf.kernels[name], k):
                reject(wf, f"options.grid.{name}.{k}", g[k], f"kernel {wf.kernels[name].kind!r} has no {k!r}")
    published = {}
    for key in ("paper", "paper_valid"):
        p = o.get(key) or {}
        if not isinstance(p, dict):
            reject(wf, f"options.{key}", p, "a mapping kernel name -> published error in %, e.g. {PT: 2.96}")
        for name, v in p.items():
            if name not in wf.kernels:
                reject(wf, f"options.{key}.{name}", v, f"no kernel of that name; the kernels are {sorted(wf.kernels)}")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 100:
                reject(wf, f"options.{key}.{name}", v, "give the published error in %, a number in [0, 100]")
        published[key] = p
    return {"fit": fit, "split": split, "seed": seed, "offset": float(off), "grid": grid, **published}


def validation_split(wf, y, train, n_fit, split="stratified", seed=0):
    """Split the training indices ``train`` into ``n_fit`` fit indices and the validation rest.

    ``stratified``: scikit-learn ``train_test_split(stratify=...)`` with ``seed``; ``shuffled``:
    the same without stratification; ``first``: the first ``n_fit`` in file order. Both parts are
    returned sorted. Warns (the ``gramtile`` logger) when a class of ``train`` is missing from a
    part, naming the classes.
    """
    train = np.asarray(train)
    if split == "first":
        fit, val = train[:n_fit], train[n_fit:]
    else:
        train_test_split = optional.sklearn("model_selection").train_test_split
        rest, single = train, train[:0]
        if split == "stratified":
            # a class with one training example cannot be in both parts: it fits (and the warning
            # below names it), the others are drawn stratified
            cls, inv, cnt = np.unique(y[train], return_inverse=True, return_counts=True)
            alone = cnt[inv] == 1
            rest, single = train[~alone], train[alone]
        try:
            fit, val = train_test_split(rest, train_size=n_fit - single.size, random_state=seed, shuffle=True,
                                        stratify=y[rest] if split == "stratified" else None)
        except ValueError as e:
            reject(wf, "options.split", split, f"cannot split the {train.size} training examples into {n_fit} "
                   f"fit and {train.size - n_fit} validation examples ({e}); use split: shuffled or change fit")
        fit, val = np.sort(np.concatenate([fit, single])), np.sort(val)
    classes = set(y[train].tolist())
    for part, idx in (("fit", fit), ("validation", val)):
        missing = sorted(classes - set(y[idx].tolist()))
        if missing:
            log.warning(f"inex: {wf.path}: the {part} part ({idx.size} examples, options.split = {split}) has no "
                        f"example of class(es) {missing}; use split: stratified")
    return fit, val


def variants(name, base, g, offset) -> list:
    """Every (spec, description) of one kernel's grid: base parameter values x degree x normalised."""

    out = []
    swept = [k for k in ("lam", "mu") if k in g]
    for values in itertools.product(*[g[k] for k in swept]):
        d = base.to_dict()
        d.update(dict(zip(swept, values)))
        b = spec_from_dict(d)
        for norm in g.get("normalized", [True]):
            k = Normalized(kernel=b) if norm else b
            for deg in g.get("degree", [1]):
                s = k if deg == 1 else Polynomial(kernel=k, degree=int(deg), offset=offset)
                out.append((s, {**dict(zip(swept, values)), "normalized": bool(norm), "degree": int(deg)}))
    return out


def fit_diagonal(view: ComposedView, rows) -> np.ndarray:
    """K(x, x) of the variant ``view`` over ``rows``, from the stored base diagonals only (the
    composite's self-kernels, as :meth:`KernelSpec.combine` derives them)."""
    rows = np.asarray(rows, dtype=np.int64)
    base = {}
    for h, v in view.views.items():
        d, _ = v.diag(rows, rows)
        base[h] = (np.zeros((rows.size, 1)), d, d[:1])
    return np.asarray(view.spec.combine(base)[1], dtype=np.float64)


def validation_scores(view: ComposedView, normalized: bool, y, held: Split, Cs, name: str, cluster):
    """Validation accuracy of one variant at each C of ``Cs``: the one-vs-all SVM fitted on
    ``held.train`` and scored on ``held.test`` through the selection loop; an unnormalised variant
    divided by its mean self-kernel over the fit trees (module docstring). None when the variant's
    blocks have NaN or infinite values (e.g. a high polynomial degree of a raw kernel)."""
    scale = None
    if not normalized:
        m = float(np.mean(fit_diagonal(view, held.train)))
        if not np.isfinite(m):
            return None
        scale = m if m > 0 else None
    src = ViewKernelSource(view, scale=scale)
    try:
        ev = selection.evaluate(make("svm", solver="libsvm"), src, y, [held], {"C": [float(C) for C in Cs]},
                                kernel=name, cluster=cluster)
    except EvaluationError:
        K_fit, K_val = view.block(held.train, held.train), view.block(held.test, held.train)
        if np.all(np.isfinite(K_fit)) and np.all(np.isfinite(K_val)):
            raise
        return None
    return [r["accuracy"] for r in ev.rows]


@dataclass
class _Final:
    """The chosen (variant, C) refitted on all training trees and scored on the test trees."""

    bases: tuple         # ((spec hash, StoreRef), ...)
    spec_json: str
    train: np.ndarray
    test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    C: float
    normalized: bool


def _final(task: _Final) -> float:
    """Test accuracy of ``task``'s refit (unnormalised kernels divided by the mean training
    self-kernel, as in the selection)."""
    view = ComposedView(as_spec(task.spec_json), {h: ref.open() for h, ref in task.bases})
    K_tr = view.block(task.train, task.train)
    K_te = view.block(task.test, task.train)
    scale = float(np.mean(np.diag(K_tr))) if not task.normalized else 1.0
    return _fit_score(K_tr, task.y_train, K_te, task.y_test, task.C, scale)


def _fit_score(K_tr, y_tr, K_te, y_te, C, scale):
    OneVsRestClassifier = optional.sklearn("multiclass").OneVsRestClassifier
    SVC = optional.sklearn("svm").SVC

    m = OneVsRestClassifier(SVC(kernel="precomputed", C=C)).fit(K_tr / scale, y_tr)
    return float(np.mean(m.predict(K_te / scale) == y_te))


def run(raw, path, out, cluster="local", tile=None) -> list:
    """Run the INEX protocol of a workflow file (see the module docstring); writes ``out/results.*``.

    Parameters
    ----------
    raw : dict
        The workflow file's mapping (``recipe: gramtile.workflows.recipes.inex:run``).
    path : path
        The workflow file (for messages).
    out : path
        Output folder; its corpus and Gram stores are reused by a rerun.
    cluster, tile : as for :func:`~gramtile.pipeline.compute.engine.run_gram`

    Returns
    -------
    list of dict
        One row per kernel name: chosen parameters and C, validation accuracy, test error,
        the paper's test and validation errors, Gram and selection seconds.
    """

    with Runtime.of(cluster) as rt:
        return _run(raw, path, out, rt, tile)


def _run(raw, path, out, cluster, tile):

    wf, options = load_recipe_workflow(raw, path)
    opts = check_options(wf, options)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    progress = cluster.progress
    say = (lambda s: print(f"inex: {s}", file=sys.stderr, flush=True)) if progress else (lambda s: None)
    t_start = time.perf_counter()
    corpus, parts = build_corpus(wf, out / "corpus.zarr", cluster)
    if "test" not in parts:
        reject(wf, "data.test", None, "the INEX protocol needs data.train and data.test")
    (a, b), (c, d) = parts["train"], parts["test"]
    if not a + 1 < a + opts["fit"] < b:
        reject(wf, "options.fit", opts["fit"], f"must leave validation examples: the training part has {b - a}")
    y = np.asarray([str(v) for v in corpus.labels])
    train, test = np.arange(a, b), np.arange(c, d)
    fit, val = validation_split(wf, y, train, opts["fit"], opts["split"], opts["seed"])
    # the selection cache is keyed to the split itself, not only to its sizes
    split_id = hashlib.sha256(np.ascontiguousarray(fit, dtype=np.int64).tobytes()).hexdigest()[:16]
    Cs = wf.protocol["C"]
    if Cs == "svmlight":
        Cs = [1.0]
    plan = {name: variants(name, spec, opts["grid"].get(name, {}), opts["offset"])
            for name, spec in wf.kernels.items()}
    # every distinct base spec once: its Gram store covers all examples, computed by the engine;
    # kernels are handled one after the other so each row is reported as soon as it is known
    stores, gram_seconds = {}, {}
    n_bases = len({bs.spec_hash for vs in plan.values() for s, _ in vs for bs in s.base_specs()})
    held = Split(fit, val, "validation")
    rows, trials = [], []
    # validation scores by (variant, split, split sizes, C), so a rerun resumes the selection too
    cache = out / "selection-cache.json"
    done = json.loads(cache.read_text()) if cache.exists() else {}
    for name, vs in plan.items():
        for s, _ in vs:
            for bs in s.base_specs():
                h = bs.spec_hash
                if h in stores:
                    continue
                path = out / f"gram-{bs.kind}-{h[:12]}.zarr"
                t1 = time.perf_counter()
                _gram_when_free(run_gram, corpus, bs, path, tile=tile, cluster=cluster.with_settings(progress=False))
                gram_seconds[h] = time.perf_counter() - t1
                stores[h] = GramStore.open(path)
                say(f"Gram store {len(stores)}/{n_bases} {bs.to_json()}: {gram_seconds[h]:.1f} s")
        t_sel = time.perf_counter()
        scored = []  # (variant, C) rows in grid order, for the choice
        for spec, params in vs:
            keys = [f"{spec.spec_hash}|{split_id}|{fit.size}|{val.size}|{C!r}" for C in Cs]
            if all(k in done for k in keys):  # scored by an earlier (interrupted) run
                accs = [done[k] for k in keys]
            else:
                accs = validation_scores(ComposedView(spec, stores), bool(params["normalized"]), y, held, Cs, name,
                                         cluster)
                if accs is not None:
                    done.update(zip(keys, accs))
                    cache.write_text(json.dumps(done))
            if accs is None:
                trials.append({"kernel": name, **params, "skipped": "non-finite kernel values"})
                continue
            for C, acc in zip(Cs, accs):
                trials.append({"kernel": name, **params, "C": C, "valid_accuracy": acc})
                scored.append({"valid_accuracy": acc, "spec": spec, "params": params, "C": C})
        best = selection.pick(scored, "valid_accuracy")
        if best is None:
            raise WorkflowError(f"{wf.path}: every variant of kernel {name!r} gave non-finite values; "
                                "lower lam or the polynomial degree in options.grid")
        acc_v, spec, params, C = best["valid_accuracy"], best["spec"], best["params"], best["C"]
        # the refit on every training tree is a task too (on a worker when the run has a client)
        final = _Final(tuple((b.spec_hash, StoreRef.of(stores[b.spec_hash])) for b in spec.base_specs()),
                       spec.to_json(), train, test, y[train], y[test], float(C), bool(params["normalized"]))
        acc_t, = run_tasks(_final, [final], cluster=cluster, desc=f"test {name}")
        paper = opts["paper"].get(name)
        paper_valid = opts["paper_valid"].get(name)
        mine = {bs.spec_hash for v, _ in vs for bs in v.base_specs()}
        row = {"kernel": name, **{k: params.get(k) for k in ("lam", "mu", "degree", "normalized")}, "C": C,
               "valid_accuracy": acc_v, "valid_error": round(100 * (1 - acc_v), 2), "paper_valid_error": paper_valid,
               "accuracy": acc_t, "test_error": round(100 * (1 - acc_t), 2),
               "paper_error": paper, "difference": None if paper is None else round(100 * (1 - acc_t) - paper, 2),
               "spec": spec.to_dict(), "n_fit": int(fit.size), "n_valid": int(val.size),
               "n_train": int(train.size), "n_test": int(test.size), "variants": len(vs),
               "gram_seconds": round(sum(store_time(stores[h])[0] for h in mine), 1),
               "gram_cpu_seconds": round(sum(store_time(stores[h])[1] for h in mine), 1),
               "selection_seconds": round(time.perf_counter() - t_sel, 1)}
        rows.append(row)
        say(f"{name}: best {params} C={C:g} valid {acc_v:.4f} -> test error {row['test_error']:.2f}% "
            f"(paper {paper}) [Gram {row['gram_seconds']} s, selection {row['selection_seconds']} s]")
        _write(out, wf, rows, trials, fit, val, train, test, len(stores), corpus.n, Cs, t_start,
               f"{opts['split']}" + ("" if opts["split"] == "first" else f", seed {opts['seed']}"))
    return rows


def _gram_when_free(run_gram, *args, patience: float = 3600.0, **kwargs):
    """:func:`run_gram`, waiting while another live process holds the store's writer lock (a
    second run may precompute stores of the same workflow directory); then resume or reuse it."""

    t0 = time.monotonic()
    while True:
        try:
            return run_gram(*args, **kwargs)
        except StoreLockedError:
            if time.monotonic() - t0 > patience:
                raise
            time.sleep(5.0)


def store_time(store) -> tuple:
    """(wall seconds of the runs that computed tiles, CPU seconds of the tile tasks) from a store's log,
    so a resumed run still reports what its stores cost."""
    wall = cpu = 0.0
    for e in store.read_log():
        if e.get("event") == "end" and e.get("tiles_computed"):
            wall += float(e.get("seconds", 0.0))
        elif e.get("event") == "tile":
            cpu += float(e.get("cpu_seconds", 0.0))
    return wall, cpu


def _write(out, wf, rows, trials, fit, val, train, test, n_stores, n, Cs, t_start, split):
    """results.json, results.md (the Table 1 layout) and selection.json (every validation score)."""

    (out / "selection.json").write_text(json.dumps(trials, indent=0))
    (out / "results.json").write_text(json.dumps(rows, indent=1))
    cols = ["kernel", "paper_error", "test_error", "difference", "paper_valid_error", "valid_error", "lam", "mu",
            "degree", "normalized", "C", "variants", "gram_seconds", "gram_cpu_seconds", "selection_seconds"]
    title = wf.report.get("title") or wf.name
    md = [f"# {title}\n",
          f"Workflow `{wf.path.name}`: fit {fit.size} ({split} split), validate {val.size}, retrain {train.size}, "
          f"test {test.size}; one-vs-all SVMs; {n_stores} base Gram stores over {n} trees; "
          f"C grid {Cs}; {time.perf_counter() - t_start:.0f} s in all.\n",
          markdown_table(rows, columns=cols, floatfmt="g"), ""]
    (out / "results.md").write_text("\n".join(md))
