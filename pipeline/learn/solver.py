"""The SVM solver of a run: libsvm on K(train, train) in memory, or smo over kernel rows.

:func:`plan_solver` chooses it from the memory of one fit where the fits run (the Runtime's
workers, or this process): scikit-learn's SVC (libsvm) on the two blocks held in memory, or, when
K(train, train) would not fit (or with ``solver="smo"``), :mod:`gramtile.pipeline.learn.smo` over
kernel rows read through a bounded cache; the prediction then reads K(test, support vectors) in
bands. Over a Gram store, smo reads its rows from one row file per run
(:mod:`gramtile.pipeline.learn.rowfile`, :func:`smo_row_file`), written before the tasks start and
removed when they end. :func:`fit_smo_functions` trains the final smo model of ``gramtile train``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.choices import SVM_SOLVERS
from gramtile.pipeline.learn.errors import EvaluationError
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
from gramtile.pipeline.stores.storage import absolute

#: (:mod:`gramtile.pipeline.learn.smo` over kernel rows read through a cache of ``cache_mb``),
#: ``auto`` (libsvm when its blocks fit the memory budget, else smo).
SOLVERS = SVM_SOLVERS
#: libsvm's own kernel cache (SVC's ``cache_size``, MB), counted in the in-memory estimate.
LIBSVM_CACHE_MB = 200.0
#: smo's working vectors beside its row cache (alpha, gradient, labels, ...), in kernel rows.
SMO_VECTORS = 8


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
                nested_folds: int = 0, multiclass: str = "ovr", n_classes: int = 2, tol: float = 1e-3,
                in_memory_fix: str = "--solver smo (or auto)", in_memory: str = "libsvm") -> SolverPlan:
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
    in_memory_fix : what to do when K(train, train) cannot fit one fit's memory on a worker (the
        SVM's bounded-memory solver; a learner that has none says what else helps)
    in_memory : the learner that would hold K(train, train), for that message

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
            raise too_big(f"{in_memory} on K(train, train) in memory", need, memory, in_memory_fix)
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
