"""Exact kernel SVM training with bounded memory: SMO over kernel rows read through a cache.

The C-SVM dual (Boser, Guyon & Vapnik 1992; Platt 1999)::

    min_a  1/2 a^T Q a - e^T a     s.t.  0 <= a_i <= C_i,  y^T a = 0,   Q_ij = y_i y_j K(x_i, x_j)

solved by sequential minimal optimisation with LIBSVM's second-order working-set selection
(Fan, Chen & Lin 2005, WSS 2): each iteration picks i = argmax_{t in I_up} -y_t G_t and j the
t in I_low minimising -(b_it^2 / a_it), updates a_i, a_j analytically within the box and the
gradient G = Q a - e with two kernel rows, and stops when the maximal violation
m(a) - M(a) < ``tol`` (LIBSVM's ``-e``, scikit-learn's ``tol``). The bias is LIBSVM's rho
(the mean of y_t G_t over free support vectors, else the middle of the feasible interval), so the
decision function is f(x) = sum_t a_t y_t K(x_t, x) - rho, as ``SVC.decision_function``.

Memory does not grow with n^2: K(train, train) is never formed. Rows are read from the kernel
source (a Gram store, an in-memory matrix, a composed view) in *bands* of consecutive training
positions, a band being one ``block(rows, train)`` read (so a Gram store reads each chunk of a
band's tile row once), and kept in an LRU cache of at most ``cache_mb`` megabytes, as
SVM-light's ``-m`` and LIBSVM's ``-m``. Per iteration the solver touches two rows and O(n)
numbers; the Numba cores do the O(n) scans.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
from numba import njit

from gramtile.pipeline.learn.errors import EvaluationError

#: LIBSVM's tau: the curvature used where a pair's a_it is not positive.
TAU = 1e-12


class RowCache:
    """Kernel rows K(train[t], train) of a kernel source, read in bands through an LRU cache.

    Parameters
    ----------
    source : kernel source (``n`` and ``block(rows, cols)``)
    idx : int array
        The training examples (positions in ``source``); row t of this cache is example idx[t].
    cache_mb : float
        Budget for cached rows, in megabytes (10^6 bytes). At least two rows must fit.
    band : int
        Rows per read (default: as many as keep at least 8 bands in the budget, at most 256).

    Attributes
    ----------
    reads : int
        Band reads so far (a measure of I/O).
    """

    def __init__(self, source, idx, cache_mb: float, band: int | None = None):
        self.source = source
        self.idx = np.asarray(idx, dtype=np.int64)
        n = self.n = int(self.idx.size)
        row_bytes = 8 * n
        budget = float(cache_mb) * 1e6
        if budget < 2 * row_bytes:
            raise EvaluationError(
                f"cache of {cache_mb} MB holds fewer than two kernel rows of {n} training examples "
                f"({row_bytes / 1e6:.3f} MB each). Fix: pass --cache-mb {2 * row_bytes / 1e6 + 0.001:.3f} or more")
        fit = int(budget // row_bytes)
        self.band = int(band) if band is not None else max(1, min(256, fit // 8))
        self.band = max(1, min(self.band, fit // 2))
        self.max_bands = max(2, fit // self.band)
        self._bands: OrderedDict = OrderedDict()
        self.reads = 0

    def row(self, t: int) -> np.ndarray:
        """K(train[t], train), shape (n,) (a view into the cached band: do not modify)."""
        b = t // self.band
        got = self._bands.get(b)
        if got is None:
            lo, hi = b * self.band, min((b + 1) * self.band, self.n)
            got = np.ascontiguousarray(self.source.block(self.idx[lo:hi], self.idx), dtype=np.float64)
            if got.shape != (hi - lo, self.n):
                raise EvaluationError(f"kernel source returned a block of shape {got.shape}, expected "
                                      f"{(hi - lo, self.n)}")
            self.reads += 1
            self._bands[b] = got
            if len(self._bands) > self.max_bands:
                self._bands.popitem(last=False)
        else:
            self._bands.move_to_end(b)
        return got[t - b * self.band]

    def diag(self) -> np.ndarray:
        """K(train[t], train[t]) for every t, from diagonal blocks only (never a full row band)."""
        out = np.empty(self.n)
        for lo in range(0, self.n, self.band):
            hi = min(lo + self.band, self.n)
            sel = self.idx[lo:hi]
            out[lo:hi] = np.diag(np.asarray(self.source.block(sel, sel), dtype=np.float64))
        return out


@njit(cache=True, nogil=True)
def _select_i(y, a, G, C):
    gmax, i = -np.inf, -1
    for t in range(y.shape[0]):
        if (y[t] > 0 and a[t] < C[t]) or (y[t] < 0 and a[t] > 0):
            v = -y[t] * G[t]
            if v >= gmax:
                gmax, i = v, t
    return i, gmax


@njit(cache=True, nogil=True)
def _select_j(y, a, G, C, Kd, Ki, i, gmax):
    gmax2, j, best = -np.inf, -1, np.inf
    for t in range(y.shape[0]):
        if (y[t] > 0 and a[t] > 0) or (y[t] < 0 and a[t] < C[t]):
            v = y[t] * G[t]
            if v >= gmax2:
                gmax2 = v
            b = gmax + v
            if b > 0:
                q = Kd[i] + Kd[t] - 2.0 * Ki[t]
                if q <= 0:
                    q = TAU
                o = -(b * b) / q
                if o <= best:
                    best, j = o, t
    return j, gmax2


@njit(cache=True, nogil=True)
def _update_grad(G, y, Ki, Kj, ci, cj):
    for t in range(G.shape[0]):
        G[t] += y[t] * (ci * Ki[t] + cj * Kj[t])


@njit(cache=True, nogil=True)
def _pair(ai, aj, yi, yj, Gi, Gj, Ci, Cj, Kii, Kjj, Kij):
    """LIBSVM's analytic update of (a_i, a_j) within the box."""
    if yi != yj:
        quad = Kii + Kjj + 2.0 * Kij
        if quad <= 0:
            quad = TAU
        delta = (-Gi - Gj) / quad
        diff = ai - aj
        ai += delta
        aj += delta
        if diff > 0:
            if aj < 0:
                aj, ai = 0.0, diff
        elif ai < 0:
            ai, aj = 0.0, -diff
        if diff > Ci - Cj:
            if ai > Ci:
                ai, aj = Ci, Ci - diff
        elif aj > Cj:
            aj, ai = Cj, Cj + diff
    else:
        quad = Kii + Kjj - 2.0 * Kij
        if quad <= 0:
            quad = TAU
        delta = (Gi - Gj) / quad
        s = ai + aj
        ai -= delta
        aj += delta
        if s > Ci:
            if ai > Ci:
                ai, aj = Ci, s - Ci
        elif aj < 0:
            aj, ai = 0.0, s
        if s > Cj:
            if aj > Cj:
                aj, ai = Cj, s - Cj
        elif ai < 0:
            ai, aj = 0.0, s
    return ai, aj


