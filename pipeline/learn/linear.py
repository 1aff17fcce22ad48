"""Linear learning on explicit features (a feature store written by ``gramtile features``).

With rows ``x = phi(x) sqrt(w)`` (``gramtile.pipeline.compute.feature_sets.linear_rows``; divided
by their norms for ``normalized`` of a mapped kernel), ``<x, y> = K(x, y)``: a linear SVM on the
rows learns with the kernel without a Gram matrix. Two solvers (``solver``):

- ``liblinear``: scikit-learn's LinearSVC (squared hinge loss, or with ``loss="hinge"`` the
  kernel SVC's hinge loss; one-vs-rest, the intercept regularised like a weight;
  ``random_state`` = the seed), on the training rows read into memory;
- ``sgd``: scikit-learn's SGDClassifier (hinge loss, L2, ``alpha = 1 / (C n_train)``, so that its
  objective ``alpha/2 ||w||^2 + (1/n) sum hinge`` is the SVM's ``1/2 ||w||^2 + C sum hinge``
  divided by ``C n``), trained by ``partial_fit`` over chunks of at most ``chunk_rows`` training
  rows read from the store one after another, for ``epochs`` passes: only one chunk of Phi is in
  memory. Each pass visits the store's shards in a seeded random order and shuffles the rows
  of each chunk (``numpy.random.default_rng(seed)``), so a run is a function of its inputs.
  ``class_weight="balanced"`` is computed from the training labels (``n / (k n_c)``, as
  scikit-learn's), which ``partial_fit`` does not do itself;
- ``auto`` (default): liblinear when its estimated peak (:func:`liblinear_mb`) fits the memory
  budget, else sgd.

Both are one-vs-rest with one function per class (one for two classes) and predict the class
of the largest score. Their models are close to, not equal to, those of the kernel SVC (other
losses; the intercept). The learner :class:`gramtile.pipeline.learn.learners.linear.Linear` evaluates them through the
one selection loop (:mod:`gramtile.pipeline.learn.selection`), each fit a :class:`FitTask` that
carries the feature store's path and uid and its row indices (the worker reads its rows itself). :func:`train_store` fits one model on
every row and saves it (:class:`gramtile.pipeline.learn.linear_models.LinearModel`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.cache import current
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.choices import LINEAR_LOSSES, LINEAR_SOLVERS, SGD_CHUNK_ROWS, SGD_EPOCHS
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.linear_models import LinearModel, labels_of
from gramtile.pipeline.learn.parallel import fit_memory, too_big
from gramtile.pipeline.progress import log
from gramtile.pipeline.stores.feature_store import FeatureStore, current_uid

SOLVERS = LINEAR_SOLVERS
#: liblinear's losses (LinearSVC's ``loss``); sgd always uses the hinge loss
LOSSES = LINEAR_LOSSES
#: default SGD passes over the training rows
EPOCHS = SGD_EPOCHS
#: default rows per partial_fit call of SGD
CHUNK_ROWS = SGD_CHUNK_ROWS


def open_features(path, uid: str | None = None) -> FeatureStore:
    """The feature store at ``path``, opened once per run and process (the run's cache,
    ``feature-stores``; reopened when the store on disk was written again); with ``uid``, refused
    unless it is still the store a run started from."""
    fs = current().load("feature-stores", (str(path), current_uid(path)), lambda: FeatureStore(path))
    if uid is not None and fs.uid != uid:
        raise EvaluationError(f"feature store {path} is not the store this run started from (uid {uid[:8]}, now "
                              f"{fs.uid[:8]}): it was written again since. Fix: rerun on the store as it is now")
    return fs


# ---- memory and the solver choice --------------------------------------------------------------

def liblinear_mb(nnz: int, n: int, n_features: int, n_functions: int) -> float:
    """Estimated peak of one LinearSVC fit in MB: the training rows as CSR (12 bytes a non-zero),
    liblinear's copy of them (16 bytes a non-zero and two per row), and the weights twice
    (liblinear's and scikit-learn's, 8 bytes per feature per function)."""
    return (28.0 * nnz + 32.0 * n + 16.0 * n_functions * n_features) / 1e6


def sgd_mb(chunk_nnz: int, n_features: int, n_functions: int) -> float:
    """Estimated peak of one SGD fit in MB: one chunk of rows (twice: read and shuffled) and the
    weights (coef and its working copy)."""
    return (24.0 * chunk_nnz + 16.0 * n_functions * n_features) / 1e6


def plan_solver(solver: str, fs: FeatureStore, n_train: int, n_classes: int, cluster=None,
                chunk_rows: int = CHUNK_ROWS) -> dict:
    """The solver a run uses and why: ``{"requested", "used", "liblinear_mb", "sgd_mb", "memory_mb"}``.

    ``cluster``: where the fits run (default ``sequential``), which sets what they may use
    (:func:`~gramtile.pipeline.learn.parallel.fit_memory`). On worker processes a solver that
    cannot fit one worker is refused before the run starts."""
    if solver not in SOLVERS:
        raise EvaluationError(f"--linear-solver {solver!r}: choose one of {', '.join(SOLVERS)}")
    memory = fit_memory(cluster)
    nfun = 1 if n_classes == 2 else n_classes
    per_row = fs.nnz / max(1, fs.n)
    need = liblinear_mb(int(per_row * n_train), n_train, fs.n_features, nfun)
    need_sgd = sgd_mb(int(per_row * min(chunk_rows, n_train)), fs.n_features, nfun)
    budget = memory.per_task_mb
    used = solver if solver != "auto" else ("liblinear" if need <= budget else "sgd")
    if memory.on_workers and used == "liblinear" and need > budget:
        raise too_big("liblinear on the training rows in memory", need, memory, "--linear-solver sgd (or auto)")
    if memory.on_workers and used == "sgd" and need_sgd > budget:
        raise too_big(f"sgd over chunks of {chunk_rows} rows", need_sgd, memory, "a smaller --chunk-rows")
    return {"requested": solver, "used": used, "liblinear_mb": round(need, 1), "sgd_mb": round(need_sgd, 1),
            "memory_mb": round(budget, 1)}


def describe(plan: dict) -> str:
    """One line saying which solver runs and why."""
    why = (f"liblinear needs ~{plan['liblinear_mb']:,.0f} MB per fit, sgd ~{plan['sgd_mb']:,.0f} MB; budget "
           f"{plan['memory_mb']:,.0f} MB")
    return f"linear solver {plan['used']} ({plan['requested']}): {why}"


# ---- one fit -----------------------------------------------------------------------------------

def balanced_weights(y, classes) -> dict:
    """scikit-learn's ``balanced`` class weights ``n / (k n_c)`` over the labels ``y``."""
    y = np.asarray(y, dtype=object)
    return {c: len(y) / (len(classes) * int(np.sum(y == c))) for c in classes}


