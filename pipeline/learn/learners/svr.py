"""Epsilon-support vector regression on kernel blocks (SVM-light ``-z r``; scikit-learn's ``SVR``
with a precomputed kernel, libsvm inside).

The fit minimises 1/2 |w|^2 + C sum_i max(0, |y_i - f(x_i)| - epsilon) with f(x) = w.phi(x) + b:
errors inside the tube of half-width ``epsilon`` cost nothing. Its dual coefficients beta_i
(alpha_i - alpha_i^*) lie in [-C, C]; an example off the support lies inside the tube, a support
example with |beta_i| < C on its edge. The prediction of x is sum_i beta_i K(x, x_i) + b.
"""
from __future__ import annotations

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.learn.fits import BlockLearner
from gramtile.pipeline.learn.learners.base import Param


class SVRegressor:
    """Epsilon-SVR fitted on K(train, train) (real targets ``y``)."""

    def __init__(self, C: float = 1.0, epsilon: float = 0.1, tol: float = 1e-3):
        self.C = C
        self.epsilon = epsilon
        self.tol = tol

    def fit(self, K, y) -> SVRegressor:
        svr = optional.sklearn("svm").SVR(kernel="precomputed", C=self.C, epsilon=self.epsilon, tol=self.tol)
        svr.fit(np.asarray(K, dtype=np.float64), np.asarray(y, dtype=np.float64))
        self.support_ = np.asarray(svr.support_, dtype=np.int64)
        self.dual_coef_ = np.asarray(svr.dual_coef_, dtype=np.float64).reshape(-1)
        self.intercept_ = float(np.asarray(svr.intercept_).reshape(-1)[0])
        self.n_train_ = int(np.asarray(K).shape[0])
        return self

    def decision_function(self, K) -> np.ndarray:
        """The predictions of the rows of K(x, train)."""
        K = np.asarray(K, dtype=np.float64)
        return K[:, self.support_] @ self.dual_coef_ + self.intercept_

    predict = decision_function

    def functions(self) -> list:
        """``(support positions, coefficients, intercept)`` of the one decision function."""
        return [(self.support_, self.dual_coef_, self.intercept_)]


class SVR(BlockLearner):
    """Epsilon-SVR (``gramtile evaluate --model svr --C 0.1,1,10 --epsilon 0.05,0.1``)."""

    name = "svr"
    reads = "kernel"
    task_kinds = ("regression",)
    params = (Param("C", float, 1.0, "--C", "the SVM penalty (larger: fewer margin errors)"),
              Param("epsilon", float, 0.1, "--epsilon", "the half-width of SVR's insensitive tube, in target units"))
    class_weight = False
    summary_line = "epsilon-support vector regression (libsvm's SVR) on kernel blocks"

    def estimator(self, point, problem):
        return SVRegressor(point["C"], point["epsilon"])
