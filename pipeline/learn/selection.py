"""The one evaluation and selection loop of every learner: splits x grid, scored on the test parts
or with the grid point chosen by nested cross-validation inside each training part.

:func:`evaluate` takes a :class:`~gramtile.pipeline.learn.learners.base.Learner`, a data source
(a kernel source over the labelled examples, or a learner's own data such as a feature store),
labels, splits and a grid over the learner's declared parameters (C, epochs, landmark count):

- ``select="test"``: every point of the grid is fitted on each training part and scored on its
  test part, one result row per point (choosing the best row is selection on test data);
- ``select="nested"``: for each split, every point is fitted on stratified inner folds of its
  training part only, the point with the best pooled inner score (``metric``; ties to the
  smaller values, the simpler model) is chosen, refitted on the whole training part and scored
  once on the test part; one row, with the grid and the point chosen per split.

Every fit is a task of the learner's session (:meth:`Session.tasks`), run by
:func:`~gramtile.pipeline.learn.fits.run_fits` on the Runtime's executor; nested, a split's final
fit starts as soon as its inner fits are in. Results are assembled in task order, so a parallel
run gives the serial run's numbers. :func:`choose` is the nested choice on all the data (what
``gramtile train`` does with a grid before it fits the chosen model), or on given held-out splits
(a recipe's dev split, folds by sentence); :func:`point_scores` gives each point's pooled or mean
held-out score and :func:`pick` the best row of a table of scores (first wins ties), so a recipe
keeps no fold or grid loop of its own; :func:`learning_curve` scores growing training parts
through the same tasks.

The task kind (``task``: :data:`~gramtile.pipeline.learn.learners.base.TASKS`) decides what is
learnt and scored: a classification task (labels) is scored by accuracy and P/R/F1; a regression
task (real targets) by Pearson's correlation (what nested selection maximises by default),
Spearman's and the mean squared error; a ranking task (real or 0/1 relevance targets and a group
id per example, ``groups``) by MAP (selected on by default), MRR, P@1 and nDCG over the groups
(:func:`~gramtile.pipeline.learn.metrics.ranking_report`); its splits must never divide a group
(:func:`~gramtile.pipeline.learn.folds.group_kfold`), nor do its inner folds. A learner declares
the task kinds it learns and the loop refuses the others.

Result rows (:class:`Evaluation`) have the same columns for every learner: the kernel name, the
learner's columns (``model``, its parameters), ``splits``, ``n_test``, then the task's scores:
classification ``accuracy``, precision, recall and F1 (binary: of the positive class; multi-class:
macro averages, plus ``macro_f1`` and ``micro_f1``), ``accuracy_std`` (over splits); regression
``pearson``, ``spearman``, ``mse``, ``pearson_std``; ranking ``map``, ``mrr``, ``p_at_1``,
``ndcg``, ``n_groups`` (the groups that count), ``map_std``; then the learner's summary columns,
and, nested, ``<param>_grid`` / ``<param>_chosen``. Overall figures pool the predictions of all
test parts (ranking: the groups of every test part, each ranked by its own split's model).
"""
from __future__ import annotations

import math
from contextlib import ExitStack
from dataclasses import dataclass, field

import numpy as np

from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.fits import run_fits
from gramtile.pipeline.learn.folds import Split, group_kfold, stratified_kfold
from gramtile.pipeline.learn.learners.base import TASKS, Learner, Outcome, Point, Problem, Sizes
from gramtile.pipeline.learn.learners.registry import names_for_task
from gramtile.pipeline.learn.metrics import (
    RANKING_METRICS,
    binary_prf,
    classification_report,
    mean_rr,
    neighbour_rr,
    positive_class,
    ranking_report,
    regression_report,
)
from gramtile.pipeline.progress import log, progress_bar

SELECT = ("nested", "test")
METRICS = ("accuracy", "f1", "macro_f1")
#: the metrics selection may maximise, by task kind (the first: the default)
TASK_METRICS = {"classification": METRICS, "regression": ("pearson", "spearman"), "ranking": RANKING_METRICS}
#: the column whose spread over the splits each task kind's rows report (``<metric>_std``)
SPREAD = {"classification": "accuracy", "regression": "pearson", "ranking": "map"}


