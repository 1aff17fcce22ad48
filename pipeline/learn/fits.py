"""The independent fits of an evaluation, as tasks a worker runs from store paths and indices.

:func:`gramtile.pipeline.learn.crossval.evaluate` cuts its work into the smallest pieces that do
not depend on each other and runs them with :func:`~gramtile.pipeline.learn.parallel.run_tasks`:

- :class:`Fit`: one model (one C of the grid, or the perceptron) trained on one training part and
  predicting its test part (libsvm's SVC, its one-vs-rest classes included: SVC and
  ``OneVsRestClassifier`` handle them inside one fit);
- :class:`Chain`: one binary problem of the smo solver (the binary task, or one one-vs-rest class)
  solved along the whole C grid of one training part, each C warm-started from the previous one
  (the chain stays one task: a warm start needs the previous C's solution), returning its decision
  values on the test part; :func:`combine_chains` turns the chains of a split into predictions.

A task carries a :class:`~gramtile.pipeline.learn.parallel.SourceRef` (store paths and
identities, never kernel values) and index arrays; the worker reads only the blocks its fit needs
(:func:`fit_blocks`). The fits of one training part read the same two blocks, so each thread keeps
the last pair it read (one pair: it is dropped before another is read) and a following fit of the
same part reuses it. When an evaluation has enough training parts to keep every worker busy,
the fits of one part are packed into one task (:func:`pack`, :func:`run_fits`), so each pair is
read once; which fits share a worker or a task does not change a number, only how often a block
is read.

:class:`BlockSession` is the session of the learners that fit on the two blocks in memory (one
:class:`Fit` per grid point); it plans the tasks of one training part / test part and the function
that turns their results into predictions per point, so the serial run and every parallel run
assemble the same predictions from the same fits.
"""
from __future__ import annotations

import hashlib
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np

from gramtile.pipeline.cache import current
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.learners.base import Learner, Outcome, Session
from gramtile.pipeline.learn.parallel import SourceRef, check_complete, n_slots, run_tasks, runs_here, source_ref
from gramtile.pipeline.learn.smo import RowCache, class_C, solve_binary
from gramtile.pipeline.learn.solver import plan_solver
from gramtile.pipeline.progress import log


def read_block(source, rows, cols, what):
    """K[rows][:, cols] as float64, refusing NaN / infinite entries (checked a band of rows at a
    time, so the check allocates no second matrix)."""
    return checked_block(source.block(rows, cols), rows, cols, what, getattr(source, "finite", False))


def read_blocks(source, pairs, whats, out=None) -> list:
    """:func:`read_block` of each ``(rows, cols)`` of ``pairs``; from a source with ``blocks`` (a
    store), in one pass over the stored chunks they share, into the float64 arrays ``out`` where
    the source can fill them."""
    if hasattr(source, "blocks"):
        finite = getattr(source, "finite", False)
        got = source.blocks(pairs) if out is None else source.blocks(pairs, out=out)
        return [checked_block(B, r, c, w, finite) for B, (r, c), w in zip(got, pairs, whats)]
    return [read_block(source, r, c, w) for (r, c), w in zip(pairs, whats)]


def checked_block(B, rows, cols, what, finite: bool = False):
    """``B`` as float64 after checking its shape and, unless the source vouches for it (``finite``:
    a store source, whose every chunk is checked finite when read), that its entries are finite."""
    B = np.asarray(B, dtype=np.float64)
    if B.shape != (len(rows), len(cols)):
        raise EvaluationError(f"kernel source returned a block of shape {B.shape} for {what}, "
                              f"expected {(len(rows), len(cols))}")
    if finite:
        return B
    band = max(1, (1 << 24) // max(1, B.shape[1]))
    if not all(np.isfinite(B[a:a + band]).all() for a in range(0, B.shape[0], band)):
        raise EvaluationError(f"the {what} block has NaN or infinite entries (an unfinished Gram store?); "
                              "finish it with `gramtile gram` (it resumes) and rerun")
    return B


# ---- the blocks of one training part, kept for the next fit of the same part -----------------------

def _digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.int64).tobytes()).hexdigest()


