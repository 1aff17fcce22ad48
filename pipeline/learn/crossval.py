"""Train and evaluate kernel machines over a kernel source: k-fold, fixed split, learning curves.

A *kernel source* is anything with ``n`` (examples) and ``block(rows, cols) -> ndarray``:
an in-memory matrix (:class:`~gramtile.pipeline.learn.sources.ArrayKernelSource`) or a Gram store's lazy reader
(:func:`gramtile.pipeline.learn.sources.open_gram_source`). For each split the learner reads exactly two blocks,
K[train][:, train] to fit and K[test][:, train] to predict, so a store only loads the chunks
those rows and columns touch; every setting of a C grid reuses the two blocks.

Models: ``"svm"`` is ``sklearn.svm.SVC(kernel="precomputed")`` (multi-class one-vs-rest via
``OneVsRestClassifier``, or SVC's native one-vs-one), ``"perceptron"`` the kernel voted
perceptron of :mod:`gramtile.pipeline.learn.perceptron`.

Solvers (:func:`plan_solver`): the SVM is fitted by libsvm on the two blocks held in memory,
or, when K(train, train) would not fit the memory budget (or with ``solver="smo"``), by
:mod:`gramtile.pipeline.learn.smo` over kernel rows read through a bounded cache
(:func:`~gramtile.pipeline.learn.fits.run_chain`); the prediction then reads K(test, support vectors) in bands. Over a
Gram store, smo reads its rows from one row file per run (:mod:`gramtile.pipeline.learn.rowfile`,
:func:`smo_row_file`), written before the tasks start and removed when they end.

Parallel: every independent fit is a task (:mod:`gramtile.pipeline.learn.fits`: one per split x C,
one per smo problem along the C grid; nested selection: split x inner fold x C, and each split's
fit at its chosen C added as soon as its inner fits are in) run by :func:`gramtile.pipeline.learn.parallel.run_tasks` on a cluster
profile or runtime; a task carries store paths and indices, and the worker reads its own blocks.
The serial run is the same tasks one after another, and results are assembled in task order
(:func:`assemble`), so a parallel run gives the serial run's numbers.

Result rows are flat dicts. Binary tasks report precision/recall/F1 of the positive class
(:func:`~gramtile.pipeline.learn.metrics.positive_class`); multi-class tasks report macro-averaged precision/recall/F1 and also
``macro_f1`` and ``micro_f1``. Overall figures pool the predictions of all test parts (each
example is tested once under k-fold); ``accuracy_std`` is the spread of per-fold accuracies.

C selection: given several C values, ``select="nested"`` (the default of ``gramtile evaluate``)
selects C *inside* each training part (stratified inner folds on the training examples only,
:func:`choose_C`), trains with the chosen C and scores the test part once; the row reports
``C_grid`` and the C chosen per split (``C_chosen``). ``select="test"`` (the default here, for
callers that do their own selection on inner or development folds, as the workflow recipes do)
scores every C on the test parts, one row per C: choosing the best of those rows is selection
on test data.
"""
from __future__ import annotations

import math
import sys
import uuid
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import numpy as np

from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.fits import Fit, Setting, forget_blocks, n_tasks, read_block, run_fits, split_tasks
from gramtile.pipeline.learn.folds import Split, stratified_kfold
from gramtile.pipeline.learn.metrics import binary_prf, classification_report, mean_rr, neighbour_rr, positive_class
from gramtile.pipeline.learn.parallel import (
    SourceRef,
    check_complete,
    fit_memory,
    run_tasks,
    runs_here,
    source_ref,
    too_big,
)
from gramtile.pipeline.learn.rowfile import row_file, store_backed
from gramtile.pipeline.learn.smo import RowCache, class_C, solve_binary
from gramtile.pipeline.learn.sources import ArrayKernelSource
from gramtile.pipeline.progress import log, progress_bar
from gramtile.pipeline.stores.chunk_cache import clear_chunk_cache
from gramtile.pipeline.stores.storage import absolute

MODELS = ("svm", "perceptron")
MULTICLASS = ("ovr", "ovo")
SELECT = ("nested", "test")
#: ``solver`` values: ``libsvm`` (scikit-learn's SVC on K(train, train) in memory), ``smo``
#: (:mod:`gramtile.pipeline.learn.smo` over kernel rows read through a cache of ``cache_mb``),
#: ``auto`` (libsvm when its blocks fit the memory budget, else smo).
SOLVERS = ("auto", "libsvm", "smo")
#: libsvm's own kernel cache (SVC's ``cache_size``, MB), counted in the in-memory estimate.
LIBSVM_CACHE_MB = 200.0
#: smo's working vectors beside its row cache (alpha, gradient, labels, ...), in kernel rows.
SMO_VECTORS = 8