@dataclass
class Evaluation:
    """What :func:`evaluate` returns.

    Attributes
    ----------
    rows : list of dict
        One per grid point (one in all, nested): pooled metrics over all test parts.
    fold_rows : list of dict
        One per (split, point).
    predictions : dict
        Point label -> (test indices, predicted labels), pooled in split order.
    reports : dict
        Point label -> full :func:`~gramtile.pipeline.learn.metrics.classification_report` (pooled).
    solver : dict or None
        What the learner's session records about its plan (the SVM solver and why), or None.
    chosen : list
        Nested: the :class:`Point` chosen for each split.
    points : list
        The points the rows stand for, in row order (with ``alternative`` among several sources).
    inner_scores : list
        Nested: for each split, the inner score of every point of the grid, in grid order.
    """

    rows: list = field(default_factory=list)
    fold_rows: list = field(default_factory=list)
    predictions: dict = field(default_factory=dict)
    reports: dict = field(default_factory=dict)
    solver: dict | None = None
    chosen: list = field(default_factory=list)
    points: list = field(default_factory=list)
    inner_scores: list = field(default_factory=list)


# ---- inputs -----------------------------------------------------------------------------------------

def check_inputs(source, labels, splits, task: str = "classification", groups=None):
    """The labels (real targets for a regression or ranking task) as an array and the splits as a
    list, after checking they fit ``source`` (``n`` examples) and that every training part can be
    learnt from: two classes; two distinct targets; for ranking, two candidates of one group with
    different targets, and no group divided between a training and a test part."""
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) != source.n:
        raise EvaluationError(f"there are {len(y)} labels for a kernel over {source.n} examples; the labels "
                              "must list every row of the Gram matrix in order (check --labels)")
    if task != "classification":
        return check_real_inputs(source, y, list(splits), task, groups)
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


def check_real_inputs(source, y, splits, task, groups):
    """:func:`check_inputs` of a regression or ranking task."""
    try:
        y = y.astype(np.float64)
    except (TypeError, ValueError):
        raise EvaluationError(f"a {task} task needs real targets, and the labels are not numbers (e.g. {y[0]!r}); "
                              "give numeric targets") from None
    if not np.isfinite(y).all():
        raise EvaluationError(f"the {task} targets have NaN or infinite values; give finite targets")
    if not splits:
        raise EvaluationError("no splits to evaluate; give --folds K or --split train:a:b,test:c:d")
    g = None
    if task == "ranking":
        if groups is None:
            raise EvaluationError("a ranking task needs the group id of every example (groups=...): candidates are "
                                  "ranked within their group")
        g = np.asarray(groups)
        if g.shape != (source.n,):
            raise EvaluationError(f"there are {g.size} group ids for a kernel over {source.n} examples; give one "
                                  "per row of the Gram matrix, in order")
    for s in splits:
        for side, idx in (("train", s.train), ("test", s.test)):
            if idx.size == 0 or idx.min() < 0 or idx.max() >= source.n:
                raise EvaluationError(f"{s.name}: {side} indices are empty or outside 0..{source.n - 1}; "
                                      "make the splits for this store's examples")
        if g is None:
            if np.unique(y[s.train]).size < 2:
                raise EvaluationError(f"{s.name}: every target of the training part is {y[s.train][0]:g}; a "
                                      "regression needs targets that differ")
            continue
        both = np.intersect1d(g[s.train], g[s.test])
        if both.size:
            raise EvaluationError(f"{s.name}: group {both[0]!r} has examples in both the training and the test "
                                  "part; make splits that keep each group whole (folds.group_kfold)")
        gt, yt = g[s.train], y[s.train]
        if not any(np.unique(yt[gt == v]).size > 1 for v in np.unique(gt)):
            raise EvaluationError(f"{s.name}: no group of the training part has candidates with different "
                                  "targets, so there is no preference to learn; check the targets and groups")
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


def problem_of(y, positive=None, class_weight=None, multiclass: str = "ovr", seed=None,
               task: str = "classification", groups=None) -> Problem:
    """The :class:`Problem` of labels ``y`` (classes sorted; a binary task's positive class by
    default :func:`~gramtile.pipeline.learn.metrics.positive_class`), checked; a regression or
    ranking problem has no classes (and ranking, the ``groups`` of every example)."""
    if multiclass not in ("ovr", "ovo"):
        raise EvaluationError(f"multiclass={multiclass!r}; use one of ['ovr', 'ovo']")
    if task not in TASKS:
        raise EvaluationError(f"task={task!r}; use one of {list(TASKS)}")
    if task != "classification":
        if positive is not None:
            raise EvaluationError(f"a {task} task has no positive class; drop --positive")
        return Problem((), None, class_weight, multiclass, seed, task,
                       None if groups is None else np.asarray(groups))
    classes = sorted(np.unique(np.asarray(y)).tolist())
    if positive is None and len(classes) == 2:
        positive = positive_class(classes)
    check_classes(classes, positive, class_weight)
    return Problem(tuple(classes), positive, class_weight, multiclass, seed)


