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
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin

from gramtile.kernels.errors import GramtileError
from gramtile.kernels.registry import as_spec
from gramtile.pipeline import optional
from gramtile.pipeline.compute.inmemory import gram, gram_with_resources
from gramtile.pipeline.learn.errors import EvaluationError, PredictInputError
from gramtile.pipeline.learn.models import TrainedResources, as_documents, kernel_reps
from gramtile.pipeline.learn.training import train
from gramtile.pipeline.resources.keys import resource_reps

if TYPE_CHECKING:
    from gramtile.kernels.spec import KernelSpec
    from gramtile.pipeline.learn.models import SavedModel
    from gramtile.pipeline.representations.structures import Document

_POOLS: dict[str, _Pool] = {}
_STATS = {"pairs": 0, "fit_pairs": 0, "predict_pairs": 0}


def pool_stats() -> dict[str, int]:
    """Kernel pairs evaluated by KernelSVC in this process: total, in fit, in predict."""
    return dict(_STATS)


def clear_pool() -> None:
    """Forget every cached kernel matrix and reset :func:`pool_stats`."""
    _POOLS.clear()
    for k in _STATS:
        _STATS[k] = 0


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


class _Pool:
    """Examples of one kernel spec and K among them (grown as new examples arrive)."""

    def __init__(self, spec: KernelSpec) -> None:
        self.spec = spec

        self.reps: list[str] = kernel_reps(spec)
        # a space built from the examples makes K depend on the whole example set: no pooling
        self.poolable = all(r is None for r in resource_reps(spec).values())
        self.index: dict[str, int] = {}
        self.docs: list[Document] = []
        self.K: NDArray[np.float64] = np.zeros((0, 0))

    def positions(self, docs: list[Document], add: bool) -> list[int | None]:
        keys = [_key(d, self.reps) for d in docs]
        if add:
            new: list[tuple[str, Document]] = []
            seen: set[str] = set()
            for k, d in zip(keys, docs):
                if k not in self.index and k not in seen:
                    seen.add(k)
                    new.append((k, d))
            if new:
                self._grow(new)
        return [self.index.get(k) for k in keys]

    def _grow(self, new: list[tuple[str, Document]]) -> None:

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


def _by_rep(docs: list[Document], reps: list[str]) -> dict[str, list[Any]]:
    return {r: [d.structures[r] for d in docs] for r in reps}


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


