"""A scikit-learn facade: :class:`KernelSVC` fits and predicts on structures, not matrices.

``KernelSVC(kernel=SPEC, C=1.0)`` takes lists of :class:`~gramtile.pipeline.representations.structures.Document`
(or of bare structures: trees, dependency trees, ...) and computes the Gram blocks it needs with
:func:`gramtile.pipeline.compute.inmemory.gram`, so it works inside ``Pipeline`` and ``GridSearchCV``.

What is computed, and what is reused
------------------------------------
``fit`` needs K(train, train). It is read from a process-wide *kernel pool*, one per kernel spec
(keyed by ``spec_hash``): the examples seen by earlier ``fit`` calls and the matrix of kernel
values among them. Examples are identified by content (a sha1 of each structure's ``repr`` per
representation), so the sub-lists ``GridSearchCV`` cuts from one data set map back onto the pool.
Only the examples not yet in the pool are evaluated, against the whole pool (m new examples cost
m x (pool + m) evaluations). In a k-fold ``GridSearchCV`` over C the pool is complete after the
first two fits; every other fit and every C setting evaluates no pair at all.

``predict`` evaluates the kernel between the inputs and the *support vectors* only (through a
:class:`~gramtile.pipeline.learn.models.SavedModel`), unless every input is already in the pool, in
which case the values are sliced from it. ``pool_stats()`` reports pairs evaluated so far;
``clear_pool()`` frees the memory (the pool holds a dense float64 matrix over all examples fitted).

Kernels whose corpus resources are built from the examples (an LSA soft-matching space,
``similarity: lsa``, or a domain space, ``domain``) bypass the pool: their kernel depends on the
whole training set, so a pooled K grown from other example sets would be another kernel. ``fit``
computes K(train, train) with the space of the training examples and the model keeps that space
(:mod:`gramtile.pipeline.learn.models`); ``predict`` always evaluates against the support vectors.
"""
from __future__ import annotations

import hashlib

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin

from gramtile.kernels.registry import as_spec
from gramtile.kernels.spec import DEFAULT_REP
from gramtile.pipeline.compute.inmemory import gram, gram_with_resources
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.models import TrainedResources, kernel_reps, train
from gramtile.pipeline.parsing.convert import parse
from gramtile.pipeline.representations.encode import KIND_OF_TYPE, kind_of
from gramtile.pipeline.representations.structures import Document
from gramtile.pipeline.resources.keys import resource_reps

_POOLS: dict = {}
_STATS = {"pairs": 0, "fit_pairs": 0, "predict_pairs": 0}


def pool_stats() -> dict:
    """Kernel pairs evaluated by KernelSVC in this process: total, in fit, in predict."""
    return dict(_STATS)


def clear_pool() -> None:
    """Forget every cached kernel matrix and reset :func:`pool_stats`."""
    _POOLS.clear()
    for k in _STATS:
        _STATS[k] = 0


def _as_docs(X, reps):
    """Documents with the representations ``reps`` from Documents or bare structures."""

    X = list(X)
    if not X:
        raise EvaluationError("KernelSVC: no examples; pass a non-empty list of Documents or structures")
    if any(not isinstance(x, (Document, dict)) and type(x) not in KIND_OF_TYPE for x in X):
        # spaCy Docs, conllu TokenLists, bracket strings, raw text: what gramtile.parse reads
        X = parse(X, what="KernelSVC")
    out = []
    for i, x in enumerate(X):
        if isinstance(x, Document):
            out.append(x)
            continue
        try:
            rep = DEFAULT_REP[kind_of(x)]
        except (TypeError, KeyError):
            raise EvaluationError(f"KernelSVC: example {i} is a {type(x).__name__}; pass Documents or structures "
                                  "(Tree, DepTree, TokenSeq, PTree, ...)") from None
        if len(reps) != 1 or rep not in reps:
            raise EvaluationError(f"KernelSVC: example {i} is a bare {type(x).__name__} (representation {rep!r}), "
                                  f"but the kernel reads {sorted(reps)}; pass Documents with those structures")
        out.append(Document(id=f"x{i}", structures={rep: x}))
    for d in out:
        missing = [r for r in reps if r not in d.structures]
        if missing:
            raise EvaluationError(f"KernelSVC: example {d.id!r} has no representation {missing[0]!r} that the kernel "
                                  f"reads (it has {sorted(d.structures)})")
    return out


def _key(doc, reps) -> str:
    h = hashlib.sha1()
    for r in reps:
        h.update(r.encode())
        h.update(repr(doc.structures[r]).encode("utf-8"))
    return h.hexdigest()