def _rho(y, a, G, C) -> float:
    yG = y * G
    free = (a > 0) & (a < C)
    if free.any():
        return float(yG[free].mean())
    upper, lower = a >= C, a <= 0
    ub_mask = (upper & (y < 0)) | (lower & (y > 0))
    lb_mask = (upper & (y > 0)) | (lower & (y < 0))
    ub = yG[ub_mask].min() if ub_mask.any() else np.inf
    lb = yG[lb_mask].max() if lb_mask.any() else -np.inf
    return float((ub + lb) / 2)


@dataclass
class BinarySolution:
    """Result of :func:`solve_binary`: dual variables, bias and what the solver did."""

    alpha: np.ndarray       # (n,), 0 <= alpha_t <= C_t
    rho: float              # f(x) = sum_t alpha_t y_t K(x_t, x) - rho
    objective: float        # 1/2 a^T Q a - e^T a at the solution
    iterations: int
    converged: bool
    row_reads: int          # band reads of the row cache

    def dual_coef(self, y) -> np.ndarray:
        """alpha_t y_t (scikit-learn's ``dual_coef_`` over all training examples)."""
        return self.alpha * np.asarray(y, dtype=np.float64)


def solve_binary(rows: RowCache, y, C, tol: float = 1e-3, max_iter: int | None = None,
                 alpha0=None) -> BinarySolution:
    """Solve the C-SVM dual for labels ``y`` in {-1, +1} over the examples of ``rows``.

    Parameters
    ----------
    rows : RowCache
    y : array of -1 / +1, shape (n,)
    C : float or array (n,)
        Box bound per example (class weights: C times the weight of the example's class).
    tol : float
        Stopping tolerance on the maximal KKT violation (as LIBSVM / scikit-learn).
    max_iter : int, optional
        Iteration limit (default max(10^7, 100 n)); reaching it is reported, not an error.
    alpha0 : array (n,), optional
        Warm start (e.g. the solution at the previous C of a grid, clipped to the new box); it
        must satisfy y^T alpha0 = 0.

    Returns
    -------
    BinarySolution
    """
    y = np.asarray(y, dtype=np.float64)
    n = y.shape[0]
    if n != rows.n:
        raise EvaluationError(f"{n} labels for a row cache of {rows.n} training examples")
    if not np.all(np.abs(y) == 1):
        raise EvaluationError("solve_binary needs labels -1 / +1")
    if (y > 0).all() or (y < 0).all():
        raise EvaluationError("solve_binary needs both classes among the training examples")
    Cv = np.broadcast_to(np.asarray(C, dtype=np.float64), (n,)).copy()
    if not (Cv > 0).all():
        raise EvaluationError(f"C must be positive, got {float(Cv.min())}")
    Kd = rows.diag()
    a = np.zeros(n)
    G = -np.ones(n)
    if alpha0 is not None:
        a = np.clip(np.asarray(alpha0, dtype=np.float64), 0, Cv)
        if abs(float(y @ a)) > 1e-8 * max(1.0, float(a.sum())):
            raise EvaluationError("warm start alpha0 violates y^T alpha = 0 after clipping to the box")
        for t in np.flatnonzero(a):
            G += y * (y[t] * a[t]) * rows.row(int(t))
    limit = max_iter if max_iter is not None else max(10_000_000, 100 * n)
    it, converged = 0, False
    while it < limit:
        i, gmax = _select_i(y, a, G, Cv)
        if i < 0:
            converged = True
            break
        Ki = rows.row(i)
        j, gmax2 = _select_j(y, a, G, Cv, Kd, Ki, i, gmax)
        if j < 0 or gmax + gmax2 < tol:
            converged = True
            break
        Ki = rows.row(i)  # reading row j may have evicted i's band
        Kj = rows.row(j)
        old_i, old_j = a[i], a[j]
        a[i], a[j] = _pair(old_i, old_j, y[i], y[j], G[i], G[j], Cv[i], Cv[j], Kd[i], Kd[j], Ki[j] * y[i] * y[j])
        _update_grad(G, y, Ki, Kj, y[i] * (a[i] - old_i), y[j] * (a[j] - old_j))
        it += 1
    return BinarySolution(alpha=a, rho=_rho(y, a, G, Cv), objective=float(0.5 * a @ (G - 1.0)),
                          iterations=it, converged=converged, row_reads=rows.reads)


