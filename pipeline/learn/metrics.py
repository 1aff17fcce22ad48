"""Classification, regression and ranking metrics, and the same-label neighbour MRR of a Gram matrix.

Counting metrics are computed from one confusion matrix with scikit-learn's arithmetic
(``precision_recall_fscore_support`` with ``zero_division=0``; the tests compare them bit for bit):
a class that is never predicted (or never present) gets precision (recall) 0 rather than a warning
and NaN. Not calling scikit-learn for every fold and setting keeps scoring a nested 10-fold
evaluation (171 reports) in milliseconds instead of seconds of driver time, which the parallel
fits would otherwise wait on.

:func:`neighbour_mrr` measures a kernel without training anything, as Suzuki et al. (2003)
did for the HDAG kernel: for each example, rank every other example by kernel value
(largest first); the score is the mean over examples of 1 / (rank of the first example with
the same label).

Regression (:func:`regression_report`): Pearson and Spearman correlation of the predictions with
the targets, and the mean squared error. Ranking (:func:`ranking_report`): MAP, MRR, precision at 1
and nDCG of the candidates of each group ordered by score, averaged over the groups, with the
convention of the answer-selection literature: a candidate is relevant when its target is > 0, and
only groups with both a relevant and an irrelevant candidate count (a group whose candidates are
all right or all wrong says nothing about the ranking).
"""
from __future__ import annotations

import numpy as np

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
        ``C[i, j]`` = examples of class ``labels[i]`` predicted as ``labels[j]`` (examples whose
        truth or prediction is not in ``labels`` are not counted).
    """
    labels, C, _, _ = _counts(*_pair(y_true, y_pred), labels)
    return labels, C


def _counts(yt, yp, labels):
    """(labels, confusion matrix, examples of each label in truth, in predictions)."""
    labels = sorted(set(yt.tolist()) | set(yp.tolist())) if labels is None else list(labels)
    pos = {c: i for i, c in enumerate(labels)}
    it = np.fromiter((pos.get(v, -1) for v in yt.tolist()), dtype=np.int64, count=yt.size)
    ip = np.fromiter((pos.get(v, -1) for v in yp.tolist()), dtype=np.int64, count=yp.size)
    keep = (it >= 0) & (ip >= 0)
    k = len(labels)
    C = np.bincount(it[keep] * k + ip[keep], minlength=k * k).reshape(k, k).astype(np.int64)
    return labels, C, np.bincount(it[it >= 0], minlength=k), np.bincount(ip[ip >= 0], minlength=k)


def _divide(num, den) -> np.ndarray:
    """num / den, 0 where den is 0 (scikit-learn's ``zero_division=0``)."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return np.where(den == 0, 0.0, num / np.where(den == 0, 1.0, den))


def _prf(tp, pred, true) -> tuple:
    """Precision, recall, F1 from true-positive, predicted and true counts (arrays)."""
    return _divide(tp, pred), _divide(tp, true), _divide(2.0 * tp, 1.0 * true + pred)


def binary_prf(y_true, y_pred, positive) -> tuple[float, float, float]:
    """Precision, recall and F1 of class ``positive`` (0 when undefined)."""
    yt, yp = _pair(y_true, y_pred)
    t, p = yt == positive, yp == positive
    pr, rc, f = _prf(np.sum(t & p), np.sum(p), np.sum(t))
    return float(pr), float(rc), float(f)


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
    yt, yp = _pair(y_true, y_pred)
    labels, C, true, pred = _counts(yt, yp, labels)
    tp = np.diag(C)
    p, r, f = _prf(tp, pred, true)
    out = {"accuracy": accuracy(yt, yp)}
    mp, mr, mf = _prf(tp.sum(), pred.sum(), true.sum())
    out.update({"micro_precision": float(mp), "micro_recall": float(mr), "micro_f1": float(mf)})
    out.update({"macro_precision": float(np.average(p)), "macro_recall": float(np.average(r)),
                "macro_f1": float(np.average(f))})
    out["labels"] = list(labels)
    out["per_class"] = {str(c): {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                                 "support": int(true[i])} for i, c in enumerate(labels)}
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


# ---- regression -----------------------------------------------------------------------------------

REGRESSION_METRICS = ("pearson", "spearman", "mse")


def _reals(y_true, y_pred):
    yt, yp = _pair(y_true, y_pred)
    yt, yp = yt.astype(np.float64), yp.astype(np.float64)
    if not (np.isfinite(yt).all() and np.isfinite(yp).all()):
        raise EvaluationError("metrics: the targets or predictions have NaN or infinite values")
    return yt, yp


def pearson(y_true, y_pred) -> float:
    """Pearson's correlation of the predictions with the targets; NaN when either is constant."""
    yt, yp = _reals(y_true, y_pred)
    a, b = yt - yt.mean(), yp - yp.mean()
    den = np.sqrt(np.dot(a, a) * np.dot(b, b))
    return float(np.dot(a, b) / den) if den > 0 else float("nan")


def average_ranks(x) -> np.ndarray:
    """The ranks (1 = smallest) of ``x``, tied values sharing the mean of their ranks."""
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(xs)) + 1))
    ends = np.concatenate((starts[1:], [xs.size]))
    ranks = np.empty(x.size)
    ranks[order] = np.repeat((starts + ends + 1) / 2.0, ends - starts)
    return ranks