def sklearn_weights(class_weight):
    """``class_weight`` as scikit-learn reads it for string labels: it turns a label that spells
    an integer ("1", "-1") into that integer before looking it up, so a dict gets both keys."""
    if not isinstance(class_weight, dict):
        return class_weight
    out = {}
    for k, v in class_weight.items():
        out[str(k)] = float(v)
        try:
            out[int(str(k))] = float(v)
        except ValueError:
            pass
    return out


def fit(fs: FeatureStore, train, C: float = 1.0, solver: str = "liblinear", class_weight=None, seed: int = 0,
        epochs: int = EPOCHS, chunk_rows: int = CHUNK_ROWS, loss: str = "squared_hinge") -> tuple:
    """Fit on rows ``train`` of a feature store: ``(coef, intercept, classes)``.

    ``solver`` is ``liblinear`` or ``sgd`` (see the module docstring); ``class_weight`` is None,
    ``"balanced"`` or ``{label: weight}``; ``loss`` is liblinear's (``squared_hinge``, its
    default, or ``hinge``, the kernel SVC's loss); sgd always minimises the hinge loss.
    """
    if loss not in LOSSES:
        raise EvaluationError(f"--linear-loss {loss!r}: choose one of {', '.join(LOSSES)}")
    train = np.sort(np.asarray(train, np.int64))
    y_all = np.asarray(fs.labels, dtype=object)
    y = y_all[train]
    classes = sorted(set(y.tolist()))
    if len(classes) < 2:
        raise EvaluationError(f"linear fit: the training rows hold one class only ({classes!r}); give two or more")
    if not C > 0:
        raise EvaluationError(f"--C {C}: give positive values")
    if solver == "liblinear":
        svm = optional.sklearn("svm")
        clf = svm.LinearSVC(C=float(C), loss=loss, class_weight=sklearn_weights(class_weight), max_iter=10_000,
                            random_state=int(seed))
        clf.fit(fs.rows(train), y)
        return clf.coef_, clf.intercept_, [str(c) for c in clf.classes_]
    if solver != "sgd":
        raise EvaluationError(f"linear fit: solver {solver!r} is not liblinear or sgd")
    if epochs < 1 or chunk_rows < 1:
        raise EvaluationError(f"--sgd-epochs {epochs} / chunk rows {chunk_rows}: give positive integers")
    lm = optional.sklearn("linear_model")
    cw = balanced_weights(y, classes) if class_weight == "balanced" else class_weight
    clf = lm.SGDClassifier(loss="hinge", penalty="l2", alpha=1.0 / (float(C) * train.shape[0]),
                           learning_rate="optimal", fit_intercept=True, shuffle=False, random_state=int(seed),
                           class_weight=sklearn_weights(cw), average=False)
    rng = np.random.default_rng(seed)
    shard_of = np.searchsorted(fs.starts, train, side="right") - 1
    groups = {int(k): train[shard_of == k] for k in np.unique(shard_of)}
    keys = np.asarray(sorted(groups), np.int64)
    cls = np.asarray(classes, dtype=object)
    for _ in range(int(epochs)):
        buf, size = [], 0
        for k in rng.permutation(keys).tolist():
            buf.append(groups[k])
            size += groups[k].shape[0]
            if size >= chunk_rows:
                _partial(clf, fs, np.concatenate(buf), y_all, cls, rng)
                buf, size = [], 0
        if buf:
            _partial(clf, fs, np.concatenate(buf), y_all, cls, rng)
    return clf.coef_, clf.intercept_, [str(c) for c in clf.classes_]


