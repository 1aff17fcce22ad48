"""Train and evaluate kernel machines over a kernel source: k-fold, fixed split, learning curves.

A *kernel source* is anything with ``n`` (examples) and ``block(rows, cols) -> ndarray``:
an in-memory matrix (:class:`~gramtile.pipeline.learn.sources.ArrayKernelSource`) or a Gram store's lazy reader
(:func:`gramtile.pipeline.learn.sources.open_gram_source`). For each split the learner reads exactly two blocks,
K[train][:, train] to fit and K[test][:, train] to predict, so a store only loads the chunks
those rows and columns touch; every setting of a C grid reuses the two blocks.

Models: ``"svm"`` is ``sklearn.svm.SVC(kernel="precomputed")`` (multi-class one-vs-rest via
``OneVsRestClassifier``, or SVC's native one-vs-one), ``"perceptron"`` the kernel voted
perceptron of :mod:`gramtile.pipeline.learn.perceptron`.

Result rows are flat dicts. Binary tasks report precision/recall/F1 of the positive class
(:func:`~gramtile.pipeline.learn.metrics.positive_class`); multi-class tasks report macro-averaged precision/recall/F1 and also
``macro_f1`` and ``micro_f1``. Overall figures pool the predictions of all test parts (each
example is tested once under k-fold); ``accuracy_std`` is the spread of per-fold accuracies.

C selection: given several C values, ``select="nested"`` (the default of ``gramtile evaluate``)
selects C *inside* each training part (stratified inner folds on the training examples only,
:func:`choose_C`), trains with the chosen C and scores the test part once; the row reports
``C_grid`` and the C chosen per split (``C_chosen``). ``select="test"`` (the default here, for
callers that do their own selection on inner or development folds, as the workflow recipes do)
scores every C on the test parts, one row per C: choosing the best of those rows is selection
on test data.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.metrics import binary_prf, classification_report, mean_rr, neighbour_rr, positive_class
from gramtile.pipeline.learn.perceptron import VotedPerceptron
from gramtile.pipeline.learn.sources import ArrayKernelSource

MODELS = ("svm", "perceptron")
MULTICLASS = ("ovr", "ovo")
SELECT = ("nested", "test")


def parse_class_weight(text):
    """``None``/"none", "balanced", or "LABEL:W,LABEL:W" (e.g. "+1:5") for SVC's class_weight."""
    if text is None or str(text).strip().lower() in ("", "none"):
        return None
    t = str(text).strip()
    if t == "balanced":
        return "balanced"
    out = {}
    for part in t.split(","):
        lab, sep, w = part.rpartition(":")
        try:
            out[lab.strip()] = float(w)
        except ValueError:
            sep = ""
        if not sep or not lab.strip() or not out.get(lab.strip(), 0) > 0:
            raise EvaluationError(f"--class-weight: cannot read {part!r} in {text!r}; use 'balanced', 'none' "
                                  "or LABEL:WEIGHT pairs with positive weights, e.g. +1:5")
    return out


@dataclass(frozen=True)
class Setting:
    """One model configuration of a grid."""

    model: str
    C: float | None = None
    epochs: int | None = None

    def build(self, class_weight, multiclass: str, n_classes: int, seed):
        if self.model == "perceptron":
            return VotedPerceptron(epochs=self.epochs, seed=seed)
        SVC = optional.sklearn("svm").SVC

        svc = SVC(kernel="precomputed", C=self.C, class_weight=class_weight)
        if n_classes > 2 and multiclass == "ovr":
            OneVsRestClassifier = optional.sklearn("multiclass").OneVsRestClassifier

            return OneVsRestClassifier(svc)
        return svc