def parse_class_weight(text):
    """``None``/"none", "balanced", or "LABEL:W,LABEL:W" (e.g. "+1:5") for SVC's class_weight."""
    if text is None or str(text).strip().lower() in ("", "none"):
        return None
    t = str(text).strip()
    if t == "balanced":
        return "balanced"
    out = {}
    for part in t.split(","):
        lab, sep, w = part.rpartition(":")
        try:
            out[lab.strip()] = float(w)
        except ValueError:
            sep = ""
        if not sep or not lab.strip() or not out.get(lab.strip(), 0) > 0:
            raise EvaluationError(f"--class-weight: cannot read {part!r} in {text!r}; use 'balanced', 'none' "
                                  "or LABEL:WEIGHT pairs with positive weights, e.g. +1:5")
    return out


def settings_for(model: str, C=(1.0,), epochs: int = 2) -> list[Setting]:
    """The grid of a model: one Setting per C for SVM, a single one for the perceptron."""
    if model not in MODELS:
        raise EvaluationError(f"model={model!r}; use one of {list(MODELS)}")
    if model == "perceptron":
        if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
            raise EvaluationError(f"epochs={epochs!r} is not an integer >= 1; use e.g. --epochs 2")
        return [Setting("perceptron", None, int(epochs))]
    Cs = [C] if np.isscalar(C) else list(C)
    if not Cs:
        raise EvaluationError("C grid is empty; give at least one value, e.g. --C 1")
    for c in Cs:
        if isinstance(c, bool) or not isinstance(c, (int, float, np.number)) or not c > 0 or not math.isfinite(c):
            raise EvaluationError(f"C={c!r} must be a positive finite number; e.g. --C 0.1,1,10")
    return [Setting("svm", float(c)) for c in Cs]


def check_inputs(source, labels, splits):
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) != source.n:
        raise EvaluationError(f"there are {len(y)} labels for a kernel over {source.n} examples; the labels "
                              "must list every row of the Gram matrix in order (check --labels)")
    splits = list(splits)
    if not splits:
        raise EvaluationError("no splits to evaluate; give --folds K or --split train:a:b,test:c:d")
    for s in splits:
        for side, idx in (("train", s.train), ("test", s.test)):
            if idx.size == 0 or idx.min() < 0 or idx.max() >= source.n:
                raise EvaluationError(f"{s.name}: {side} indices are empty or outside 0..{source.n - 1}; "
                                      "make the splits for this store's examples")
        if len(np.unique(y[s.train])) < 2:
            raise EvaluationError(f"{s.name}: the training part has one class only ({y[s.train][0]!r}); "
                                  "use stratified folds or a training range with both classes")
    return y, splits


def check_classes(classes, positive, class_weight):
    if len(classes) == 2 and positive not in classes:
        raise EvaluationError(f"positive class {positive!r} is not one of the labels {classes!r}; pick one of them")
    if isinstance(class_weight, dict):
        unknown = [k for k in class_weight if k not in classes]
        if unknown:
            raise EvaluationError(f"class weight given for {unknown[0]!r}, which is not a label ({classes!r}); "
                                  "name existing labels, e.g. --class-weight " + f"{classes[-1]}:5")
    elif class_weight not in (None, "balanced"):
        raise EvaluationError(f"class_weight={class_weight!r}; use None, 'balanced' or a dict label -> weight")


def prediction_scores(y_true, y_pred, classes, positive) -> dict:
    rep = classification_report(y_true, y_pred, labels=classes)
    row = {"accuracy": rep["accuracy"]}
    if len(classes) == 2:
        p, r, f = binary_prf(y_true, y_pred, positive)
        row.update({"precision": p, "recall": r, "f1": f})
    else:
        row.update({"precision": rep["macro_precision"], "recall": rep["macro_recall"], "f1": rep["macro_f1"],
                    "macro_f1": rep["macro_f1"], "micro_f1": rep["micro_f1"]})
    return row, rep


@dataclass
class Evaluation:
    """What :func:`evaluate` returns.

    Attributes
    ----------
    rows : list of dict
        One per setting: pooled metrics over all test parts.
    fold_rows : list of dict
        One per (split, setting).
    predictions : dict
        Setting label -> (test indices, predicted labels), pooled in split order.
    reports : dict
        Setting label -> full :func:`~gramtile.pipeline.learn.metrics.classification_report` (pooled).
    solver : dict or None
        The SVM solver used and why (:meth:`SolverPlan.to_dict`); None for the perceptron.
    """

    rows: list = field(default_factory=list)
    fold_rows: list = field(default_factory=list)
    predictions: dict = field(default_factory=dict)
    reports: dict = field(default_factory=dict)
    solver: dict | None = None


def _label(s: Setting) -> str:
    if s.model == "perceptron":
        return f"perceptron epochs={s.epochs}"
    return "svm C=nested" if s.C is None else f"svm C={s.C:g}"


def _base_row(kernel, s: Setting, class_weight, multiclass, n_classes):
    row = {"kernel": kernel, "model": s.model, "C": s.C}
    if s.model == "perceptron":
        row["epochs"] = s.epochs
    else:
        row["class_weight"] = class_weight if class_weight is None or isinstance(class_weight, str) \
            else ",".join(f"{k}:{v:g}" for k, v in class_weight.items())
        if n_classes > 2:
            row["multiclass"] = multiclass
    return row


# ---- solver choice: in memory (libsvm) or through a row cache (smo) -------------------------------

