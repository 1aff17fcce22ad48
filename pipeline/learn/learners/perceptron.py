"""The kernel voted perceptron (:mod:`gramtile.pipeline.learn.perceptron`) on kernel blocks in
memory, one-vs-rest for several classes; its visiting order is the data order, or a seeded
shuffle (the problem's ``seed``)."""
from __future__ import annotations

from contextlib import contextmanager

from gramtile.pipeline.learn.fits import BlockSession, kernel_ref
from gramtile.pipeline.learn.learners.base import Learner, Param
from gramtile.pipeline.learn.perceptron import VotedPerceptron
from gramtile.pipeline.learn.solver import plan_solver


class Perceptron(Learner):
    """The kernel voted perceptron (``gramtile evaluate --model perceptron``)."""

    name = "perceptron"
    reads = "kernel"
    params = (Param("epochs", int, 2, "--epochs", "passes over the training data"),)
    multiclass = ("ovr",)
    class_weight = False
    summary_line = "the kernel voted perceptron (Freund and Schapire) on kernel blocks"

    def estimator(self, point, problem):
        return VotedPerceptron(epochs=point["epochs"], seed=problem.seed)

    def row(self, point, problem):
        return {"model": self.name, "C": None, "epochs": point["epochs"]}

    @contextmanager
    def session(self, source, problem, sizes, cluster):
        # the perceptron reads its two blocks into memory: refused on workers where they cannot fit
        plan_solver("libsvm", sizes.n_train, sizes.n_test, cluster, sizes.nested_folds)
        yield BlockSession(self, kernel_ref(source, cluster))
