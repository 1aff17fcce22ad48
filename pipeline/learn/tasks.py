"""The task of a run and what it learns from: the task kind a learner runs (:func:`task_of`), and
the real targets and group ids a regression or ranking reads (:func:`task_targets`), from a corpus
store or from files of their own (``--targets FILE``, ``--groups FILE``: one value per line).

A regression learns each example's real-valued target. A ranking orders the candidates of a group
(the answers of one question) by relevance: the targets when the examples carry them, else their
labels read as numbers (0/1 answer labels); it needs every example's group. Each missing piece is
an :class:`~gramtile.pipeline.learn.errors.EvaluationError` naming how to supply it.
"""
from __future__ import annotations

import math

import numpy as np

from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.learners.base import TASKS, Learner
from gramtile.pipeline.learn.learners.registry import names_for_task
from gramtile.pipeline.readers.labels import read_label_file
from gramtile.pipeline.representations.errors import CorpusFormatError

#: how to give a corpus real targets, named by every refusal that lacks them
TARGETS_FIX = ("prepare the corpus with --target-col COLUMN (or a format with targets, e.g. sick2014), or give "
               "--targets FILE (one number per line, one per example)")
#: how to give a corpus group ids, named by every refusal that lacks them
GROUPS_FIX = ("prepare the corpus with --group-col COLUMN (or a format with groups, e.g. trec_qa_wang), or give "
              "--groups FILE (one group id per line, one per example)")


def task_of(learner: Learner, task: str | None = None) -> str:
    """The task kind ``learner`` runs: ``task`` when given (and the learner learns it), else the
    learner's one task kind; a learner of several kinds needs ``task``."""
    kinds = learner.task_kinds
    if task is None:
        if len(kinds) == 1:
            return kinds[0]
        raise EvaluationError(f"--model {learner.name} learns {' and '.join(kinds)}; say which with --task "
                              f"{'|'.join(kinds)}")
    if task not in TASKS:
        raise EvaluationError(f"--task {task}: use one of {list(TASKS)}")
    if task not in kinds:
        raise EvaluationError(f"--model {learner.name} learns {' and '.join(kinds)} only, not {task}; for --task "
                              f"{task} use --model {' or '.join(names_for_task(task))}")
    return task


def read_targets(path, n: int, what: str) -> np.ndarray:
    """The real targets of ``path``: one finite number per line, exactly ``n`` of them."""
    texts = read_label_file(path, n, what)
    out = np.empty(len(texts), dtype=np.float64)
    for i, t in enumerate(texts):
        try:
            out[i] = float(t)
        except ValueError:
            out[i] = math.nan
        if not math.isfinite(out[i]):
            raise CorpusFormatError(f"target {t!r} is not a finite number", path=path, line=i + 1,
                                    fix="write one real number per line (e.g. 3.5)")
    return out


def read_groups(path, n: int, what: str) -> np.ndarray:
    """The group ids of ``path``: one per line, exactly ``n`` of them."""
    return np.array(read_label_file(path, n, what), dtype=object)


def labels_as_relevance(labels, where: str) -> np.ndarray:
    """Labels read as numbers (0/1 answer labels), or the refusal naming how to give relevance."""
    try:
        y = np.array([float(v) for v in labels], dtype=np.float64)
    except (TypeError, ValueError):
        bad = next(v for v in labels if not _number(v))
        raise EvaluationError(f"there are no targets in {where}, and the labels are not numbers (e.g. {bad!r}), so "
                              f"there is no relevance to rank by. Fix: {TARGETS_FIX}") from None
    if not np.isfinite(y).all():
        raise EvaluationError(f"{where}: a label read as relevance is not a finite number. Fix: {TARGETS_FIX}")
    return y


def _number(v) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def task_targets(task: str, n: int, where: str, *, targets=None, labels=None, groups=None, targets_file=None,
                 groups_file=None, labels_from: str | None = None) -> tuple:
    """``(y, groups, y_from)`` of a regression or ranking over ``n`` examples: the real targets (a
    regression's; a ranking's relevance, else ``labels`` read as numbers), the group ids (ranking;
    None for a regression) and a phrase saying where ``y`` came from.

    ``targets``, ``labels`` and ``groups`` are what the examples carry (None: nothing); the files,
    when given, replace them. ``where`` names the examples in messages (``corpus store C``);
    ``labels_from`` where ``labels`` came from (default: the labels of ``where``).
    """
    if task not in ("regression", "ranking"):
        raise EvaluationError(f"task={task!r}: targets are read for a regression or a ranking")
    if targets_file is not None:
        y, y_from = read_targets(targets_file, n, f"examples of {where}"), f"targets file {targets_file}"
    elif targets is not None:
        y, y_from = np.asarray(targets, dtype=np.float64), f"the targets of {where}"
    elif task == "regression":
        raise EvaluationError(f"there are no targets in {where}, and a regression learns real targets. Fix: "
                              f"{TARGETS_FIX}")
    elif labels is None or any(v is None for v in labels):
        raise EvaluationError(f"there are neither targets nor labels to rank by in {where}. Fix: {TARGETS_FIX}")
    else:
        what = labels_from or f"the labels of {where}"
        y, y_from = labels_as_relevance(labels, what), f"{what} (as relevance)"
    if y.shape != (n,):
        raise EvaluationError(f"{y.size} targets for {n} examples of {where}; give one per example")
    if task == "regression":
        return y, None, y_from
    if groups_file is not None:
        g = read_groups(groups_file, n, f"examples of {where}")
    elif groups is not None and not any(v is None for v in groups):
        g = np.asarray(groups, dtype=object)
    else:
        raise EvaluationError(f"there are no group ids in {where}, and a ranking orders candidates within their "
                              f"group. Fix: {GROUPS_FIX}")
    return y, g, y_from


def retarget(docs, targets_file, groups_file, what: str) -> list:
    """``docs`` with the targets of ``targets_file`` and the group ids of ``groups_file`` (one per
    line, one per document, in order) instead of their own; as they are when both are None."""
    if targets_file is not None:
        for d, t in zip(docs, read_targets(targets_file, len(docs), what)):
            d.target = float(t)
    if groups_file is not None:
        for d, g in zip(docs, read_groups(groups_file, len(docs), what)):
            d.group = g
    return docs