def check_task(learner: Learner, problem: Problem) -> None:
    """Refuse a learner that does not learn the problem's task kind (naming those that do), then
    what else of the problem it cannot train."""
    if problem.task not in learner.task_kinds:
        raise EvaluationError(f"--model {learner.name} learns {' and '.join(learner.task_kinds)} only, and this is a "
                              f"{problem.task} task; change --model to one of {names_for_task(problem.task)}")
    learner.check_problem(problem)


def task_scores(problem: Problem, y_true, y_pred, groups=None) -> tuple:
    """The score columns of one set of predictions (labels, real predictions or scores) and the
    full report, by the problem's task kind; ``groups``: the group ids of a ranking's examples."""
    if problem.task == "regression":
        rep = regression_report(y_true, y_pred)
        return dict(rep), rep
    if problem.task == "ranking":
        rep = ranking_report(y_true, y_pred, groups)
        return {k: rep[k] for k in (*RANKING_METRICS, "n_groups")}, rep
    return prediction_scores(y_true, y_pred, problem.classes, problem.positive)


def prediction_scores(y_true, y_pred, classes, positive) -> tuple:
    rep = classification_report(y_true, y_pred, labels=list(classes))
    row = {"accuracy": rep["accuracy"]}
    if len(classes) == 2:
        p, r, f = binary_prf(y_true, y_pred, positive)
        row.update({"precision": p, "recall": r, "f1": f})
    else:
        row.update({"precision": rep["macro_precision"], "recall": rep["macro_recall"], "f1": rep["macro_f1"],
                    "macro_f1": rep["macro_f1"], "micro_f1": rep["micro_f1"]})
    return row, rep


def as_grid(learner: Learner, grid) -> list[Point]:
    """``grid`` as a list of points: points as they are, or a dict of parameter values."""
    if isinstance(grid, list) and grid and all(isinstance(p, Point) for p in grid):
        return grid
    return learner.grid(grid)


# ---- nested selection ---------------------------------------------------------------------------

def inner_splits(y, sp, folds: int, seed: int, problem: Problem):
    """The inner folds of nested selection in ``sp``'s training part, as (train, test) positions of
    the source, with the :class:`Problem` of that part (its classes; the positive class kept when
    present). Regression: seeded k-fold; ranking: seeded group k-fold (:func:`group_kfold`)."""
    if problem.task != "classification":
        ids = np.arange(sp.train.size) if problem.task == "regression" else np.asarray(problem.groups)[sp.train]
        n_ids = np.unique(ids).size
        k = int(min(folds, n_ids))
        if k < 2:
            what = "groups" if problem.task == "ranking" else "examples"
            raise EvaluationError(f"nested selection needs at least 2 training {what}; the training part of "
                                  f"{sp.name} has {n_ids}. Give one value per parameter, or --C-on-test")
        inner = group_kfold(ids, k, seed)
        return [(sp.train[s.train], sp.train[s.test]) for s in inner], problem
    ytr = y[sp.train]
    counts = np.unique(ytr, return_counts=True)[1]
    k = int(min(folds, counts.min()))
    if k < 2:
        raise EvaluationError(f"nested selection needs at least 2 training examples of every class; one class "
                              f"has {int(counts.min())}. Give one value per parameter, or --C-on-test")
    inner = stratified_kfold(ytr, k, seed)
    cl = sorted(np.unique(ytr).tolist())
    pos = problem.positive if problem.positive is not None and problem.positive in set(ytr.tolist()) else None
    if pos is None and len(cl) == 2:
        pos = positive_class(cl)
    check_classes(cl, pos, problem.class_weight)
    sub = Problem(tuple(cl), pos, problem.class_weight, problem.multiclass, problem.seed)
    return [(sp.train[s.train], sp.train[s.test]) for s in inner], sub


def _value(v) -> float:
    """A score as selection compares it: an undefined score (NaN: a constant prediction) is the worst."""
    return -math.inf if v != v else v


def _check_metric(rows, metric: str) -> None:
    if metric not in rows[0]:
        names = next((m for m in TASK_METRICS.values() if m[0] in rows[0]), METRICS)
        raise EvaluationError(f"selection metric {metric!r} is not a result column; use one of {list(names)}")