def default_cache_mb(memory_mb: float) -> float:
    """The default row cache of the smo solver: a quarter of the budget, between 100 MB (or half
    the budget, when that is less) and 4 GB."""
    return float(min(4000.0, max(min(100.0, memory_mb / 2), memory_mb / 4)))


def in_memory_mb(n_train: int, n_test: int, nested_folds: int = 0) -> float:
    """MB the in-memory path holds at its peak for one fit: K(train, train) and K(test, train),
    plus, with nested C selection over ``nested_folds`` inner folds, the largest inner fold's two
    blocks, plus libsvm's kernel cache."""
    need = n_train * n_train + n_test * n_train
    if nested_folds >= 2:
        inner_te = -(-n_train // nested_folds)
        inner_tr = n_train - n_train // nested_folds
        need += inner_tr * inner_tr + inner_te * inner_tr
    return 8 * need / 1e6 + LIBSVM_CACHE_MB


@dataclass(frozen=True)
class SolverPlan:
    """Which SVM solver a run uses and why (recorded in results.json / provenance)."""

    requested: str
    used: str              # "libsvm" or "smo"
    need_mb: float         # the in-memory path's peak per fit
    memory_mb: float       # the budget per fit
    cache_mb: float        # the smo row cache of one fit
    tol: float = 1e-3
    scratch: str | None = None   # where smo's kernel row file goes (None: the system's temporary directory)
    row_file: object = None      # the run's RowFile, once written (:func:`smo_row_file`)

    @property
    def line(self) -> str:
        how = (f"libsvm (scikit-learn SVC) on K(train, train) in memory: {self.need_mb:,.0f} MB per fit"
               if self.used == "libsvm" else
               f"smo over kernel rows read through a {self.cache_mb:,.0f} MB cache (K(train, train) in memory would "
               f"need {self.need_mb:,.0f} MB per fit)")
        why = "" if self.requested != "auto" else (
            f" within the {self.memory_mb:,.0f} MB budget" if self.used == "libsvm"
            else f", over the {self.memory_mb:,.0f} MB budget")
        return f"solver {self.used} ({'--solver ' + self.requested if self.requested != 'auto' else 'auto'}): {how}{why}"

    def to_dict(self) -> dict:
        return {"requested": self.requested, "used": self.used, "in_memory_mb": round(self.need_mb, 1),
                "memory_mb": round(self.memory_mb, 1), "cache_mb": round(self.cache_mb, 1), "tol": self.tol}


def plan_solver(solver: str = "auto", n_train: int = 0, n_test: int = 0, cluster=None,
                nested_folds: int = 0, multiclass: str = "ovr", n_classes: int = 2, tol: float = 1e-3) -> SolverPlan:
    """Choose the SVM solver of a run.

    Parameters
    ----------
    solver : {"auto", "libsvm", "smo"}
    n_train, n_test : the largest training and test parts of the run's fits
    cluster : str or Runtime, optional
        Where the fits run (default ``sequential``): what they may use there
        (:func:`~gramtile.pipeline.learn.parallel.fit_memory`; the fits running at once in one
        process split it), the Runtime's ``cache_mb`` (smo's row cache of one process, split
        the same way; default :func:`default_cache_mb` of the per-fit budget) and ``scratch``
        (where smo writes its kernel row file, :mod:`~gramtile.pipeline.learn.rowfile`).
    nested_folds : inner folds of nested C selection (0: none)

    On worker processes a plan that cannot fit one worker is refused (:func:`too_big`): Dask
    would pause the worker at its memory limit and the run would stall.
    """
    if solver not in SOLVERS:
        raise EvaluationError(f"solver={solver!r}; use one of {list(SOLVERS)} (--solver)")
    rt = Runtime.of(cluster)
    cache_mb, scratch = rt.cache_mb, rt.scratch
    if cache_mb is not None and (isinstance(cache_mb, bool) or not isinstance(cache_mb, (int, float, np.number))
                                 or not cache_mb > 0 or not math.isfinite(cache_mb)):
        raise EvaluationError(f"--cache-mb {cache_mb!r} must be a positive number of megabytes, e.g. --cache-mb 2000")
    memory = fit_memory(rt)
    budget = memory.per_task_mb
    cache = float(cache_mb) / max(1, memory.tasks) if cache_mb is not None else default_cache_mb(budget)
    need = in_memory_mb(n_train, n_test, nested_folds)
    used = solver if solver != "auto" else ("libsvm" if need <= budget else "smo")
    if used == "smo" and n_classes > 2 and multiclass == "ovo":
        if solver == "smo":
            raise EvaluationError("--solver smo trains one-vs-rest only; use --multiclass ovr, or --solver libsvm")
        raise EvaluationError(f"K(train, train) would need {need:,.0f} MB in memory, over the {budget:,.0f} MB "
                              "budget, and the bounded-memory solver (smo) trains one-vs-rest only. Fix: use "
                              "--multiclass ovr, or raise --memory-mb")
    row_mb = 8 * n_train / 1e6
    if used == "smo" and cache < 2 * row_mb:
        raise EvaluationError(f"--cache-mb {cache:g} holds fewer than two kernel rows of {n_train} training examples "
                              f"({row_mb:.3f} MB each). Fix: pass --cache-mb {2 * row_mb + 0.001:.3f} or more")
    if memory.on_workers:
        if used == "libsvm" and need > budget:
            raise too_big("libsvm on K(train, train) in memory", need, memory, "--solver smo (or auto)")
        smo_need = cache + SMO_VECTORS * row_mb
        if used == "smo" and smo_need > budget:
            raise too_big(f"smo with a {cache:,.0f} MB row cache", smo_need, memory, "a smaller --cache-mb")
    return SolverPlan(solver, used, need, budget, cache, float(tol), None if scratch is None else absolute(scratch))


def needs_row_file(plan: SolverPlan, source, n_train: int) -> bool:
    """Whether smo under ``plan`` reads its rows from a row file: a store-backed source (and no row
    file written yet). Even when the cache holds every training row, the file pays: each fold
    would otherwise decompress again every store chunk its rows and its test block cross
    (bench/smo_scale.py, BENCHMARKS.md)."""
    return plan.used == "smo" and plan.row_file is None and store_backed(source) and n_train > 0


def smo_row_file(plan: SolverPlan, source, n_train: int):
    """``with smo_row_file(plan, source, n_train) as plan:`` ``plan`` with the run's kernel row file
    (written here when :func:`needs_row_file`; removed when the block ends, also on error)."""
    return _PlanRows(plan, source, n_train)


class _PlanRows:
    def __init__(self, plan, source, n_train):
        self.cm = row_file(source, plan.scratch, needs_row_file(plan, source, n_train))
        self.plan = plan

    def __enter__(self):
        rf = self.cm.__enter__()
        return self.plan if rf is None else replace(self.plan, row_file=rf)

    def __exit__(self, *exc):
        return self.cm.__exit__(*exc)


@dataclass
class ProblemTask:
    """One binary problem of an smo fit on all training positions ``train`` of ``ref``'s source."""

    ref: SourceRef
    y: np.ndarray        # labels of ``train``
    train: np.ndarray
    positive: object     # the class labelled +1
    box: np.ndarray      # per-example C
    cache_mb: float
    tol: float
    row_file: object = None  # the run's kernel row file (:func:`smo_row_file`), if any


def solve_problem(task: ProblemTask):
    """``(support positions, dual coefficients alpha_t y_t, intercept -rho)`` of one smo problem."""
    rows = RowCache(task.ref.open(), task.train, task.cache_mb, row_file=task.row_file)
    yc = np.where(task.y == task.positive, 1.0, -1.0)
    sol = solve_binary(rows, yc, task.box, tol=task.tol)
    if not sol.converged:
        raise EvaluationError(f"smo did not converge for class {task.positive!r} in {sol.iterations} iterations; "
                              "raise the tolerance (tol) or use --solver libsvm")
    sv = np.flatnonzero(sol.alpha > 0)
    return sv, (sol.alpha * yc)[sv], -sol.rho


def fit_smo_functions(source, y, classes, C: float, class_weight=None, plan: SolverPlan | None = None,
                      cluster=None) -> list:
    """The decision functions of an smo SVM on all examples of ``source`` (labels ``y``): binary
    (``classes[1]`` positive, as SVC) or one per class (one-vs-rest, class weights as in
    :func:`~gramtile.pipeline.learn.fits.run_chain`). One-vs-rest problems are independent tasks on ``cluster``
    (a profile name, address or :class:`~gramtile.pipeline.compute.runtime.Runtime`), each reading its rows from the store.

    Returns
    -------
    list of (support positions, coefficients, intercept), one per decision function
    """
    plan = plan or plan_solver("smo", source.n, 0, cluster)
    y = np.asarray(y)
    train = np.arange(source.n, dtype=np.int64)
    check_complete(source)
    ref = SourceRef(local=source) if runs_here(cluster) else source_ref(source)
    binary = len(classes) == 2
    tasks = []
    for p in ([classes[1]] if binary else list(classes)):
        yc = np.where(y == p, 1.0, -1.0)
        box = class_C(y, C, class_weight) if binary or isinstance(class_weight, dict) else class_C(yc, C, class_weight)
        tasks.append(ProblemTask(ref, y, train, p, box, plan.cache_mb, plan.tol))
    with smo_row_file(plan, source, train.size) as plan:
        for t in tasks:
            t.row_file = plan.row_file
        return run_tasks(solve_problem, tasks, cluster=cluster, desc="train", bar=Runtime.of(cluster).progress)


# ---- evaluation: every independent fit a task ----------------------------------------------------

def evaluate(source, labels, splits, model: str = "svm", C=(1.0,), class_weight=None, multiclass: str = "ovr",
             epochs: int = 2, seed=None, kernel: str = "kernel", positive=None,
             select: str = "test", inner_folds: int = 3, inner_seed: int = 0,
             inner_metric: str = "accuracy", solver: str | SolverPlan = "auto", tol: float = 1e-3,
             cluster=None) -> Evaluation:
    """Fit and score a model on each split, reading two kernel blocks per split.

    Parameters
    ----------
    source : KernelSource
        n x n kernel over all labelled examples.
    labels : sequence, shape (n,)
    splits : list of Split
        k-fold splits (:func:`~gramtile.pipeline.learn.folds.stratified_kfold`) or one fixed split.
    model : {"svm", "perceptron"}
    C : float or sequence of float
        SVM regularisation grid (ignored by the perceptron).
    class_weight : None, "balanced" or dict label -> weight
        SVC's ``class_weight`` (ignored by the perceptron).
    multiclass : {"ovr", "ovo"}
        SVM multi-class scheme for more than two classes (the perceptron is always one-vs-rest).
    epochs : int
        Perceptron passes over the training data.
    seed : int or None
        Perceptron visiting order (None: data order, deterministic).
    kernel : str
        Name written into every row.
    positive : label or None
        Positive class of a binary task (default :func:`positive_class`).
    select : {"test", "nested"}
        With several C: score every C on the test parts (``"test"``, one row per C, default),
        or choose C per split on ``inner_folds`` stratified folds (seed ``inner_seed``) of its
        training part only (``"nested"``, one row), by ``inner_metric`` (accuracy, f1, macro_f1).
    solver : {"auto", "libsvm", "smo"} or SolverPlan
        SVM solver (:func:`plan_solver`): scikit-learn's SVC on K(train, train) in memory, or
        :mod:`~gramtile.pipeline.learn.smo` over kernel rows read through the Runtime's
        ``cache_mb``; ``auto``: libsvm when its blocks fit the memory of one fit where the fits
        run (:func:`~gramtile.pipeline.learn.parallel.fit_memory`), else smo. The perceptron
        always reads its blocks into memory. The choice is logged as one line.
    tol : float
        smo's stopping tolerance (libsvm keeps SVC's default, also 1e-3).
    cluster : str or Runtime
        Run every fit as a task where this runtime runs its tasks (a profile name, a scheduler
        address or a :class:`~gramtile.pipeline.compute.runtime.Runtime`)
        (:func:`~gramtile.pipeline.learn.parallel.run_tasks`; the tasks of
        :func:`~gramtile.pipeline.learn.fits.split_tasks`); each task opens the stores itself and
        reads its own blocks. Results are those of the serial run. None: in this process. The
        Runtime's settings apply: ``progress`` (one bar over every fit), ``memory_mb``,
        ``cache_mb`` and ``scratch`` (where smo writes the run's kernel row file when its cache
        cannot hold every training row of a store source; :mod:`~gramtile.pipeline.learn.rowfile`).

    Returns
    -------
    Evaluation
    """
    if multiclass not in MULTICLASS:
        raise EvaluationError(f"multiclass={multiclass!r}; use one of {list(MULTICLASS)}")
    if select not in SELECT:
        raise EvaluationError(f"select={select!r}; use one of {list(SELECT)}")
    grid = settings_for(model, C, epochs)
    nested = model == "svm" and len(grid) > 1 and select == "nested"
    c_grid = [s.C for s in grid]
    y, splits = check_inputs(source, labels, splits)
    classes = sorted(np.unique(y).tolist())
    if positive is None and len(classes) == 2:
        positive = positive_class(classes)
    check_classes(classes, positive, class_weight)
    if isinstance(solver, SolverPlan):
        plan = solver
    else:
        plan = plan_solver(solver if model == "svm" else "libsvm",  # the perceptron reads its blocks into memory
                           max(sp.train.size for sp in splits), max(sp.test.size for sp in splits),
                           cluster, inner_folds if nested else 0, multiclass, len(classes), tol=tol)
    if model == "svm":
        log.info(plan.line)
    check_complete(source)
    # in this process, read through the caller's own source; elsewhere, each worker opens the stores
    ref = SourceRef(local=source) if runs_here(cluster) else source_ref(source)
    run = uuid.uuid4().hex
    # smo over a store reads its kernel rows from one row file, written here for every fit of the run
    # and removed when they end (also on error)
    rows_cm = smo_row_file(plan if model == "svm" else replace(plan, used="libsvm"), source,
                           max(sp.train.size for sp in splits))
    plan = rows_cm.__enter__()
    exc = (None, None, None)
    try:
        common = dict(class_weight=class_weight, multiclass=multiclass, seed=seed, plan=plan)
        inner = [inner_splits(y, sp, inner_folds, inner_seed, positive, class_weight) for sp in splits] if nested \
            else []
        # one bar over every fit of both waves (nested: the inner fits, then one fit per split)
        n_fits = sum(len(isplits) * n_tasks(plan, grid, cl) for isplits, cl, _ in inner) + \
            len(splits) * n_tasks(plan, [Setting("svm", 1.0)] if nested else grid, classes)
        pb = progress_bar(n_fits, "fit", "evaluate", disable=not Runtime.of(cluster).progress or n_fits < 2)
        opts = dict(cluster=cluster, bar=pb, desc="evaluate")
        try:
            # every fit is one run of tasks: nested, the inner fits of every split first; as soon as
            # a split's inner fits are in, its C is chosen and its final fit starts (no barrier
            # between the inner fits of all splits and the final ones)
            tasks, reads, where, inner_got = [], [None] * len(splits), {}, {}
            chosen = [None] * len(splits) if nested else []
            fit_grid = [None] * len(splits) if nested else [grid] * len(splits)
            todo, inner_reads = [0] * len(splits), [[] for _ in splits]

            def final(i):
                """The tasks of split i on its whole training part (the grid, or the C chosen for it)."""
                sp = splits[i]
                t, asm = split_tasks(ref, run, y, sp.train, sp.test, fit_grid[i], classes, **common, name=sp.name)
                reads[i] = (len(tasks), len(t), asm)
                where.update({len(tasks) + j: ("final", i) for j in range(len(t))})
                todo[i] = len(t)
                tasks.extend(t)
                return t

            def choose(i):
                """Split i's C, from the pooled predictions of its inner fits."""
                isplits, cl, pos = inner[i]
                fits = [list(zip(grid, [{}] * len(grid), asm([inner_got[a + q] for q in range(m)])))
                        for a, m, asm in inner_reads[i]]
                ev = assemble(y, [Split(te, te, "inner") for _, te in isplits], grid, fits, cl, pos, "inner",
                              class_weight, multiclass)
                return best_C(ev.rows, inner_metric)

            for i, sp in enumerate(splits):
                if not nested:
                    final(i)
                    continue
                isplits, cl, _ = inner[i]
                for k, (tr, te) in enumerate(isplits):
                    t, asm = split_tasks(ref, run, y, tr, te, grid, cl, **common, name=f"{sp.name} inner {k}")
                    inner_reads[i].append((len(tasks), len(t), asm))
                    where.update({len(tasks) + j: ("inner", i) for j in range(len(t))})
                    tasks += t
                todo[i] = sum(m for _, m, _ in inner_reads[i])

            def done(j, r):
                kind, i = where[j]
                todo[i] -= 1
                if kind == "inner":
                    inner_got[j] = r
                    if todo[i] == 0:
                        chosen[i] = choose(i)
                        fit_grid[i] = [Setting("svm", chosen[i])]
                        return final(i)
                elif todo[i] == 0:
                    sp = splits[i]
                    log.info(f"  {sp.name}: trained on {sp.train.size}, tested on {sp.test.size}")
                return None

            results = run_fits(tasks, on_done=done, **opts)  # run_fits copies: final() extends this list
        finally:
            pb.close()
            forget_blocks()
            clear_chunk_cache()
    except BaseException:
        exc = sys.exc_info()
        raise
    finally:
        rows_cm.__exit__(*exc)
    fits = []
    for (a, m, asm), g, c in zip(reads, fit_grid, chosen or [None] * len(splits)):
        extra = {"C_chosen": c} if nested else {}
        fits.append(list(zip(g, [extra] * len(g), asm(results[a:a + m]))))
    res = assemble(y, splits, [Setting("svm", None)] if nested else grid, fits, classes, positive, kernel,
                   class_weight, multiclass, nested=nested, c_grid=c_grid, inner_folds=inner_folds)
    res.solver = plan.to_dict() if model == "svm" else None
    return res


def inner_splits(y, sp, folds: int, seed: int, positive, class_weight):
    """The inner folds of nested C selection in ``sp``'s training part, as (train, test) positions of
    the source, with the classes and positive class of that part (as :func:`choose_C_source`)."""
    ytr = y[sp.train]
    counts = np.unique(ytr, return_counts=True)[1]
    k = int(min(folds, counts.min()))
    if k < 2:
        raise EvaluationError(f"nested C selection needs at least 2 training examples of every class; one class "
                              f"has {int(counts.min())}. Give one --C, or --C-on-test")
    inner = stratified_kfold(ytr, k, seed)
    check_inputs(SimpleNamespace(n=ytr.size), ytr, inner)
    cl = sorted(np.unique(ytr).tolist())
    pos = positive if positive is not None and positive in set(ytr.tolist()) else None
    if pos is None and len(cl) == 2:
        pos = positive_class(cl)
    check_classes(cl, pos, class_weight)
    return [(sp.train[s.train], sp.train[s.test]) for s in inner], cl, pos


def best_C(rows, metric: str) -> float:
    """The C of the best row by ``metric`` (ties to the smaller C)."""
    if metric not in rows[0]:
        raise EvaluationError(f"C selection metric {metric!r} is not a result column; use accuracy, f1 or macro_f1")
    return float(max(rows, key=lambda r: (r[metric], -r["C"]))["C"])


def assemble(y, splits, grid, fits, classes, positive, kernel, class_weight, multiclass, nested: bool = False,
             c_grid=(), inner_folds: int = 0) -> Evaluation:
    """The :class:`Evaluation` of per-split fits: ``fits[i]`` lists ``(setting fitted, extra row
    fields, predictions of splits[i].test)`` in the order of ``grid``; rows pool the predictions
    over the splits in split order."""
    res = Evaluation()
    pooled = {_label(s): ([], []) for s in grid}
    fold_acc = {_label(s): [] for s in grid}
    chosen = []
    for sp, split_fits in zip(splits, fits):
        for s, (fit_s, extra, pred) in zip(grid, split_fits):
            if nested:
                chosen.append(fit_s.C)
            row, _ = prediction_scores(y[sp.test], pred, classes, positive)
            fold_acc[_label(s)].append(row["accuracy"])
            res.fold_rows.append({**_base_row(kernel, fit_s, class_weight, multiclass, len(classes)), **extra,
                                  "split": sp.name, "n_train": int(sp.train.size), "n_test": int(sp.test.size),
                                  **row})
            pooled[_label(s)][0].append(sp.test)
            pooled[_label(s)][1].append(pred)
    for s in grid:
        key = _label(s)
        idx, pred = np.concatenate(pooled[key][0]), np.concatenate(pooled[key][1])
        row, rep = prediction_scores(y[idx], pred, classes, positive)
        acc = np.asarray(fold_acc[key])
        out = {**_base_row(kernel, s, class_weight, multiclass, len(classes)), "splits": len(splits),
               "n_test": int(idx.size), **row,
               "accuracy_std": float(acc.std(ddof=1)) if acc.size > 1 else 0.0}
        if nested:
            out["C_grid"] = ",".join(f"{c:g}" for c in c_grid)
            out["C_chosen"] = ",".join(f"{c:g}" for c in chosen)
            out["selection"] = f"nested: {inner_folds}-fold on each training part"
        if len(classes) == 2:
            out["positive"] = positive
        res.rows.append(out)
        res.predictions[key] = (idx, pred)
        res.reports[key] = rep
    return res


def source_mrr(source, labels, ties: str = "pessimistic", block_rows: int = 256) -> float:
    """:func:`~gramtile.pipeline.learn.metrics.neighbour_mrr` over a kernel source, ``block_rows``
    full rows at a time, so the whole matrix never has to fit in memory."""
    y = np.asarray(labels)
    if len(y) != source.n:
        raise EvaluationError(f"there are {len(y)} labels for a kernel over {source.n} examples; the labels "
                              "must list every row of the Gram matrix in order (check --labels)")
    cols = np.arange(source.n)
    rr = [neighbour_rr(source.block(cols[a:a + block_rows], cols), cols[a:a + block_rows], y, ties)
          for a in range(0, source.n, block_rows)]
    return mean_rr(np.concatenate(rr))


def nested_order(y_train, seed: int = 0) -> np.ndarray:
    """A seeded order of training positions whose every prefix keeps the class proportions.

    Each example gets the key (rank within its class in a seeded shuffle + 0.5) / class size,
    and examples are sorted by key (ties broken by a seeded shuffle). Taking the first m of
    this order gives nested, roughly stratified training subsets, and any prefix of at least
    n_classes examples holds every class.
    """
    y = np.asarray(y_train)
    rng = np.random.default_rng(seed)
    key = np.empty(len(y))
    for c in np.unique(y):
        pos = np.flatnonzero(y == c)
        key[rng.permutation(pos)] = (np.arange(pos.size) + 0.5) / pos.size
    tiebreak = rng.permutation(len(y))
    return np.lexsort((tiebreak, key))


def learning_curve(source, labels, splits, fractions=(0.1, 0.25, 0.5, 1.0), model: str = "svm", C=(1.0,),
                   class_weight=None, multiclass: str = "ovr", epochs: int = 2, seed: int = 0,
                   perceptron_seed=None, kernel: str = "kernel", positive=None, cluster=None) -> list[dict]:
    """Scores as the training part grows: for each fraction f, train on the first
    ceil(f * n_train) examples of :func:`nested_order` of each split's training part.

    Every (split, fraction, setting) is a fit of :mod:`~gramtile.pipeline.learn.fits`, run as a
    task on ``cluster`` like :func:`evaluate`'s (the settings of one split and
    fraction packed into one task when there are enough of them), each reading ``K[train'][:, train']``
    and ``K[test][:, train']`` of its subset train'. ``seed`` fixes the nested subsets;
    ``perceptron_seed`` is the perceptron's visiting order as in :func:`evaluate` (other
    parameters as there). Results are those of the serial run.

    Returns
    -------
    list of dict
        One per (fraction, setting): ``fraction``, ``n_train`` (mean over splits), pooled
        metrics as in :func:`evaluate`, and ``accuracy_std`` over splits.
    """
    fr = sorted({float(f) for f in np.atleast_1d(fractions)})
    if not fr or fr[0] <= 0 or fr[-1] > 1:
        raise EvaluationError(f"learning curve fractions {fractions!r} must lie in (0, 1]; e.g. 0.1,0.25,0.5,1")
    if multiclass not in MULTICLASS:
        raise EvaluationError(f"multiclass={multiclass!r}; use one of {list(MULTICLASS)}")
    grid = settings_for(model, C, epochs)
    y, splits = check_inputs(source, labels, splits)
    classes = sorted(np.unique(y).tolist())
    if positive is None and len(classes) == 2:
        positive = positive_class(classes)
    check_classes(classes, positive, class_weight)
    check_complete(source)
    ref = SourceRef(local=source) if runs_here(cluster) else source_ref(source)
    run = uuid.uuid4().hex
    tasks, where = [], []  # where[j]: (split position, fraction, setting, training size) of task j
    for i, sp in enumerate(splits):
        order = sp.train[nested_order(y[sp.train], seed)]
        for f in fr:
            m = max(len(classes), math.ceil(f * sp.train.size))
            tr = order[:m]
            if len(np.unique(y[tr])) < 2:
                raise EvaluationError(f"{sp.name}: a training subset of {m} examples has one class; "
                                      "use larger learning-curve fractions")
            for s in grid:
                tasks.append(Fit(ref, run, y[tr], tr, sp.test, s, class_weight, multiclass, len(classes),
                                 perceptron_seed, f"{sp.name} curve {f:g}"))
                where.append((i, f, s, m))
    todo = np.bincount([w[0] for w in where], minlength=len(splits)).tolist()

    def done(j, _):
        i = where[j][0]
        todo[i] -= 1
        if todo[i] == 0:
            log.info(f"  {splits[i].name}: learning curve over {len(fr)} training sizes")

    pb = progress_bar(len(tasks), "fit", "learning curve", disable=not Runtime.of(cluster).progress or len(tasks) < 2)
    try:
        preds = run_fits(tasks, cluster=cluster, bar=pb, on_done=done,
                         desc="learning curve")
    finally:
        pb.close()
        forget_blocks()
        clear_chunk_cache()
    acc = {}  # (fraction, label) -> [idx list, pred list, accs, n_trains, setting], in split order
    for (i, f, s, m), pred in zip(where, preds):
        sp = splits[i]
        a = acc.setdefault((f, _label(s)), ([], [], [], [], s))
        a[0].append(sp.test)
        a[1].append(pred)
        a[2].append(float(np.mean(pred == y[sp.test])))
        a[3].append(m)
    rows = []
    for (f, _), (idx, pred, accs, ms, s) in acc.items():
        idx, pred = np.concatenate(idx), np.concatenate(pred)
        row, _ = prediction_scores(y[idx], pred, classes, positive)
        accs = np.asarray(accs)
        rows.append({**_base_row(kernel, s, class_weight, multiclass, len(classes)), "fraction": f,
                     "n_train": float(np.mean(ms)), "n_test": int(idx.size), **row,
                     "accuracy_std": float(accs.std(ddof=1)) if accs.size > 1 else 0.0})
    return rows


def select_C(source, labels, train, C, folds: int = 3, seed: int = 0, class_weight=None, multiclass: str = "ovr",
             positive=None, metric: str = "accuracy"):
    """Choose the SVM's C by stratified k-fold cross-validation inside the training examples only.

    ``K[train][:, train]`` is read once; the inner folds are cut from it in memory. Ties go to the
    smaller C (the simpler model).

    Returns
    -------
    (float, list of dict)
        The chosen C and the inner result rows (one per C, pooled over the inner folds).
    """

    tr = np.asarray(train, dtype=np.int64)
    y = np.asarray(labels)[tr]
    return choose_C(read_block(source, tr, tr, "train x train (C selection)"), y, C, folds=folds, seed=seed,
                    class_weight=class_weight, multiclass=multiclass, positive=positive, metric=metric)


def choose_C(K_train, y_train, C, folds: int = 3, seed: int = 0, class_weight=None, multiclass: str = "ovr",
             positive=None, metric: str = "accuracy"):
    """:func:`select_C` on an in-memory ``K[train][:, train]`` and its labels (ties to the smaller C).

    Returns
    -------
    (float, list of dict)
    """
    return choose_C_source(ArrayKernelSource(K_train), y_train, C, folds=folds, seed=seed, class_weight=class_weight,
                           multiclass=multiclass, positive=positive, metric=metric)


def choose_C_source(source, y_train, C, folds: int = 3, seed: int = 0, class_weight=None, multiclass: str = "ovr",
                    positive=None, metric: str = "accuracy", plan: SolverPlan | None = None):
    """:func:`choose_C` over a kernel source of the training examples only (positions 0..n-1), fitted
    with ``plan``'s solver (default libsvm in memory), in this process.

    Returns
    -------
    (float, list of dict)
    """
    y = np.asarray(y_train)
    counts = np.unique(y, return_counts=True)[1]
    k = int(min(folds, counts.min()))
    if k < 2:
        raise EvaluationError(f"nested C selection needs at least 2 training examples of every class; one class "
                              f"has {int(counts.min())}. Give one --C, or --C-on-test")
    if positive is not None and positive not in set(y.tolist()):
        positive = None
    if plan is None:
        plan = SolverPlan("libsvm", "libsvm", 0.0, 0.0, 0.0)
    ev = evaluate(source, y, stratified_kfold(y, k, seed), model="svm", C=C, class_weight=class_weight,
                  multiclass=multiclass, positive=positive, select="test", solver=plan)
    return best_C(ev.rows, metric), ev.rows
