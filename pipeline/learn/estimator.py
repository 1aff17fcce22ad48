"""A scikit-learn facade: :class:`KernelSVC` fits and predicts on structures, not matrices;
:class:`KernelSVR` (regression) and :class:`KernelRanker` (preference ranking within groups) do the
same for real targets.

``KernelSVC(kernel=SPEC, C=1.0)`` takes lists of :class:`~gramtile.pipeline.representations.structures.Document`
(or of bare structures: trees, dependency trees, ..., raw texts, spaCy Docs) and computes the
Gram blocks it needs itself, so it works inside ``Pipeline`` and ``GridSearchCV``.
:class:`GramTransformer` turns examples into kernel rows K(X, X_train) for a scikit-learn learner
on a precomputed kernel.

What is computed, and what is reused
------------------------------------
Each estimator owns its *kernel pool* (:class:`KernelPool`, created by ``fit``): the examples it
was fitted on and the matrix of kernel values among them. Examples are identified by content (a
sha1 of each structure's ``repr`` per representation). A later ``fit`` of the same instance with
the same kernel spec (another C, more examples) evaluates only the pairs of examples not yet in
the pool, and ``predict`` / ``decision_function`` / ``predict_proba`` on examples that are all in
the pool slice their kernel values from it. Otherwise ``predict`` evaluates the kernel between
the inputs and the *support examples* only (the model's
:meth:`~gramtile.pipeline.learn.models.SavedModel.decision_function` over ``K(X, support)``).
``n_kernel_pairs_`` counts the pairs an instance evaluated, in fit and in prediction.

The pool belongs to the instance: ``clone`` (which ``GridSearchCV`` and ``cross_val_score`` call
for every fit) gives an estimator without one, and pickling carries it along. So each fit of a
cross-validation computes K over its own training part (n_train (n_train + 1) / 2 pairs).

Kernels whose corpus resources are built from the examples (an LSA soft-matching space,
``similarity: lsa``, or a domain space, ``domain``) bypass the pool: their kernel depends on the
whole training set, so a pooled K grown from other example sets would be another kernel. ``fit``
computes K(train, train) with the space of the training examples and the model keeps that space
(:mod:`gramtile.pipeline.learn.models`); ``predict`` always evaluates against the support examples.

Where the kernel is computed
----------------------------
``n_jobs`` (threads of this process: the kernel cores release the GIL) or ``cluster`` (a cluster
profile name, a scheduler address, a connected ``distributed.Client`` or a
:class:`~gramtile.pipeline.compute.runtime.Runtime`) run the Gram blocks of fit and prediction as
tasks on that executor (:func:`gram_on`): the examples are encoded once, in this process, each
task evaluates the base kernels of one tile, and the tiles are assembled and combined (normalised,
summed, ...) here, so the matrix is bitwise the one the in-process computation gives.
"""
from __future__ import annotations

import copy
import hashlib
import math
import os
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted

from gramtile.kernels.batches import Batch
from gramtile.kernels.errors import GramtileError
from gramtile.kernels.registry import as_spec
from gramtile.pipeline import optional
from gramtile.pipeline.compute.cluster import Profile
from gramtile.pipeline.compute.compilation import announce, mark_compiled
from gramtile.pipeline.compute.errors import ClusterConfigError
from gramtile.pipeline.compute.inmemory import base_block, encode_with_resources, evaluate_block
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn.errors import EvaluationError, PredictInputError
from gramtile.pipeline.learn.learners.rank import PairRanker
from gramtile.pipeline.learn.learners.svr import SVRegressor
from gramtile.pipeline.learn.metrics import ranking_report
from gramtile.pipeline.learn.models import SavedModel, TrainedResources, as_documents, kernel_reps, resources_onto
from gramtile.pipeline.learn.sources import check_labels
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.resources.keys import resource_reps

if TYPE_CHECKING:
    from gramtile.kernels.spec import KernelSpec
    from gramtile.pipeline.representations.structures import Document

#: Encoded examples as the kernels read them: representation name -> Batch, plus the corpus
#: resources (similarity matrices, spaces) by name on the row side.
Data = dict[str, Any]
#: Where the Gram blocks run: a profile name or scheduler address, a Dask client or a Runtime.
Cluster = str | Runtime | Any | None
#: One tile's base blocks: base spec hash -> (K_base, diag of the rows, diag of the columns).
BaseBlocks = dict[str, tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]]


def _as_docs(X: Any, reps: list[str], who: str = "KernelSVC") -> list[Document]:
    """Documents with the representations ``reps`` from Documents, bare structures, raw texts
    or spaCy Docs (:func:`gramtile.pipeline.learn.models.as_documents`)."""
    if isinstance(X, np.ndarray) and X.dtype.kind in "biufc":
        raise PredictInputError(f"{who}: got a numeric array of shape {X.shape}; pass examples (Documents, "
                                "structures or texts): the kernel is computed from them")
    docs: list[Document] = as_documents(X, reps, who=who)
    return docs


def _key(doc: Document, reps: list[str]) -> str:
    h = hashlib.sha1()
    for r in reps:
        h.update(r.encode())
        h.update(repr(doc.structures[r]).encode("utf-8"))
    return h.hexdigest()


def _by_rep(docs: list[Document], reps: list[str]) -> dict[str, list[Any]]:
    return {r: [d.structures[r] for d in docs] for r in reps}


# ---- Gram blocks as tasks on an executor ------------------------------------------------------