def best(rows, grid: list[Point], metric: str, ties: str = "smaller") -> Point:
    """The point of the best row by ``metric``; ties go to the smaller values, in the point's
    order (the simpler model), or with ``ties="first"`` to the earlier point of the grid."""
    _check_metric(rows, metric)

    def key(i):
        v = _value(rows[i][metric])
        return (v, tuple(-v for _, v in grid[i].values) if ties == "smaller" else -i)

    return grid[max(range(len(rows)), key=key)]


def point_scores(ev: Evaluation, metric: str, score: str = "pooled") -> list[float]:
    """The score of each point of an evaluation (``ev.points``, in row order) by ``metric``: the
    value of its row, which pools the predictions of every split (``score="pooled"``), or the mean
    of its per-split values (``score="mean"``, e.g. the mean fold F1)."""
    if score not in ("pooled", "mean"):
        raise EvaluationError(f"score={score!r}; use 'pooled' or 'mean'")
    _check_metric(ev.rows, metric)
    if score == "pooled":
        return [r[metric] for r in ev.rows]
    k = len(ev.rows)  # fold rows are split-major, one per point
    return [float(np.mean([r[metric] for r in ev.fold_rows[c::k]])) for c in range(k)]


def pick(rows, metric: str):
    """The row of ``rows`` (dicts) with the highest ``metric``: rows without it (e.g. a setting
    that could not be scored) are passed over, an undefined score (NaN) is the worst, and between
    equal scores the first row wins (the earlier point of a grid). None when no row has it."""
    have = [i for i, r in enumerate(rows) if metric in r]
    if not have:
        return None
    return rows[max(have, key=lambda i: (_value(rows[i][metric]), -i))]


# ---- the loop -------------------------------------------------------------------------------------

