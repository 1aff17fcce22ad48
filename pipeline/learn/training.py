"""Fit the final model on every training example and return it as a saved model: what ``gramtile
train`` does once the configuration is fixed (or chosen, :func:`gramtile.pipeline.learn.selection.choose`).

:func:`train` fits a kernel learner of the registry (the SVM, by libsvm or smo, or the voted
perceptron) on labelled Documents, with K(train, train) given, read from Gram stores
(:func:`train_from_store`) or computed in memory; the model carries the support examples, their
dual coefficients and the corpus resources the kernel read (:class:`~gramtile.pipeline.learn.models.SavedModel`).
"""
from __future__ import annotations

import numpy as np

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.inmemory import gram_with_resources
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.fits import read_block
from gramtile.pipeline.learn.learners.base import Learner, Problem
from gramtile.pipeline.learn.learners.registry import make
from gramtile.pipeline.learn.models import (
    SavedModel,
    TrainedResources,
    kernel_reps,
    relabel,
    stored_resources,
    stored_source,
    structures_by_rep,
)
from gramtile.pipeline.learn.selection import TASK_METRICS, choose
from gramtile.pipeline.learn.solver import fit_smo_functions, plan_solver
from gramtile.pipeline.learn.sources import ArrayKernelSource, check_labels
from gramtile.pipeline.learn.tasks import retarget, task_of, task_targets
from gramtile.pipeline.progress import log
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreMismatchError

#: how the folds of each task kind's nested choice are made, as the model's record says it
FOLD_KIND = {"classification": "stratified cross-validation", "regression": "cross-validation",
             "ranking": "group cross-validation (every group in one fold)"}


def select_point(learner, source, labels, grid, inner_folds: int = 3, inner_seed: int = 0, positive=None,
                 class_weight=None, multiclass: str = "ovr", seed=None, cluster=None, task: str = "classification",
                 groups=None):
    """The point of ``grid`` chosen by ``inner_folds``-fold cross-validation on all the training
    examples (stratified; plain for a regression, by group for a ranking; pooled accuracy, Pearson's
    correlation or MAP, ties to the smaller values; :func:`~gramtile.pipeline.learn.selection.choose`),
    and the record a model keeps of the choice. A grid of one point is returned as it is, with no
    record."""
    points = learner.grid(grid)
    if len(points) == 1:
        return points[0], None
    metric = TASK_METRICS[task][0]
    point, ev = choose(learner, source, labels, points, folds=inner_folds, seed=inner_seed, positive=positive,
                       class_weight=class_weight, multiclass=multiclass, problem_seed=seed, task=task, groups=groups,
                       cluster=cluster)
    varying = learner.varying(points)
    record = {"method": f"nested: {inner_folds}-fold {FOLD_KIND[task]} on the training examples (seed "
                        f"{inner_seed}), pooled {metric}, ties to the smaller value",
              "grid": {p: list(dict.fromkeys(pt[p] for pt in points)) for p in varying},
              "chosen": {p: point[p] for p in varying},
              f"inner_{metric}": [{**{p: pt[p] for p in varying}, metric: r[metric]}
                                  for pt, r in zip(points, ev.rows)]}
    log.info(f"  chosen by {inner_folds}-fold cross-validation on the training examples: "
             + ", ".join(f"{p}={learner.param(p).text(point[p])}" for p in varying)
             + f" (inner {metric} " + ", ".join(f"{r[metric]:.4f}" for r in ev.rows) + ")")
    return point, record


