"""Evaluate the kernel learners by name and keyword: k-fold, fixed split, learning curves, C choice.

The front end of :mod:`gramtile.pipeline.learn.selection` for the kernel learners of the
registry (``model="svm"`` or ``"perceptron"``) with their options as keywords, as the workflow
runner and the recipes call it. A *kernel source* is anything with ``n`` (examples) and
``block(rows, cols) -> ndarray``: an in-memory matrix
(:class:`~gramtile.pipeline.learn.sources.ArrayKernelSource`) or a Gram store's lazy reader
(:func:`gramtile.pipeline.learn.sources.open_gram_source`). For each split a fit reads exactly
two blocks, K[train][:, train] and K[test][:, train] (or, under the smo solver, kernel rows
through a bounded cache; :mod:`gramtile.pipeline.learn.solver`).

C selection: given several C values, ``select="nested"`` (the default of ``gramtile evaluate``)
selects C *inside* each training part (stratified inner folds on the training examples only),
trains with the chosen C and scores the test part once; the row reports ``C_grid`` and the C
chosen per split (``C_chosen``). ``select="test"`` (the default here, for callers that do their
own selection on inner or development folds) scores every C on the test parts, one row per C:
choosing the best of those rows is selection on test data.
"""
from __future__ import annotations

import numpy as np

from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.fits import read_block
from gramtile.pipeline.learn.learners.registry import make
from gramtile.pipeline.learn.nystroem import CUTOFF, LOSS, MAX_ITER, TOL
from gramtile.pipeline.learn.selection import (  # noqa: F401  (the names callers of this front end use)
    Evaluation,
    check_classes,
    check_inputs,
    nested_order,
    prediction_scores,
    source_mrr,
)
from gramtile.pipeline.learn.solver import SOLVERS, SolverPlan, fit_smo_functions, plan_solver  # noqa: F401
from gramtile.pipeline.learn.sources import ArrayKernelSource

MODELS = ("svm", "perceptron")
MULTICLASS = ("ovr", "ovo")
SELECT = selection.SELECT


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


def kernel_learner(model: str, solver="auto", tol: float = 1e-3):
    """The registry's learner ``model`` (svm or perceptron) with the SVM's solver options."""
    if model not in MODELS:
        raise EvaluationError(f"model={model!r}; use one of {list(MODELS)}")
    return make("svm", solver=solver, tol=tol) if model == "svm" else make("perceptron")


def _grid(model: str, C, epochs) -> dict:
    if model == "perceptron":
        return {"epochs": epochs}
    return {"C": [C] if np.isscalar(C) else list(C)}


def evaluate(source, labels, splits, model: str = "svm", C=(1.0,), class_weight=None, multiclass: str = "ovr",
             epochs: int = 2, seed=None, kernel: str = "kernel", positive=None,
             select: str = "test", inner_folds: int = 3, inner_seed: int = 0,
             inner_metric: str = "accuracy", solver: str | SolverPlan = "auto", tol: float = 1e-3,
             cluster=None) -> Evaluation:
    """Fit and score an SVM (a C grid) or the voted perceptron on each split
    (:func:`gramtile.pipeline.learn.selection.evaluate`).

    Parameters
    ----------
    source : KernelSource
        n x n kernel over all labelled examples.
    labels : sequence, shape (n,)
    splits : list of Split
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
        Positive class of a binary task (default :func:`~gramtile.pipeline.learn.metrics.positive_class`).
    select, inner_folds, inner_seed, inner_metric
        With several C: score every C on the test parts (``"test"``), or choose C per split on
        ``inner_folds`` stratified folds of its training part by ``inner_metric`` (``"nested"``).
    solver : {"auto", "libsvm", "smo"} or SolverPlan
        The SVM solver (:func:`~gramtile.pipeline.learn.solver.plan_solver`).
    tol : float
        smo's stopping tolerance.
    cluster : str or Runtime
        Where every fit runs as a task, and the run's settings.
    """
    if multiclass not in MULTICLASS:
        raise EvaluationError(f"multiclass={multiclass!r}; use one of {list(MULTICLASS)}")
    learner = kernel_learner(model, solver, tol)
    if model == "perceptron":
        check_classes(sorted(np.unique(np.asarray(labels)).tolist()), positive if positive is not None else
                      selection.problem_of(labels).positive, class_weight)
        class_weight, multiclass = None, "ovr"
    return selection.evaluate(learner, source, labels, splits, _grid(model, C, epochs), kernel=kernel,
                              positive=positive, class_weight=class_weight, multiclass=multiclass, seed=seed,
                              select=select, inner_folds=inner_folds, inner_seed=inner_seed, metric=inner_metric,
                              cluster=cluster)