def evaluate(learner: Learner, source, labels, splits, grid=None, *, kernel: str = "kernel", positive=None,
             class_weight=None, multiclass: str = "ovr", seed=None, select: str = "test", inner_folds: int = 3,
             inner_seed: int = 0, inner_use: int | None = None, inner=None, metric: str | None = None,
             score: str = "pooled", ties: str = "smaller", task: str = "classification", groups=None,
             cluster=None) -> Evaluation:
    """Fit and score ``learner`` on each split for each point of ``grid``.

    Parameters
    ----------
    learner : Learner
        From the registry (:func:`~gramtile.pipeline.learn.learners.registry.make`).
    source
        What the learner reads (``learner.reads``), with ``n`` examples; or a list of such
        sources over the same examples (alternatives, e.g. kernels): the grid then spans the
        alternative too (``alternative`` = its position, first in the grid's order).
    labels : sequence, shape (n,)
        The class labels, or the real targets of a regression or ranking task.
    splits : list of Split
        Ranking: none may divide a group (:func:`~gramtile.pipeline.learn.folds.group_kfold`).
    grid : dict of parameter -> value(s), or a list of Points (default: the learner's defaults)
    kernel : name written into every row
    positive, class_weight, multiclass, seed
        The :class:`Problem`: a binary task's positive class (default
        :func:`~gramtile.pipeline.learn.metrics.positive_class`), class weights (None, "balanced"
        or label -> weight), the multi-class scheme, a learner's visiting-order seed.
    select : {"test", "nested"}
        With several points: score each on the test parts (one row per point), or choose one per
        split on ``inner_folds`` stratified folds (seed ``inner_seed``) of its training part by
        ``metric`` (one row; default: accuracy, Pearson's correlation or MAP by the task kind, one of
        :data:`TASK_METRICS`); ``inner_use`` validates on the first that many inner folds only;
        ``inner`` gives the inner folds instead, one list of (train, test) positions per split (e.g.
        folds that keep the candidates of one sentence together).
    score : {"pooled", "mean"}
        Nested: a point's inner score is ``metric`` over the pooled inner predictions, or the mean
        of its per-fold values.
    ties : {"smaller", "first"}
        Between equal scores, choose the smaller values (the simpler model) or the earlier point
        of the grid.
    task : {"classification", "regression", "ranking"}
        What the labels are (:data:`~gramtile.pipeline.learn.learners.base.TASKS`); the learner
        must learn it. Regression and ranking inner folds are seeded k-fold and group k-fold.
    groups : sequence, shape (n,)
        Ranking: the group id of every example (its candidates are ranked within it).
    cluster : profile name, address or Runtime
        Where the fits run (each fit a task; results equal the serial run's) and the run's
        settings (progress, memory, cache, scratch).
    """
    if select not in SELECT:
        raise EvaluationError(f"select={select!r}; use one of {list(SELECT)}")
    if ties not in ("smaller", "first"):
        raise EvaluationError(f"ties={ties!r}; use 'smaller' or 'first'")
    if score not in ("pooled", "mean"):
        raise EvaluationError(f"score={score!r}; use 'pooled' or 'mean'")
    cluster = Runtime.of(cluster)  # one run: its cache serves every fit
    if task not in TASKS:
        raise EvaluationError(f"task={task!r}; use one of {list(TASKS)}")
    if metric is None:
        metric = TASK_METRICS[task][0]
    elif task != "classification" and metric not in TASK_METRICS[task]:
        raise EvaluationError(f"selection metric {metric!r} does not score a {task} task; use one of "
                              f"{list(TASK_METRICS[task])}")
    sources = list(source) if isinstance(source, (list, tuple)) else [source]
    points = as_grid(learner, grid)
    y, splits = check_inputs(sources[0], labels, splits, task, groups)
    for src in sources[1:]:
        check_inputs(src, labels, splits, task, groups)
    problem = problem_of(y, positive, class_weight, multiclass, seed, task, groups)
    check_task(learner, problem)
    cells = [Point((("alternative", a),) + pt.values) for a in range(len(sources)) for pt in points] \
        if len(sources) > 1 else points
    varying = (["alternative"] if len(sources) > 1 else []) + learner.varying(points)
    nested = len(cells) > 1 and select == "nested"
    sizes = Sizes(max(sp.train.size for sp in splits), max(sp.test.size for sp in splits),
                  inner_folds if nested else 0)
    with ExitStack() as stack:
        sessions = [stack.enter_context(learner.session(src, problem, sizes, cluster)) for src in sources]

        def cell_tasks(tr, te, these, prob, name):
            """The tasks of ``these`` cells on one part, each alternative's from its own session, and
            the function giving their outcomes in the order of ``these``."""
            groups: dict = {}
            for i, c in enumerate(these):
                groups.setdefault(c.get("alternative", 0), []).append(i)
            out, reads = [], []
            for a, idx in groups.items():
                t, asm = sessions[a].tasks(y, tr, te, [these[i] for i in idx], prob, name)
                reads.append((len(out), len(t), asm, idx))
                out += t

            def assemble_cells(results):
                got = [None] * len(these)
                for s0, m, asm, idx in reads:
                    for i, o in zip(idx, asm(results[s0:s0 + m])):
                        got[i] = o
                return got

            return out, assemble_cells

        def count(these, prob):
            return sum(sessions[a].n_tasks([c for c in these if c.get("alternative", 0) == a], prob)
                       for a in dict.fromkeys(c.get("alternative", 0) for c in these))

        given = inner
        inner = [inner_splits(y, sp, inner_folds, inner_seed, problem) for sp in splits] if nested and given is None \
            else []
        if nested and given is not None:
            if len(given) != len(splits):
                raise EvaluationError(f"{len(given)} lists of inner folds for {len(splits)} splits; give one per split")
            for parts in given:
                sub_y = y[np.concatenate([np.asarray(tr) for tr, _ in parts])]
                if task != "classification":
                    inner.append(([(np.asarray(tr, dtype=np.int64), np.asarray(te, dtype=np.int64))
                                   for tr, te in parts], problem))
                    continue
                inner.append(([(np.asarray(tr, dtype=np.int64), np.asarray(te, dtype=np.int64)) for tr, te in parts],
                              problem_of(sub_y, problem.positive if problem.positive in set(sub_y.tolist()) else None,
                                         problem.class_weight, problem.multiclass, problem.seed)))
        if inner_use is not None:
            inner = [(parts[:inner_use], sub) for parts, sub in inner]
        n_fits = sum(len(parts) * count(cells, sub) for parts, sub in inner) + \
            len(splits) * (count(cells[:1], problem) if nested else count(cells, problem))
        pb = progress_bar(n_fits, "fit", "evaluate", disable=not Runtime.of(cluster).progress or n_fits < 2)
        try:
            tasks, reads, where, inner_got = [], [None] * len(splits), {}, {}
            chosen, inner_scores = [None] * len(splits), [None] * len(splits)
            fit_grid = [None] * len(splits) if nested else [cells] * len(splits)
            todo, inner_reads = [0] * len(splits), [[] for _ in splits]

            def final(i):
                """The tasks of split i on its whole training part (the grid, or the point chosen for it)."""
                sp = splits[i]
                t, asm = cell_tasks(sp.train, sp.test, fit_grid[i], problem, sp.name)
                reads[i] = (len(tasks), len(t), asm)
                where.update({len(tasks) + j: ("final", i) for j in range(len(t))})
                todo[i] = len(t)
                tasks.extend(t)
                return t

            def choose_for(i):
                """Split i's point, from the pooled predictions of its inner fits."""
                parts, sub = inner[i]
                fits = [list(zip(cells, [{}] * len(cells), asm([inner_got[a + q] for q in range(m)])))
                        for a, m, asm in inner_reads[i]]
                ev = assemble(learner, y, [Split(tr, te, "inner") for tr, te in parts], cells, fits, sub, "inner",
                              varying=varying)
                inner_scores[i] = point_scores(ev, metric, score)
                return best([{metric: v} for v in inner_scores[i]], cells, metric, ties)

            for i, sp in enumerate(splits):
                if not nested:
                    final(i)
                    continue
                parts, sub = inner[i]
                for k, (tr, te) in enumerate(parts):
                    t, asm = cell_tasks(tr, te, cells, sub, f"{sp.name} inner {k}")
                    inner_reads[i].append((len(tasks), len(t), asm))
                    where.update({len(tasks) + j: ("inner", i) for j in range(len(t))})
                    tasks += t
                todo[i] = sum(m for _, m, _ in inner_reads[i])

            def done(j, r):
                kind, i = where[j]
                todo[i] -= 1
                if kind == "inner":
                    inner_got[j] = r
                    if todo[i] == 0:
                        chosen[i] = choose_for(i)
                        fit_grid[i] = [chosen[i]]
                        return final(i)
                elif todo[i] == 0:
                    sp = splits[i]
                    log.info(f"  {sp.name}: trained on {sp.train.size}, tested on {sp.test.size}")
                return None

            results = run_fits(tasks, cluster=cluster, bar=pb, on_done=done, desc="evaluate")
        finally:
            pb.close()
            release(cluster)
        plan = sessions[0].plan
    fits = []
    for (a, m, asm), g, c in zip(reads, fit_grid, chosen):
        extra = {f"{p}_chosen": c[p] for p in varying} if nested else {}
        fits.append(list(zip(g, [extra] * len(g), asm(results[a:a + m]))))
    shown = [Point(tuple((k, None if k in varying else v) for k, v in cells[0].values))] if nested else cells
    res = assemble(learner, y, splits, shown, fits, problem, kernel, nested=nested, grid=cells,
                   inner_folds=inner_folds, varying=varying)
    res.solver = plan
    res.chosen = list(chosen) if nested else []
    res.inner_scores = list(inner_scores) if nested else []
    res.points = shown
    return res