def fit_blocks(ref: SourceRef, run: str, train: np.ndarray, test: np.ndarray, name: str):
    """``(K[train][:, train], K[test][:, train])`` from ``ref``'s source, reusing this thread's last
    pair when it is the same run's blocks of the same source and indices (otherwise that pair is
    dropped first, so a thread holds at most one pair).

    A store source reads the pair into this thread's scratch memory (:func:`_scratch`), the memory
    of the pair it replaces: a fresh 200 MB pair costs its page faults and zeroing again on every
    task (about 35 ms per 86 MB here), and two threads faulting at once slow each other. The
    fits use their blocks only while they run (SVC and the perceptron keep no reference to K), and
    the pair is dropped before its memory is filled again.
    """
    key = (run, ref.key, _digest(train), _digest(test))
    mine = _kept()
    got = mine.get("blocks")
    if got is not None and got[0] == key:
        return got[1], got[2]
    # drop every reference to the kept pair (this name's too) before reading the next one: holding
    # it meant two pairs at once (3.85 GB against 2.23 GB at n = 16,449, 5 folds)
    got = mine["blocks"] = None
    src = ref.open()
    out = None
    if hasattr(src, "blocks"):  # a store source (one that cannot fill the arrays allocates its own)
        n_tr, n_te = train.size, test.size
        flat = _scratch(n_tr * n_tr + n_te * n_tr)
        out = [flat[:n_tr * n_tr].reshape(n_tr, n_tr), flat[n_tr * n_tr:n_tr * (n_tr + n_te)].reshape(n_te, n_tr)]
    K_tr, K_te = read_blocks(src, [(train, train), (test, train)], [f"{name} train x train", f"{name} test x train"],
                             out=out)
    mine["blocks"] = (key, K_tr, K_te)
    return K_tr, K_te


def _kept() -> dict:
    """What this thread keeps for its next fit (``blocks``, ``scratch``), in the run's cache
    (namespace ``fit-blocks``, one entry per thread: a thread holds at most one pair)."""
    return current().load("fit-blocks", threading.get_ident(), dict)


def _scratch(size: int) -> np.ndarray:
    """This thread's float64 scratch memory of at least ``size`` entries (grown when too small; its
    previous contents are not kept)."""
    mine = _kept()
    buf = mine.get("scratch")
    if buf is None or buf.size < size:
        buf = mine["scratch"] = None  # the old memory goes before the new is taken
        buf = mine["scratch"] = np.empty(size)
    return buf


# ---- the tasks ------------------------------------------------------------------------------------

@dataclass
class Fit:
    """One model fitted on ``train`` and predicting ``test`` (positions of ``ref``'s source)."""

    ref: SourceRef
    run_id: str          # the evaluation this fit belongs to (keys the kept blocks)
    y: np.ndarray        # labels of ``train``
    train: np.ndarray
    test: np.ndarray
    learner: object      # the Learner whose estimator is fitted (``estimator(point, problem)``)
    point: object        # the grid point
    problem: object      # the task's kind, classes, class weights, multi-class scheme, seed
    name: str            # the split, for messages
    groups: np.ndarray | None = None  # ranking: the group ids of ``train``

    def run(self):
        return run_fit(self)


@dataclass
class Chain:
    """One binary smo problem (``positive`` against the rest) along the C grid ``Cs`` (increasing)."""

    ref: SourceRef
    y: np.ndarray        # labels of ``train``
    train: np.ndarray
    test: np.ndarray
    positive: object
    binary: bool         # the task's only problem (class weights over the original labels)
    Cs: tuple
    class_weight: object
    cache_mb: float
    tol: float
    name: str
    row_file: object = None  # the run's kernel row file (solver.smo_row_file), if any

    def run(self):
        return run_chain(self)


@dataclass
class Group:
    """Fits of one training part / test part (they read the same two blocks), run in one task one
    after another (:func:`pack`)."""

    fits: list


def run_task(task):
    """What a worker runs: a task's own ``run()`` (a :class:`Fit`, a :class:`Chain`, a learner's
    task), or the fits of a :class:`Group` one after another."""
    if isinstance(task, Group):
        return [f.run() for f in task.fits]
    return task.run()


#: Fits sharing a block pair are packed into one task when there are at least this many such
#: pairs per worker slot (enough to keep every worker busy without splitting a pair).
PACK_PER_SLOT = 2


def _pair_key(t):
    return (t.ref.key, t.run_id, _digest(t.train), _digest(t.test)) if isinstance(t, Fit) else None


