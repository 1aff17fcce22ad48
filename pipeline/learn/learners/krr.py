"""Kernel ridge regression on kernel blocks: regularised least squares on real targets in the
kernel's feature space (scikit-learn's ``KernelRidge`` on a precomputed kernel).

The dual coefficients are a = (K + alpha I)^{-1} y and the prediction of x is K(x, train) a, with no
intercept (centre the targets first if their mean matters). Every training example is a support
example.
"""
from __future__ import annotations

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.learn.fits import BlockLearner
from gramtile.pipeline.learn.learners.base import Param


class RidgeRegressor:
    """Kernel ridge regression fitted on K(train, train) (real targets ``y``)."""

    def __init__(self, alpha: float = 1.0):
        self.alpha = alpha

    def fit(self, K, y) -> RidgeRegressor:
        ridge = optional.sklearn("kernel_ridge").KernelRidge(alpha=self.alpha, kernel="precomputed")
        ridge.fit(np.asarray(K, dtype=np.float64), np.asarray(y, dtype=np.float64))
        self.dual_coef_ = np.asarray(ridge.dual_coef_, dtype=np.float64).reshape(-1)
        return self

    def decision_function(self, K) -> np.ndarray:
        """The predictions of the rows of K(x, train)."""
        return np.asarray(K, dtype=np.float64) @ self.dual_coef_

    predict = decision_function

    def functions(self) -> list:
        """``(support positions, coefficients, intercept)`` of the one decision function."""
        return [(np.arange(self.dual_coef_.size), self.dual_coef_, 0.0)]


class KRR(BlockLearner):
    """Kernel ridge regression (``gramtile evaluate --model krr --alpha 0.1,1,10``)."""

    name = "krr"
    reads = "kernel"
    task_kinds = ("regression",)
    params = (Param("alpha", float, 1.0, "--alpha", "the ridge penalty (larger: smoother)"),)
    class_weight = False
    summary_line = "kernel ridge regression (least squares on real targets) on kernel blocks"

    def estimator(self, point, problem):
        return RidgeRegressor(point["alpha"])
