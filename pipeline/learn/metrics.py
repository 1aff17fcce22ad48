"""Classification metrics, and the same-label neighbour MRR of a Gram matrix.

Counting metrics delegate to :mod:`sklearn.metrics`; a class that is never predicted (or
never present) gets precision (recall) 0 rather than a warning and NaN.

:func:`neighbour_mrr` measures a kernel without training anything, as Suzuki et al. (2003)
did for the HDAG kernel: for each example, rank every other example by kernel value
(largest first); the score is the mean over examples of 1 / (rank of the first example with
the same label).
"""
from __future__ import annotations

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.learn.errors import EvaluationError


def _pair(y_true, y_pred):
    yt, yp = np.asarray(y_true), np.asarray(y_pred)
    if yt.shape != yp.shape or yt.ndim != 1:
        raise EvaluationError(f"metrics: y_true has shape {yt.shape} and y_pred {yp.shape}; "
                              "pass two 1-d sequences of the same length")
    if yt.size == 0:
        raise EvaluationError("metrics: no predictions to score; the test part is empty")
    return yt, yp


def accuracy(y_true, y_pred) -> float:
    """Fraction of predictions equal to the truth."""
    yt, yp = _pair(y_true, y_pred)
    return float(np.mean(yt == yp))


def confusion(y_true, y_pred, labels=None) -> tuple[list, np.ndarray]:
    """Confusion matrix.

    Returns
    -------
    labels : list
        Class order (sorted union of truth and predictions unless given).
    C : ndarray of int64, shape (n_classes, n_classes)
        ``C[i, j]`` = examples of class ``labels[i]`` predicted as ``labels[j]``.
    """
    confusion_matrix = optional.sklearn("metrics").confusion_matrix

    yt, yp = _pair(y_true, y_pred)
    labels = sorted(set(yt.tolist()) | set(yp.tolist())) if labels is None else list(labels)
    return labels, confusion_matrix(yt, yp, labels=labels).astype(np.int64)


def binary_prf(y_true, y_pred, positive) -> tuple[float, float, float]:
    """Precision, recall and F1 of class ``positive`` (0 when undefined)."""
    precision_recall_fscore_support = optional.sklearn("metrics").precision_recall_fscore_support

    yt, yp = _pair(y_true, y_pred)
    p, r, f, _ = precision_recall_fscore_support(yt, yp, labels=[positive], average=None, zero_division=0)
    return float(p[0]), float(r[0]), float(f[0])


def classification_report(y_true, y_pred, labels=None) -> dict:
    """Accuracy, per-class and micro/macro precision, recall, F1, and the confusion matrix.

    Returns
    -------
    dict with keys ``accuracy``, ``micro_precision``, ``micro_recall``, ``micro_f1``,
    ``macro_precision``, ``macro_recall``, ``macro_f1``, ``labels`` (class order),
    ``per_class`` (label -> {precision, recall, f1, support}) and ``confusion``
    (list of lists, rows = truth, columns = prediction, in ``labels`` order).
    Macro averages run over ``labels`` (by default every class seen in truth or prediction).
    """
    precision_recall_fscore_support = optional.sklearn("metrics").precision_recall_fscore_support

    yt, yp = _pair(y_true, y_pred)
    labels, C = confusion(yt, yp, labels)
    p, r, f, s = precision_recall_fscore_support(yt, yp, labels=labels, average=None, zero_division=0)
    out = {"accuracy": accuracy(yt, yp)}
    for avg in ("micro", "macro"):
        ap, ar, af, _ = precision_recall_fscore_support(yt, yp, labels=labels, average=avg, zero_division=0)
        out.update({f"{avg}_precision": float(ap), f"{avg}_recall": float(ar), f"{avg}_f1": float(af)})
    out["labels"] = list(labels)
    out["per_class"] = {str(c): {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                                 "support": int(s[i])} for i, c in enumerate(labels)}
    out["confusion"] = C.tolist()
    return out


def positive_class(classes):
    """The positive class of a binary task.

    The first of ``"+1"``, ``"1"``, ``1``, ``True``, ``"pos"``, ``"positive"``, ``"yes"``
    present in ``classes``; otherwise the larger of the two in sorted order (scikit-learn's
    convention for ``decision_function > 0``).
    """
    cl = list(classes)
    for c in ("+1", "1", 1, True, "pos", "positive", "yes"):
        if any(type(x) is type(c) and x == c for x in cl):
            return c
    return sorted(cl)[-1]


TIES = ("pessimistic", "optimistic", "expected")


