"""Feature-based baselines for relation examples (Zelenko, Aone & Richardella 2003, Appendix C).

The paper compares its kernels with learners over explicit features of the same relation
examples: conjunctions of node conditions *at a depth* of the tree. A node offers two
conditions, ``T`` = (Class(Type), Role) and, when it has a Text, ``X`` = (Text, Role);
:func:`relation_features` gives, exactly as Appendix C lists them, the binary features

* node, for every node at depth ``d`` (root = 0): ``n|d|T`` and ``n|d|X``;
* parent-child, for every edge with the parent at depth ``d``: ``pc|d|A>B`` for the four
  combinations A in {T, X} of the parent and B in {T, X} of the child;
* sibling pairs, for every two adjacent children at depth ``d``: ``sib|d|A+B``, the same four
  combinations;
* sibling triples, for every three adjacent children at depth ``d``: ``tri|d|...`` with exactly
  one X among the three (T+T+X, T+X+T, X+T+T).

T is written ``Class,Role`` and X ``=Text,Role`` (the ``=`` keeps a Text that equals a class
name apart). A condition that needs a Text is left out for nodes without one. "P2 follows P1 in
the children list" is read as *immediately* follows: the features are small subtrees.

Learners: :class:`Winnow` (Littlestone 1988's Winnow2, written here as scikit-learn has none),
Naive Bayes (scikit-learn's ``BernoulliNB``) and a linear SVM (``LinearSVC``), built by
:func:`feature_learner`. :class:`FeatureSVM` is that linear SVM as a learner of the one
evaluation and selection loop (:mod:`gramtile.pipeline.learn.selection`), over the relation
examples themselves (:class:`RelationExamples`): each training part builds its own vocabulary, so
choosing C never sees a feature of the held-out examples.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix, issparse

from gramtile.pipeline import optional
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.learners.base import Learner, Outcome, Param, Session
from gramtile.pipeline.representations.relation import node_class


def _conditions(node) -> tuple:
    """(T, X) of a node; X is None without a Text."""
    t = f"{node_class(node.type)},{node.role}"
    return t, (None if node.text is None else f"={node.text},{node.role}")


def relation_features(example) -> set:
    """The binary Appendix C features of one :class:`~gramtile.pipeline.representations.relation.RelationExample`
    (module docstring)."""
    feats = set()
    stack = [(example, 0)]
    while stack:
        node, d = stack.pop()
        t, x = _conditions(node)
        feats.add(f"n|{d}|{t}")
        if x is not None:
            feats.add(f"n|{d}|{x}")
        kids = [_conditions(c) for c in node.children]
        for c, (ct, cx) in zip(node.children, kids):
            for a in (t, x):
                for b in (ct, cx):
                    if a is not None and b is not None:
                        feats.add(f"pc|{d}|{a}>{b}")
            stack.append((c, d + 1))
        for (at, ax), (bt, bx) in zip(kids, kids[1:]):
            for a in (at, ax):
                for b in (bt, bx):
                    if a is not None and b is not None:
                        feats.add(f"sib|{d + 1}|{a}+{b}")
        for (at, ax), (bt, bx), (ct, cx) in zip(kids, kids[1:], kids[2:]):
            for combo in ((at, bt, cx), (at, bx, ct), (ax, bt, ct)):
                if None not in combo:
                    feats.add(f"tri|{d + 1}|" + "+".join(combo))
    return feats


def feature_matrix(examples, vocabulary: dict | None = None):
    """A binary CSR matrix of :func:`relation_features` of ``examples``.

    Parameters
    ----------
    examples : sequence of RelationExample
    vocabulary : dict, optional
        Feature -> column. When given (the training vocabulary), unseen features are dropped;
        otherwise it is built from ``examples``.

    Returns
    -------
    (scipy.sparse.csr_matrix of shape (len(examples), n_features), dict vocabulary)
    """

    grow = vocabulary is None
    vocab = {} if grow else vocabulary
    indptr, indices = [0], []
    for x in examples:
        cols = set()
        for f in relation_features(x):
            j = vocab.get(f)
            if j is None and grow:
                j = vocab[f] = len(vocab)
            if j is not None:
                cols.add(j)
        indices.extend(sorted(cols))
        indptr.append(len(indices))
    X = csr_matrix((np.ones(len(indices)), np.asarray(indices, dtype=np.int64), np.asarray(indptr)),
                   shape=(len(indptr) - 1, len(vocab)))
    return X, vocab


class Winnow:
    """Winnow2 (Littlestone 1988) for binary features and two classes.

    Predicts the positive class when ``w . x >= theta``. Weights start at 1; on a missed positive
    the weights of the active features are multiplied by ``alpha`` (promotion), on a false
    positive divided by ``alpha`` (demotion). Examples are visited ``epochs`` times in a seeded
    order.

    Parameters
    ----------
    alpha : float > 1
    theta : float or None
        Threshold; None uses the mean number of active features of the training examples, so
        an example whose features all kept weight 1 lies at the threshold.
    epochs : int >= 1
    seed : int or None
        Visiting order (None: data order).
    """

    def __init__(self, alpha: float = 2.0, theta: float | None = None, epochs: int = 10, seed=0):
        if not alpha > 1:
            raise EvaluationError(f"Winnow alpha={alpha!r} must be > 1; e.g. alpha=2")
        if theta is not None and not theta > 0:
            raise EvaluationError(f"Winnow theta={theta!r} must be positive (or None for the default)")
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
            raise EvaluationError(f"Winnow epochs={epochs!r} must be an integer >= 1")
        self.alpha, self.theta, self.epochs, self.seed = float(alpha), theta, epochs, seed

    def get_params(self, deep=True) -> dict:
        return {"alpha": self.alpha, "theta": self.theta, "epochs": self.epochs, "seed": self.seed}

    @staticmethod
    def _rows(X):

        X = csr_matrix(X) if not issparse(X) else X.tocsr()
        if X.nnz and not np.all(X.data == 1):
            raise EvaluationError("Winnow needs binary features (every stored value 1); binarise the matrix first")
        return X

    def fit(self, X, y) -> Winnow:
        """Learn from a binary feature matrix ``X`` (n, d) and labels ``y`` (n,) of exactly two classes."""
        X = self._rows(X)
        y = np.asarray(y)
        classes = np.unique(y)
        if classes.size != 2:
            raise EvaluationError(f"Winnow is a binary learner; got {classes.size} classes {classes.tolist()[:5]}")
        self.classes_ = classes
        pos = y == classes[1]
        w = np.ones(X.shape[1])
        counts = np.diff(X.indptr)
        theta = float(self.theta) if self.theta is not None else max(float(counts.mean()), 1.0)
        order = np.arange(X.shape[0])
        rng = np.random.default_rng(self.seed) if self.seed is not None else None
        self.mistakes_ = []
        for _ in range(self.epochs):
            if rng is not None:
                rng.shuffle(order)
            m = 0
            for i in order:
                cols = X.indices[X.indptr[i]:X.indptr[i + 1]]
                s = w[cols].sum()
                if pos[i] and s < theta:
                    w[cols] *= self.alpha
                    m += 1
                elif not pos[i] and s >= theta:
                    w[cols] /= self.alpha
                    m += 1
            self.mistakes_.append(m)
            if m == 0:
                break
        self.coef_, self.theta_ = w, theta
        return self

    def decision_function(self, X) -> np.ndarray:
        """``w . x - theta`` per row (>= 0: positive class)."""
        X = self._rows(X)
        if X.shape[1] != self.coef_.size:
            raise EvaluationError(f"X has {X.shape[1]} features, the model {self.coef_.size}; use the training "
                                  "vocabulary")
        return X @ self.coef_ - self.theta_

    def predict(self, X) -> np.ndarray:
        return np.where(self.decision_function(X) >= 0, self.classes_[1], self.classes_[0])


#: Feature learners of the baselines, by name.
LEARNERS = ("naive_bayes", "winnow", "linear_svm")


def feature_learner(name: str, C: float = 1.0, seed: int = 0):
    """A fresh learner: ``naive_bayes`` (BernoulliNB, alpha = 1), ``winnow`` or ``linear_svm`` (LinearSVC)."""
    if name == "naive_bayes":
        BernoulliNB = optional.sklearn("naive_bayes").BernoulliNB

        return BernoulliNB(alpha=1.0)
    if name == "winnow":
        return Winnow(seed=seed)
    if name == "linear_svm":
        LinearSVC = optional.sklearn("svm").LinearSVC

        return LinearSVC(C=C, max_iter=20000)
    raise EvaluationError(f"unknown feature learner {name!r}; use one of {list(LEARNERS)}")


# ---- the linear SVM as a learner of the selection loop -------------------------------------------

class RelationExamples:
    """The data source of :class:`FeatureSVM`: relation examples by position (``n`` of them)."""

    def __init__(self, examples):
        self.examples = list(examples)
        self.n = len(self.examples)


@dataclass
class FeatureFits:
    """The linear SVM at every C of a grid on one training part, predicting its test part: the
    vocabulary is that of the training examples (features only the test part has are dropped)."""

    train: list          # the training examples
    y: np.ndarray        # their labels
    test: list           # the test examples
    Cs: tuple

    def run(self) -> list:
        Xa, vocab = feature_matrix(self.train)
        Xb, _ = feature_matrix(self.test, vocab)
        return [np.asarray(feature_learner("linear_svm", C=C).fit(Xa, self.y).predict(Xb)) for C in self.Cs]


class FeatureSession(Session):
    """One :class:`FeatureFits` per training part (the feature matrices are built once for its grid)."""

    def __init__(self, source: RelationExamples):
        self.source = source

    def tasks(self, y, train, test, points, problem, name):
        ex = self.source.examples
        y = np.asarray(y)
        task = FeatureFits([ex[i] for i in train], y[np.asarray(train)], [ex[i] for i in test],
                           tuple(float(p["C"]) for p in points))

        def assemble(results):
            return [Outcome(pred) for pred in results[0]]

        return [task], assemble

    def n_tasks(self, points, problem):
        return 1


class FeatureSVM(Learner):
    """The Appendix C linear SVM (``LinearSVC``) over the :func:`relation_features` of relation
    examples (a :class:`RelationExamples` source), with a vocabulary per training part. It serves
    the relation workflows' feature baselines and is not one of ``gramtile evaluate``'s models."""

    name = "feature_svm"
    reads = "features"
    params = (Param("C", float, 1.0, "--C", "the regularisation C of the linear SVM"),)
    class_weight = False
    summary_line = "LinearSVC on the Appendix C features of relation examples"

    @contextmanager
    def session(self, source, problem, sizes, cluster):
        if not isinstance(source, RelationExamples):
            raise EvaluationError(f"{self.name} reads relation examples (RelationExamples), not {type(source).__name__}")
        yield FeatureSession(source)
