"""The linear SVM on Nystroem features (:mod:`gramtile.pipeline.learn.nystroem`): for corpora whose
training block does not fit in memory, only K(examples, landmarks) is read.

Each task is one training part / test part and one landmark count: the landmarks are drawn
among the training part (stratified, seeded) or, from a landmark store, taken from it (those
in the training part, or all of them with ``protocol="all"``); K(rows, landmarks) is read in
bands into one array and turned into features in place; then the linear SVM
(:mod:`gramtile.pipeline.learn.dcd`) is fitted for every C of the grid on those features.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from gramtile.pipeline.learn import dcd
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.fits import kernel_ref
from gramtile.pipeline.learn.learners.base import Learner, Outcome, Param, Session
from gramtile.pipeline.learn.nystroem import (
    CUTOFF,
    LOSS,
    MAX_ITER,
    PROTOCOLS,
    TOL,
    LandmarkSource,
    check_memory,
    features_in_place,
    pick_landmarks,
)
from gramtile.pipeline.learn.parallel import SourceRef, fit_memory
from gramtile.pipeline.progress import log


@dataclass
class NystroemFit:
    """One training part / test part, one landmark count, every C of the grid."""

    ref: SourceRef
    y: np.ndarray            # labels of every example of the source
    train: np.ndarray
    test: np.ndarray
    m: int                   # landmarks to draw (ignored with ``fixed``)
    fixed: np.ndarray | None  # a landmark store's landmarks
    protocol: str
    Cs: tuple
    problem: object
    options: dict            # cutoff, loss, tol, max_iter, seed, stratified
    name: str

    def run(self) -> dict:
        """``{C: (predicted labels of test, info)}``."""
        o = self.options
        t0 = time.perf_counter()
        if self.fixed is None:
            L = pick_landmarks(self.y, self.train, self.m, o["seed"], o["stratified"])
        else:
            L = self.fixed if self.protocol == "all" else np.intersect1d(self.fixed, self.train)
            if L.size == 0:
                raise EvaluationError(f"{self.name}: none of the {self.fixed.size} landmarks is in its training part; "
                                      "compute the landmark store with more --landmarks")
        src = self.ref.open()
        rows = np.union1d(np.union1d(self.train, self.test), L)
        F, fmap = features_in_place(src, rows, L, np.empty(rows.size * L.size), o["cutoff"],
                                    f"{self.name} examples x landmarks", memory_mb=o.get("memory_mb"))
        tr, te = np.searchsorted(rows, self.train), np.searchsorted(rows, self.test)
        ytr = self.y[self.train]
        out = {}
        for C in self.Cs:
            clf = dcd.fit(F, tr, ytr, C=C, class_weight=self.problem.class_weight, loss=o["loss"], tol=o["tol"],
                          max_iter=o["max_iter"], seed=o["seed"])
            info = {"m": int(self.m if self.fixed is None else self.fixed.size), "landmarks_used": int(L.size),
                    "rank": int(fmap.rank), "converged": bool(clf.converged),
                    "iterations": int(max(f.iterations for f in clf.fits))}
            if self.fixed is not None:
                info["landmark_protocol"] = self.protocol
            out[C] = (clf.predict(F, te), info)
        log.debug(f"  {self.name}: nystroem m={L.size} rank {fmap.rank}, {len(self.Cs)} C, "
                  f"{time.perf_counter() - t0:.1f} s")
        return out


class NystroemSession(Session):
    def __init__(self, learner, ref, fixed, memory=None):
        self.learner, self.ref, self.fixed = learner, ref, fixed
        self.memory = memory  # what one fit may use where it runs (parallel.fit_memory)
        self.plan = None

    def _check_memory(self, train, test, ms):
        """Refuse, before any task, a fit whose n x m feature array cannot fit where it runs."""
        if self.memory is None:
            return
        rows = np.union1d(train, test)
        for m in ms:
            if self.fixed is None:
                n, k = rows.size, min(m, train.size)
            else:
                L = self.fixed if self.learner.protocol == "all" else np.intersect1d(self.fixed, train)
                n, k = np.union1d(rows, L).size, L.size
            check_memory(int(n), int(k), self.memory)

    def tasks(self, y, train, test, points, problem, name):
        y = np.asarray(y)
        train, test = np.asarray(train, dtype=np.int64), np.asarray(test, dtype=np.int64)
        ms = list(dict.fromkeys(int(p["landmarks"]) for p in points))
        Cs = tuple(sorted({float(p["C"]) for p in points}))
        lr = self.learner
        self._check_memory(train, test, ms)
        opts = {"cutoff": lr.cutoff, "loss": lr.loss, "tol": lr.tol, "max_iter": lr.max_iter, "seed": lr.seed,
                "stratified": lr.stratified,
                "memory_mb": None if self.memory is None else self.memory.per_task_mb}
        tasks = [NystroemFit(self.ref, y, train, test, m, self.fixed, lr.protocol, Cs, problem, opts, name)
                 for m in ms]

        def assemble(results):
            by_m = dict(zip(ms, results))
            outs = []
            for p in points:
                pred, info = by_m[int(p["landmarks"])][float(p["C"])]
                outs.append(Outcome(np.asarray(pred), info))
            return outs

        return tasks, assemble

    def n_tasks(self, points, problem):
        return len({int(p["landmarks"]) for p in points})


class Nystroem(Learner):
    """The Nystroem linear SVM (``gramtile evaluate --model nystroem``).

    Parameters
    ----------
    seed : int
        Seed of the landmark draw and of the linear SVM's order.
    stratified : bool
        Landmarks drawn in proportion to the classes (else uniformly).
    cutoff, loss, tol, max_iter
        The feature map's eigenvalue cutoff and the linear SVM's loss and stopping rule
        (:mod:`gramtile.pipeline.learn.nystroem`).
    protocol : {"train", "all"}
        With a landmark store: the landmarks in each training part, or all of them.
    fixed : array of int, optional
        Landmark positions among the source's rows to use instead of a draw per split (as a
        landmark store brings its own); ``protocol`` applies to them.
    """

    name = "nystroem"
    reads = "landmarks"
    params = (Param("C", float, 1.0, "--C", "the linear SVM's C"),
              Param("landmarks", int, 500, "--landmarks", "landmarks per split", in_label=False),)
    multiclass = ("ovr",)
    class_weight = True
    summary_line = "a linear SVM on Nystroem features from K(examples, landmarks)"

    def __init__(self, seed: int = 0, stratified: bool = True, cutoff: float = CUTOFF, loss: str = LOSS,
                 tol: float = TOL, max_iter: int = MAX_ITER, protocol: str = "train", fixed=None):
        if protocol not in PROTOCOLS:
            raise EvaluationError(f"nystroem: protocol {protocol!r}; use 'train' (landmarks of each training part) "
                                  f"or 'all' (transductive)")
        self.seed, self.stratified, self.cutoff, self.loss = seed, stratified, cutoff, loss
        self.tol, self.max_iter, self.protocol = tol, max_iter, protocol
        self.fixed = None if fixed is None else np.unique(np.asarray(fixed, dtype=np.int64))

    @classmethod
    def from_args(cls, args):
        return cls(seed=getattr(args, "fold_seed", 0), loss=args.linear_loss,
                   protocol=getattr(args, "landmark_protocol", "train"))

    def row(self, point, problem):
        return {"model": self.name, "C": point["C"]}

    def summary(self, infos):
        if not infos:
            return {}
        out = {"m": infos[0]["m"], "rank": min(i["rank"] for i in infos), "cutoff": self.cutoff, "loss": self.loss,
               "converged": all(i["converged"] for i in infos), "iterations": max(i["iterations"] for i in infos)}
        if "landmark_protocol" in infos[0]:
            out.update(landmark_protocol=infos[0]["landmark_protocol"],
                       landmarks_used_min=min(i["landmarks_used"] for i in infos))
        return out

    @contextmanager
    def session(self, source, problem, sizes, cluster):
        fixed = self.fixed if self.fixed is not None else \
            source.landmarks if isinstance(source, LandmarkSource) else None
        yield NystroemSession(self, kernel_ref(source, cluster), fixed, fit_memory(cluster))