def runtime_for(n_jobs: int | None, cluster: Cluster, who: str) -> Runtime:
    """Where an estimator computes its Gram blocks: ``cluster`` (a profile name or scheduler
    address, a ``distributed.Client``, a :class:`Runtime`), else ``n_jobs`` threads of this
    process (None or 1: in this process, one block at a time; -1: one per core)."""
    if cluster is not None:
        if n_jobs not in (None, 1):
            raise EvaluationError(f"{who}: n_jobs={n_jobs!r} and cluster={cluster!r}; pass one of them (n_jobs: "
                                  "threads of this process; cluster: a profile, scheduler address, Client or Runtime)")
        try:
            return Runtime.of(cluster, progress=False)
        except ClusterConfigError as e:
            raise EvaluationError(f"{who}: {e}") from None
    if n_jobs is None or n_jobs == 1:
        return Runtime.of("sequential", progress=False)
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0:
        raise EvaluationError(f"{who}: n_jobs={n_jobs!r}; pass a positive number of threads, -1 for one per "
                              "core, or None")
    cores = os.cpu_count() or 1
    n = int(n_jobs) if n_jobs > 0 else max(1, cores + 1 + int(n_jobs))  # joblib's convention: -1 = every core
    if n == 1:
        return Runtime.of("sequential", progress=False)
    return Runtime(Profile(f"n_jobs={n_jobs}", "threads", {"n_workers": n}, "n_jobs"), progress=False)


def base_tile(spec: KernelSpec, X: Data, Y: Data | None) -> BaseBlocks:
    """The task: every base kernel's block of one tile, K_base(X, Y) and the two diagonals
    (Y None: the symmetric block K_base(X, X), pairs (p, q) evaluated as K(x_p, x_q), p <= q)."""
    return {b.spec_hash: base_block(b, X, Y) for b in spec.base_specs()}


def _rows(data: Data) -> int:
    return next(v.n for v in data.values() if isinstance(v, Batch))


def _part(data: Data, start: int, stop: int) -> Data:
    """Examples ``start:stop`` of ``data``, with its resources (which are corpus-level)."""
    return {k: v.slice(start, stop) if isinstance(v, Batch) else v for k, v in data.items()}


def _edges(n: int, parts: int) -> list[int]:
    return sorted({round(i * n / parts) for i in range(parts + 1)})


def base_blocks_on(rt: Runtime, spec: KernelSpec, X: Data, Y: Data | None = None,
                   y_self: dict[str, NDArray[np.float64]] | None = None) -> tuple[BaseBlocks, int]:
    """The base kernels' blocks of :func:`gram_on`, assembled from its tiles, and the pairs
    evaluated: ``{base spec hash: (K_base(X, Y), diag X, diag Y)}``."""
    n = _rows(X)
    m = n if Y is None else _rows(Y)
    announce(spec)  # a first run compiles the kernel's Numba cores: say so, once
    with rt.session() as ex:
        parts = 1 if ex.slots <= 1 else 2 * ex.slots
        if Y is None:
            edges = _edges(n, parts)
            bands = list(zip(edges[:-1], edges[1:]))
            tasks: list[tuple[tuple[int, int, int, int], tuple[Any, ...]]] = [
                ((a, b, c, d), (spec, _part(X, a, b), None if (a, b) == (c, d) else _part(X, c, d)))
                for i, (a, b) in enumerate(bands) for (c, d) in bands[i:]]
        else:
            rb = min(n, parts)
            re_, ce = _edges(n, rb), _edges(m, min(m, math.ceil(parts / rb)))
            rs, cs = list(zip(re_[:-1], re_[1:])), list(zip(ce[:-1], ce[1:]))
            tasks = [((a, b, c, d), (spec, _part(X, a, b), _part(Y, c, d))) for a, b in rs for c, d in cs]
        if len(tasks) == 1:  # in this process, as one block
            (_, args), = tasks
            results = [((0, n, 0, m), base_tile(*args))]
        else:
            results = list(ex.imap(base_tile, tasks, what="Gram tile"))
    done: BaseBlocks = {}
    for h in results[0][1]:
        K = np.empty((n, m), dtype=np.float64)
        dx, dy = np.empty(n, dtype=np.float64), np.empty(m, dtype=np.float64)
        for (a, b, c, d), blocks in results:
            Kt, dr, dc = blocks[h]
            K[a:b, c:d] = Kt
            dx[a:b], dy[c:d] = dr, dc
            if Y is None and (a, b) != (c, d):
                K[c:d, a:b] = np.asarray(Kt).T
        done[h] = (K, dx, dx if Y is None else (y_self[h] if y_self is not None else dy))
    mark_compiled(spec)
    return done, n * (n + 1) // 2 if Y is None else n * m


def combined(spec: KernelSpec, done: BaseBlocks) -> NDArray[np.float64]:
    """The spec's K from its base blocks (normalised, summed, ... entry by entry)."""
    K: NDArray[np.float64] = evaluate_block(spec, {}, None, done=done)[0]
    return K


def transposed(done: BaseBlocks) -> BaseBlocks:
    """The base blocks of K(Y, X) from those of K(X, Y): combined, the entries of the lower
    triangle a symmetric block over X then Y has (pairs evaluated as K(x, y), combined as (y, x))."""
    return {h: (np.ascontiguousarray(K.T), dy, dx) for h, (K, dx, dy) in done.items()}


def gram_on(rt: Runtime, spec: KernelSpec, X: Data, Y: Data | None = None,
            y_self: dict[str, NDArray[np.float64]] | None = None) -> tuple[NDArray[np.float64], int]:
    """K_spec(X, Y) (Y None: the symmetric K(X, X)) with its base blocks computed on ``rt``.

    ``X`` and ``Y`` are encoded examples over one vocabulary (X also carries the resources);
    ``y_self`` gives the column examples' base self-kernels when they are known (a model's
    support examples). In this process (one slot) the blocks are one task, as
    :func:`~gramtile.pipeline.compute.inmemory.evaluate_block` computes them; on an executor with
    more slots, about two tiles per slot. Each tile evaluates every pair in the same orientation
    as the single block (tiles i <= j of a symmetric block, mirrored here), and the composite is
    combined here from the assembled base blocks, so the result does not depend on the executor.

    Returns
    -------
    K : ndarray (len(X), len(Y)), float64
    pairs : int
        The kernel pairs evaluated.
    """
    done, pairs = base_blocks_on(rt, spec, X, Y, y_self)
    return combined(spec, done), pairs


