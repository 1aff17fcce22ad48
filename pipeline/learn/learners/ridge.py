"""Kernel ridge classification: regularised least squares on +-1 targets in the kernel's feature
space, one-vs-rest (Rifkin, "Everything old is new again", 2002; scikit-learn's ``KernelRidge`` on a
precomputed kernel).

With targets Y (n x k: +1 for the class, -1 otherwise; one column, for the larger class, when there
are two classes, as SVC), the dual coefficients are A = (K + alpha I)^{-1} Y and the decision values
of x are K(x, train) A, with no intercept. Two classes: the larger class where the score is > 0;
more: the class of the largest score, ties to the later class (as one-vs-rest SVC). Every training
example is a support example, so a saved model holds them all.
"""
from __future__ import annotations

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.learn.fits import BlockLearner
from gramtile.pipeline.learn.learners.base import Param


class RidgeClassifier:
    """One-vs-rest kernel ridge regression to +-1 targets, fitted on K(train, train)."""

    def __init__(self, alpha: float = 1.0):
        self.alpha = alpha

    def fit(self, K, y) -> RidgeClassifier:
        y = np.asarray(y)
        self.classes_ = np.unique(y)
        self.scheme = "binary" if self.classes_.size == 2 else "ovr"
        cols = self.classes_[1:] if self.scheme == "binary" else self.classes_
        Y = np.where(y[:, None] == cols[None, :], 1.0, -1.0)
        ridge = optional.sklearn("kernel_ridge").KernelRidge(alpha=self.alpha, kernel="precomputed")
        self.dual_coef_ = np.asarray(ridge.fit(np.asarray(K, dtype=np.float64), Y).dual_coef_).reshape(y.size, -1)
        return self

    def decision_function(self, K) -> np.ndarray:
        S = np.asarray(K, dtype=np.float64) @ self.dual_coef_
        return S[:, 0] if self.scheme == "binary" else S

    def predict(self, K) -> np.ndarray:
        S = self.decision_function(K)
        cl = self.classes_
        if self.scheme == "binary":
            return np.where(S > 0, cl[1], cl[0])
        return cl[S.shape[1] - 1 - np.argmax(S[:, ::-1], axis=1)]

    def functions(self) -> list:
        """``(support positions, coefficients, intercept)`` of each decision function."""
        n = self.dual_coef_.shape[0]
        return [(np.arange(n), self.dual_coef_[:, j], 0.0) for j in range(self.dual_coef_.shape[1])]


class Ridge(BlockLearner):
    """Kernel ridge classification (``gramtile evaluate --model ridge --alpha 0.1,1,10``)."""

    name = "ridge"
    reads = "kernel"
    params = (Param("alpha", float, 1.0, "--alpha", "the ridge penalty (larger: smoother)"),)
    multiclass = ("ovr",)
    class_weight = False
    summary_line = "kernel ridge classification (least squares on +-1 targets, one-vs-rest) on kernel blocks"

    def estimator(self, point, problem):
        return RidgeClassifier(point["alpha"])

    def row(self, point, problem):
        return {"model": self.name, "alpha": point["alpha"]}
