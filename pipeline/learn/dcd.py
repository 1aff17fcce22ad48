"""Linear SVM by dual coordinate descent over rows of one feature array, in place.

LIBLINEAR's solver for the L2-regularised L1-loss (hinge) and L2-loss (squared hinge) SVM in
the dual (Hsieh, Chang, Lin, Keerthi & Sundararajan 2008, "A dual coordinate descent method for
large-scale linear SVM"; ``solve_l2r_l1l2_svc`` in LIBLINEAR)::

    min_a  f(a) = 1/2 a^T Qbar a - e^T a,   0 <= a_i <= U_i,   Qbar = Q + D,  Q_ij = y_i y_j x_i . x_j

hinge: U_i = C_i, D = 0; squared hinge: U_i = inf, D_ii = 1 / (2 C_i). The primal weight
vector w = sum_i a_i y_i x_i is kept up to date, so one coordinate step costs two dot products
of length d. Each outer iteration visits the active coordinates in a random order; shrinking
drops a coordinate at a bound whose projected gradient is beyond the previous iteration's
extremes, and the loop stops when max PG - min PG <= ``tol`` over the active set, re-checking
all coordinates once before it stops (LIBLINEAR's ``eps``, scikit-learn's ``tol``).

The bias is LIBLINEAR's (and scikit-learn's ``intercept_scaling``): every x gets one more
feature of value ``bias`` whose weight is regularised like the others; the intercept is
``bias * w[d]``. Class weights scale C per class. One-vs-rest for more than two classes: class
k against the rest with C_i = C * weight[k] on its examples and C on the others, as LIBLINEAR;
two classes train one function, positive for the second class (scikit-learn's order).

Nothing is copied: the examples are rows ``X[rows]`` of one C-contiguous float64 array, read in
place through the index array, so a caller holds one n x d feature array for all its splits and
classes (:mod:`gramtile.pipeline.learn.nystroem`). Extra memory is O(len(rows) + d) per class.
Agreement with ``sklearn.svm.LinearSVC(dual=True)`` (same problem, different random order) is
checked in ``tests/learn/test_dcd.py``: dual objective equal to minus the primal objective of
scikit-learn's solution within 1e-6 relative, >= 99.9 % identical decisions.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from gramtile.pipeline.learn.errors import EvaluationError

LOSSES = ("hinge", "squared_hinge")


@njit(cache=True, nogil=True)
def _dcd(X, rows, y, Cp, Cn, l2loss, bias, eps, max_iter, seed, w, alpha):
    """LIBLINEAR's solve_l2r_l1l2_svc on X[rows] (labels y = +-1), updating w (d + 1) and alpha
    in place from their given values (w must equal sum alpha_i y_i x_i). Returns the outer
    iterations run and whether the stopping condition was met."""
    n = rows.size
    d = X.shape[1]
    inf = np.inf
    if l2loss:
        diag_p, diag_n, ub_p, ub_n = 0.5 / Cp, 0.5 / Cn, inf, inf
    else:
        diag_p, diag_n, ub_p, ub_n = 0.0, 0.0, Cp, Cn
    QD = np.empty(n)
    index = np.arange(n)
    for s in range(n):
        i = rows[s]
        q = bias * bias
        for k in range(d):
            q += X[i, k] * X[i, k]
        QD[s] = q + (diag_p if y[s] > 0 else diag_n)
    np.random.seed(seed)
    active = n
    pgmax_old, pgmin_old = inf, -inf
    it = 0
    converged = False
    while it < max_iter:
        pgmax_new, pgmin_new = -inf, inf
        for s in range(active):
            j = s + np.random.randint(0, active - s)
            index[s], index[j] = index[j], index[s]
        s = 0
        while s < active:
            t = index[s]
            i = rows[t]
            yi = y[t]
            g = bias * w[d]
            for k in range(d):
                g += w[k] * X[i, k]
            if yi > 0:
                C, dg = ub_p, diag_p
            else:
                C, dg = ub_n, diag_n
            G = yi * g - 1.0 + alpha[t] * dg
            PG = 0.0
            a = alpha[t]
            if a == 0.0:
                if G > pgmax_old:
                    active -= 1
                    index[s], index[active] = index[active], index[s]
                    continue
                elif G < 0.0:
                    PG = G
            elif a == C:
                if G < pgmin_old:
                    active -= 1
                    index[s], index[active] = index[active], index[s]
                    continue
                elif G > 0.0:
                    PG = G
            else:
                PG = G
            if PG > pgmax_new:
                pgmax_new = PG
            if PG < pgmin_new:
                pgmin_new = PG
            if abs(PG) > 1.0e-12:
                na = min(max(a - G / QD[t], 0.0), C)
                alpha[t] = na
                step = (na - a) * yi
                for k in range(d):
                    w[k] += step * X[i, k]
                w[d] += step * bias
            s += 1
        it += 1
        if pgmax_new - pgmin_new <= eps:
            if active == n:
                converged = True
                break
            active = n
            pgmax_old, pgmin_old = inf, -inf
            continue
        pgmax_old, pgmin_old = pgmax_new, pgmin_new
        if pgmax_old <= 0.0:
            pgmax_old = inf
        if pgmin_old >= 0.0:
            pgmin_old = -inf
    return it, converged


@njit(cache=True, nogil=True)
def _decision(X, rows, coef, intercept):
    """(len(rows), k) decision values X[rows] @ coef.T + intercept, without copying X[rows]."""
    n, k, d = rows.size, coef.shape[0], coef.shape[1]
    out = np.empty((n, k))
    for s in range(n):
        i = rows[s]
        for c in range(k):
            v = intercept[c]
            for j in range(d):
                v += coef[c, j] * X[i, j]
            out[s, c] = v
    return out


@dataclass
class BinaryFit:
    """One binary problem's solution: ``w`` (d weights then the bias weight), dual ``alpha``,
    outer ``iterations``, ``converged``, the dual objective f(alpha) (to be minimised) and the
    primal objective of ``w`` (their sum is the duality gap, >= 0)."""

    w: np.ndarray
    alpha: np.ndarray
    iterations: int
    converged: bool
    dual_objective: float
    primal_objective: float


def _check_rows(X, rows):
    if not (isinstance(X, np.ndarray) and X.dtype == np.float64 and X.ndim == 2 and X.flags.c_contiguous):
        raise EvaluationError("dcd: the features must be one C-contiguous float64 array (n, d); "
                              "pass np.ascontiguousarray(X, dtype=np.float64)")
    rows = np.asarray(rows, dtype=np.int64)
    if rows.ndim != 1 or rows.size == 0:
        raise EvaluationError("dcd: rows must be a non-empty 1-d array of row positions")
    if rows.min() < 0 or rows.max() >= X.shape[0]:
        raise EvaluationError(f"dcd: row positions must lie in 0..{X.shape[0] - 1}")
    return rows


def objectives(X, rows, y, w, alpha, Cp, Cn, loss, bias):
    """(dual f(alpha), primal P(w)) of the binary problem on X[rows], labels y = +-1."""
    l2 = loss == "squared_hinge"
    Ci = np.where(y > 0, Cp, Cn)
    margin = y * _decision(X, rows, w[None, :-1], np.array([bias * w[-1]]))[:, 0]
    slack = np.maximum(0.0, 1.0 - margin)
    ww = float(w @ w)
    primal = 0.5 * ww + float(np.sum(Ci * (slack * slack if l2 else slack)))
    diag = 0.5 / Ci if l2 else np.zeros_like(Ci)
    dual = 0.5 * ww + 0.5 * float(np.sum(diag * alpha * alpha)) - float(alpha.sum())
    return dual, primal


def fit_binary(X, rows, y, Cp: float, Cn: float, loss: str = "hinge", bias: float = 1.0, tol: float = 1e-4,
               max_iter: int = 1000, seed: int = 0) -> BinaryFit:
    """Solve one binary problem on X[rows] with labels ``y`` (+1 / -1, one per row)."""
    rows = _check_rows(X, rows)
    if loss not in LOSSES:
        raise EvaluationError(f"dcd: loss={loss!r}; use one of {LOSSES}")
    y = np.asarray(y, dtype=np.float64)
    if y.shape != rows.shape or not np.all(np.abs(y) == 1):
        raise EvaluationError("dcd: y must hold +1 or -1 for each row")
    if not (Cp > 0 and Cn > 0):
        raise EvaluationError(f"dcd: C must be positive (got {Cp!r}, {Cn!r})")
    w = np.zeros(X.shape[1] + 1)
    alpha = np.zeros(rows.size)
    it, ok = _dcd(X, rows, y, float(Cp), float(Cn), loss == "squared_hinge", float(bias), float(tol),
                  int(max_iter), int(seed), w, alpha)
    dual, primal = objectives(X, rows, y, w, alpha, Cp, Cn, loss, bias)
    return BinaryFit(w, alpha, int(it), bool(ok), dual, primal)


@dataclass
class LinearSVM:
    """A fitted one-vs-rest (or binary) linear SVM: ``coef`` (k, d), ``intercept`` (k,),
    ``classes`` (sorted), per-function ``fits`` (:class:`BinaryFit` without alpha kept)."""

    coef: np.ndarray
    intercept: np.ndarray
    classes: list
    fits: list

    @property
    def converged(self) -> bool:
        return all(f.converged for f in self.fits)

    def decision_function(self, X, rows) -> np.ndarray:
        """Decision values of X[rows]: (len(rows),) for two classes, else (len(rows), k)."""
        rows = _check_rows(X, rows)
        D = _decision(X, rows, self.coef, self.intercept)
        return D[:, 0] if len(self.classes) == 2 else D

    def predict(self, X, rows) -> np.ndarray:
        D = self.decision_function(X, rows)
        cls = np.asarray(self.classes, dtype=object)
        return cls[(D > 0).astype(np.int64)] if len(self.classes) == 2 else cls[np.argmax(D, axis=1)]


def fit(X, rows, labels, C: float = 1.0, class_weight=None, loss: str = "hinge", bias: float = 1.0,
        tol: float = 1e-4, max_iter: int = 1000, seed: int = 0) -> LinearSVM:
    """Train a linear SVM on X[rows] with ``labels`` (one per row), as ``LinearSVC(dual=True)``.

    Parameters
    ----------
    class_weight : dict or None
        C multiplier per class label ({label: weight}); "balanced" is n / (k * n_class).
    tol, max_iter :
        LIBLINEAR's ``eps`` and outer-iteration limit (scikit-learn's ``tol`` and ``max_iter``).
    """
    rows = _check_rows(X, rows)
    y = np.asarray(labels)
    if y.shape != rows.shape:
        raise EvaluationError(f"dcd: {y.size} labels for {rows.size} rows")
    classes = sorted(np.unique(y).tolist())
    if len(classes) < 2:
        raise EvaluationError(f"dcd: the training rows have one class only ({classes!r}); training needs two")
    if class_weight == "balanced":
        counts = {c: int(np.sum(y == c)) for c in classes}
        cw = {c: y.size / (len(classes) * counts[c]) for c in classes}
    else:
        cw = {c: 1.0 for c in classes}
        for c, v in (class_weight or {}).items():
            if c not in cw:
                raise EvaluationError(f"dcd: class_weight names class {c!r}, not among the labels {classes!r}")
            cw[c] = float(v)
    C = float(C)
    if not C > 0:
        raise EvaluationError(f"dcd: C={C!r}; give a positive number")
    jobs = [(classes[1], C * cw[classes[1]], C * cw[classes[0]])] if len(classes) == 2 else \
        [(c, C * cw[c], C) for c in classes]
    coef, icpt, fits = [], [], []
    for pos, Cp, Cn in jobs:
        f = fit_binary(X, rows, np.where(y == pos, 1.0, -1.0), Cp, Cn, loss, bias, tol, max_iter, seed)
        coef.append(f.w[:-1])
        icpt.append(bias * f.w[-1])
        f.alpha = None
        fits.append(f)
    return LinearSVM(np.asarray(coef), np.asarray(icpt), classes, fits)