def pack(tasks: list, slots: int) -> list:
    """``[(task to run, [indices of tasks it stands for])]``: consecutive :class:`Fit` s of one
    block pair become one :class:`Group` when the pairs are at least :data:`PACK_PER_SLOT` per
    worker slot (each pair is then read once, by one worker); with fewer pairs (a fixed split, a
    3-fold inner selection) every fit stays a task of its own, so the workers share the C grid
    (and each reads the pair it needs)."""
    runs = []
    for i, t in enumerate(tasks):
        k = _pair_key(t)
        if runs and k is not None and runs[-1][0] == k:
            runs[-1][1].append(i)
        else:
            runs.append((k, [i]))
    if len(runs) < PACK_PER_SLOT * max(1, slots):
        return [(t, [i]) for i, t in enumerate(tasks)]
    return [(Group([tasks[i] for i in idx]), idx) if len(idx) > 1 else (tasks[idx[0]], idx) for _, idx in runs]


def run_fits(tasks: list, cluster=None, bar=None, on_done=None,
             desc: str = "fits", key_prefix: str = "gramtile-fit") -> list:
    """The results of ``tasks`` (:class:`Fit` s and :class:`Chain` s) in task order, run as the
    units of :func:`pack` by :func:`~gramtile.pipeline.learn.parallel.run_tasks`; ``bar`` (a
    progress bar) advances and ``on_done(i, result)`` is called once per task, not per unit.
    ``on_done`` may return further tasks (each run as a unit of its own, indices after every task
    so far, results appended), which start while the others still run."""
    tasks = list(tasks)
    units = pack(tasks, n_slots(cluster))
    out = [None] * len(tasks)

    def done(u, r):
        idx = units[u][1]
        more = []
        for i, x in zip(idx, r if isinstance(units[u][0], Group) else [r]):
            out[i] = x
            if bar is not None:
                bar.update(1)
            if on_done is not None:
                more += on_done(i, x) or []
        for t in more:
            units.append((t, [len(tasks)]))
            tasks.append(t)
            out.append(None)
        return more

    run_tasks(run_task, [u for u, _ in units], cluster=cluster, desc=desc, on_done=done, key_prefix=key_prefix)
    return out


def run_fit(task: Fit) -> np.ndarray:
    """The predictions of ``task.test`` by the model trained on ``task.train`` (a ranking
    estimator is fitted with the groups of its training part: ``fit(K, y, groups=...)``)."""
    K_tr, K_te = fit_blocks(task.ref, task.run_id, task.train, task.test, task.name)
    est = task.learner.estimator(task.point, task.problem)
    if task.groups is None:
        est.fit(K_tr, task.y)
    else:
        est.fit(K_tr, task.y, groups=task.groups)
    return np.asarray(est.predict(K_te))