def _first_success_rr(g: int, s: int, d: int) -> float:
    """E[1 / (g + T)] where T is the position of the first of s same-label items among
    s + d tied items in uniformly random order."""
    t = np.arange(1, d + 2, dtype=np.float64)
    # P(T > t-1) = prod_{u < t-1} (d - u) / (s + d - u); P(T = t) = P(T > t-1) * s / (s + d - t + 1)
    u = np.arange(0, d, dtype=np.float64)
    survive = np.concatenate(([1.0], np.cumprod((d - u) / (s + d - u))))
    p = survive * s / (s + d - t + 1)
    return float(np.sum(p / (g + t)))


def neighbour_rr(K_rows, rows, labels, ties: str = "pessimistic") -> np.ndarray:
    """Reciprocal rank of the nearest same-label neighbour for some rows of a Gram matrix.

    Parameters
    ----------
    K_rows : ndarray, shape (len(rows), n)
        Rows ``rows`` of the full n x n Gram matrix (all columns).
    rows : sequence of int, shape (len(rows),)
        Which examples the rows belong to (their own column is skipped).
    labels : sequence, shape (n,)
    ties : {"pessimistic", "optimistic", "expected"}
        See :func:`neighbour_mrr`.

    Returns
    -------
    ndarray of float64, shape (len(rows),); NaN for an example alone in its class.
    """
    K_rows = np.asarray(K_rows, dtype=np.float64)
    y = np.asarray(labels)
    rows = np.asarray(rows, dtype=np.int64).reshape(-1)
    n = len(y)
    if K_rows.ndim != 2 or K_rows.shape != (rows.size, n):
        raise EvaluationError(f"neighbour_mrr: K has shape {K_rows.shape} for {rows.size} rows and {n} labels; "
                              "pass the square Gram matrix of the labelled examples")
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise EvaluationError(f"neighbour_mrr: row index outside 0..{n - 1}")
    if ties not in TIES:
        raise EvaluationError(f"neighbour_mrr: ties={ties!r}; use one of {list(TIES)}")
    if not np.all(np.isfinite(K_rows)):
        raise EvaluationError("neighbour_mrr: K has NaN or infinite entries (an incomplete store?); "
                              "finish the Gram matrix first")
    rr = np.full(rows.size, np.nan)
    others = np.ones(n, dtype=bool)
    for r, i in enumerate(rows):
        others[i] = False
        same = others & (y == y[i])
        if same.any():
            row = K_rows[r]
            v = row[same].max()
            g = int(np.count_nonzero(others & (row > v)))
            at_v = others & (row == v)
            s = int(np.count_nonzero(at_v & same))
            d = int(np.count_nonzero(at_v)) - s
            if ties == "optimistic":
                rr[r] = 1.0 / (g + 1)
            elif ties == "pessimistic":
                rr[r] = 1.0 / (g + d + 1)
            else:
                rr[r] = _first_success_rr(g, s, d)
        others[i] = True
    return rr


def mean_rr(rr) -> float:
    """Mean of reciprocal ranks, leaving out the NaN of singleton classes."""
    rr = np.asarray(rr, dtype=np.float64)
    if not np.any(~np.isnan(rr)):
        raise EvaluationError("neighbour_mrr: every class has a single example, so no example has a "
                              "same-label neighbour; MRR needs classes with >= 2 members")
    return float(np.nanmean(rr))


def neighbour_mrr(K, labels, ties: str = "pessimistic") -> float:
    """Mean reciprocal rank of the nearest same-label neighbour under a kernel.

    For each example i, the other examples j != i are ranked by ``K[i, j]``, largest first;
    RR_i = 1 / (rank of the first j with ``labels[j] == labels[i]``). The result is the mean
    of RR_i over examples whose class has at least two members (a singleton class has no
    neighbour to find and is left out).

    Parameters
    ----------
    K : ndarray, shape (n, n)
        Gram matrix (normalised or not; only the order within each row matters).
    labels : sequence, shape (n,)
    ties : {"pessimistic", "optimistic", "expected"}
        How examples with a value equal to the best same-label value v are ordered.
        With g = #{j != i : K[i, j] > v}, s same-label and d other-label examples at exactly v:
        "pessimistic" ranks the tied other-label ones first (rank g + d + 1), so a kernel that
        cannot tell examples apart gets no credit; "optimistic" ranks a same-label one first
        (rank g + 1); "expected" averages 1/rank over uniformly random orders of the tie.

    Returns
    -------
    float in (0, 1].
    """
    K = np.asarray(K, dtype=np.float64)
    n = len(labels)
    if K.ndim != 2 or K.shape != (n, n):
        raise EvaluationError(f"neighbour_mrr: K has shape {K.shape} but there are {n} labels; "
                              "pass the square Gram matrix of the labelled examples")
    return mean_rr(neighbour_rr(K, np.arange(n), labels, ties))
