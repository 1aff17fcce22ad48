"""The Learner protocol: what every learner of gramtile declares and does.

A learner is a configured object (its fixed options, e.g. the SVM's solver, set when it is
made) that declares

- ``reads``: what it learns from (``"kernel"``: a square kernel source read in blocks or rows;
  ``"landmarks"``: kernel columns of landmark examples; ``"features"``: a feature store's rows);
- ``params``: the parameters a grid may span (:class:`Param`: C, epochs, the landmark count),
  with their defaults and checks;
- its capabilities: the task kinds it learns (``task_kinds``: :data:`TASKS`), the multi-class
  schemes it trains (``multiclass``), whether it takes class weights (``class_weight``), whether
  the fits along a C grid are warm-started inside one task (``warm_start``);

and does four things, each used by the one evaluation and selection loop
(:mod:`gramtile.pipeline.learn.selection`), by ``gramtile evaluate`` and by ``gramtile train``:

- :meth:`Learner.session`: plan the run where it runs (the memory of one fit on the
  Runtime's workers, a solver choice, a scratch file), as a context manager that cleans up;
- :meth:`Session.tasks`: the tasks that fit one training part and predict one test part for
  every point of a grid, and the function that turns their results into one :class:`Outcome`
  per point; every task is picklable and runs on the execution layer
  (:func:`gramtile.pipeline.learn.parallel.run_tasks`);
- :meth:`Learner.row`: the result columns that name a point (``model``, ``C``, ...);
- :meth:`Learner.summary`: result columns gathered over the splits (a rank, a convergence flag).

The registry (:mod:`gramtile.pipeline.learn.learners.registry`) maps names to learner classes.
"""
from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from gramtile.pipeline.learn.choices import TASKS
from gramtile.pipeline.learn.errors import EvaluationError

#: the multi-class schemes, by their option values
SCHEMES = {"ovr": "one-vs-rest", "ovo": "one-vs-one"}


@dataclass(frozen=True)
class Param:
    """A parameter a grid may span.

    ``kind`` is ``float`` (positive, finite) or ``int`` (at least ``minimum``); ``option`` is the
    command-line option that sets it (comma-separated values make a grid); ``in_label``: the
    parameter always appears in the learner's result label (``svm C=1``), the others only when
    they take several values in a run.
    """

    name: str
    kind: type
    default: Any
    option: str
    help: str
    in_label: bool = True
    minimum: int = 1

    def check(self, value: Any) -> Any:
        """``value`` as this parameter's type, or an :class:`EvaluationError` naming the option."""
        if self.kind is float:
            ok = not isinstance(value, bool) and isinstance(value, (int, float, np.number)) and \
                math.isfinite(value) and value > 0
            if not ok:
                raise EvaluationError(f"{self.name}={value!r} must be a positive finite number; e.g. {self.option} "
                                      "0.1,1,10")
            return float(value)
        ok = not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= self.minimum
        if not ok:
            raise EvaluationError(f"{self.name}={value!r} is not an integer >= {self.minimum}; e.g. {self.option} "
                                  f"{max(self.minimum, int(self.default))}")
        return int(value)

    def parse(self, text: str) -> list:
        """The values of a comma-separated command-line list."""
        vals = []
        for t in str(text).split(","):
            if not t.strip():
                continue
            try:
                v: Any = float(t) if self.kind is float else int(t)
            except ValueError:
                raise EvaluationError(f"{self.option} {text!r}: {t.strip()!r} is not "
                                      f"{'a number' if self.kind is float else 'an integer'}; e.g. {self.option} "
                                      f"{'0.1,1,10' if self.kind is float else '1,2,5'}") from None
            vals.append(self.check(v))
        if not vals:
            raise EvaluationError(f"{self.option} {text!r} is empty; give at least one value")
        return vals

    def text(self, value: Any) -> str:
        return "nested" if value is None else f"{value:g}" if self.kind is float else str(value)


def option_dest(option: str) -> str:
    """The argparse attribute of a command-line option (``--C`` -> ``C``)."""
    return option.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Point:
    """One point of a grid: parameter name -> value, in the learner's declared order. A value of
    None stands for "chosen per split by nested selection"."""

    values: tuple = ()

    def __getitem__(self, name: str) -> Any:
        for k, v in self.values:
            if k == name:
                return v
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:
        try:
            return self[name]
        except KeyError:
            return default

    def as_dict(self) -> dict:
        return dict(self.values)

    def replace(self, **kw: Any) -> Point:
        return Point(tuple((k, kw.get(k, v)) for k, v in self.values))


@dataclass(frozen=True)
class Problem:
    """What a run learns, beyond the data: the task's classes, the positive class of a binary
    task, class weights, the multi-class scheme, and the seed of a learner's visiting order.

    ``task`` is the task kind (:data:`TASKS`); a regression or ranking problem has no classes
    (``()``). ``groups``, for ranking, is the group id of every example of the source (its
    candidates are ordered within their group only); the tasks of a ranking learner carry the
    groups of their training part only.
    """

    classes: tuple
    positive: Any = None
    class_weight: Any = None
    multiclass: str = "ovr"
    seed: Any = None
    task: str = "classification"
    groups: Any = field(default=None, compare=False, repr=False)

    @property
    def n_classes(self) -> int:
        return len(self.classes)


@dataclass
class Outcome:
    """What the fit of one grid point on one split gives: the predictions of its test part (the
    labels of a classification task, the real predictions of a regression, the scores of a
    ranking: higher ranks higher within a group) and anything the learner reports about the fit
    (``info``, summarised by :meth:`Learner.summary`)."""

    predicted: np.ndarray
    info: dict = field(default_factory=dict)