def spearman(y_true, y_pred) -> float:
    """Spearman's rank correlation (Pearson's of the average ranks); NaN when either is constant."""
    yt, yp = _reals(y_true, y_pred)
    return pearson(average_ranks(yt), average_ranks(yp))


def mse(y_true, y_pred) -> float:
    """The mean squared error of the predictions."""
    yt, yp = _reals(y_true, y_pred)
    return float(np.mean((yt - yp) ** 2))


def regression_report(y_true, y_pred) -> dict:
    """``pearson``, ``spearman`` and ``mse`` of real predictions against real targets."""
    return {"pearson": pearson(y_true, y_pred), "spearman": spearman(y_true, y_pred), "mse": mse(y_true, y_pred)}


# ---- ranking --------------------------------------------------------------------------------------

RANKING_METRICS = ("map", "mrr", "p_at_1", "ndcg")


def group_ranking(targets, scores) -> dict | None:
    """AP, RR, P@1 and nDCG of one group's candidates ordered by score (largest first), or None
    when the group does not count (no relevant or no irrelevant candidate: target > 0 is relevant).

    Tied scores are ordered pessimistically (the lower target first), so a scorer that cannot tell
    candidates apart gets no credit for them. AP is the mean over relevant candidates of the
    precision at their rank; RR is 1 / the rank of the first relevant candidate; nDCG is the DCG
    (gain: the target, negative targets counting 0; discount 1 / log2(rank + 1)) over the whole list
    divided by the DCG of the best order.
    """
    t = np.asarray(targets, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    rel = t > 0
    if rel.all() or not rel.any():
        return None
    order = np.lexsort((t, -s))
    r = rel[order]
    ranks = np.arange(1, t.size + 1)
    hits = np.cumsum(r)
    ap = float(np.sum(hits[r] / ranks[r]) / r.sum())
    rr = 1.0 / float(ranks[r][0])
    gain = np.maximum(t, 0.0)
    disc = 1.0 / np.log2(ranks + 1.0)
    ndcg = float(np.dot(gain[order], disc) / np.dot(np.sort(gain)[::-1], disc))
    return {"map": ap, "mrr": rr, "p_at_1": float(r[0]), "ndcg": ndcg}


def ranking_report(targets, scores, groups) -> dict:
    """``map``, ``mrr``, ``p_at_1``, ``ndcg``: the means of :func:`group_ranking` over the groups
    that count (both a relevant and an irrelevant candidate), ``n_groups`` how many counted and
    ``n_groups_skipped`` how many did not; the metrics are NaN when no group counts."""
    t, s = _reals(targets, scores)
    g = np.asarray(groups)
    if g.shape != t.shape:
        raise EvaluationError(f"metrics: {g.size} group ids for {t.size} targets; give one group id per example")
    _, code = np.unique(g, return_inverse=True)
    order = np.argsort(code, kind="stable")
    bounds = np.flatnonzero(np.diff(code[order])) + 1
    got = [group_ranking(t[m], s[m]) for m in np.split(order, bounds)]
    counted = [x for x in got if x is not None]
    out = {k: float(np.mean([x[k] for x in counted])) if counted else float("nan") for k in RANKING_METRICS}
    out.update({"n_groups": len(counted), "n_groups_skipped": len(got) - len(counted)})
    return out