def label_of(learner: Learner, point: Point, varying=()) -> str:
    """The key of a point in results: the learner's label, and the alternative when there are several."""
    a = point.get("alternative", None)
    return learner.label(point, varying) + ("" if "alternative" not in varying else
                                            f" alternative={'nested' if a is None else a}")


def text_of(learner: Learner, name: str, value) -> str:
    if name == "alternative":
        return "nested" if value is None else str(value)
    return learner.param(name).text(value)


def assemble(learner: Learner, y, splits, shown, fits, problem: Problem, kernel, nested: bool = False, grid=(),
             inner_folds: int = 0, varying=()) -> Evaluation:
    """The :class:`Evaluation` of per-split fits: ``fits[i]`` lists ``(point fitted, extra row
    fields, Outcome on splits[i].test)`` in the order of ``shown`` (the points the rows stand for);
    rows pool the predictions over the splits in split order."""
    res = Evaluation()
    labels = [label_of(learner, s, varying) for s in shown]
    pooled = {k: ([], []) for k in labels}
    fold_acc = {k: [] for k in labels}
    infos = {k: [] for k in labels}
    chosen = []
    spread = SPREAD[problem.task]
    # ranking: the groups of each split's test part, kept apart from another split's (each split's
    # model ranks its own test groups)
    split_groups = [None] * len(splits)
    if problem.task == "ranking":
        offset = 0
        for i, sp in enumerate(splits):
            code = np.unique(np.asarray(problem.groups)[sp.test], return_inverse=True)[1].astype(np.int64)
            split_groups[i] = code + offset
            offset += int(code.max()) + 1 if code.size else 0
    for sp, sg, split_fits in zip(splits, split_groups, fits):
        for key, (fit_s, extra, out) in zip(labels, split_fits):
            if nested:
                chosen.append(fit_s)
            pred = out.predicted if isinstance(out, Outcome) else out
            row, _ = task_scores(problem, y[sp.test], pred, sg)
            fold_acc[key].append(row[spread])
            if isinstance(out, Outcome):
                infos[key].append(out.info)
            res.fold_rows.append({"kernel": kernel, **learner.row(fit_s, problem), **extra, "split": sp.name,
                                  "n_train": int(sp.train.size), "n_test": int(sp.test.size), **row})
            pooled[key][0].append(sp.test)
            pooled[key][1].append(pred)
    pooled_groups = np.concatenate(split_groups) if problem.task == "ranking" else None
    for s, key in zip(shown, labels):
        idx, pred = np.concatenate(pooled[key][0]), np.concatenate(pooled[key][1])
        row, rep = task_scores(problem, y[idx], pred, pooled_groups)
        acc = np.asarray(fold_acc[key])
        out = {"kernel": kernel, **learner.row(s, problem), "splits": len(splits), "n_test": int(idx.size), **row,
               f"{spread}_std": float(acc.std(ddof=1)) if acc.size > 1 else 0.0, **learner.summary(infos[key])}
        if nested:
            for p in varying:
                out[f"{p}_grid"] = ",".join(text_of(learner, p, v) for v in dict.fromkeys(pt[p] for pt in grid))
                out[f"{p}_chosen"] = ",".join(text_of(learner, p, c[p]) for c in chosen)
            out["selection"] = f"nested: {inner_folds}-fold on each training part"
        if len(problem.classes) == 2:
            out["positive"] = problem.positive
        res.rows.append(out)
        res.predictions[key] = (idx, pred)
        res.reports[key] = rep
    return res