def encode_to_support(spec: KernelSpec, docs: list[Document], support: list[Document],
                      trained: TrainedResources | None) -> tuple[Data, Data]:
    """``docs`` and a model's support examples encoded over one vocabulary, with the model's
    resources mapped onto it, as :meth:`SavedModel.kernel_to_support` encodes them."""
    reps = kernel_reps(spec, spaces=False)
    vocabs = Vocabularies()
    bx: Data = {}
    by: Data = {}
    for r in reps:
        bx[r] = encode([d.structures[r] for d in docs], vocabs)
        by[r] = encode([d.structures[r] for d in support], vocabs)
    bx.update(resources_onto(spec, trained, vocabs.sym.strings))
    return bx, by


class KernelPool:
    """The examples an estimator was fitted on, under one kernel spec, and K among them.

    Grown as new examples arrive: m new examples after p cost p x m + m (m + 1) / 2 evaluations,
    every pair (p, q) of pool positions p <= q evaluated as K(x_p, x_q), so K is bitwise
    :func:`gramtile.gram` over the pooled examples in pool order. ``poolable`` is False for
    kernels whose resources are built from the examples (their K depends on the example set)."""

    def __init__(self, spec: KernelSpec) -> None:
        self.spec = spec
        self.reps: list[str] = kernel_reps(spec)
        # a space built from the examples makes K depend on the whole example set: no pooling
        self.poolable = all(r is None for r in resource_reps(spec).values())
        self.index: dict[str, int] = {}
        self.docs: list[Document] = []
        self.K: NDArray[np.float64] = np.zeros((0, 0))

    def positions(self, docs: list[Document]) -> list[int | None]:
        """Pool positions of ``docs`` (None: not in the pool)."""
        return [self.index.get(_key(d, self.reps)) for d in docs]

    def add(self, docs: list[Document], rt: Runtime) -> tuple[NDArray[np.int64], int]:
        """Pool positions of ``docs``, adding those not in it; and the pairs evaluated."""
        keys = [_key(d, self.reps) for d in docs]
        new: dict[str, Document] = {}
        for k, d in zip(keys, docs):
            if k not in self.index and k not in new:
                new[k] = d
        pairs = self._grow(list(new.values()), rt) if new else 0
        for k, d in new.items():
            self.index[k] = len(self.docs)
            self.docs.append(d)
        return np.asarray([self.index[k] for k in keys], dtype=np.int64), pairs

    def _grow(self, new_docs: list[Document], rt: Runtime) -> int:
        p, m = len(self.docs), len(new_docs)
        K = np.empty((p + m, p + m))
        K[:p, :p] = self.K
        if p:
            bo, bn, _ = encode_with_resources(self.spec, _by_rep(self.docs, self.reps), _by_rep(new_docs, self.reps))
            done, pairs = base_blocks_on(rt, self.spec, bo, bn)
            K[:p, p:], K[p:, :p] = combined(self.spec, done), combined(self.spec, transposed(done))
            resources = {k: v for k, v in bo.items() if not isinstance(v, Batch)}
            new_new, more = gram_on(rt, self.spec, {**bn, **resources})
            pairs += more
        else:
            bn, _, _ = encode_with_resources(self.spec, _by_rep(new_docs, self.reps))
            new_new, pairs = gram_on(rt, self.spec, bn)
        K[p:, p:] = new_new
        self.K = K
        return pairs


def _flatten(d: dict[str, Any] | list[Any], prefix: str) -> dict[str, Any]:
    """``{"kind": "normalized", "kernel": {"lam": 0.4}}`` -> ``{prefix__kind: ..., prefix__kernel__lam: 0.4}``
    (list items by index: ``prefix__kernels__0__weight``)."""
    out: dict[str, Any] = {}
    items = d.items() if isinstance(d, dict) else enumerate(d)
    for k, v in items:
        key = f"{prefix}__{k}"
        if isinstance(v, (dict, list)) and v:
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


def _set_path(d: dict[str, Any], path: list[str], value: Any, full: str) -> None:
    node: Any = d
    k: Any
    for i, k in enumerate(path):
        last = i == len(path) - 1
        if isinstance(node, list):
            try:
                k = int(k)
                node[k]
            except (ValueError, IndexError):
                raise EvaluationError(f"set_params: {full!r} names item {path[i]!r} of a list of {len(node)}") from None
        elif k not in node:
            raise EvaluationError(f"set_params: {full!r}: the kernel spec has no parameter {k!r} here (it has "
                                  f"{sorted(node)}); see get_params()")
        if last:
            node[k] = value
        else:
            node = node[k]


def kernel_params(kernel: KernelSpec | dict[str, Any] | str | None) -> dict[str, Any]:
    """The nested ``kernel__...`` parameters of a spec (its full dict, defaults included).

    An invalid spec has none here (``get_params`` never raises; ``fit`` reports the spec error)."""
    if kernel is None:
        return {}
    try:
        return _flatten(as_spec(kernel).to_dict(), "kernel")
    except GramtileError:
        return {}


def with_kernel_params(kernel: KernelSpec | dict[str, Any] | str, params: dict[str, Any]) -> dict[str, Any]:
    """A copy of the spec dict of ``kernel`` with ``kernel__a__b=v`` parameters set (validated)."""
    d = as_spec(kernel).to_dict()
    for key, v in params.items():
        _set_path(d, key.split("__")[1:], v, key)
    return as_spec(d).to_dict()


