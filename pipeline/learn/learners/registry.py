"""The learners by name: what ``--model NAME`` and :func:`make` choose from.

Adding a learner: its module in this package (a :class:`~.base.Learner` subclass), one line
here, and its tests (docs/ARCHITECTURE.md, "A learner").
"""
from __future__ import annotations

from types import MappingProxyType

from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.learners.base import Learner
from gramtile.pipeline.learn.learners.krr import KRR
from gramtile.pipeline.learn.learners.linear import Linear
from gramtile.pipeline.learn.learners.nystroem import Nystroem
from gramtile.pipeline.learn.learners.perceptron import Perceptron
from gramtile.pipeline.learn.learners.rank import Rank
from gramtile.pipeline.learn.learners.ridge import Ridge
from gramtile.pipeline.learn.learners.svm import SVM
from gramtile.pipeline.learn.learners.svr import SVR

#: name -> learner class (read-only)
LEARNERS = MappingProxyType({cls.name: cls for cls in (SVM, Perceptron, Nystroem, Linear, Ridge, SVR, KRR, Rank)})


def make(name: str, **options) -> Learner:
    """The learner ``name`` configured with ``options`` (its constructor's keywords)."""
    cls = LEARNERS.get(name)
    if cls is None:
        raise EvaluationError(f"unknown learner {name!r}; use one of {sorted(LEARNERS)} (--model)")
    return cls(**options)


def names_reading(what: str) -> list[str]:
    """The learners that read ``what`` (``kernel``, ``landmarks``, ``features``)."""
    return [n for n, c in LEARNERS.items() if c.reads == what]


def names_for_task(task: str) -> list[str]:
    """The learners that learn the task kind ``task`` (``classification``, ``regression``, ``ranking``)."""
    return [n for n, c in LEARNERS.items() if task in c.task_kinds]