def train(docs, spec, K=None, learner: str = "svm", C=1.0, class_weight=None, multiclass: str = "ovr",
          epochs=2, seed=None, provenance=None, resources: TrainedResources | None = None,
          solver: str = "auto", tol: float = 1e-3, cluster=None, inner_folds: int = 3,
          inner_seed: int = 0, grid: dict | None = None, task: str | None = None) -> SavedModel:
    """Train a saved model on labelled Documents.

    Parameters
    ----------
    docs : list of Document
        Training examples (with the representations ``spec`` reads, and labels).
    spec : KernelSpec, dict or JSON
    K : ndarray (n, n) or kernel source, optional
        K_spec(docs, docs) if already computed, or a kernel source over the docs (e.g. a view of
        Gram stores, read only as the solver needs); else computed in memory.
    learner, C, class_weight, multiclass, epochs, seed
        As in :func:`gramtile.pipeline.learn.crossval.evaluate`. ``C`` (svm) or ``epochs``
        (perceptron) may be a list: the value is then chosen by ``inner_folds``-fold stratified
        cross-validation on the training examples (seed ``inner_seed``; :func:`select_point`),
        the model fitted on all of them with it, and the choice recorded in
        ``params["selection"]``. ``learner`` may also be a learner of the registry (a
        :class:`~gramtile.pipeline.learn.learners.base.Learner` that reads a kernel) with its grid
        in ``grid`` (parameter name -> value or list of values); its estimator is saved through
        its ``functions()`` (a kernel expansion) when it has them.
    solver, tol, cluster
        The SVM solver (:func:`~gramtile.pipeline.learn.crossval.plan_solver`; ``smo`` reads
        kernel rows from ``K`` through a cache and never holds K(train, train)) and where its
        one-vs-rest problems run (a profile name, address or Runtime, whose ``memory_mb``,
        ``cache_mb`` and ``scratch`` apply). The choice is logged as one line and recorded in
        the model's ``params["solver"]``.
    resources : TrainedResources, optional
        The corpus resources ``K`` was computed with (e.g. a corpus store's, see
        :func:`train_from_store`). By default, and always when K is computed here, those
        :func:`gramtile.gram` builds over ``docs``; a K computed otherwise must pass its own.
    task : {"classification", "regression", "ranking"}, optional
        The task kind (default: the learner's one kind, :func:`~gramtile.pipeline.learn.tasks.task_of`).
        A regression learns the Documents' ``target``; a ranking their targets as relevance (else
        their labels read as numbers) within their ``group``
        (:func:`~gramtile.pipeline.learn.tasks.task_targets`); either model is saved with its
        task, one real-valued function over its support examples (``scheme`` ``single``).
    """

    spec = as_spec(spec)
    lr = learner if isinstance(learner, Learner) else \
        make(learner, **({"solver": solver, "tol": tol} if learner == "svm" else {}))
    task = task_of(lr, task)
    if task == "classification":
        if any(d.label is None for d in docs) and docs and all(d.target is not None for d in docs):
            raise EvaluationError(f"the training examples carry real targets and no class labels, and --model "
                                  f"{lr.name} learns classification; use --model svr or krr (regression) or rank "
                                  "(ranking), or give --labels FILE")
        y = np.asarray(check_labels([d.label for d in docs], "training data"), dtype=object).astype(str)
        classes = np.unique(y)
        if len(classes) < 2:
            raise EvaluationError(f"training data have one class only ({classes.tolist()!r}); give two or more")
    else:
        y, groups = real_targets(task, docs)
    if K is None:
        if resources is not None:
            raise EvaluationError("train(): resources given without K; pass the K computed with them, or neither")
        K, strings, values = gram_with_resources(spec, structures_by_rep(docs, kernel_reps(spec)))
        resources = TrainedResources(strings, values) if values else None
    source = K if hasattr(K, "block") and hasattr(K, "n") else None
    if source is None:
        K = np.asarray(K, dtype=np.float64)
        if K.shape != (len(docs), len(docs)):
            raise EvaluationError(f"K has shape {K.shape} for {len(docs)} training examples; pass K(train, train)")
    elif source.n != len(docs):
        raise EvaluationError(f"the kernel source has {source.n} examples for {len(docs)} training examples; its rows "
                              "must be the training examples, in order")
    if lr.reads != "kernel":
        raise EvaluationError(f"train(): {lr.name} reads {lr.reads}, not a kernel over the training examples; "
                              f"train it from its store (gramtile train --model {lr.name})")
    grid_values = dict(grid) if grid is not None else {"C": C} if lr.name == "svm" else \
        {"epochs": epochs} if lr.name == "perceptron" else {}
    if task != "classification":
        return train_real(lr, task, docs, spec, K if source is None else source, y, groups, grid_values,
                          class_weight=class_weight, seed=seed, provenance=provenance, resources=resources,
                          cluster=cluster, inner_folds=inner_folds, inner_seed=inner_seed)
    point, record = select_point(lr, source if source is not None else ArrayKernelSource(K), y, grid_values,
                                 inner_folds, inner_seed, class_weight=class_weight, multiclass=multiclass, seed=seed,
                                 cluster=cluster)
    params = {"C": point.get("C"), "class_weight": class_weight, "multiclass": multiclass,
              **{k: v for k, v in point.values if k != "C"}, **({"selection": record} if record else {})}
    problem = Problem(tuple(classes.tolist()), None, class_weight, multiclass, seed)
    if lr.name == "svm":
        solver = getattr(lr, "solver", solver)
        plan = plan_solver(solver, len(docs), 0, cluster, 0, multiclass, len(classes), tol=tol)
        params["solver"] = plan.to_dict()
        log.info(plan.line)
        if plan.used == "smo":
            funcs = fit_smo_functions(source if source is not None else ArrayKernelSource(K), y, classes.tolist(),
                                      float(point["C"]), class_weight, plan, cluster=cluster)
            scheme = "binary" if len(classes) == 2 else "ovr"
            return SavedModel.from_functions(spec, "svm", scheme, classes.tolist(), funcs, docs, params=params,
                                             provenance=provenance, resources=resources)
    if source is not None:
        n = len(docs)
        K = read_block(source, np.arange(n), np.arange(n), "train x train")
    est = lr.estimator(point, problem)
    est.fit(K, y)
    if hasattr(est, "functions"):  # a kernel expansion: (support positions, coefficients, intercept) per function
        return SavedModel.from_functions(spec, lr.name, est.scheme, est.classes_.tolist(), est.functions(), docs,
                                         params=params, provenance=provenance, resources=resources)
    return SavedModel.from_estimator(est, spec, docs, params=params, provenance=provenance, resources=resources)