class KernelParamsMixin:
    """``get_params(deep=True)`` lists the kernel spec's parameters as ``kernel__lam``,
    ``kernel__kernel__mu``, ``kernel__kernels__0__weight`` ...; ``set_params`` takes them, so
    ``GridSearchCV(est, {"kernel__lam": [0.2, 0.4]})`` searches the kernel as well as C."""

    kernel: KernelSpec | dict[str, Any] | str | None

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        # a mixin: super() is scikit-learn's BaseEstimator, later in the estimators' bases
        out: dict[str, Any] = super().get_params(deep=False)  # type: ignore[misc]
        if deep:
            out.update(kernel_params(out.get("kernel")))
        return out

    def set_params(self, **params: Any) -> KernelParamsMixin:
        nested = {k: v for k, v in params.items() if k.startswith("kernel__")}
        rest = {k: v for k, v in params.items() if not k.startswith("kernel__")}
        if rest:
            super().set_params(**rest)  # type: ignore[misc]
        if nested:
            if self.kernel is None:
                raise EvaluationError("set_params: kernel__... parameters need a kernel spec; set kernel= first")
            self.kernel = with_kernel_params(self.kernel, nested)
        return self


def platt_calibrated(C: float, class_weight: str | dict[Any, float] | None = None,
                     random_state: int | None = None) -> Any:
    """An unfitted Platt-scaled SVM on a precomputed kernel: ``CalibratedClassifierCV`` (sigmoid,
    ``ensemble=False``) over ``SVC(kernel="precomputed")`` with stratified 5-fold inner folds."""
    SVC = optional.sklearn("svm").SVC
    CalibratedClassifierCV = optional.sklearn("calibration").CalibratedClassifierCV
    StratifiedKFold = optional.sklearn("model_selection").StratifiedKFold
    cv = StratifiedKFold(5, shuffle=random_state is not None, random_state=random_state)
    return CalibratedClassifierCV(SVC(kernel="precomputed", C=C, class_weight=class_weight), method="sigmoid",
                                  cv=cv, ensemble=False)




class ExecutorParamsMixin:
    """``n_jobs`` / ``cluster``: where an estimator computes its Gram blocks (:func:`runtime_for`).

    A cluster given as a live handle (a ``distributed.Client``, a Runtime) is a connection, not a
    value: ``clone`` hands the clone the same handle instead of copying it, and an estimator
    holding one is not picklable (pass a profile name or address, or ``set_params(cluster=None)``)."""

    n_jobs: int | None
    cluster: Cluster

    def _runtime(self) -> Runtime:
        return runtime_for(self.n_jobs, self.cluster, type(self).__name__)

    def __sklearn_clone__(self) -> Any:
        handle = self.cluster
        if handle is None or isinstance(handle, str):
            return super().__sklearn_clone__()  # type: ignore[misc]
        # scikit-learn's clone, except that the handle is shared (deep-copying a client fails)
        params: dict[str, Any] = self.get_params(deep=False)  # type: ignore[attr-defined]
        new = type(self)(**{k: v if k == "cluster" else clone(v, safe=False) for k, v in params.items()})
        for attr in ("_metadata_request", "_sklearn_output_config"):
            if attr in self.__dict__:
                setattr(new, attr, copy.deepcopy(self.__dict__[attr]))
        return new

    def __getstate__(self) -> dict[str, Any]:
        handle = self.cluster
        if handle is not None and not isinstance(handle, str):
            raise TypeError(f"{type(self).__name__}(cluster={type(handle).__name__}) cannot be pickled: the cluster is "
                            "a live connection. Fix: set_params(cluster=None) (or a profile name or scheduler "
                            "address) before pickling")
        state: dict[str, Any] = super().__getstate__()  # type: ignore[misc]
        return state