class _Pool:
    """Examples of one kernel spec and K among them (grown as new examples arrive)."""

    def __init__(self, spec):
        self.spec = spec

        self.reps = kernel_reps(spec)
        # a space built from the examples makes K depend on the whole example set: no pooling
        self.poolable = all(r is None for r in resource_reps(spec).values())
        self.index: dict = {}
        self.docs: list = []
        self.K = np.zeros((0, 0))

    def positions(self, docs, add: bool):
        keys = [_key(d, self.reps) for d in docs]
        if add:
            new, seen = [], set()
            for k, d in zip(keys, docs):
                if k not in self.index and k not in seen:
                    seen.add(k)
                    new.append((k, d))
            if new:
                self._grow(new)
        return [self.index.get(k) for k in keys]

    def _grow(self, new):

        p, m = len(self.docs), len(new)
        new_docs = [d for _, d in new]
        everything = self.docs + new_docs
        block = gram(self.spec, _by_rep(new_docs, self.reps), _by_rep(everything, self.reps))  # (m, p + m)
        _STATS["pairs"] += block.size
        _STATS["fit_pairs"] += block.size
        K = np.empty((p + m, p + m))
        K[:p, :p] = self.K
        K[p:, :] = block
        K[:p, p:] = block[:, :p].T
        self.K = K
        for k, d in new:
            self.index[k] = len(self.docs)
            self.docs.append(d)


def _by_rep(docs, reps):
    return {r: [d.structures[r] for d in docs] for r in reps}


class KernelSVC(ClassifierMixin, BaseEstimator):
    """Support vector classifier with a gramtile kernel spec, on structures.

    Parameters
    ----------
    kernel : KernelSpec, dict or JSON string
        E.g. ``{"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4}}``.
    C : float, default 1.0
    class_weight : None, "balanced" or dict
    multiclass : {"ovr", "ovo"}, default "ovr"
        One-vs-rest (``OneVsRestClassifier``) or SVC's native one-vs-one.

    Attributes
    ----------
    classes_ : ndarray
    model_ : SavedModel
        The fitted model over its support examples (``model_.save(DIR)`` writes it for
        ``gramtile predict``).
    """

    def __init__(self, kernel=None, C: float = 1.0, class_weight=None, multiclass: str = "ovr"):
        self.kernel = kernel
        self.C = C
        self.class_weight = class_weight
        self.multiclass = multiclass

    def _pool(self):

        if self.kernel is None:
            raise EvaluationError("KernelSVC: kernel=None; pass a kernel spec, e.g. {'kind': 'sst', 'lam': 0.4}")
        spec = as_spec(self.kernel)
        pool = _POOLS.get(spec.spec_hash)
        if pool is None:
            pool = _POOLS[spec.spec_hash] = _Pool(spec)
        return pool

    def fit(self, X, y):
        """Fit on examples X (Documents or structures) and labels y."""

        if self.multiclass not in ("ovr", "ovo"):
            raise EvaluationError(f"KernelSVC: multiclass={self.multiclass!r}; use 'ovr' or 'ovo'")
        pool = self._pool()
        docs = _as_docs(X, pool.reps)
        y = np.asarray(y)
        if len(y) != len(docs):
            raise EvaluationError(f"KernelSVC.fit: {len(docs)} examples but {len(y)} labels")
        labelled = [type(d)(id=f"{d.id}#{i}", label=str(lab), structures={r: d.structures[r] for r in pool.reps})
                    for i, (d, lab) in enumerate(zip(docs, y))]
        self.classes_ = np.unique(y)
        self._label_of = {str(c): c for c in self.classes_}
        resources = None
        if pool.poolable:
            pos = np.asarray(pool.positions(docs, add=True), dtype=np.int64)
            K = pool.K[np.ix_(pos, pos)]
            self._train_pos = pos
        else:

            K, strings, values = gram_with_resources(pool.spec, _by_rep(docs, pool.reps))
            resources, self._train_pos = TrainedResources(strings, values), None
            _STATS["pairs"] += K.size
            _STATS["fit_pairs"] += K.size
        # the model keeps the space K was computed with (WordNet: rebuilt from the training strings)
        self.model_ = train(labelled, pool.spec, K=K, learner="svm", C=float(self.C),
                            class_weight=self.class_weight, multiclass=self.multiclass, resources=resources)
        return self

    def _kernel_to_support(self, X):
        if not hasattr(self, "model_"):
            raise EvaluationError("KernelSVC: call fit() before predict()")
        pool = self._pool()
        docs = _as_docs(X, pool.reps)
        pos = pool.positions(docs, add=False) if self._train_pos is not None else [None]
        if all(p is not None for p in pos):
            sv = self._train_pos[[int(d.id.rsplit("#", 1)[1]) for d in self.model_.support]]
            return pool.K[np.ix_(np.asarray(pos, dtype=np.int64), sv)]
        K = self.model_.kernel_to_support(docs)
        _STATS["pairs"] += K.size
        _STATS["predict_pairs"] += K.size
        return K

    def decision_function(self, X):
        """Scores: (n,) for two classes (> 0 means ``classes_[1]``), else (n, n_functions)."""
        return self.model_.decision_function(self._kernel_to_support(X))

    def predict(self, X):
        """Predicted labels of X."""
        pred = self.model_.predict_from_kernel(self._kernel_to_support(X))
        return np.asarray([self._label_of[p] for p in pred])