def learning_curve(source, labels, splits, fractions=(0.1, 0.25, 0.5, 1.0), model: str = "svm", C=(1.0,),
                   class_weight=None, multiclass: str = "ovr", epochs: int = 2, seed: int = 0,
                   perceptron_seed=None, kernel: str = "kernel", positive=None, cluster=None) -> list[dict]:
    """:func:`gramtile.pipeline.learn.selection.learning_curve` of an SVM or the perceptron
    (``seed`` fixes the nested training subsets, ``perceptron_seed`` the perceptron's order)."""
    if multiclass not in MULTICLASS:
        raise EvaluationError(f"multiclass={multiclass!r}; use one of {list(MULTICLASS)}")
    learner = kernel_learner(model)
    if model == "perceptron":
        class_weight, multiclass = None, "ovr"
    return selection.learning_curve(learner, source, labels, splits, fractions, _grid(model, C, epochs), seed=seed,
                                    kernel=kernel, positive=positive, class_weight=class_weight,
                                    multiclass=multiclass, problem_seed=perceptron_seed, cluster=cluster)


def evaluate_nystroem(source, labels, splits, m: int, C=(1.0,), seed: int = 0, stratified: bool = True,
                      class_weight=None, cutoff: float = CUTOFF, kernel: str = "kernel", positive=None,
                      max_iter: int = MAX_ITER, landmarks=None, protocol: str = "train", tol: float = TOL,
                      loss: str = LOSS, cluster=None) -> list[dict]:
    """Score the Nystroem linear SVM for each split and C (``select="test"``), as rows with their
    pooled ``predictions`` (test indices, predicted labels). ``m`` landmarks are drawn per
    training part (seeded by ``seed``, stratified), or ``landmarks`` (positions among the
    source's rows; ``m`` is then ignored) are used under ``protocol`` (see
    :class:`~gramtile.pipeline.learn.learners.nystroem.Nystroem` for the other options)."""
    learner = make("nystroem", seed=seed, stratified=stratified, cutoff=cutoff, loss=loss, tol=tol,
                   max_iter=max_iter, protocol=protocol, fixed=landmarks)
    grid = {"C": [C] if np.isscalar(C) else list(C), "landmarks": 1 if landmarks is not None else m}
    ev = selection.evaluate(learner, source, labels, splits, grid, kernel=kernel, positive=positive,
                            class_weight=class_weight, cluster=cluster)
    return [{**row, "predictions": ev.predictions[key]} for row, key in zip(ev.rows, ev.predictions)]


def select_C(source, labels, train, C, folds: int = 3, seed: int = 0, class_weight=None, multiclass: str = "ovr",
             positive=None, metric: str = "accuracy"):
    """Choose the SVM's C by stratified k-fold cross-validation inside the training examples only.

    ``K[train][:, train]`` is read once; the inner folds are cut from it in memory. Ties go to the
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
    """:func:`select_C` on an in-memory ``K[train][:, train]`` and its labels (ties to the smaller C).

    Returns
    -------
    (float, list of dict)
    """
    from_array = ArrayKernelSource(K_train)
    y = np.asarray(y_train)
    if positive is not None and positive not in set(y.tolist()):
        positive = None
    point, ev = selection.choose(make("svm", solver=SolverPlan("libsvm", "libsvm", 0.0, 0.0, 0.0)), from_array, y,
                                 {"C": [C] if np.isscalar(C) else list(C)}, folds=folds, seed=seed, metric=metric,
                                 positive=positive, class_weight=class_weight, multiclass=multiclass)
    return float(point["C"]), ev.rows
