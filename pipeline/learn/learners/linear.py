"""The linear SVM on explicit features (a feature store written by ``gramtile features``):
LinearSVC on the training rows in memory, or SGD over chunks of rows read from the store
(:mod:`gramtile.pipeline.learn.linear`), one-vs-rest.

Its data is a :class:`FeatureData`: a feature store and the rows a run learns from (positions
0..n-1 of the run are those rows). Each fit is a :class:`~gramtile.pipeline.learn.linear.FitTask`
(one split, one C) that reads its own rows.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.learners.base import Learner, Outcome, Param, Session
from gramtile.pipeline.learn.learners.svm import class_weight_text
from gramtile.pipeline.learn.linear import (
    CHUNK_ROWS,
    EPOCHS,
    LOSSES,
    SOLVERS,
    FitTask,
    describe,
    open_features,
    parse_rows,
    plan_solver,
)
from gramtile.pipeline.progress import log
from gramtile.pipeline.stores.feature_store import FeatureStore
from gramtile.pipeline.stores.storage import absolute


@dataclass
class FeatureData:
    """The rows ``idx`` of the feature store at ``path``."""

    path: str
    store: FeatureStore
    idx: np.ndarray

    @classmethod
    def open(cls, path, rows: str | None = None) -> FeatureData:
        """The feature store at ``path``, all its rows or ``rows`` (``"A:B"``, half-open)."""
        fs = open_features(path)
        return cls(absolute(path), fs, parse_rows(rows, fs.n))

    @property
    def n(self) -> int:
        return int(self.idx.size)

    @property
    def labels(self) -> list:
        return [self.store.labels[i] for i in self.idx]


class LinearSession(Session):
    def __init__(self, learner, data: FeatureData, plan: dict):
        self.learner, self.data, self.plan = learner, data, plan

    def tasks(self, y, train, test, points, problem, name):
        d, lr = self.data, self.learner
        tasks = [FitTask(d.path, d.store.uid, d.idx[np.asarray(train)], d.idx[np.asarray(test)], float(p["C"]),
                         self.plan["used"], problem.class_weight, int(lr.seed), int(lr.epochs), int(lr.chunk_rows),
                         lr.loss) for p in points]

        def assemble(results):
            return [Outcome(np.asarray(r["predicted"], dtype=object),
                            {"fit_seconds": r["fit_seconds"], "cpu_seconds": r["cpu_seconds"]}) for r in results]

        return tasks, assemble


class Linear(Learner):
    """The linear SVM on a feature store (``gramtile evaluate --features F.zarr --model linear``).

    Parameters
    ----------
    solver : {"auto", "liblinear", "sgd"}
    epochs, chunk_rows : SGD's passes and rows per ``partial_fit`` call
    loss : {"squared_hinge", "hinge"} (liblinear; SGD always uses the hinge)
    seed : LinearSVC's ``random_state`` and SGD's order
    """

    name = "linear"
    reads = "features"
    params = (Param("C", float, 1.0, "--C", "the linear SVM's C"),)
    multiclass = ("ovr",)
    class_weight = True
    summary_line = "a linear SVM (LinearSVC, or SGD over row chunks) on a feature store's explicit features"

    def __init__(self, solver: str = "auto", epochs: int = EPOCHS, chunk_rows: int = CHUNK_ROWS,
                 loss: str = "squared_hinge", seed: int = 0):
        if solver not in SOLVERS:
            raise EvaluationError(f"--linear-solver {solver!r}: choose one of {', '.join(SOLVERS)}")
        if loss not in LOSSES:
            raise EvaluationError(f"--linear-loss {loss!r}: choose one of {', '.join(LOSSES)}")
        self.solver, self.epochs, self.chunk_rows, self.loss, self.seed = solver, epochs, chunk_rows, loss, seed

    @classmethod
    def from_args(cls, args):
        return cls(solver=args.linear_solver, epochs=args.sgd_epochs, chunk_rows=args.sgd_chunk_rows,
                   loss=args.linear_loss, seed=getattr(args, "fold_seed", 0))

    def row(self, point, problem):
        return {"model": self.name, "C": point["C"], "class_weight": class_weight_text(problem.class_weight)}

    def summary(self, infos):
        return {"fit_seconds": round(sum(i["fit_seconds"] for i in infos), 3),
                "cpu_seconds": round(sum(i["cpu_seconds"] for i in infos), 3)}

    @contextmanager
    def session(self, source, problem, sizes, cluster):
        if not isinstance(source, FeatureData):
            raise EvaluationError("the linear learner reads a feature store (--features F.zarr, written by "
                                  "`gramtile features`), not a Gram store")
        plan = plan_solver(self.solver, source.store, sizes.n_train, problem.n_classes, cluster, self.chunk_rows)
        plan["loss"] = "hinge" if plan["used"] == "sgd" else self.loss
        log.info(describe(plan))
        yield LinearSession(self, source, plan)