def settings_for(model: str, C=(1.0,), epochs: int = 2) -> list[Setting]:
    """The grid of a model: one Setting per C for SVM, a single one for the perceptron."""
    if model not in MODELS:
        raise EvaluationError(f"model={model!r}; use one of {list(MODELS)}")
    if model == "perceptron":
        if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
            raise EvaluationError(f"epochs={epochs!r} is not an integer >= 1; use e.g. --epochs 2")
        return [Setting("perceptron", None, int(epochs))]
    Cs = [C] if np.isscalar(C) else list(C)
    if not Cs:
        raise EvaluationError("C grid is empty; give at least one value, e.g. --C 1")
    for c in Cs:
        if isinstance(c, bool) or not isinstance(c, (int, float, np.number)) or not c > 0 or not math.isfinite(c):
            raise EvaluationError(f"C={c!r} must be a positive finite number; e.g. --C 0.1,1,10")
    return [Setting("svm", float(c)) for c in Cs]


def check_inputs(source, labels, splits):
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) != source.n:
        raise EvaluationError(f"there are {len(y)} labels for a kernel over {source.n} examples; the labels "
                              "must list every row of the Gram matrix in order (check --labels)")
    splits = list(splits)
    if not splits:
        raise EvaluationError("no splits to evaluate; give --folds K or --split train:a:b,test:c:d")
    for s in splits:
        for side, idx in (("train", s.train), ("test", s.test)):
            if idx.size == 0 or idx.min() < 0 or idx.max() >= source.n:
                raise EvaluationError(f"{s.name}: {side} indices are empty or outside 0..{source.n - 1}; "
                                      "make the splits for this store's examples")
        if len(np.unique(y[s.train])) < 2:
            raise EvaluationError(f"{s.name}: the training part has one class only ({y[s.train][0]!r}); "
                                  "use stratified folds or a training range with both classes")
    return y, splits


def check_classes(classes, positive, class_weight):
    if len(classes) == 2 and positive not in classes:
        raise EvaluationError(f"positive class {positive!r} is not one of the labels {classes!r}; pick one of them")
    if isinstance(class_weight, dict):
        unknown = [k for k in class_weight if k not in classes]
        if unknown:
            raise EvaluationError(f"class weight given for {unknown[0]!r}, which is not a label ({classes!r}); "
                                  "name existing labels, e.g. --class-weight " + f"{classes[-1]}:5")
    elif class_weight not in (None, "balanced"):
        raise EvaluationError(f"class_weight={class_weight!r}; use None, 'balanced' or a dict label -> weight")


def read_block(source, rows, cols, what):
    B = np.asarray(source.block(rows, cols), dtype=np.float64)
    if B.shape != (len(rows), len(cols)):
        raise EvaluationError(f"kernel source returned a block of shape {B.shape} for {what}, "
                              f"expected {(len(rows), len(cols))}")
    if not np.all(np.isfinite(B)):
        raise EvaluationError(f"the {what} block has NaN or infinite entries (an unfinished Gram store?); "
                              "finish it with `gramtile gram` (it resumes) and rerun")
    return B


def prediction_scores(y_true, y_pred, classes, positive) -> dict:
    rep = classification_report(y_true, y_pred, labels=classes)
    row = {"accuracy": rep["accuracy"]}
    if len(classes) == 2:
        p, r, f = binary_prf(y_true, y_pred, positive)
        row.update({"precision": p, "recall": r, "f1": f})
    else:
        row.update({"precision": rep["macro_precision"], "recall": rep["macro_recall"], "f1": rep["macro_f1"],
                    "macro_f1": rep["macro_f1"], "micro_f1": rep["micro_f1"]})
    return row, rep


@dataclass
class Evaluation:
    """What :func:`evaluate` returns.

    Attributes
    ----------
    rows : list of dict
        One per setting: pooled metrics over all test parts.
    fold_rows : list of dict
        One per (split, setting).
    predictions : dict
        Setting label -> (test indices, predicted labels), pooled in split order.
    reports : dict
        Setting label -> full :func:`~gramtile.pipeline.learn.metrics.classification_report` (pooled).
    """

    rows: list = field(default_factory=list)
    fold_rows: list = field(default_factory=list)
    predictions: dict = field(default_factory=dict)
    reports: dict = field(default_factory=dict)


def _label(s: Setting) -> str:
    if s.model == "perceptron":
        return f"perceptron epochs={s.epochs}"
    return "svm C=nested" if s.C is None else f"svm C={s.C:g}"