def decision_values(K_test_train, y, sol: BinarySolution) -> np.ndarray:
    """f(x) = sum_t alpha_t y_t K(x, x_t) - rho for the rows of ``K_test_train`` (n_test, n_train)."""
    return np.asarray(K_test_train, dtype=np.float64) @ sol.dual_coef(y) - sol.rho


def class_C(y, C: float, class_weight=None) -> np.ndarray:
    """Per-example box bounds: C times the weight of the example's class (scikit-learn's
    ``class_weight``: None, ``"balanced"`` = n / (k n_c), or {label: weight})."""
    y = np.asarray(y)
    classes, counts = np.unique(y, return_counts=True)
    if class_weight is None:
        w = dict.fromkeys(classes.tolist(), 1.0)
    elif class_weight == "balanced":
        w = {c: len(y) / (len(classes) * k) for c, k in zip(classes.tolist(), counts.tolist())}
    else:
        w = {c: float(class_weight.get(c, 1.0)) for c in classes.tolist()}
    return float(C) * np.array([w[v] for v in y.tolist()])


def solve_ovr(rows: RowCache, labels, C: float, class_weight=None, tol: float = 1e-3) -> dict:
    """One-vs-rest: one binary problem per class (that class +1, the rest -1) over the same row cache.

    ``class_weight`` weights the classes of the original labels, as scikit-learn's
    ``OneVsRestClassifier(SVC(class_weight=...))`` does not (there each binary SVC sees labels
    0 / 1); here None and {label: weight} apply per example, which equals it for None.

    Returns
    -------
    dict class -> BinarySolution (labels of that problem: +1 for the class)
    """
    labels = np.asarray(labels)
    Cv = class_C(labels, C, class_weight)
    out = {}
    for c in np.unique(labels).tolist():
        yc = np.where(labels == c, 1.0, -1.0)
        out[c] = solve_binary(rows, yc, Cv, tol=tol)
    return out


def predict_ovr(K_test_train, labels, solutions: dict) -> np.ndarray:
    """The class whose one-vs-rest decision value is largest, for each test row."""
    labels = np.asarray(labels)
    classes = list(solutions)
    scores = np.column_stack([decision_values(K_test_train, np.where(labels == c, 1.0, -1.0), solutions[c])
                              for c in classes])
    return np.asarray(classes)[np.argmax(scores, axis=1)]