def real_targets(task: str, docs) -> tuple:
    """The real targets (and a ranking's groups) of training Documents, checked that there is
    something to learn: targets that differ; a group whose candidates differ in relevance."""
    targets = [d.target for d in docs]
    y, groups, _ = task_targets(task, len(docs), "the training examples",
                                targets=None if any(t is None for t in targets) else targets,
                                labels=[d.label for d in docs], groups=[d.group for d in docs])
    if task == "regression" and np.unique(y).size < 2:
        raise EvaluationError(f"every target of the training examples is {y[0]:g}; a regression needs targets that "
                              "differ")
    if task == "ranking" and not any(np.unique(y[groups == g]).size > 1 for g in np.unique(groups)):
        raise EvaluationError("no group of the training examples has candidates with different relevance, so there "
                              "is no preference to learn; check the targets and groups")
    return y, groups


def train_real(lr: Learner, task: str, docs, spec, K, y, groups, grid_values: dict, class_weight=None, seed=None,
               provenance=None, resources=None, cluster=None, inner_folds: int = 3,
               inner_seed: int = 0) -> SavedModel:
    """:func:`train` of a regression or ranking: the grid point chosen by nested cross-validation
    (:func:`select_point`), the learner's estimator fitted on K(train, train) exactly as the tasks of
    :func:`~gramtile.pipeline.learn.selection.evaluate` fit it, and saved as its kernel expansion."""
    problem = Problem((), None, class_weight, "ovr", seed, task)
    lr.check_problem(problem)
    source = K if hasattr(K, "block") else ArrayKernelSource(K)
    point, record = select_point(lr, source, y, grid_values, inner_folds, inner_seed, seed=seed, cluster=cluster,
                                 task=task, groups=groups)
    params = {**point.as_dict(), **({"selection": record} if record else {})}
    n = len(docs)
    block = read_block(source, np.arange(n), np.arange(n), "train x train") if hasattr(K, "block") else K
    est = lr.estimator(point, problem)
    if task == "ranking":
        est.fit(block, y, groups=groups)
    else:
        est.fit(block, y)
    return SavedModel.from_functions(spec, lr.name, "single", [], est.functions(), docs, params=params,
                                     provenance=provenance, resources=resources, task=task)


def train_from_store(corpus_path, grams, spec, provenance=None, labels_file=None, targets_file=None,
                     groups_file=None, **kwargs) -> SavedModel:
    """Train on a corpus store's examples with K read from its Gram stores (``gramtile train
    --corpus C --gram G ...``); the model carries the corpus store's stored resources.

    Parameters
    ----------
    corpus_path : path of a corpus store
    grams : list of paths
        Square Gram stores of the corpus, one per base kernel of ``spec``.
    spec : KernelSpec, dict or JSON
    provenance : dict, optional
    labels_file : path, optional
        One label per line for the corpus's examples (in corpus order), instead of the stored ones.
    targets_file, groups_file : path, optional
        One real target / group id per line for the corpus's examples (in corpus order), instead
        of the stored ones (a regression's or ranking's, :func:`~gramtile.pipeline.learn.tasks.retarget`).
    **kwargs
        Learner options of :func:`train` (learner, C, class_weight, multiclass, epochs, seed,
        solver, tol, cluster). K(train, train) is read from the
        stores only as the solver needs it: whole for libsvm, row bands through the cache for smo.
    """

    spec = as_spec(spec)
    cs = CorpusStore.open(corpus_path)
    source, rows, stores = stored_source(spec, grams, cs.content_hash)
    docs = relabel(cs.documents(), labels_file, f"examples of {corpus_path}")
    docs = retarget(docs, targets_file, groups_file, f"examples of {corpus_path}")
    if len(rows) != source.n or (len(rows) and (int(np.min(rows)) < 0 or int(np.max(rows)) >= len(docs))):
        raise StoreMismatchError(f"the Gram store's {source.n} rows are not examples of {corpus_path} ({len(docs)} "
                                 "examples); pass the corpus store the Gram store was computed from")
    docs = [docs[int(i)] for i in rows]
    prov = {"corpus": str(corpus_path), "corpus_hash": cs.content_hash, "gram": [str(g) for g in grams],
            **(provenance or {})}
    return train(docs, spec, K=source, provenance=prov, resources=stored_resources(corpus_path, spec, stores),
                 **kwargs)