def _partial(clf, fs, rows, y_all, classes, rng):
    rows = rows[rng.permutation(rows.shape[0])]
    clf.partial_fit(fs.rows(rows), y_all[rows], classes=classes)


@dataclass(frozen=True)
class FitTask:
    """One (split, C) fit: what a worker needs to read its rows and fit."""

    path: str
    uid: str
    train: np.ndarray
    test: np.ndarray
    C: float
    solver: str
    class_weight: object
    seed: int
    epochs: int
    chunk_rows: int
    loss: str = "squared_hinge"

    def run(self) -> dict:
        return run_fit(self)


def run_fit(task: FitTask) -> dict:
    """Fit on the task's training rows and predict its test rows (a task of :func:`run_tasks`)."""
    t0, c0 = time.perf_counter(), time.process_time()
    fs = open_features(task.path, task.uid)
    coef, intercept, classes = fit(fs, task.train, task.C, task.solver, task.class_weight, task.seed, task.epochs,
                                   task.chunk_rows, task.loss)
    t1 = time.perf_counter()
    S = np.asarray(fs.rows(task.test) @ coef.T) + intercept
    pred = labels_of(S[:, 0] if S.shape[1] == 1 else S, classes)
    return {"predicted": pred, "fit_seconds": t1 - t0, "seconds": time.perf_counter() - t0,
            "cpu_seconds": time.process_time() - c0}


# ---- evaluation and training -------------------------------------------------------------------

def parse_rows(text, n: int) -> np.ndarray:
    """Row indices from ``"A:B"`` (half-open) or None (all ``n`` rows)."""
    if text is None:
        return np.arange(n, dtype=np.int64)
    try:
        a, b = (int(v) for v in str(text).split(":"))
    except ValueError:
        raise EvaluationError(f"--rows {text!r}: write a half-open range START:END, e.g. --rows 0:50068") from None
    if not 0 <= a < b <= n:
        raise EvaluationError(f"--rows {text}: the range must lie in 0:{n} (the feature store has {n} rows) and "
                              f"be non-empty")
    return np.arange(a, b, dtype=np.int64)


def train_store(path, out=None, C: float = 1.0, class_weight=None, solver: str = "auto", epochs: int = EPOCHS,
                chunk_rows: int = CHUNK_ROWS, seed: int = 0, rows=None, loss: str = "squared_hinge",
                cluster=None, overwrite: bool = False) -> LinearModel:
    """Fit on every row of a feature store (or ``rows``, ``"A:B"``) and, with ``out``, save the
    model into that new directory, or over the model there when ``overwrite`` (``gramtile train
    --features F.zarr --model linear``). The fit runs in this process; ``cluster`` (a Runtime)
    gives the run's settings (``memory_mb``)."""
    fs = open_features(path)
    idx = parse_rows(rows, fs.n)
    classes = sorted({fs.labels[i] for i in idx})
    settings = Runtime.of(cluster)
    plan = plan_solver(solver, fs, idx.shape[0], len(classes),
                       Runtime("sequential", progress=settings.progress, memory_mb=settings.memory_mb), chunk_rows)
    log.info(describe(plan))
    t0 = time.perf_counter()
    coef, intercept, classes = fit(fs, idx, C, plan["used"], class_weight, seed, epochs, chunk_rows, loss)
    params = {"solver": plan, "C": float(C), "class_weight": class_weight, "seed": int(seed),
              "epochs": int(epochs) if plan["used"] == "sgd" else None, "rows": rows or f"0:{fs.n}",
              "loss": "hinge" if plan["used"] == "sgd" else loss,
              "n_train": int(idx.shape[0]), "fit_seconds": round(time.perf_counter() - t0, 3)}
    meta = {k: v for k, v in fs.meta.items() if k != "shards"}
    model = LinearModel(coef, intercept, classes, meta, params, fs.vocab_arrays(), fs.strings())
    if out is not None:
        model.save(out, overwrite=overwrite)
    return model
