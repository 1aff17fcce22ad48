"""Nystroem approximation from a Gram store: a linear model on K[:, landmarks] features.

For n too large for an n x n matrix in memory. With m landmark examples L (chosen among the
training examples: seeded, uniform or stratified by label), the feature map is

    phi(x) = K(x, L) K_LL^{-1/2},   K_LL^{-1/2} = U diag(s)^{-1/2} over eigenpairs with s > cutoff * s_max

so phi(x) . phi(y) = K(x, L) K_LL^+ K(L, y), which equals K(x, y) when L holds every training
example (m = n, up to the eigenvalue cutoff). Only the column block K[rows, L] is read (one
block read per split, K_LL sliced from it), so a store loads only the chunks of the landmark
columns; a ``LinearSVC`` is trained on the features (n x m floats instead of n x n).
"""
from __future__ import annotations

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.learn.crossval import check_classes, check_inputs, prediction_scores, read_block, settings_for
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.metrics import positive_class


def pick_landmarks(labels, candidates, m: int, seed: int = 0, stratified: bool = True) -> np.ndarray:
    """m landmark positions among ``candidates`` (sorted).

    Stratified: each class gets a share of m proportional to its size among the candidates
    (largest remainders; at least one per class when m >= n_classes); uniform: a seeded sample.
    """
    cand = np.asarray(candidates, dtype=np.int64)
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise EvaluationError(f"nystroem: m={m!r} landmarks; give an integer >= 1")
    if m >= cand.size:
        return np.sort(cand)
    rng = np.random.default_rng(seed)
    if not stratified:
        return np.sort(rng.choice(cand, m, replace=False))
    y = np.asarray(labels)[cand]
    classes, counts = np.unique(y, return_counts=True)
    share = counts / counts.sum() * m
    take = np.floor(share).astype(int)
    if m >= len(classes):
        take = np.maximum(take, 1)
    while take.sum() > m:
        take[np.argmax(take)] -= 1
    for c in np.argsort(-(share - np.floor(share))):
        if take.sum() >= m:
            break
        if take[c] < counts[c]:
            take[c] += 1
    out = [rng.choice(cand[y == c], int(t), replace=False) for c, t in zip(classes, take) if t > 0]
    return np.sort(np.concatenate(out))


class NystroemMap:
    """The feature map phi(x) = K(x, L) K_LL^{-1/2} fitted on the landmark block K_LL.

    Parameters
    ----------
    cutoff : float
        Eigenvalues below ``cutoff * largest`` are dropped (K_LL is often singular: repeated
        examples, low-rank kernels).

    Attributes
    ----------
    W : ndarray, shape (m, r)
        U_r diag(s_r)^{-1/2}; features are K(x, L) @ W.
    rank : int
    """

    def __init__(self, cutoff: float = 1e-10):
        if not 0 <= cutoff < 1:
            raise EvaluationError(f"nystroem: cutoff={cutoff!r}; use a small non-negative number, e.g. 1e-10")
        self.cutoff = cutoff

    def fit(self, K_LL) -> NystroemMap:
        K_LL = np.asarray(K_LL, dtype=np.float64)
        # symmetrise: stored blocks are symmetric up to round-off, eigh reads one triangle only
        s, U = np.linalg.eigh((K_LL + K_LL.T) / 2)
        keep = s > self.cutoff * max(s.max(), 0.0)
        if not keep.any():
            raise EvaluationError("nystroem: the landmark kernel block has no positive eigenvalue "
                                  "(all landmarks have zero self-similarity?); choose other landmarks")
        self.W = U[:, keep] / np.sqrt(s[keep])
        self.rank = int(keep.sum())
        return self

    def transform(self, K_xL) -> np.ndarray:
        return np.asarray(K_xL, dtype=np.float64) @ self.W


def evaluate_nystroem(source, labels, splits, m: int, C=(1.0,), seed: int = 0, stratified: bool = True,
                      class_weight=None, cutoff: float = 1e-10, kernel: str = "kernel", positive=None,
                      max_iter: int = 20000) -> list[dict]:
    """Train and score LinearSVC on Nystroem features for each split and C.

    For each split, m landmarks are picked among its training examples and the one block
    K[train + test, landmarks] is read. Returns pooled rows as
    :func:`gramtile.pipeline.learn.crossval.evaluate` does (``model`` = ``"nystroem"``, plus ``m`` and
    the feature ``rank``).
    """
    LinearSVC = optional.sklearn("svm").LinearSVC


    grid = settings_for("svm", C)
    y, splits = check_inputs(source, labels, splits)
    classes = sorted(np.unique(y).tolist())
    if positive is None and len(classes) == 2:
        positive = positive_class(classes)
    check_classes(classes, positive, class_weight)
    pooled = {s.C: ([], []) for s in grid}
    fold_acc = {s.C: [] for s in grid}
    ranks = []
    for sp in splits:
        L = pick_landmarks(y, sp.train, m, seed, stratified)
        rows = np.union1d(sp.train, sp.test)
        B = read_block(source, rows, L, f"{sp.name} examples x landmarks")
        where = np.searchsorted(rows, L)
        fmap = NystroemMap(cutoff).fit(B[where])
        ranks.append(fmap.rank)
        F = fmap.transform(B)
        F_tr, F_te = F[np.searchsorted(rows, sp.train)], F[np.searchsorted(rows, sp.test)]
        for s in grid:
            clf = LinearSVC(C=s.C, loss="hinge", class_weight=class_weight, max_iter=max_iter, random_state=seed)
            clf.fit(F_tr, y[sp.train])
            pred = clf.predict(F_te)
            pooled[s.C][0].append(sp.test)
            pooled[s.C][1].append(pred)
            fold_acc[s.C].append(float(np.mean(pred == y[sp.test])))
    out = []
    for s in grid:
        idx, pred = np.concatenate(pooled[s.C][0]), np.concatenate(pooled[s.C][1])
        row, _ = prediction_scores(y[idx], pred, classes, positive)
        acc = np.asarray(fold_acc[s.C])
        out.append({"kernel": kernel, "model": "nystroem", "C": s.C, "m": int(m), "rank": int(min(ranks)),
                    "splits": len(splits), "n_test": int(idx.size), **row,
                    "accuracy_std": float(acc.std(ddof=1)) if acc.size > 1 else 0.0, "predictions": (idx, pred)})
    return out