def choose(learner: Learner, source, labels, grid, *, folds: int = 3, seed: int = 0, splits=None,
           metric: str | None = None, score: str = "pooled", ties: str = "smaller", positive=None, class_weight=None,
           multiclass: str = "ovr", problem_seed=None, kernel: str = "kernel", task: str = "classification",
           groups=None, cluster=None) -> tuple[Point, Evaluation]:
    """The point of ``grid`` with the best score (``metric``, by default the task's first of
    :data:`TASK_METRICS`: accuracy, Pearson's correlation, MAP) over ``folds`` folds (seed ``seed``;
    stratified, plain k-fold for a regression, group k-fold for a ranking) of all of ``source``'s
    examples (ties to the smaller values): the nested choice ``gramtile train`` makes before it
    fits the chosen model on every example, the same choice :func:`evaluate` makes inside each
    training part. Returns the point and the evaluation of the grid (one row per point).

    ``splits`` gives the held-out splits instead of the k folds (e.g. a fixed train -> dev split, or
    folds that keep the examples of one sentence together). ``score`` and ``ties`` are those of
    :func:`evaluate`: the pooled score of all held-out predictions or the mean of the per-split
    scores; equal scores to the smaller values or the earlier point. ``source`` may be a list of
    sources over the same examples (alternatives, e.g. variants of a kernel): the grid then spans
    the alternative too, and the point returned names it (``alternative``, its position).
    """
    if ties not in ("smaller", "first"):
        raise EvaluationError(f"ties={ties!r}; use 'smaller' or 'first'")
    if score not in ("pooled", "mean"):
        raise EvaluationError(f"score={score!r}; use 'pooled' or 'mean'")
    points = as_grid(learner, grid)
    metric = TASK_METRICS[task][0] if metric is None else metric
    y = np.asarray(labels)
    if splits is None:
        sp = Split(np.arange(y.size, dtype=np.int64), np.arange(y.size, dtype=np.int64), "all")
        parts, _ = inner_splits(y, sp, folds, seed, problem_of(y, positive, class_weight, multiclass, problem_seed,
                                                               task, groups))
        splits = [Split(tr, te, f"inner {k}") for k, (tr, te) in enumerate(parts)]
    ev = evaluate(learner, source, y, splits, points, kernel=kernel, positive=positive, class_weight=class_weight,
                  multiclass=multiclass, seed=problem_seed, select="test", task=task, groups=groups, cluster=cluster)
    return best([{metric: v} for v in point_scores(ev, metric, score)], ev.points, metric, ties), ev


