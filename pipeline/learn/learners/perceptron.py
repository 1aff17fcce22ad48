"""The kernel voted perceptron (:mod:`gramtile.pipeline.learn.perceptron`) on kernel blocks in
memory, one-vs-rest for several classes; its visiting order is the data order, or a seeded
shuffle (the problem's ``seed``)."""
from __future__ import annotations

from gramtile.pipeline.learn.fits import BlockLearner
from gramtile.pipeline.learn.learners.base import Param
from gramtile.pipeline.learn.perceptron import VotedPerceptron


class Perceptron(BlockLearner):
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