def _base_row(kernel, s: Setting, class_weight, multiclass, n_classes):
    row = {"kernel": kernel, "model": s.model, "C": s.C}
    if s.model == "perceptron":
        row["epochs"] = s.epochs
    else:
        row["class_weight"] = class_weight if class_weight is None or isinstance(class_weight, str) \
            else ",".join(f"{k}:{v:g}" for k, v in class_weight.items())
        if n_classes > 2:
            row["multiclass"] = multiclass
    return row


def evaluate(source, labels, splits, model: str = "svm", C=(1.0,), class_weight=None, multiclass: str = "ovr",
             epochs: int = 2, seed=None, kernel: str = "kernel", positive=None,
             progress=None, select: str = "test", inner_folds: int = 3, inner_seed: int = 0) -> Evaluation:
    """Fit and score a model on each split, reading two kernel blocks per split.

    Parameters
    ----------
    source : KernelSource
        n x n kernel over all labelled examples.
    labels : sequence, shape (n,)
    splits : list of Split
        k-fold splits (:func:`~gramtile.pipeline.learn.folds.stratified_kfold`) or one fixed split.
    model : {"svm", "perceptron"}
    C : float or sequence of float
        SVM regularisation grid (ignored by the perceptron).
    class_weight : None, "balanced" or dict label -> weight
        SVC's ``class_weight`` (ignored by the perceptron).
    multiclass : {"ovr", "ovo"}
        SVM multi-class scheme for more than two classes (the perceptron is always one-vs-rest).
    epochs : int
        Perceptron passes over the training data.
    seed : int or None
        Perceptron visiting order (None: data order, deterministic).
    kernel : str
        Name written into every row.
    positive : label or None
        Positive class of a binary task (default :func:`positive_class`).
    progress : callable or None
        Called with one line of text after each split.
    select : {"test", "nested"}
        With several C: score every C on the test parts (``"test"``, one row per C, default),
        or choose C per split on ``inner_folds`` stratified folds (seed ``inner_seed``) of its
        training part only (``"nested"``, one row).

    Returns
    -------
    Evaluation
    """
    if multiclass not in MULTICLASS:
        raise EvaluationError(f"multiclass={multiclass!r}; use one of {list(MULTICLASS)}")
    if select not in SELECT:
        raise EvaluationError(f"select={select!r}; use one of {list(SELECT)}")
    grid = settings_for(model, C, epochs)
    nested = model == "svm" and len(grid) > 1 and select == "nested"
    c_grid = [s.C for s in grid]
    if nested:
        grid = [Setting("svm", None)]
    chosen = []
    y, splits = check_inputs(source, labels, splits)
    classes = sorted(np.unique(y).tolist())
    if positive is None and len(classes) == 2:
        positive = positive_class(classes)
    check_classes(classes, positive, class_weight)
    res = Evaluation()
    pooled = {_label(s): ([], []) for s in grid}
    fold_acc = {_label(s): [] for s in grid}
    for sp in splits:
        K_tr = read_block(source, sp.train, sp.train, f"{sp.name} train x train")
        K_te = read_block(source, sp.test, sp.train, f"{sp.name} test x train")
        for s in grid:
            fit_s, extra = s, {}
            if nested:
                c, _ = choose_C(K_tr, y[sp.train], c_grid, folds=inner_folds, seed=inner_seed,
                                class_weight=class_weight, multiclass=multiclass, positive=positive)
                chosen.append(c)
                fit_s, extra = Setting("svm", c), {"C_chosen": c}
            est = fit_s.build(class_weight, multiclass, len(classes), seed)
            est.fit(K_tr, y[sp.train])
            pred = np.asarray(est.predict(K_te))
            row, _ = prediction_scores(y[sp.test], pred, classes, positive)
            fold_acc[_label(s)].append(row["accuracy"])
            res.fold_rows.append({**_base_row(kernel, fit_s, class_weight, multiclass, len(classes)), **extra,
                                  "split": sp.name, "n_train": int(sp.train.size), "n_test": int(sp.test.size),
                                  **row})
            pooled[_label(s)][0].append(sp.test)
            pooled[_label(s)][1].append(pred)
        if progress is not None:
            progress(f"{sp.name}: trained on {sp.train.size}, tested on {sp.test.size}")
    for s in grid:
        key = _label(s)
        idx, pred = np.concatenate(pooled[key][0]), np.concatenate(pooled[key][1])
        row, rep = prediction_scores(y[idx], pred, classes, positive)
        acc = np.asarray(fold_acc[key])
        out = {**_base_row(kernel, s, class_weight, multiclass, len(classes)), "splits": len(splits),
               "n_test": int(idx.size), **row,
               "accuracy_std": float(acc.std(ddof=1)) if acc.size > 1 else 0.0}
        if nested:
            out["C_grid"] = ",".join(f"{c:g}" for c in c_grid)
            out["C_chosen"] = ",".join(f"{c:g}" for c in chosen)
            out["selection"] = f"nested: {inner_folds}-fold on each training part"
        if len(classes) == 2:
            out["positive"] = positive
        res.rows.append(out)
        res.predictions[key] = (idx, pred)
        res.reports[key] = rep
    return res


