"""Linear learning on explicit features (a feature store written by ``gramtile features``).

With rows ``x = phi(x) sqrt(w)`` (``gramtile.pipeline.stores.feature_store.linear_rows``; divided
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
losses; the intercept). :func:`evaluate_store` runs stratified k-fold (the folds ``gramtile
evaluate`` makes: :func:`gramtile.pipeline.learn.folds.stratified_kfold`) over a C grid, every C
scored on the test parts or (``select="nested"``) C chosen by inner folds of each training part
as for the kernel models; each fit is a task of :func:`gramtile.pipeline.learn.parallel.run_tasks`, so it runs on the
cluster profile as the kernel learners' fits do: a task carries the feature store's path and uid
and its row indices, the worker reads its rows itself. :func:`train_store` fits one model on
every row and saves it (:class:`gramtile.pipeline.learn.linear_models.LinearModel`).
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.crossval import inner_splits
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import load_or_make_folds, stratified_kfold
from gramtile.pipeline.learn.linear_models import LinearModel, labels_of
from gramtile.pipeline.learn.parallel import fit_memory, run_tasks, too_big
from gramtile.pipeline.progress import log
from gramtile.pipeline.stores.feature_store import FeatureStore, current_uid
from gramtile.pipeline.stores.storage import absolute

SOLVERS = ("auto", "liblinear", "sgd")
#: liblinear's losses (LinearSVC's ``loss``); sgd always uses the hinge loss
LOSSES = ("squared_hinge", "hinge")
#: default SGD passes over the training rows
EPOCHS = 5
#: default rows per partial_fit call of SGD
CHUNK_ROWS = 20_000
#: feature stores opened per process (per thread for the threads pool share the dict)
_OPEN = 4
_stores: dict = {}
_stores_lock = threading.Lock()


def open_features(path, uid: str | None = None) -> FeatureStore:
    """The feature store at ``path``, opened once per process (reopened when the store on disk
    was written again); with ``uid``, refused unless it is still the store a run started from."""
    key = str(path)
    now = current_uid(path)
    with _stores_lock:
        fs = _stores.get(key)
    if fs is None or fs.uid != now:
        fs = FeatureStore(path)
        with _stores_lock:
            _stores[key] = fs
            while len(_stores) > _OPEN:
                _stores.pop(next(iter(_stores)))
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


def evaluate_store(path, folds: int = 5, seed: int = 0, Cs=(1.0,), class_weight=None, solver: str = "auto",
                   epochs: int = EPOCHS, chunk_rows: int = CHUNK_ROWS, rows=None, folds_dir=None,
                   loss: str = "squared_hinge", cluster=None, select: str = "test", inner_folds: int = 3) -> dict:
    """Stratified ``folds``-fold accuracy of the linear SVM on a feature store (``gramtile
    evaluate --features F.zarr --model linear``), for each C of ``Cs`` or with C chosen per split.

    ``select="test"`` scores every C of ``Cs`` on the test parts (one entry per C under ``"C"``;
    picking the best of them is selection on test data). ``select="nested"`` (the CLI's default
    with several C) chooses C inside each training part: ``inner_folds`` stratified folds of that
    part (seed ``seed``, as ``gramtile evaluate``'s nested selection makes them), pooled inner
    accuracy, ties to the smaller C; then the split's model is fitted on its whole training part
    at that C and scored on its test part, which took no part in the choice. Each split's final
    fit starts as soon as its inner fits are in (``run_tasks``'s ``on_done``).

    ``rows`` (``"A:B"``) evaluates on those rows only (folds over their labels, as ``gramtile
    evaluate`` makes them for a Gram store over the same examples); ``folds_dir`` reuses or
    saves the folds file there. Every fit is a task on ``cluster`` (a profile name, address or Runtime,
    whose ``progress`` and ``memory_mb`` apply); the solver plan is logged; results are those of
    the serial run. Returns ``{"folds", "seed", "rows", "n", "n_features", "kernel",
    "features", "solver", "C_selection", "C": {C: {"accuracy", "accuracy_std", "per_fold",
    "fit_seconds", "cpu_seconds"}}, "best_C", "predictions": {C: {"row", "predicted", "gold"}}}``;
    nested: ``"C"`` is empty, ``"nested"`` holds the one row (with ``"C_chosen"`` per split and
    each split's ``"inner_accuracy"`` per C), ``"C_grid"``, ``"inner_folds"``, ``"best_C"`` is
    None and ``"predictions"`` has the key ``"nested"``.
    """
    if select not in ("test", "nested"):
        raise EvaluationError(f"C selection {select!r}: use 'nested' or 'test'")
    fs = open_features(path)
    idx = parse_rows(rows, fs.n)
    labels = [fs.labels[i] for i in idx]
    classes = sorted(set(labels))
    if len(classes) < 2:
        raise EvaluationError("linear evaluation needs at least two classes among the labels")
    Cs = tuple(float(c) for c in Cs)
    if not Cs or any(not c > 0 for c in Cs):
        raise EvaluationError(f"--C {Cs}: give positive values")
    nested = select == "nested" and len(Cs) > 1
    splits = load_or_make_folds(folds_dir, labels, folds, seed) if folds_dir else stratified_kfold(labels, folds, seed)
    n_train = max(s.train.shape[0] for s in splits)
    plan = plan_solver(solver, fs, n_train, len(classes), cluster, chunk_rows)
    log.info(describe(plan))

    def task(train, test, C):
        return FitTask(absolute(path), fs.uid, idx[train], idx[test], C, plan["used"], class_weight, int(seed),
                       int(epochs), int(chunk_rows), loss)

    common = dict(cluster=cluster, bar=Runtime.of(cluster).progress, key_prefix="gramtile-linear")
    head = {"folds": folds, "seed": seed, "rows": rows or f"0:{fs.n}", "n": int(idx.shape[0]),
            "n_features": fs.n_features, "kernel": fs.meta["spec"], "features": str(path), "solver": plan,
            "class_weight": class_weight, "epochs": epochs if plan["used"] == "sgd" else None,
            "loss": "hinge" if plan["used"] == "sgd" else loss}
    if nested:
        return {**head, **_nested(splits, labels, Cs, inner_folds, seed, class_weight, task, common, fs, idx)}
    results = run_tasks(run_fit, [task(s.train, s.test, C) for s in splits for C in Cs], desc="linear fits",
                        **common)
    out, preds = {}, {}
    for j, C in enumerate(Cs):
        out[C], preds[C] = _pooled(splits, labels, [results[i * len(Cs) + j] for i in range(len(splits))], fs, idx)
    best = max(out, key=lambda c: (out[c]["accuracy"], -c))  # ties to the smaller C
    return {**head, "C_selection": "test" if len(Cs) > 1 else "single", "C": out, "best_C": best,
            "predictions": preds}


def _pooled(splits, labels, results, fs, idx) -> tuple:
    """One row (accuracy over the splits' test parts) and its pooled predictions."""
    accs, rows_c, pred_c, fit_s, cpu_s = [], [], [], 0.0, 0.0
    for s, r in zip(splits, results):
        gold = [labels[k] for k in s.test]
        accs.append(float(np.mean([g == p for g, p in zip(gold, r["predicted"])])))
        rows_c += idx[s.test].tolist()
        pred_c += r["predicted"]
        fit_s += r["fit_seconds"]
        cpu_s += r["cpu_seconds"]
    row = {"accuracy": float(np.mean(accs)), "accuracy_std": float(np.std(accs)), "per_fold": accs,
           "fit_seconds": round(fit_s, 3), "cpu_seconds": round(cpu_s, 3)}
    return row, {"row": rows_c, "predicted": pred_c, "gold": [fs.labels[k] for k in rows_c]}


def _nested(splits, labels, Cs, inner_folds, seed, class_weight, task, common, fs, idx) -> dict:
    """Nested C selection (see :func:`evaluate_store`): the inner fits of every split, and each
    split's final fit added as soon as its inner fits are in."""
    # the inner folds gramtile evaluate's nested selection makes (crossval.inner_splits)
    y = np.asarray(labels, dtype=object)
    inner = [inner_splits(y, s, inner_folds, seed, None, class_weight)[0] for s in splits]
    tasks, owner = [], []
    for i, parts in enumerate(inner):
        for tr, te in parts:
            for C in Cs:
                tasks.append(task(tr, te, C))
                owner.append(i)
    n_inner = len(tasks)
    left = np.bincount(owner, minlength=len(splits)).tolist()
    got, chosen, inner_acc, final_of = {}, [None] * len(splits), [None] * len(splits), []

    def on_done(k, r):
        if k >= n_inner:
            return None
        got[k] = r
        i = owner[k]
        left[i] -= 1
        if left[i]:
            return None
        first = owner.index(i)
        hits, total = dict.fromkeys(Cs, 0), 0
        for q, (_, te) in enumerate(inner[i]):
            gold = [labels[t] for t in te]
            total += len(gold)
            for j, C in enumerate(Cs):
                pred = got[first + q * len(Cs) + j]["predicted"]
                hits[C] += sum(g == p for g, p in zip(gold, pred))
        inner_acc[i] = {C: hits[C] / total for C in Cs}
        chosen[i] = max(Cs, key=lambda c: (inner_acc[i][c], -c))  # ties to the smaller C
        final_of.append(i)
        return [task(splits[i].train, splits[i].test, chosen[i])]

    results = run_tasks(run_fit, tasks, desc="linear fits (nested)", on_done=on_done, **common)
    final = {final_of[m]: results[n_inner + m] for m in range(len(splits))}
    row, pred = _pooled(splits, labels, [final[i] for i in range(len(splits))], fs, idx)
    inner_s = list(got.values())
    row.update(fit_seconds=round(row["fit_seconds"] + sum(r["fit_seconds"] for r in inner_s), 3),
               cpu_seconds=round(row["cpu_seconds"] + sum(r["cpu_seconds"] for r in inner_s), 3),
               C_chosen=list(chosen), inner_accuracy=inner_acc)
    return {"C_selection": "nested", "C_grid": list(Cs), "inner_folds": int(inner_folds), "C": {}, "nested": row,
            "best_C": None, "predictions": {"nested": pred}}


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


def table(res: dict) -> str:
    """The markdown table of an :func:`evaluate_store` result."""
    lines = [f"linear SVM ({res['solver']['used']}, {res.get('loss', 'squared_hinge')} loss) on {res['n']} x "
             f"{res['n_features']} explicit features of {res['kernel']}, {res['folds']}-fold (seed {res['seed']}), "
             f"rows {res['rows']}"]
    if res.get("C_selection") == "nested":
        r = res["nested"]
        grid = ",".join(f"{c:g}" for c in res["C_grid"])
        lines.append(f"C selected by nested {res['inner_folds']}-fold cross-validation inside each training part "
                     f"(grid {grid}); C_chosen lists the C chosen per split; no test example took part in choosing it")
        lines += ["", "| C | accuracy | accuracy_std | fit s (sum) | C_chosen |", "|---|---:|---:|---:|---|",
                  f"| nested | {r['accuracy']:.4f} | {r['accuracy_std']:.4f} | {r['fit_seconds']:.1f} | "
                  f"{','.join(f'{c:g}' for c in r['C_chosen'])} |"]
        return "\n".join(lines)
    if len(res["C"]) > 1:
        lines.append("every C below is scored on the test parts, so picking the best row is selection on test "
                     "data and its score is optimistic")
    lines += ["", "| C | accuracy | accuracy_std | fit s (sum) |", "|---:|---:|---:|---:|"]
    for C, r in sorted(res["C"].items()):
        lines.append(f"| {C:g} | {r['accuracy']:.4f} | {r['accuracy_std']:.4f} | {r['fit_seconds']:.1f} |")
    return "\n".join(lines)