class KernelSVC(ExecutorParamsMixin, KernelParamsMixin, ClassifierMixin, BaseEstimator):
    """Support vector classifier with a gramtile kernel spec, on structures.

    Parameters
    ----------
    kernel : KernelSpec, dict or JSON string
        E.g. ``{"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4}}``.
    C : float, default 1.0
    class_weight : None, "balanced" or dict
    multiclass : {"ovr", "ovo"}, default "ovr"
        With three classes or more: one binary SVM per class against the rest (as
        ``OneVsRestClassifier(SVC)``), or libsvm's one-vs-one (``SVC``'s own scheme). Two
        classes: one SVM either way.
    probability : bool, default False
        Also fit Platt-scaled class probabilities (``predict_proba``): a sigmoid fitted to the
        SVM's decision values of an internal stratified 5-fold cross-validation over the training
        kernel (:func:`platt_calibrated`, scikit-learn's ``CalibratedClassifierCV(ensemble=False)``,
        its replacement for ``SVC(probability=True)``, deprecated in scikit-learn 1.9). Fitting is
        slower; ``predict_proba``'s argmax may disagree with ``predict`` on a few examples (as in
        SVC); ``predict_proba`` evaluates the kernel against every training example.
    random_state : int or None, default None
        With an integer, the internal folds are shuffled with this seed (None: unshuffled).
    n_jobs : int or None, default None
        Threads of this process computing the Gram blocks (-1: one per core; None: one).
    cluster : str, distributed.Client or Runtime, optional
        Compute the Gram blocks as tasks there instead: a cluster profile name (``threads``,
        ``local``, a profile of cluster.yaml), a scheduler address, a connected client or a
        :class:`~gramtile.pipeline.compute.runtime.Runtime` (an entered Runtime keeps its
        cluster open across calls; a profile name opens and closes one per call). The values
        are bitwise those computed in this process. Not together with ``n_jobs``.

    Notes
    -----
    Nested parameters ``kernel__<name>`` (see :class:`KernelParamsMixin`) set the spec's own
    parameters, e.g. ``GridSearchCV(KernelSVC(kernel=spec), {"C": [1, 10], "kernel__lam": [0.2, 0.4]})``.

    With ``S = support_vectors_``, ``K(X, S) @ dual_coef_.T + intercept_`` is the decision
    function for two classes (raveled) and for one-vs-rest; for one-vs-one, ``dual_coef_``,
    ``intercept_`` and ``n_support_`` are libsvm's, laid out as in ``SVC``.

    Attributes
    ----------
    classes_ : ndarray (n_classes,)
    support_ : ndarray of int32 (n_SV,)
        Indices of the support examples into the training X. Two classes and one-vs-one: SVC's
        (grouped by class); one-vs-rest: every example some binary SVM uses, in training order.
    support_vectors_ : list of Document
        The support examples (``support_``'s training examples, with the representations the
        kernel reads): the columns of the kernel the decision function needs.
    dual_coef_ : ndarray (n_classes - 1, n_SV) or (n_classes, n_SV)
        Two classes: (1, n_SV), y_i alpha_i as in SVC. One-vs-one: SVC's (n_classes - 1, n_SV).
        One-vs-rest: (n_classes, n_SV), row k the coefficients of "class k against the rest"
        over ``support_`` (0 for an example that is not a support example of that SVM).
    intercept_ : ndarray
        (1,) for two classes; (n_classes (n_classes - 1) / 2,) for one-vs-one, in SVC's pair
        order; (n_classes,) for one-vs-rest.
    n_support_ : ndarray of int32 (n_classes,)
        Support examples per class (over ``support_``).
    n_kernel_pairs_ : dict
        Kernel pairs this instance evaluated: ``{"fit": ..., "predict": ...}`` (predict counts
        decision_function and predict_proba too), over its fits with one kernel spec.
    model_ : SavedModel
        The fitted model over its support examples (``model_.save(DIR)`` writes it for
        ``gramtile predict``).
    proba_ : CalibratedClassifierCV
        The Platt-scaled calibrator (with ``probability=True`` only).
    """

    classes_: NDArray[Any]
    model_: SavedModel
    support_: NDArray[np.int32]
    support_vectors_: list[Document]
    dual_coef_: NDArray[np.float64]
    intercept_: NDArray[np.float64]
    n_support_: NDArray[np.int32]
    n_kernel_pairs_: dict[str, int]
    _kernel_pool: KernelPool
    _train_pos: NDArray[np.int64] | None
    _train_docs: list[Document]
    _fit_rows: NDArray[np.int64]
    _label_of: dict[str, Any]

    def __init__(self, kernel: KernelSpec | dict[str, Any] | str | None = None, C: float = 1.0,
                 class_weight: str | dict[Any, float] | None = None, multiclass: str = "ovr",
                 probability: bool = False, random_state: int | None = None, n_jobs: int | None = None,
                 cluster: Cluster = None) -> None:
        self.kernel = kernel
        self.C = C
        self.class_weight = class_weight
        self.multiclass = multiclass
        self.probability = probability
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.cluster = cluster

    def _spec(self) -> KernelSpec:
        if self.kernel is None:
            raise EvaluationError("KernelSVC: kernel=None; pass a kernel spec, e.g. {'kind': 'sst', 'lam': 0.4}")
        return as_spec(self.kernel)

    def fit(self, X: Any, y: ArrayLike, sample_weight: ArrayLike | None = None) -> KernelSVC:
        """Fit on examples X (Documents, structures, texts, spaCy Docs) and labels y.

        ``sample_weight`` (n,) rescales C per example, as in libsvm (``SVC.fit``); examples of
        weight 0 take no part (and are never support examples)."""
        if self.multiclass not in ("ovr", "ovo"):
            raise EvaluationError(f"KernelSVC: multiclass={self.multiclass!r}; use 'ovr' or 'ovo'")
        spec = self._spec()
        rt = self._runtime()
        pool = self.__dict__.get("_kernel_pool")
        if pool is None or pool.spec.spec_hash != spec.spec_hash:  # a pool holds one spec's values
            pool = KernelPool(spec)
            self.n_kernel_pairs_ = {"fit": 0, "predict": 0}
        docs = _as_docs(X, pool.reps)
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != len(docs):
            raise EvaluationError(f"KernelSVC.fit: {len(docs)} examples but labels of shape {y.shape}; pass one "
                                  "label per example")
        check_labels(y.tolist(), "KernelSVC.fit")
        sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if sw is not None and (sw.shape != (len(docs),) or not np.isfinite(sw).all() or (sw < 0).any()):
            raise EvaluationError(f"KernelSVC.fit: sample_weight of shape {sw.shape} for {len(docs)} examples; pass "
                                  "one finite, non-negative weight per example")
        classes = np.unique(y)
        if len(classes) < 2:
            raise EvaluationError(f"KernelSVC.fit: one class only ({classes.tolist()!r}); give two or more")
        resources = None
        if pool.poolable:
            pos, pairs = pool.add(docs, rt)
            K = pool.K[np.ix_(pos, pos)]
            self._train_pos = pos
        else:
            bx, _, vocabs = encode_with_resources(spec, _by_rep(docs, pool.reps))
            K, pairs = gram_on(rt, spec, bx)
            resources = TrainedResources(list(vocabs.sym.strings), {n: bx[n] for n in resource_reps(spec)})
            self._train_pos = None
        self._kernel_pool = pool
        self.n_kernel_pairs_["fit"] += pairs
        self.classes_ = classes
        self._label_of = {str(c): c for c in classes}
        self._fit_svm(spec, K, docs, y, sw, resources)
        self._train_docs = docs
        if self.probability:
            if not pool.poolable:
                raise EvaluationError("KernelSVC: probability=True is not available for kernels whose resources "
                                      "(LSA / domain spaces) are built from the training examples; use "
                                      "decision_function, or a kernel without such a space")
            keep = self._fit_rows  # the examples of positive weight, as for the SVM
            self.proba_ = platt_calibrated(float(self.C), self.class_weight, self.random_state).fit(
                K if len(keep) == len(y) else K[np.ix_(keep, keep)], y[keep],
                sample_weight=None if sw is None else sw[keep])
        else:
            self.__dict__.pop("proba_", None)
        self.n_features_in_ = None  # examples are structures, not feature vectors
        return self

    def _fit_svm(self, spec: KernelSpec, K: NDArray[np.float64], docs: list[Document], y: NDArray[Any],
                 sw: NDArray[np.float64] | None, resources: TrainedResources | None) -> None:
        """libsvm on K(train, train): the model and SVC's fitted attributes."""
        SVC = optional.sklearn("svm").SVC
        svc = SVC(kernel="precomputed", C=float(self.C), class_weight=self.class_weight)
        # the model's training examples carry their position, which ties its support back to support_
        reps = kernel_reps(spec)
        labelled = [type(d)(id=f"{d.id}#{i}", label=str(lab), structures={r: d.structures[r] for r in reps})
                    for i, (d, lab) in enumerate(zip(docs, y))]
        params = {"C": float(self.C), "class_weight": self.class_weight, "multiclass": self.multiclass,
                  "solver": {"requested": "libsvm", "used": "libsvm"}}
        classes = self.classes_
        # libsvm drops the examples of weight 0 and SVC's support_ then indexes the others, while
        # SVC(kernel="precomputed") reads it as columns of the full K: fit on the others, map back
        keep = np.arange(len(y)) if sw is None else np.flatnonzero(sw > 0)
        missing = [c for c in classes if not np.any(y[keep] == c)]
        if missing:
            raise EvaluationError(f"KernelSVC.fit: sample_weight is 0 for every example of class {missing[0]!r}; "
                                  "give some of them a positive weight, or leave the class out")
        Kf, yf = (K, y) if len(keep) == len(y) else (K[np.ix_(keep, keep)], y[keep])
        swf = None if sw is None else sw[keep]
        if len(classes) > 2 and self.multiclass == "ovr":
            # OneVsRestClassifier(SVC), which passes no sample_weight without metadata routing
            svms = [clone(svc).fit(Kf, (yf == c).astype(np.int64), sample_weight=swf) for c in classes]
            funcs = [(keep[e.support_].astype(np.int64), np.asarray(e.dual_coef_[0], np.float64),
                      float(e.intercept_[0])) for e in svms]
            self.model_ = SavedModel.from_functions(spec, "svm", "ovr", [str(c) for c in classes], funcs, labelled,
                                                    params=params, resources=resources)
            support = np.unique(np.concatenate([f[0] for f in funcs])).astype(np.int32)
            dual = np.zeros((len(classes), len(support)))
            for k, f in enumerate(funcs):
                dual[k, np.searchsorted(support, f[0])] = f[1]
            self.support_, self.dual_coef_ = support, dual
            self.intercept_ = np.asarray([float(e.intercept_[0]) for e in svms])
            self.n_support_ = np.asarray([np.sum(y[support] == c) for c in classes], dtype=np.int32)
        else:
            svc.fit(Kf, yf, sample_weight=swf)
            self.model_ = SavedModel.from_estimator(svc, spec, [labelled[i] for i in keep], params=params,
                                                    resources=resources)
            self.support_ = keep[svc.support_].astype(np.int32)
            self.dual_coef_ = np.asarray(svc.dual_coef_, dtype=np.float64)
            self.intercept_ = np.asarray(svc.intercept_, dtype=np.float64)
            self.n_support_ = np.asarray(svc.n_support_, dtype=np.int32)
        self._fit_rows = keep
        self.support_vectors_ = [docs[int(i)] for i in self.support_]

    def _docs(self, X: Any) -> list[Document]:
        check_is_fitted(self)
        return _as_docs(X, self._kernel_pool.reps)

    def _from_pool(self, docs: list[Document], cols: NDArray[np.int64]) -> NDArray[np.float64] | None:
        """K(docs, training examples ``cols``) sliced from the pool, when every doc is in it."""
        if self._train_pos is None:
            return None
        pos = self._kernel_pool.positions(docs)
        if any(p is None for p in pos):
            return None
        K: NDArray[np.float64] = self._kernel_pool.K[np.ix_(np.asarray(pos, dtype=np.int64), self._train_pos[cols])]
        return K

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Class probabilities (n, n_classes) in ``classes_`` order, by Platt scaling; needs
        ``probability=True`` at fit."""
        check_is_fitted(self)
        if not self.probability or "proba_" not in self.__dict__:
            raise AttributeError("predict_proba is available when probability=True (set it before fit), "
                                 "as in sklearn.svm.SVC")
        docs = self._docs(X)
        keep = self._fit_rows
        K = self._from_pool(docs, keep)
        if K is None:
            pool = self._kernel_pool
            train = [self._train_docs[i] for i in keep]
            bx, by, _ = encode_with_resources(pool.spec, _by_rep(docs, pool.reps), _by_rep(train, pool.reps))
            K, pairs = gram_on(self._runtime(), pool.spec, bx, by)
            self.n_kernel_pairs_["predict"] += pairs
        proba: NDArray[np.float64] = self.proba_.predict_proba(K)
        return proba

    def _kernel_to_support(self, X: Any) -> NDArray[np.float64]:
        """K(X, the model's support examples)."""
        docs = self._docs(X)
        model = self.model_
        sv = np.asarray([int(d.id.rsplit("#", 1)[1]) for d in model.support], dtype=np.int64)
        K = self._from_pool(docs, sv)
        if K is None:
            spec = self._kernel_pool.spec  # the model's
            bx, by = encode_to_support(spec, docs, model.support, model.resources)
            K, pairs = gram_on(self._runtime(), spec, bx, by, y_self=model.sv_self)
            self.n_kernel_pairs_["predict"] += pairs
        return K

    def decision_function(self, X: Any) -> NDArray[np.float64]:
        """Scores: (n,) for two classes (> 0 means ``classes_[1]``); (n, n_classes) for
        one-vs-rest; (n, n_classes (n_classes - 1) / 2) for one-vs-one (pairs (i, j), i < j, in
        SVC's order; > 0 votes for i)."""
        K = self._kernel_to_support(X)  # raises NotFittedError first
        scores: NDArray[np.float64] = self.model_.decision_function(K)
        return scores

    def predict(self, X: Any) -> NDArray[Any]:
        """Predicted labels of X."""
        K = self._kernel_to_support(X)  # raises NotFittedError first
        pred = self.model_.predict_from_kernel(K)
        return np.asarray([self._label_of[p] for p in pred])


class GramTransformer(ExecutorParamsMixin, KernelParamsMixin, TransformerMixin, BaseEstimator):
    """A scikit-learn transformer from examples to kernel rows, as GraKeL's kernels are.

    ``fit(X)`` keeps the training examples X (Documents, structures, texts, spaCy Docs);
    ``transform(Z)`` returns K(Z, X_train), shape (len(Z), len(X_train)), so
    ``Pipeline([("k", GramTransformer(kernel=spec)), ("svm", SVC(kernel="precomputed"))])``
    trains and predicts on structures. ``fit_transform(X)`` is K(X, X).

    Parameters
    ----------
    kernel : KernelSpec, dict or JSON string
        ``kernel__<name>`` parameters search its parameters (:class:`KernelParamsMixin`).
    normalized : bool, default False
        K(x, y) / sqrt(K(x, x) K(y, y)) (the spec wrapped in ``normalized``).
    n_jobs : int or None, default None
        Threads of this process computing the kernel rows, as in :class:`KernelSVC`.
    cluster : str, distributed.Client or Runtime, optional
        Compute them as tasks there instead, as in :class:`KernelSVC`.

    Notes
    -----
    Kernels whose corpus resources are built from the examples (LSA, domain spaces) are
    computed with the resources of the training examples joined with Z by
    :func:`gramtile.gram`, so for those the transform of Z depends on Z as a whole.
    """

    reps_: list[str]
    train_: list[Document]
    n_train_: int

    def __init__(self, kernel: KernelSpec | dict[str, Any] | str | None = None, normalized: bool = False,
                 n_jobs: int | None = None, cluster: Cluster = None) -> None:
        self.kernel = kernel
        self.normalized = normalized
        self.n_jobs = n_jobs
        self.cluster = cluster

    def _spec(self) -> KernelSpec:
        if self.kernel is None:
            raise EvaluationError("GramTransformer: kernel=None; pass a kernel spec, e.g. {'kind': 'sst', 'lam': 0.4}")
        spec = as_spec(self.kernel)
        return as_spec({"kind": "normalized", "kernel": spec.to_dict()}) if self.normalized else spec

    def fit(self, X: Any, y: ArrayLike | None = None) -> GramTransformer:
        """Keep the training examples."""
        spec = self._spec()
        self.reps_ = kernel_reps(spec)
        self.train_ = _as_docs(X, self.reps_, who="GramTransformer")
        self.n_train_ = len(self.train_)
        return self

    def transform(self, X: Any) -> NDArray[np.float64]:
        """K(X, training examples), float64 (len(X), n_train)."""
        check_is_fitted(self)
        docs = _as_docs(X, self.reps_, who="GramTransformer")
        spec = self._spec()
        bx, by, _ = encode_with_resources(spec, _by_rep(docs, self.reps_), _by_rep(self.train_, self.reps_))
        K, _ = gram_on(self._runtime(), spec, bx, by)
        return K


class _KernelScorer(ExecutorParamsMixin, KernelParamsMixin, BaseEstimator):
    """The base of the estimators that score examples with one kernel expansion
    ``sum_i dual_coef_i K(x, support_i) + intercept_`` (:class:`KernelSVR`, :class:`KernelRanker`):
    K(train, train) from the instance's kernel pool, the fit of a learner's estimator on it, and
    prediction over the support examples."""

    support_: NDArray[np.int64]
    support_vectors_: list[Document]
    dual_coef_: NDArray[np.float64]
    intercept_: float
    n_kernel_pairs_: dict[str, int]
    _kernel_pool: KernelPool

    def _spec(self) -> KernelSpec:
        if self.kernel is None:
            raise EvaluationError(f"{type(self).__name__}: kernel=None; pass a kernel spec, e.g. "
                                  "{'kind': 'sst', 'lam': 0.4}")
        return as_spec(self.kernel)

    def _train_kernel(self, X: Any, y: ArrayLike) -> tuple[list[Document], NDArray[np.float64],
                                                             NDArray[np.float64]]:
        """The training examples, their real targets and K(train, train) from the pool."""
        who = type(self).__name__
        spec = self._spec()
        pool = self.__dict__.get("_kernel_pool")
        if pool is None or pool.spec.spec_hash != spec.spec_hash:  # a pool holds one spec's values
            pool = KernelPool(spec)
            self.n_kernel_pairs_ = {"fit": 0, "predict": 0}
        if not pool.poolable:
            raise EvaluationError(f"{who}: kernels whose resources (LSA / domain spaces) are built from the training "
                                  "examples are not available here; use GramTransformer with a scikit-learn "
                                  "estimator on the precomputed kernel, or a kernel without such a space")
        docs = _as_docs(X, pool.reps, who=who)
        try:
            t = np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise EvaluationError(f"{who}.fit: the targets are not numbers; pass one real target per example") from None
        if t.shape != (len(docs),) or not np.isfinite(t).all():
            raise EvaluationError(f"{who}.fit: {len(docs)} examples but targets of shape {t.shape} (or not finite); "
                                  "pass one finite real target per example")
        pos, pairs = pool.add(docs, self._runtime())
        self._kernel_pool = pool
        self.n_kernel_pairs_["fit"] += pairs
        return docs, t, pool.K[np.ix_(pos, pos)]

    def _keep(self, docs: list[Document], fitted: Any) -> None:
        """The fitted expansion of ``fitted`` (one ``functions()`` entry) over ``docs``."""
        support, coef, intercept = fitted.functions()[0]
        self.support_ = np.asarray(support, dtype=np.int64)
        self.dual_coef_ = np.asarray(coef, dtype=np.float64)
        self.intercept_ = float(intercept)
        self.support_vectors_ = [docs[int(i)] for i in self.support_]
        self.n_features_in_ = None  # examples are structures, not feature vectors

    def _kernel_to_support(self, X: Any) -> NDArray[np.float64]:
        """K(X, support examples): sliced from the pool when every example is in it."""
        check_is_fitted(self)
        pool = self._kernel_pool
        docs = _as_docs(X, pool.reps, who=type(self).__name__)
        pos = pool.positions(docs)
        sv = pool.positions(self.support_vectors_)
        if all(p is not None for p in pos):
            K: NDArray[np.float64] = pool.K[np.ix_(np.asarray(pos, dtype=np.int64), np.asarray(sv, dtype=np.int64))]
            return K
        bx, by, _ = encode_with_resources(pool.spec, _by_rep(docs, pool.reps), _by_rep(self.support_vectors_, pool.reps))
        K, pairs = gram_on(self._runtime(), pool.spec, bx, by)
        self.n_kernel_pairs_["predict"] += pairs
        return K

    def decision_function(self, X: Any) -> NDArray[np.float64]:
        """The real scores of X: ``K(X, support_vectors_) @ dual_coef_ + intercept_``."""
        K = self._kernel_to_support(X)  # raises NotFittedError first
        scores: NDArray[np.float64] = K @ self.dual_coef_ + self.intercept_
        return scores

    def predict(self, X: Any) -> NDArray[np.float64]:
        """The real scores of X (:meth:`decision_function`)."""
        return self.decision_function(X)


class KernelSVR(RegressorMixin, _KernelScorer):
    """Epsilon-support vector regression with a gramtile kernel spec, on structures (SVM-light
    ``-z r``; libsvm's SVR on the precomputed kernel, :mod:`gramtile.pipeline.learn.learners.svr`).

    Parameters
    ----------
    kernel : KernelSpec, dict or JSON string
    C : float, default 1.0
    epsilon : float, default 0.1
        The half-width of the insensitive tube, in target units.
    tol : float, default 1e-3
        libsvm's stopping tolerance.
    n_jobs, cluster
        Where the Gram blocks are computed, as in :class:`KernelSVC`.

    Attributes
    ----------
    support_ : ndarray of int64
        Indices of the support examples into the training X.
    support_vectors_ : list of Document
    dual_coef_ : ndarray (n_SV,)
        alpha_i - alpha_i^* of each support example, in [-C, C].
    intercept_ : float
    n_kernel_pairs_ : dict
        Kernel pairs this instance evaluated in fit and prediction.

    ``score(X, y)`` is the coefficient of determination R^2 (scikit-learn's regressors').
    Kernels whose resources are built from the training examples (LSA, domain spaces) are refused.
    """

    def __init__(self, kernel: KernelSpec | dict[str, Any] | str | None = None, C: float = 1.0,
                 epsilon: float = 0.1, tol: float = 1e-3, n_jobs: int | None = None, cluster: Cluster = None) -> None:
        self.kernel = kernel
        self.C = C
        self.epsilon = epsilon
        self.tol = tol
        self.n_jobs = n_jobs
        self.cluster = cluster

    def fit(self, X: Any, y: ArrayLike) -> KernelSVR:
        """Fit on examples X (Documents, structures, texts, spaCy Docs) and real targets y."""
        docs, t, K = self._train_kernel(X, y)
        self._keep(docs, SVRegressor(float(self.C), float(self.epsilon), float(self.tol)).fit(K, t))
        return self


class KernelRanker(_KernelScorer):
    """Pairwise preference ranking with a gramtile kernel spec, on structures (SVM-light ``-z p``:
    :mod:`gramtile.pipeline.learn.learners.rank`).

    ``fit(X, y, groups=None)``: within each group (None: all examples one group), every pair with
    y_i > y_j asks for score(x_i) >= score(x_j) + 1, softly (penalty C, no bias). ``predict(X)``
    gives the scores: higher ranks higher (compare the scores of one group's candidates).

    Parameters
    ----------
    kernel : KernelSpec, dict or JSON string
    C : float, default 1.0
    tol : float, default 1e-6
        The solver stops when no pair's projected gradient exceeds it.
    random_state : int or None, default None
        The seed of the solver's visiting order (the optimum does not depend on it).
    n_jobs, cluster
        Where the Gram blocks are computed, as in :class:`KernelSVC`.

    Attributes
    ----------
    support_, support_vectors_, dual_coef_, intercept_ (0), n_kernel_pairs_
        As in :class:`KernelSVR`; ``dual_coef_`` sums the pairs' coefficients per example.
    n_pairs_ : int
        The preference pairs of the training groups.

    ``score(X, y, groups=None)`` is the mean average precision over the groups with a relevant
    (target > 0) and an irrelevant candidate (:func:`~gramtile.pipeline.learn.metrics.ranking_report`).
    """

    n_pairs_: int

    def __init__(self, kernel: KernelSpec | dict[str, Any] | str | None = None, C: float = 1.0, tol: float = 1e-6,
                 random_state: int | None = None, n_jobs: int | None = None, cluster: Cluster = None) -> None:
        self.kernel = kernel
        self.C = C
        self.tol = tol
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.cluster = cluster

    def fit(self, X: Any, y: ArrayLike, groups: ArrayLike | None = None) -> KernelRanker:
        """Fit on examples X, their relevance targets y and their groups (None: one group)."""
        docs, t, K = self._train_kernel(X, y)
        g = None if groups is None else np.asarray(groups)
        if g is not None and g.shape != (len(docs),):
            raise EvaluationError(f"KernelRanker.fit: {len(docs)} examples but groups of shape {g.shape}; pass one "
                                  "group id per example")
        ranker = PairRanker(float(self.C), tol=float(self.tol), seed=self.random_state).fit(K, t, g)
        self.n_pairs_ = int(ranker.first_.size)
        self._keep(docs, ranker)
        return self

    def score(self, X: Any, y: ArrayLike, groups: ArrayLike | None = None) -> float:
        """The MAP of the scores of X over the groups that count."""
        s = self.decision_function(X)
        g = np.zeros(len(s), dtype=np.int64) if groups is None else np.asarray(groups)
        return float(ranking_report(np.asarray(y, dtype=np.float64), s, g)["map"])
