"""Preference ranking on kernel blocks, as SVM-light ``-z p`` (Joachims 2002, "Optimizing search
engines using clickthrough data").

Within every group (a query, a question and its candidate answers), every pair (i, j) whose
targets have y_i > y_j gives a constraint w.(phi(x_i) - phi(x_j)) >= 1 - xi_ij, xi_ij >= 0; the fit
minimises 1/2 |w|^2 + C sum xi_ij, with no bias (a bias cancels in a difference). Pairs of two
groups are never compared. The score of x is w.phi(x) = sum_p alpha_p (K(x, i_p) - K(x, j_p)):
higher ranks higher.

The dual is max sum_p alpha_p - 1/2 alpha^T Q alpha over the box 0 <= alpha_p <= C, with the kernel
of two pairs Q_pq = K(i, k) - K(i, l) - K(j, k) + K(j, l); there is no equality constraint. It is
solved exactly by dual coordinate descent (Hsieh et al. 2008, LIBLINEAR's method for the SVM
without bias), in Numba, over the pairs in a seeded random order each epoch, until the largest
projected gradient of an epoch is at most ``tol``. Q is never formed: the solver keeps the
training scores f = K beta, beta_i = sum of the alpha of the pairs i wins less those it loses, so
the gradient of pair p is f(i_p) - f(j_p) - 1 and a step on alpha_p updates f by one difference of
two kernel rows (O(n) time, O(n + P) memory beside K). This is chosen over scikit-learn's SVC on
the pair kernel, which would need the P x P pair kernel twice over (both orientations of every
pair, to make its bias vanish by symmetry) and a bias the problem does not have.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from gramtile.pipeline.learn.fits import BlockLearner
from gramtile.pipeline.learn.learners.base import Param
from gramtile.pipeline.progress import log


@njit(cache=True, nogil=True)
def _pair_cd(K, first, second, C, tol, max_epochs, seed, alpha, f):
    """Dual coordinate descent on the pairs (first[p] preferred to second[p]), updating ``alpha``
    and the training scores ``f`` (= K beta) in place. Returns (epochs run, converged)."""
    P = first.size
    n = K.shape[0]
    QD = np.empty(P)
    for t in range(P):
        i, j = first[t], second[t]
        QD[t] = K[i, i] + K[j, j] - 2.0 * K[i, j]
    order = np.arange(P)
    np.random.seed(seed)
    for epoch in range(max_epochs):
        for s in range(P - 1):
            r = s + np.random.randint(0, P - s)
            order[s], order[r] = order[r], order[s]
        worst = 0.0
        for s in range(P):
            t = order[s]
            i, j = first[t], second[t]
            G = f[i] - f[j] - 1.0
            a = alpha[t]
            if a <= 0.0:
                PG = min(G, 0.0)
            elif a >= C:
                PG = max(G, 0.0)
            else:
                PG = G
            if abs(PG) > worst:
                worst = abs(PG)
            if PG == 0.0:
                continue
            if QD[t] > 1e-12:
                na = min(max(a - G / QD[t], 0.0), C)
            else:  # two examples the kernel cannot tell apart: the objective falls linearly in alpha
                na = C if G < 0.0 else 0.0
            d = na - a
            if d != 0.0:
                alpha[t] = na
                for k in range(n):
                    f[k] += d * (K[i, k] - K[j, k])
        if worst <= tol:
            return epoch + 1, True
    return max_epochs, False


def preference_pairs(y, groups) -> tuple[np.ndarray, np.ndarray]:
    """``(first, second)``: the positions of every pair of one group whose targets have
    y[first] > y[second], group by group (in sorted group order), then by position."""
    y = np.asarray(y, dtype=np.float64)
    _, g = np.unique(np.asarray(groups), return_inverse=True)
    order = np.argsort(g, kind="stable")
    bounds = np.flatnonzero(np.diff(g[order])) + 1
    firsts, seconds = [], []
    for members in np.split(order, bounds):
        if members.size < 2:
            continue
        yi = y[members]
        a, b = np.nonzero(yi[:, None] > yi[None, :])
        firsts.append(members[a])
        seconds.append(members[b])
    if not firsts:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    return np.concatenate(firsts).astype(np.int64), np.concatenate(seconds).astype(np.int64)


class PairRanker:
    """Pairwise preference ranking (SVM-light ``-z p``) fitted on K(train, train), the targets and
    the group of every training example (no groups: one group)."""

    def __init__(self, C: float = 1.0, tol: float = 1e-6, max_epochs: int = 100000, seed=None):
        self.C = C
        self.tol = tol
        self.max_epochs = max_epochs
        self.seed = seed

    def fit(self, K, y, groups=None) -> PairRanker:
        K = np.ascontiguousarray(K, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        n = y.size
        if K.shape != (n, n):
            raise ValueError(f"the kernel has shape {K.shape} for {n} targets; give K(train, train)")
        groups = np.zeros(n, dtype=np.int64) if groups is None else np.asarray(groups)
        if groups.shape != (n,):
            raise ValueError(f"{groups.shape[0] if groups.ndim else 0} group ids for {n} targets; give one per example")
        self.first_, self.second_ = preference_pairs(y, groups)
        self.alpha_ = np.zeros(self.first_.size)
        f = np.zeros(n)
        self.epochs_, self.converged_ = 0, True
        if self.first_.size:
            self.epochs_, self.converged_ = _pair_cd(K, self.first_, self.second_, float(self.C), float(self.tol),
                                                     int(self.max_epochs), int(self.seed or 0), self.alpha_, f)
            if not self.converged_:
                log.warning(f"rank: not converged in {self.epochs_} epochs over {self.first_.size} pairs "
                            f"(C={self.C:g}); the scores are approximate")
        beta = np.zeros(n)
        np.add.at(beta, self.first_, self.alpha_)
        np.subtract.at(beta, self.second_, self.alpha_)
        self.support_ = np.flatnonzero(beta)
        self.dual_coef_ = beta[self.support_]
        return self

    def decision_function(self, K) -> np.ndarray:
        """The scores of the rows of K(x, train): higher ranks higher."""
        return np.asarray(K, dtype=np.float64)[:, self.support_] @ self.dual_coef_

    predict = decision_function

    def functions(self) -> list:
        """``(support positions, coefficients, intercept)`` of the one scoring function."""
        return [(self.support_, self.dual_coef_, 0.0)]


class Rank(BlockLearner):
    """Preference ranking (``gramtile evaluate --model rank --C 0.1,1,10``)."""

    name = "rank"
    reads = "kernel"
    task_kinds = ("ranking",)
    params = (Param("C", float, 1.0, "--C", "the SVM penalty (larger: fewer margin errors)"),)
    class_weight = False
    summary_line = "pairwise preference ranking within groups (SVM-light -z p, no bias) on kernel blocks"

    def estimator(self, point, problem):
        return PairRanker(point["C"], seed=problem.seed)
