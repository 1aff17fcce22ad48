"""The SVM on kernel blocks: scikit-learn's SVC (libsvm) on K(train, train) in memory, or the smo
solver over kernel rows read through a bounded cache when the blocks would not fit
(:mod:`gramtile.pipeline.learn.solver`).

Multi-class: one-vs-rest (``OneVsRestClassifier``, or one smo problem per class) or SVC's native
one-vs-one (libsvm only). Along a C grid, smo solves each binary problem for every C in one task,
each C warm-started from the previous solution (:class:`~gramtile.pipeline.learn.fits.Chain`).
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.fits import BlockSession, Chain, combine_chains, kernel_ref
from gramtile.pipeline.learn.learners.base import Learner, Outcome, Param
from gramtile.pipeline.learn.solver import SOLVERS, SolverPlan, plan_solver, smo_row_file
from gramtile.pipeline.progress import log


def class_weight_text(class_weight) -> str | None:
    """Class weights as a result column: None, "balanced" or ``LABEL:W,...``."""
    if class_weight is None or isinstance(class_weight, str):
        return class_weight
    return ",".join(f"{k}:{v:g}" for k, v in class_weight.items())


class SVMSession(BlockSession):
    """Fits of the planned solver: one :class:`~gramtile.pipeline.learn.fits.Fit` per C (libsvm),
    or one :class:`~gramtile.pipeline.learn.fits.Chain` per binary problem along the C grid (smo)."""

    def __init__(self, learner, ref, solver: SolverPlan):
        super().__init__(learner, ref, solver.to_dict())
        self.solver = solver

    def tasks(self, y, train, test, points, problem, name):
        if self.solver.used != "smo":
            return super().tasks(y, train, test, points, problem, name)
        y = np.asarray(y)
        train, test = np.asarray(train, dtype=np.int64), np.asarray(test, dtype=np.int64)
        classes = list(problem.classes)
        Cs = tuple(sorted({float(p["C"]) for p in points}))
        binary = len(classes) == 2
        plan = self.solver
        tasks = [Chain(self.ref, y[train], train, test, p, binary, Cs, problem.class_weight, plan.cache_mb, plan.tol,
                       name, plan.row_file)
                 for p in ([classes[1]] if binary else classes)]

        def assemble(results):
            preds = combine_chains(results, classes, Cs)
            return [Outcome(preds[float(p["C"])]) for p in points]

        return tasks, assemble

    def n_tasks(self, points, problem):
        if self.solver.used == "smo":
            return 1 if problem.n_classes == 2 else problem.n_classes
        return len(points)


class SVM(Learner):
    """The SVM over a square kernel source (``gramtile evaluate --model svm``).

    Parameters
    ----------
    solver : {"auto", "libsvm", "smo"} or SolverPlan
        :func:`~gramtile.pipeline.learn.solver.plan_solver`; ``auto`` chooses libsvm when its
        blocks fit the memory of one fit where the fits run, else smo. The choice is logged.
    tol : float
        smo's stopping tolerance (libsvm keeps SVC's default, also 1e-3).
    """

    name = "svm"
    reads = "kernel"
    params = (Param("C", float, 1.0, "--C", "the regularisation C (larger: closer fit to the training data)"),)
    multiclass = ("ovr", "ovo")
    class_weight = True
    warm_start = True
    summary_line = "SVC(kernel='precomputed') on kernel blocks, or the smo solver over kernel rows beyond memory"

    def __init__(self, solver="auto", tol: float = 1e-3):
        if not isinstance(solver, SolverPlan) and solver not in SOLVERS:
            raise EvaluationError(f"solver={solver!r}; use one of {list(SOLVERS)} (--solver)")
        self.solver, self.tol = solver, tol

    @classmethod
    def from_args(cls, args):
        return cls(solver=args.solver)

    def estimator(self, point, problem):
        """scikit-learn's SVC on a precomputed kernel (one-vs-rest around it for ``ovr``)."""
        svc = optional.sklearn("svm").SVC(kernel="precomputed", C=point["C"], class_weight=problem.class_weight)
        if problem.n_classes > 2 and problem.multiclass == "ovr":
            return optional.sklearn("multiclass").OneVsRestClassifier(svc)
        return svc

    def row(self, point, problem):
        row = {"model": self.name, "C": point["C"], "class_weight": class_weight_text(problem.class_weight)}
        if problem.n_classes > 2:
            row["multiclass"] = problem.multiclass
        return row

    def plan(self, sizes, problem, cluster) -> SolverPlan:
        if isinstance(self.solver, SolverPlan):
            return self.solver
        return plan_solver(self.solver, sizes.n_train, sizes.n_test, cluster, sizes.nested_folds, problem.multiclass,
                           problem.n_classes, tol=self.tol)

    @contextmanager
    def session(self, source, problem, sizes, cluster):
        plan = self.plan(sizes, problem, cluster)
        log.info(plan.line)
        ref = kernel_ref(source, cluster)
        # smo over a store reads its kernel rows from one row file, written here for every fit of the run
        # and removed when the session ends (also on error)
        with smo_row_file(plan, source, sizes.n_train) as plan:
            yield SVMSession(self, ref, plan)