def source_mrr(source, labels, ties: str = "pessimistic", block_rows: int = 256) -> float:
    """:func:`~gramtile.pipeline.learn.metrics.neighbour_mrr` over a kernel source, ``block_rows``
    full rows at a time, so the whole matrix never has to fit in memory."""
    y = np.asarray(labels)
    if len(y) != source.n:
        raise EvaluationError(f"there are {len(y)} labels for a kernel over {source.n} examples; the labels "
                              "must list every row of the Gram matrix in order (check --labels)")
    cols = np.arange(source.n)
    rr = [neighbour_rr(source.block(cols[a:a + block_rows], cols), cols[a:a + block_rows], y, ties)
          for a in range(0, source.n, block_rows)]
    return mean_rr(np.concatenate(rr))


def nested_order(y_train, seed: int = 0) -> np.ndarray:
    """A seeded order of training positions whose every prefix keeps the class proportions.

    Each example gets the key (rank within its class in a seeded shuffle + 0.5) / class size,
    and examples are sorted by key (ties broken by a seeded shuffle). Taking the first m of
    this order gives nested, roughly stratified training subsets, and any prefix of at least
    n_classes examples holds every class.
    """
    y = np.asarray(y_train)
    rng = np.random.default_rng(seed)
    key = np.empty(len(y))
    for c in np.unique(y):
        pos = np.flatnonzero(y == c)
        key[rng.permutation(pos)] = (np.arange(pos.size) + 0.5) / pos.size
    tiebreak = rng.permutation(len(y))
    return np.lexsort((tiebreak, key))


