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

Shrinking (LIBSVM's, Chang & Lin 2011, section 5.1; Joachims 1999): every min(n, 1000)
iterations the examples at a bound whose gradient says they will stay there leave the *active
set*, and the iterations scan only the active set. G_bar_t = sum_{a_s = C_s} C_s Q_ts (over the
examples at their upper bound) is kept up to date for all t, so the gradient of the shrunk
examples can be rebuilt (G_t = G_bar_t - 1 + sum over the free a_s of a_s Q_ts) when the violation
first falls below 10 ``tol`` and again when the active set is optimal: the solver stops only when
the whole problem satisfies the tolerance, as LIBSVM.

Memory does not grow with n^2: K(train, train) is never formed. Kernel rows live in a
:class:`RowCache`, a preallocated (slots, n) float64 slab of at most ``cache_mb`` megabytes with
a least-recently-used slot map, as SVM-light's ``-m`` and LIBSVM's ``-m``. The iteration loop
runs compiled (Numba, :func:`_run`) until it needs a row that is not cached; it then returns the
request, Python fills the slot (one ``pread`` from a :class:`~gramtile.pipeline.learn.rowfile.RowFile`,
or a read from the kernel source) and the loop resumes where it stopped. A row comes from a row
file when one is given (a store source with a cache smaller than the training block), else from
the kernel source: one row at a time, or, when the cache holds every row, in bands of
consecutive training positions (one ``block(rows, train)`` read each).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.rowfile import store_backed, tile_of

#: LIBSVM's tau: the curvature used where a pair's a_it is not positive.
TAU = 1e-12

# the cache's counters: clock (LRU stamps), hits, misses (accesses that needed a read)
_CLOCK, _HITS, _MISSES = 0, 1, 2
# the solver state: phase, iterations, shrink countdown, active size, pending i and j, unshrunk
# flag, final-check flag, requested row and its slot, the smallest active set so far
_PHASE, _IT, _COUNTER, _NACT, _PI, _PJ, _UNSHRUNK, _FINAL, _REQ, _REQSLOT, _MINACT = range(11)
_TOP, _SHRINK, _SELECT, _HAVE_I, _UPDATE = range(5)
#: what :func:`_run` returns: converged, a row is needed, gradient reconstruction, limit reached
DONE, NEED_ROW, RECONSTRUCT, LIMIT = range(4)


@njit(cache=True, nogil=True)
def _claim(t, slot_of, slot_row, stamp, counters, count):
    """The slot of row ``t`` (marked most recently used), and whether it must be filled (then
    the least recently used slot was given to ``t`` and its old row dropped)."""
    counters[_CLOCK] += 1
    s = slot_of[t]
    if s >= 0:
        stamp[s] = counters[_CLOCK]
        if count:
            counters[_HITS] += 1
        return s, False
    best, bs = 0, stamp[0]
    for k in range(1, stamp.shape[0]):
        if stamp[k] < bs:
            bs, best = stamp[k], k
    old = slot_row[best]
    if old >= 0:
        slot_of[old] = -1
    slot_row[best] = t
    slot_of[t] = best
    stamp[best] = counters[_CLOCK]
    if count:
        counters[_MISSES] += 1
    return best, True


class RowCache:
    """Kernel rows K(train[t], train) of a kernel source in a bounded LRU cache.

    Parameters
    ----------
    source : kernel source (``n`` and ``block(rows, cols)``)
    idx : int array
        The training examples (positions in ``source``); row t of this cache is example idx[t].
    cache_mb : float
        Budget for cached rows, in megabytes (10^6 bytes). At least two rows must fit.
    band : int, optional
        Rows per source read when the cache holds every row (default: the tile of the store the
        source reads, so a band crosses each chunk of a tile row once, or 256); otherwise rows are
        read one at a time.
    row_file : RowFile, optional
        Read rows from this row file (written from ``source`` or a source it renumbers) instead
        of the source.

    Attributes
    ----------
    slots : int
        Rows the cache holds.
    reads : int
        Reads so far (a row file row, a source row, or a source band each).
    """

    def __init__(self, source, idx, cache_mb: float, band: int | None = None, row_file=None):
        self.source = source
        self.idx = np.asarray(idx, dtype=np.int64)
        n = self.n = int(self.idx.size)
        row_bytes = 8 * n
        budget = float(cache_mb) * 1e6
        if budget < 2 * row_bytes:
            raise EvaluationError(
                f"cache of {cache_mb} MB holds fewer than two kernel rows of {n} training examples "
                f"({row_bytes / 1e6:.3f} MB each). Fix: pass --cache-mb {2 * row_bytes / 1e6 + 0.001:.3f} or more")
        self.slots = int(min(n, budget // row_bytes))
        self.slab = np.empty((self.slots, n))
        self.slot_of = np.full(n, -1, dtype=np.int64)
        self.slot_row = np.full(self.slots, -1, dtype=np.int64)
        self.stamp = np.zeros(self.slots, dtype=np.int64)
        self.counters = np.zeros(3, dtype=np.int64)
        self.reads = 0
        self.row_file = row_file
        if row_file is not None:
            pos = row_file.positions(source)
            if pos is None:
                raise EvaluationError(f"kernel row file {row_file.path} was not written from this kernel source "
                                      "(another store or selection); it is never used for another")
            self._pos = pos[self.idx]
            self._cols = None if np.array_equal(self._pos, np.arange(row_file.n)) else self._pos
            self._buf = np.empty(row_file.n)
        if band is None:
            band = tile_of(source) if store_backed(source) else 256
        self.band = 1 if row_file is not None or self.slots < n else max(1, int(band))

    @property
    def hits(self) -> int:
        """Row accesses served from the cache."""
        return int(self.counters[_HITS])

    @property
    def misses(self) -> int:
        """Row accesses that needed a read."""
        return int(self.counters[_MISSES])

    def fill(self, t: int, s: int) -> None:
        """Read row ``t`` into slot ``s`` (and, reading a band, the band's other uncached rows)."""
        if self.row_file is not None:
            self.row_file.read_into(self._pos[t], self._cols, self.slab[s], self._buf)
            self.reads += 1
            return
        lo = (t // self.band) * self.band
        hi = min(lo + self.band, self.n)
        got = np.asarray(self.source.block(self.idx[lo:hi], self.idx), dtype=np.float64)
        if got.shape != (hi - lo, self.n):
            raise EvaluationError(f"kernel source returned a block of shape {got.shape}, expected "
                                  f"{(hi - lo, self.n)}")
        self.reads += 1
        self.slab[s] = got[t - lo]
        for u in range(lo, hi):
            if u != t and self.slot_of[u] < 0:
                su, _ = _claim(u, self.slot_of, self.slot_row, self.stamp, self.counters, False)
                self.slab[su] = got[u - lo]

    def row(self, t: int) -> np.ndarray:
        """K(train[t], train), shape (n,) (a view into the cache: do not modify; valid until the
        next row is read)."""
        s, fill = _claim(int(t), self.slot_of, self.slot_row, self.stamp, self.counters, True)
        if fill:
            self.fill(int(t), int(s))
        return self.slab[s]

    def diag(self) -> np.ndarray:
        """K(train[t], train[t]) for every t, from diagonal blocks only (never a full row band)."""
        if self.row_file is not None:
            return self.row_file.diag(self._pos)
        out = np.empty(self.n)
        b = max(1, min(256, self.slots))  # a b x b block is within the cache's budget
        for lo in range(0, self.n, b):
            hi = min(lo + b, self.n)
            sel = self.idx[lo:hi]
            out[lo:hi] = np.diag(np.asarray(self.source.block(sel, sel), dtype=np.float64))
        return out


@njit(cache=True, nogil=True)
def _select_i(y, a, G, C, active, nact):
    gmax, i = -np.inf, -1
    for k in range(nact):
        t = active[k]
        if (y[t] > 0 and a[t] < C[t]) or (y[t] < 0 and a[t] > 0):
            v = -y[t] * G[t]
            if v >= gmax:
                gmax, i = v, t
    return i, gmax


@njit(cache=True, nogil=True)
def _select_j(y, a, G, C, Kd, Ki, i, gmax, active, nact):
    gmax2, j, best = -np.inf, -1, np.inf
    for k in range(nact):
        t = active[k]
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


@njit(cache=True, nogil=True)
def _be_shrunk(t, y, a, G, C, g1, g2):
    """LIBSVM's be_shrunk: an example at a bound whose gradient keeps it there."""
    if a[t] >= C[t]:
        return -G[t] > g1 if y[t] > 0 else -G[t] > g2
    if a[t] <= 0:
        return G[t] > g2 if y[t] > 0 else G[t] > g1
    return False


@njit(cache=True, nogil=True)
def _run(y, a, G, Gb, C, Kd, slab, slot_of, slot_row, stamp, counters, active, st, fl, tol, shrinking, limit):
    """The SMO iterations from state ``st`` until convergence (DONE), the iteration limit (LIMIT),
    an uncached row (NEED_ROW: st[_REQ] is to be read into slot st[_REQSLOT]) or a gradient
    reconstruction of the shrunk examples (RECONSTRUCT); call again after serving the request."""
    n = y.shape[0]
    while True:
        ph = st[_PHASE]
        if ph == _TOP:
            if st[_IT] >= limit:
                return LIMIT
            st[_PHASE] = _SELECT
            if shrinking:
                st[_COUNTER] -= 1
                if st[_COUNTER] <= 0:
                    st[_COUNTER] = min(n, 1000)
                    st[_PHASE] = _SHRINK
            continue
        if ph == _SHRINK:
            nact = st[_NACT]
            g1, g2 = -np.inf, -np.inf
            for k in range(nact):
                t = active[k]
                if (y[t] > 0 and a[t] < C[t]) or (y[t] < 0 and a[t] > 0):
                    v = -y[t] * G[t]
                    if v > g1:
                        g1 = v
                if (y[t] > 0 and a[t] > 0) or (y[t] < 0 and a[t] < C[t]):
                    v = y[t] * G[t]
                    if v > g2:
                        g2 = v
            if st[_UNSHRUNK] == 0 and g1 + g2 <= 10.0 * tol:
                st[_UNSHRUNK] = 1
                if nact < n:
                    return RECONSTRUCT  # resumed here with every example active
            k = 0
            while k < nact:
                t = active[k]
                if _be_shrunk(t, y, a, G, C, g1, g2):
                    nact -= 1
                    active[k] = active[nact]
                    active[nact] = t
                else:
                    k += 1
            st[_NACT] = nact
            if nact < st[_MINACT]:
                st[_MINACT] = nact
            st[_PHASE] = _SELECT
            continue
        if ph == _SELECT:
            i, gmax = _select_i(y, a, G, C, active, st[_NACT])
            st[_PI] = i
            fl[0] = gmax
            st[_PHASE] = _HAVE_I
            if i >= 0:
                s, fill = _claim(i, slot_of, slot_row, stamp, counters, True)
                if fill:
                    st[_REQ], st[_REQSLOT] = i, s
                    return NEED_ROW
            continue
        if ph == _HAVE_I:
            i, gmax = st[_PI], fl[0]
            j, gmax2 = -1, -np.inf
            if i >= 0:
                j, gmax2 = _select_j(y, a, G, C, Kd, slab[slot_of[i]], i, gmax, active, st[_NACT])
            if i < 0 or j < 0 or gmax + gmax2 < tol:
                if st[_NACT] < n:  # optimal on the active set: rebuild the rest and check all
                    st[_FINAL] = 1
                    st[_PHASE] = _SELECT
                    return RECONSTRUCT
                st[_PHASE] = _TOP
                st[_FINAL] = 0
                return DONE
            if st[_FINAL] == 1:
                st[_FINAL] = 0
                st[_COUNTER] = 1
            st[_PJ] = j
            st[_PHASE] = _UPDATE
            s, fill = _claim(j, slot_of, slot_row, stamp, counters, True)  # i stays: it is the newest
            if fill:
                st[_REQ], st[_REQSLOT] = j, s
                return NEED_ROW
            continue
        # _UPDATE: rows i and j are cached
        i, j = st[_PI], st[_PJ]
        Ki, Kj = slab[slot_of[i]], slab[slot_of[j]]
        yi, yj = y[i], y[j]
        oi, oj = a[i], a[j]
        ui, uj = oi >= C[i], oj >= C[j]
        ni, nj = _pair(oi, oj, yi, yj, G[i], G[j], C[i], C[j], Kd[i], Kd[j], Ki[j] * yi * yj)
        a[i], a[j] = ni, nj
        ci, cj = yi * (ni - oi), yj * (nj - oj)
        for k in range(st[_NACT]):
            t = active[k]
            G[t] += y[t] * (ci * Ki[t] + cj * Kj[t])
        if ui != (ni >= C[i]):
            c = -C[i] * yi if ui else C[i] * yi
            for t in range(n):
                Gb[t] += c * y[t] * Ki[t]
        if uj != (nj >= C[j]):
            c = -C[j] * yj if uj else C[j] * yj
            for t in range(n):
                Gb[t] += c * y[t] * Kj[t]
        st[_IT] += 1
        st[_PHASE] = _TOP


@njit(cache=True, nogil=True)
def _add_row(G, which, c, y, Kr):
    """G[t] += c y_t K_rt for t in ``which`` (one row's contribution)."""
    for k in range(which.shape[0]):
        t = which[k]
        G[t] += c * y[t] * Kr[t]


@njit(cache=True, nogil=True)
def _dot_free(t, y, a, Kt, free):
    """sum over s in ``free`` of a_s y_t y_s K_ts."""
    acc = 0.0
    for k in range(free.shape[0]):
        s = free[k]
        acc += a[s] * y[s] * Kt[s]
    return acc * y[t]


def _reconstruct(rows: RowCache, y, a, G, Gb, C, active, st) -> None:
    """LIBSVM's reconstruct_gradient: G of the shrunk examples from G_bar and the free a_s, reading
    the rows of whichever side is smaller; then every example is active again."""
    n, nact = y.shape[0], int(st[_NACT])
    if nact < n:
        act, inact = active[:nact], active[nact:].copy()
        G[inact] = Gb[inact] - 1.0
        free = act[(a[act] > 0) & (a[act] < C[act])]
        if free.size * n > 2 * nact * (n - nact):
            for t in inact.tolist():
                G[t] += _dot_free(t, y, a, rows.row(t), free)
        else:
            for s in free.tolist():
                _add_row(G, inact, a[s] * y[s], y, rows.row(s))
    st[_NACT] = n


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
    row_reads: int          # reads of the row cache so far (rows, or bands of rows)
    hits: int = 0           # row accesses of this solve served from the cache
    misses: int = 0         # row accesses of this solve that needed a read
    min_active: int = 0     # the smallest active set of the iterations (n without shrinking)

    def dual_coef(self, y) -> np.ndarray:
        """alpha_t y_t (scikit-learn's ``dual_coef_`` over all training examples)."""
        return self.alpha * np.asarray(y, dtype=np.float64)


def solve_binary(rows: RowCache, y, C, tol: float = 1e-3, max_iter: int | None = None,
                 alpha0=None, shrinking: bool = True) -> BinarySolution:
    """Solve the C-SVM dual for labels ``y`` in {-1, +1} over the examples of ``rows``.

    Parameters
    ----------
    rows : RowCache
    y : array of -1 / +1, shape (n,)
    C : float or array (n,)
        Box bound per example (class weights: C times the weight of the example's class).
    tol : float
        Stopping tolerance on the maximal KKT violation over all examples (as LIBSVM / scikit-learn).
    max_iter : int, optional
        Iteration limit (default max(10^7, 100 n)); reaching it is reported, not an error.
    alpha0 : array (n,), optional
        Warm start (e.g. the solution at the previous C of a grid, clipped to the new box); it
        must satisfy y^T alpha0 = 0.
    shrinking : bool
        LIBSVM's shrinking heuristic (default on, as LIBSVM and SVC): the same solution to the
        tolerance, with fewer examples scanned per iteration.

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
    hits0, misses0 = rows.hits, rows.misses
    Kd = rows.diag()
    a = np.zeros(n)
    G = -np.ones(n)
    Gb = np.zeros(n)
    everyone = np.arange(n, dtype=np.int64)
    if alpha0 is not None:
        a = np.clip(np.asarray(alpha0, dtype=np.float64), 0, Cv)
        if abs(float(y @ a)) > 1e-8 * max(1.0, float(a.sum())):
            raise EvaluationError("warm start alpha0 violates y^T alpha = 0 after clipping to the box")
        for t in np.flatnonzero(a).tolist():
            Kt = rows.row(t)
            _add_row(G, everyone, y[t] * a[t], y, Kt)
            if a[t] >= Cv[t]:
                _add_row(Gb, everyone, y[t] * Cv[t], y, Kt)
    limit = max_iter if max_iter is not None else max(10_000_000, 100 * n)
    active = everyone.copy()
    st = np.zeros(11, dtype=np.int64)
    st[_PHASE], st[_NACT], st[_COUNTER], st[_MINACT] = _TOP, n, min(n, 1000) + 1, n
    fl = np.zeros(1)
    while True:
        code = _run(y, a, G, Gb, Cv, Kd, rows.slab, rows.slot_of, rows.slot_row, rows.stamp, rows.counters,
                    active, st, fl, float(tol), bool(shrinking), int(limit))
        if code == NEED_ROW:
            rows.fill(int(st[_REQ]), int(st[_REQSLOT]))
        elif code == RECONSTRUCT:
            _reconstruct(rows, y, a, G, Gb, Cv, active, st)
        else:
            break
    if st[_NACT] < n:  # stopped at the limit while shrunk: the gradient of every example for rho
        _reconstruct(rows, y, a, G, Gb, Cv, active, st)
    return BinarySolution(alpha=a, rho=_rho(y, a, G, Cv), objective=float(0.5 * a @ (G - 1.0)),
                          iterations=int(st[_IT]), converged=code == DONE, row_reads=rows.reads,
                          hits=rows.hits - hits0, misses=rows.misses - misses0, min_active=int(st[_MINACT]))


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


def solve_ovr(rows: RowCache, labels, C: float, class_weight=None, tol: float = 1e-3, shrinking: bool = True) -> dict:
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
        out[c] = solve_binary(rows, yc, Cv, tol=tol, shrinking=shrinking)
    return out


def predict_ovr(K_test_train, labels, solutions: dict) -> np.ndarray:
    """The class whose one-vs-rest decision value is largest, for each test row."""
    labels = np.asarray(labels)
    classes = list(solutions)
    scores = np.column_stack([decision_values(K_test_train, np.where(labels == c, 1.0, -1.0), solutions[c])
                              for c in classes])
    return np.asarray(classes)[np.argmax(scores, axis=1)]