def run_chain(task: Chain) -> dict:
    """``{C: decision values of task.test}`` of one smo problem solved along its C grid.

    Each C is warm-started from the solution at the previous C when its box only grows (that
    solution stays feasible);
    K(train, train) is read through one :class:`~gramtile.pipeline.learn.smo.RowCache` of
    ``cache_mb``, and K(test, support vectors) in bands of at most ``cache_mb`` after the cache is
    released; both from the run's row file when there is one (:mod:`~gramtile.pipeline.learn.rowfile`).
    """
    src = task.ref.open()
    ytr = np.asarray(task.y)
    yc = np.where(ytr == task.positive, 1.0, -1.0)
    t0 = time.perf_counter()
    rows = RowCache(src, task.train, task.cache_mb, row_file=task.row_file)
    sols, prev = {}, None
    for C in task.Cs:
        box = class_C(ytr, C, task.class_weight) if task.binary or isinstance(task.class_weight, dict) else \
            class_C(yc, C, task.class_weight)
        a0 = prev[0] if prev is not None and np.all(box >= prev[1]) else None
        sol = solve_binary(rows, yc, box, tol=task.tol, alpha0=a0)
        if not sol.converged:
            raise EvaluationError(f"smo did not converge at C={C:g} for class {task.positive!r} in "
                                  f"{sol.iterations} iterations; raise the tolerance (tol) or use --solver libsvm")
        prev = (sol.alpha, box)
        sols[C] = sol
    t_fit, hits, misses = time.perf_counter() - t0, rows.hits, rows.misses
    del rows  # its slab: the prediction's bands take that memory
    t1 = time.perf_counter()
    used = np.zeros(task.train.size, dtype=bool)
    for sol in sols.values():
        used |= sol.alpha > 0
    sv = np.flatnonzero(used)
    coef = {C: (sol.alpha * yc)[sv] for C, sol in sols.items()}
    dec = {C: np.empty(task.test.size) for C in sols}
    band = max(1, int(task.cache_mb * 1e6 // (8 * max(1, sv.size))))
    rf = task.row_file
    pos = rf.positions(src) if rf is not None else None
    for a in range(0, task.test.size, band):
        if pos is None:
            Kb = read_block(src, task.test[a:a + band], task.train[sv], f"{task.name} test x support")
        else:
            Kb, buf, cols = np.empty((min(band, task.test.size - a), sv.size)), np.empty(rf.n), pos[task.train[sv]]
            for k, r in enumerate(pos[task.test[a:a + band]].tolist()):
                rf.read_into(r, cols, Kb[k], buf)
        for C, sol in sols.items():
            dec[C][a:a + band] = Kb @ coef[C] - sol.rho
        del Kb
    its = sum(sol.iterations for sol in sols.values())
    log.info(f"  smo {task.name}, class {task.positive!r}: {len(sols)} C, {its} iterations, {misses} row reads, "
             f"hit rate {hits / max(1, hits + misses):.3f}, {t_fit:.1f} s; prediction of {task.test.size} on "
             f"{sv.size} support vectors {time.perf_counter() - t1:.1f} s")
    return dec


def combine_chains(decisions: list, classes, Cs) -> dict:
    """``{C: predicted labels}`` from the chains of one split (``decisions[k]`` of the k-th problem):
    binary, ``classes[1]`` where the decision is > 0 (SVC's convention); one-vs-rest, the largest
    decision value, ties to the later class (as ``OneVsRestClassifier``)."""
    cl = np.asarray(classes)
    out = {}
    for C in Cs:
        C = float(C)
        if len(classes) == 2:
            out[C] = np.where(decisions[0][C] > 0, cl[1], cl[0])
        else:
            S = np.column_stack([d[C] for d in decisions])
            out[C] = cl[S.shape[1] - 1 - np.argmax(S[:, ::-1], axis=1)]
    return out


class BlockLearner(Learner):
    """The base of a learner fitted on K(train, train) held in memory: it defines
    ``estimator(point, problem)`` (an object with ``fit(K, y)`` and ``predict(K)``), and its
    session refuses, on workers, blocks that cannot fit one fit's memory, then makes one
    :class:`Fit` per grid point."""

    @contextmanager
    def session(self, source, problem, sizes, cluster):
        plan_solver("libsvm", sizes.n_train, sizes.n_test, cluster, sizes.nested_folds,
                    in_memory_fix=f"fewer examples per fit (more --folds, or --rows), or --model svm, whose smo solver "
                                  f"reads kernel rows in bounded memory ({self.name} holds K(train, train))",
                    in_memory=self.name)
        yield BlockSession(self, kernel_ref(source, cluster))


class BlockSession(Session):
    """The session of a learner fitted on K(train, train) in memory: one :class:`Fit` per point,
    reading its blocks from ``ref``'s source (the fits of one part share them, :func:`fit_blocks`)."""

    def __init__(self, learner, ref: SourceRef, plan=None):
        self.learner = learner
        self.ref = ref
        self.run = uuid.uuid4().hex
        self.plan = plan

    def tasks(self, y, train, test, points, problem, name):
        y = np.asarray(y)
        train, test = np.asarray(train, dtype=np.int64), np.asarray(test, dtype=np.int64)
        ytr = y[train]
        groups = None
        if problem.groups is not None:  # each task carries the groups of its training part only
            groups = np.asarray(problem.groups)[train]
            problem = replace(problem, groups=None)
        tasks = [Fit(self.ref, self.run, ytr, train, test, self.learner, pt, problem, name, groups) for pt in points]
        return tasks, outcomes


def outcomes(results) -> list:
    """Predictions as :class:`~gramtile.pipeline.learn.learners.base.Outcome` s."""
    return [Outcome(np.asarray(r)) for r in results]


def kernel_ref(source, cluster) -> SourceRef:
    """What the tasks of a run over ``source`` carry: the source itself when they run in this
    process, else store paths and identities (each worker opens the stores)."""
    check_complete(source)
    return SourceRef(local=source) if runs_here(cluster) else source_ref(source)
