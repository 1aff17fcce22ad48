"""The slow, obviously correct SMO: LIBSVM's second-order working-set selection on the whole
matrix in memory, plain Python and numpy, no shrinking, no cache (the reference for
``gramtile.pipeline.learn.smo``)."""
import numpy as np

TAU = 1e-12


def solve(K, y, C, tol=1e-3, max_iter=10**6):
    """(alpha, rho, objective, iterations) of min 1/2 a^T Q a - e^T a, 0 <= a <= C, y^T a = 0."""
    y = np.asarray(y, dtype=np.float64)
    n = y.size
    C = np.broadcast_to(np.asarray(C, dtype=np.float64), (n,)).copy()
    Q = (y[:, None] * y[None, :]) * K
    a, G = np.zeros(n), -np.ones(n)
    it = 0
    while it < max_iter:
        up = ((y > 0) & (a < C)) | ((y < 0) & (a > 0))
        low = ((y > 0) & (a > 0)) | ((y < 0) & (a < C))
        if not up.any():
            break
        v = np.where(up, -y * G, -np.inf)
        i = int(np.flatnonzero(v == v.max())[-1])
        gmax = v[i]
        gmax2 = np.max(np.where(low, y * G, -np.inf))
        if gmax + gmax2 < tol:
            break
        b = gmax + y * G
        q = K[i, i] + np.diag(K) - 2 * K[i]
        q = np.where(q > 0, q, TAU)
        obj = np.where(low & (b > 0), -(b * b) / q, np.inf)
        if not np.isfinite(obj).any():
            break
        j = int(np.flatnonzero(obj == obj.min())[-1])
        # the two-variable subproblem along the feasible direction, clipped to the box
        old_i, old_j = a[i], a[j]
        if y[i] != y[j]:
            quad = max(K[i, i] + K[j, j] - 2 * K[i, j], TAU)
            delta = (-G[i] - G[j]) / quad
            diff = a[i] - a[j]
            ai, aj = a[i] + delta, a[j] + delta
            if diff > 0 and aj < 0:
                aj, ai = 0.0, diff
            elif diff <= 0 and ai < 0:
                ai, aj = 0.0, -diff
            if diff > C[i] - C[j] and ai > C[i]:
                ai, aj = C[i], C[i] - diff
            elif diff <= C[i] - C[j] and aj > C[j]:
                aj, ai = C[j], C[j] + diff
        else:
            quad = max(K[i, i] + K[j, j] - 2 * K[i, j], TAU)
            delta = (G[i] - G[j]) / quad
            s = a[i] + a[j]
            ai, aj = a[i] - delta, a[j] + delta
            if s > C[i] and ai > C[i]:
                ai, aj = C[i], s - C[i]
            elif s <= C[i] and aj < 0:
                aj, ai = 0.0, s
            if s > C[j] and aj > C[j]:
                aj, ai = C[j], s - C[j]
            elif s <= C[j] and ai < 0:
                ai, aj = 0.0, s
        a[i], a[j] = ai, aj
        G += Q[i] * (ai - old_i) + Q[j] * (aj - old_j)
        it += 1
    yG = y * G
    free = (a > 0) & (a < C)
    if free.any():
        rho = yG[free].mean()
    else:
        ub = np.min(yG[((a >= C) & (y < 0)) | ((a <= 0) & (y > 0))], initial=np.inf)
        lb = np.max(yG[((a >= C) & (y > 0)) | ((a <= 0) & (y < 0))], initial=-np.inf)
        rho = (ub + lb) / 2
    return a, float(rho), float(0.5 * a @ (G - 1.0)), it