# ---- learning curves ------------------------------------------------------------------------------

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


def release(rt: Runtime) -> None:
    """Drop what the fits of an evaluation kept in the run's cache, here and on its workers: each
    thread's pair of blocks and the cached Gram-store chunks (a later evaluation reads others, and
    a worker's memory plan counts what it still holds)."""
    rt.release("fit-blocks", "chunks")


def learning_curve(learner: Learner, source, labels, splits, fractions=(0.1, 0.25, 0.5, 1.0), grid=None, *,
                   seed: int = 0, kernel: str = "kernel", positive=None, class_weight=None, multiclass: str = "ovr",
                   problem_seed=None, cluster=None) -> list[dict]:
    """Scores as the training part grows: for each fraction f, train on the first
    ceil(f * n_train) examples of :func:`nested_order` of each split's training part (``seed``
    fixes the nested subsets), every (split, fraction) fitted through the learner's session as in
    :func:`evaluate`. One row per (fraction, point): ``fraction``, ``n_train`` (mean over splits),
    pooled metrics and ``accuracy_std`` over splits."""
    fr = sorted({float(f) for f in np.atleast_1d(fractions)})
    if not fr or fr[0] <= 0 or fr[-1] > 1:
        raise EvaluationError(f"learning curve fractions {fractions!r} must lie in (0, 1]; e.g. 0.1,0.25,0.5,1")
    cluster = Runtime.of(cluster)  # one run: its cache serves every fit
    points = as_grid(learner, grid)
    varying = learner.varying(points)
    y, splits = check_inputs(source, labels, splits)
    problem = problem_of(y, positive, class_weight, multiclass, problem_seed)
    learner.check_problem(problem)
    plans, where, tasks = [], [], []
    for i, sp in enumerate(splits):
        order = sp.train[nested_order(y[sp.train], seed)]
        for f in fr:
            m = max(len(problem.classes), math.ceil(f * sp.train.size))
            tr = order[:m]
            if len(np.unique(y[tr])) < 2:
                raise EvaluationError(f"{sp.name}: a training subset of {m} examples has one class; "
                                      "use larger learning-curve fractions")
            plans.append((i, f, tr, m))
    sizes = Sizes(max(sp.train.size for sp in splits), max(sp.test.size for sp in splits))
    with learner.session(source, problem, sizes, cluster) as sess:
        for i, f, tr, m in plans:
            t, asm = sess.tasks(y, tr, splits[i].test, points, problem, f"{splits[i].name} curve {f:g}")
            where.append((i, f, m, len(tasks), len(t), asm))
            tasks += t
        owner = [w[0] for w in where for _ in range(w[4])]
        left = [sum(w[4] for w in where if w[0] == i) for i in range(len(splits))]

        def finished(j, _):
            i = owner[j]
            left[i] -= 1
            if left[i] == 0:
                log.info(f"  {splits[i].name}: learning curve over {len(fr)} training sizes")

        pb = progress_bar(len(tasks), "fit", "learning curve",
                          disable=not Runtime.of(cluster).progress or len(tasks) < 2)
        try:
            results = run_fits(tasks, cluster=cluster, bar=pb, on_done=finished, desc="learning curve")
        finally:
            pb.close()
            release(cluster)
    acc = {}  # (fraction, label) -> [idx list, pred list, accs, n_trains, point, infos], in split order
    for i, f, m, a, k, asm in where:
        sp = splits[i]
        for pt, out in zip(points, asm(results[a:a + k])):
            e = acc.setdefault((f, label_of(learner, pt, varying)), ([], [], [], [], pt, []))
            e[0].append(sp.test)
            e[1].append(out.predicted)
            e[2].append(float(np.mean(out.predicted == y[sp.test])))
            e[3].append(m)
            e[5].append(out.info)
    rows = []
    for (f, _), (idx, pred, accs, ms, pt, infos) in acc.items():
        idx, pred = np.concatenate(idx), np.concatenate(pred)
        row, _ = prediction_scores(y[idx], pred, problem.classes, problem.positive)
        accs = np.asarray(accs)
        rows.append({"kernel": kernel, **learner.row(pt, problem), "fraction": f, "n_train": float(np.mean(ms)),
                     "n_test": int(idx.size), **row, "accuracy_std": float(accs.std(ddof=1)) if accs.size > 1 else 0.0,
                     **learner.summary(infos)})
    return rows


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