class Session:
    """A planned run of one learner over one data source (made by :meth:`Learner.session`)."""

    #: what the results record about the plan (e.g. the SVM solver and why), or None
    plan: dict | None = None

    def tasks(self, y: np.ndarray, train: np.ndarray, test: np.ndarray, points: list[Point], problem: Problem,
              name: str) -> tuple[list, Any]:
        """The tasks fitting ``train`` and predicting ``test`` (positions of the source; ``y`` the
        labels of every example) for each point, and ``assemble(results) -> [Outcome]`` in the order
        of ``points``."""
        raise NotImplementedError

    def n_tasks(self, points: list[Point], problem: Problem) -> int:
        """How many tasks :meth:`tasks` makes for one split."""
        return len(points)


@dataclass(frozen=True)
class Sizes:
    """The largest training and test parts of a run's fits and the inner folds of nested selection
    (0: none): what a learner plans its memory for."""

    n_train: int
    n_test: int
    nested_folds: int = 0


class Learner:
    """The base of every learner (see the module docstring)."""

    name: ClassVar[str]
    reads: ClassVar[str]
    params: ClassVar[tuple[Param, ...]]
    task_kinds: ClassVar[tuple[str, ...]] = ("classification",)
    multiclass: ClassVar[tuple[str, ...]] = ("ovr",)
    class_weight: ClassVar[bool] = True
    warm_start: ClassVar[bool] = False
    #: one line for ``--help`` and the learner table of the documentation
    summary_line: ClassVar[str] = ""

    @classmethod
    def from_args(cls, args: Any) -> Learner:
        """The learner configured from the options of ``gramtile evaluate`` / ``train`` (an
        argparse namespace): each learner reads the options it declares."""
        return cls()

    @classmethod
    def grid_from_args(cls, args: Any) -> dict:
        """The grid given on the command line: each declared parameter's option (comma-separated
        values), the default where the option is not given."""
        out = {}
        for p in cls.params:
            text = getattr(args, option_dest(p.option), None)
            if text is not None:
                out[p.name] = p.parse(text)
        return out

    def param(self, name: str) -> Param:
        for p in self.params:
            if p.name == name:
                return p
        raise EvaluationError(f"{self.name} takes no parameter {name!r}; its parameters are "
                              f"{[p.name for p in self.params]}")

    def grid(self, values: dict | None = None) -> list[Point]:
        """The grid over ``values`` (parameter name -> value or list of values; missing: the
        default), as the cartesian product in declared order (the last parameter varies fastest).
        Names the learner does not declare are refused."""
        values = dict(values or {})
        for k in values:
            self.param(k)
        axes = []
        for p in self.params:
            v = values.get(p.name, p.default)
            vs = list(v) if isinstance(v, (list, tuple, np.ndarray)) else [v]
            if not vs:
                raise EvaluationError(f"the {p.name} grid is empty; give at least one value, e.g. {p.option} "
                                      f"{p.text(p.default)}")
            axes.append([(p.name, p.check(x)) for x in vs])
        points = [()]
        for ax in axes:
            points = [pt + (kv,) for pt in points for kv in ax]
        return [Point(pt) for pt in points]

    def varying(self, grid: list[Point]) -> list[str]:
        """The parameters taking more than one value in ``grid``."""
        return [p.name for p in self.params if len({pt[p.name] for pt in grid}) > 1]

    def label(self, point: Point, varying: list[str] = ()) -> str:
        """The key of a point in results (``svm C=1``, ``perceptron epochs=2``)."""
        parts = [f"{p.name}={p.text(point[p.name])}" for p in self.params if p.in_label or p.name in varying]
        return " ".join([self.name] + parts)

    def row(self, point: Point, problem: Problem) -> dict:
        """The result columns that name a point (after ``kernel``)."""
        return {"model": self.name, **point.as_dict()}

    def summary(self, infos: list[dict]) -> dict:
        """Result columns gathered from the :attr:`Outcome.info` of every split (default: none)."""
        return {}

    def check_problem(self, problem: Problem) -> None:
        """Refuse a problem this learner cannot train (a task kind, a scheme or class weights it does
        not take)."""
        self.check_task(problem.task)
        if problem.task == "classification":
            self.check_capabilities(problem.multiclass, problem.class_weight)
        elif problem.class_weight is not None:
            raise EvaluationError(f"a {problem.task} task takes no class weights; drop --class-weight")

    def check_task(self, task: str) -> None:
        """Refuse a task kind this learner does not learn, naming the learners that do."""
        if task not in TASKS:
            raise EvaluationError(f"task={task!r}; use one of {list(TASKS)}")
        if task not in self.task_kinds:
            raise EvaluationError(f"{self.name} learns {' and '.join(self.task_kinds)} only, and this is a {task} "
                                  f"task; choose another --model (one that learns {task})")

    def check_capabilities(self, multiclass: str = "ovr", class_weight: Any = None) -> None:
        """Refuse options this learner does not declare: a multi-class scheme, class weights."""
        if multiclass not in self.multiclass:
            schemes = " or ".join(SCHEMES[m] for m in self.multiclass)
            raise EvaluationError(f"{self.name} trains {schemes} models only; drop --multiclass {multiclass}")
        if class_weight is not None and not self.class_weight:
            raise EvaluationError(f"{self.name} takes no class weights; drop --class-weight")

    @contextmanager
    def session(self, source: Any, problem: Problem, sizes: Sizes, cluster: Any) -> Iterator[Session]:
        """Plan a run over ``source`` where ``cluster`` runs its tasks; the session's tasks are valid
        until the block ends."""
        raise NotImplementedError
        yield  # pragma: no cover