class KernelSVC(KernelParamsMixin, ClassifierMixin, BaseEstimator):
    """Support vector classifier with a gramtile kernel spec, on structures.

    Parameters
    ----------
    kernel : KernelSpec, dict or JSON string
        E.g. ``{"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4}}``.
    C : float, default 1.0
    class_weight : None, "balanced" or dict
    multiclass : {"ovr", "ovo"}, default "ovr"
        One-vs-rest (``OneVsRestClassifier``) or SVC's native one-vs-one.
    probability : bool, default False
        Also fit Platt-scaled class probabilities (``predict_proba``): a sigmoid fitted to the
        SVM's decision values of an internal stratified 5-fold cross-validation over the training
        kernel (:func:`platt_calibrated`, scikit-learn's ``CalibratedClassifierCV(ensemble=False)``,
        its replacement for ``SVC(probability=True)``, deprecated in scikit-learn 1.9). Fitting is
        slower; ``predict_proba``'s argmax may disagree with ``predict`` on a few examples (as in
        SVC); ``predict_proba`` evaluates the kernel against every training example.
    random_state : int or None, default None
        With an integer, the internal folds are shuffled with this seed (None: unshuffled).

    Notes
    -----
    Nested parameters ``kernel__<name>`` (see :class:`KernelParamsMixin`) set the spec's own
    parameters, e.g. ``GridSearchCV(KernelSVC(kernel=spec), {"C": [1, 10], "kernel__lam": [0.2, 0.4]})``.

    Attributes
    ----------
    classes_ : ndarray
    model_ : SavedModel
        The fitted model over its support examples (``model_.save(DIR)`` writes it for
        ``gramtile predict``).
    """

    classes_: NDArray[Any]
    model_: SavedModel
    _train_pos: NDArray[np.int64] | None
    _train_docs: list[Document]
    _label_of: dict[str, Any]

    def __init__(self, kernel: KernelSpec | dict[str, Any] | str | None = None, C: float = 1.0,
                 class_weight: str | dict[Any, float] | None = None, multiclass: str = "ovr",
                 probability: bool = False, random_state: int | None = None) -> None:
        self.kernel = kernel
        self.C = C
        self.class_weight = class_weight
        self.multiclass = multiclass
        self.probability = probability
        self.random_state = random_state

    def _pool(self) -> _Pool:

        if self.kernel is None:
            raise EvaluationError("KernelSVC: kernel=None; pass a kernel spec, e.g. {'kind': 'sst', 'lam': 0.4}")
        spec = as_spec(self.kernel)
        pool = _POOLS.get(spec.spec_hash)
        if pool is None:
            pool = _POOLS[spec.spec_hash] = _Pool(spec)
        return pool

    def fit(self, X: Any, y: ArrayLike) -> KernelSVC:
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
        self._train_docs = docs
        if self.probability:
            if not pool.poolable:
                raise EvaluationError("KernelSVC: probability=True is not available for kernels whose resources "
                                      "(LSA / domain spaces) are built from the training examples; use "
                                      "decision_function, or a kernel without such a space")
            self.proba_ = platt_calibrated(float(self.C), self.class_weight, self.random_state).fit(K, y)
        else:
            self.__dict__.pop("proba_", None)
        self.n_features_in_ = None  # examples are structures, not feature vectors
        return self

    def predict_proba(self, X: Any) -> NDArray[np.float64]:
        """Class probabilities (n, n_classes) in ``classes_`` order, by Platt scaling; needs
        ``probability=True`` at fit."""
        if not hasattr(self, "model_"):
            raise EvaluationError("KernelSVC: call fit() before predict_proba()")
        if not self.probability or not hasattr(self, "proba_"):
            raise AttributeError("predict_proba is available when probability=True (set it before fit), "
                                 "as in sklearn.svm.SVC")
        pool = self._pool()
        docs = _as_docs(X, pool.reps)
        pos = pool.positions(docs, add=False) if self._train_pos is not None else [None]
        if all(p is not None for p in pos):
            train_pos = cast("NDArray[np.int64]", self._train_pos)  # not None: every input is in the pool
            K = pool.K[np.ix_(np.asarray(pos, dtype=np.int64), train_pos)]
        else:
            K = gram(pool.spec, _by_rep(docs, pool.reps), _by_rep(self._train_docs, pool.reps))
            _STATS["pairs"] += K.size
            _STATS["predict_pairs"] += K.size
        proba: NDArray[np.float64] = self.proba_.predict_proba(K)
        return proba

    def _kernel_to_support(self, X: Any) -> NDArray[np.float64]:
        if not hasattr(self, "model_"):
            raise EvaluationError("KernelSVC: call fit() before predict()")
        pool = self._pool()
        docs = _as_docs(X, pool.reps)
        pos = pool.positions(docs, add=False) if self._train_pos is not None else [None]
        if all(p is not None for p in pos):
            train_pos = cast("NDArray[np.int64]", self._train_pos)  # not None: every input is in the pool
            sv = train_pos[[int(d.id.rsplit("#", 1)[1]) for d in self.model_.support]]
            return pool.K[np.ix_(np.asarray(pos, dtype=np.int64), sv)]
        K: NDArray[np.float64] = self.model_.kernel_to_support(docs)
        _STATS["pairs"] += K.size
        _STATS["predict_pairs"] += K.size
        return K

    def decision_function(self, X: Any) -> NDArray[np.float64]:
        """Scores: (n,) for two classes (> 0 means ``classes_[1]``), else (n, n_functions)."""
        scores: NDArray[np.float64] = self.model_.decision_function(self._kernel_to_support(X))
        return scores

    def predict(self, X: Any) -> NDArray[Any]:
        """Predicted labels of X."""
        pred = self.model_.predict_from_kernel(self._kernel_to_support(X))
        return np.asarray([self._label_of[p] for p in pred])


class GramTransformer(KernelParamsMixin, TransformerMixin, BaseEstimator):
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

    Notes
    -----
    Kernels whose corpus resources are built from the examples (LSA, domain spaces) are
    computed with the resources of the training examples joined with Z by
    :func:`gramtile.gram`, so for those the transform of Z depends on Z as a whole.
    """

    reps_: list[str]
    train_: list[Document]
    n_train_: int

    def __init__(self, kernel: KernelSpec | dict[str, Any] | str | None = None, normalized: bool = False) -> None:
        self.kernel = kernel
        self.normalized = normalized

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
        if not hasattr(self, "train_"):
            raise EvaluationError("GramTransformer: call fit() before transform()")
        docs = _as_docs(X, self.reps_, who="GramTransformer")
        return gram(self._spec(), _by_rep(docs, self.reps_), _by_rep(self.train_, self.reps_))