def learning_curve(source, labels, splits, fractions=(0.1, 0.25, 0.5, 1.0), model: str = "svm", C=(1.0,),
                   class_weight=None, multiclass: str = "ovr", epochs: int = 2, seed: int = 0,
                   perceptron_seed=None, kernel: str = "kernel", positive=None, progress=None) -> list[dict]:
    """Scores as the training part grows: for each fraction f, train on the first
    ceil(f * n_train) examples of :func:`nested_order` of each split's training part.

    Reads K[train'][:, train'] and K[test][:, train'] once per split, where train' is the
    largest subset needed; smaller subsets are sliced from them in memory. ``seed`` fixes the
    nested subsets; ``perceptron_seed`` is the perceptron's visiting order as in :func:`evaluate`
    (other parameters as there).

    Returns
    -------
    list of dict
        One per (fraction, setting): ``fraction``, ``n_train`` (mean over splits), pooled
        metrics as in :func:`evaluate`, and ``accuracy_std`` over splits.
    """
    fr = sorted({float(f) for f in np.atleast_1d(fractions)})
    if not fr or fr[0] <= 0 or fr[-1] > 1:
        raise EvaluationError(f"learning curve fractions {fractions!r} must lie in (0, 1]; e.g. 0.1,0.25,0.5,1")
    if multiclass not in MULTICLASS:
        raise EvaluationError(f"multiclass={multiclass!r}; use one of {list(MULTICLASS)}")
    grid = settings_for(model, C, epochs)
    y, splits = check_inputs(source, labels, splits)
    classes = sorted(np.unique(y).tolist())
    if positive is None and len(classes) == 2:
        positive = positive_class(classes)
    check_classes(classes, positive, class_weight)
    acc = {}  # (fraction, label) -> [idx list, pred list, accs, n_trains]
    for sp in splits:
        order = sp.train[nested_order(y[sp.train], seed)]
        sizes = [max(len(classes), math.ceil(f * sp.train.size)) for f in fr]
        top = order[:max(sizes)]
        K_tr = read_block(source, top, top, f"{sp.name} train x train")
        K_te = read_block(source, sp.test, top, f"{sp.name} test x train")
        for f, m in zip(fr, sizes):
            if len(np.unique(y[top[:m]])) < 2:
                raise EvaluationError(f"{sp.name}: a training subset of {m} examples has one class; "
                                      "use larger learning-curve fractions")
            for s in grid:
                est = s.build(class_weight, multiclass, len(classes), perceptron_seed)
                est.fit(K_tr[:m, :m], y[top[:m]])
                pred = np.asarray(est.predict(K_te[:, :m]))
                a = acc.setdefault((f, _label(s)), ([], [], [], [], s))
                a[0].append(sp.test)
                a[1].append(pred)
                a[2].append(float(np.mean(pred == y[sp.test])))
                a[3].append(m)
        if progress is not None:
            progress(f"{sp.name}: learning curve over {len(fr)} training sizes")
    rows = []
    for (f, _), (idx, pred, accs, ms, s) in acc.items():
        idx, pred = np.concatenate(idx), np.concatenate(pred)
        row, _ = prediction_scores(y[idx], pred, classes, positive)
        accs = np.asarray(accs)
        rows.append({**_base_row(kernel, s, class_weight, multiclass, len(classes)), "fraction": f,
                     "n_train": float(np.mean(ms)), "n_test": int(idx.size), **row,
                     "accuracy_std": float(accs.std(ddof=1)) if accs.size > 1 else 0.0})
    return rows


def select_C(source, labels, train, C, folds: int = 3, seed: int = 0, class_weight=None, multiclass: str = "ovr",
             positive=None, metric: str = "accuracy"):
    """Choose the SVM's C by stratified k-fold cross-validation inside the training examples only.

    K[train][:, train] is read once; the inner folds are cut from it in memory. Ties go to the
    smaller C (the simpler model).

    Returns
    -------
    (float, list of dict)
        The chosen C and the inner result rows (one per C, pooled over the inner folds).
    """

    tr = np.asarray(train, dtype=np.int64)
    y = np.asarray(labels)[tr]
    return choose_C(read_block(source, tr, tr, "train x train (C selection)"), y, C, folds=folds, seed=seed,
                    class_weight=class_weight, multiclass=multiclass, positive=positive, metric=metric)


def choose_C(K_train, y_train, C, folds: int = 3, seed: int = 0, class_weight=None, multiclass: str = "ovr",
             positive=None, metric: str = "accuracy"):
    """:func:`select_C` on an in-memory K[train][:, train] and its labels (ties to the smaller C).

    Returns
    -------
    (float, list of dict)
    """
    y = np.asarray(y_train)
    counts = np.unique(y, return_counts=True)[1]
    k = int(min(folds, counts.min()))
    if k < 2:
        raise EvaluationError(f"nested C selection needs at least 2 training examples of every class; one class "
                              f"has {int(counts.min())}. Give one --C, or --C-on-test")
    if positive is not None and positive not in set(y.tolist()):
        positive = None
    ev = evaluate(ArrayKernelSource(K_train), y, stratified_kfold(y, k, seed), model="svm", C=C,
                  class_weight=class_weight, multiclass=multiclass, positive=positive, select="test")
    if metric not in ev.rows[0]:
        raise EvaluationError(f"C selection metric {metric!r} is not a result column; use accuracy, f1 or macro_f1")
    best = max(ev.rows, key=lambda r: (r[metric], -r["C"]))
    return float(best["C"]), ev.rows
