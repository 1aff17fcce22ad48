"""The kernel voted perceptron (Freund & Schapire 1999), from precomputed kernel blocks.

Training (binary, labels y in {-1, +1}) keeps a list of prediction vectors v_1 = 0, v_2, ...
and their survival counts c_j. For each epoch and each training example x_i in turn:
if y_i * <v_k, x_i> > 0 the current vector survives (c_k += 1); otherwise (a mistake, also
when the score is exactly 0) v_{k+1} = v_k + y_i x_i with c_{k+1} = 1. In kernel form
v_k = sum over the earlier mistakes l of y_l phi(x_l), so only the mistake sequence is stored.

Prediction on x is the vote  s(x) = sum_j c_j sign(<v_j, x>)  (sign(0) = 0: a vector that
scores 0 abstains), and the predicted label is +1 when s(x) > 0, else -1 (the positive class
of a binary task is "+1"/"1"/... when present, see ``positive_``). ``vote="averaged"``
uses the averaged perceptron  s(x) = sum_j c_j <v_j, x>  instead. Multi-class is one-vs-rest:
one binary perceptron per class, the class with the largest score wins (ties: first class in
sorted order). Every class's counts sum to epochs * n_train, so scores are comparable.

Zelenko, Aone & Richardella (2003) trained this with 2 epochs on relation extraction.
"""
from __future__ import annotations

import numpy as np

from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.metrics import positive_class

VOTES = ("voted", "averaged")


def _binary_fit(K: np.ndarray, y: np.ndarray, epochs: int, order_rng):
    """Mistake sequence (train indices, their ±1 labels) and survival counts of one perceptron.

    ``K`` is (n, n), ``y`` is ±1 float64. Returns (idx int64 (M,), ylab float64 (M,),
    counts int64 (M + 1,)) where counts[j] is c of v_{j+1} (v_1 = 0).
    """
    n = len(y)
    f = np.zeros(n)  # f[j] = <v_k, x_j> for the current vector v_k, updated at each mistake
    idx, counts = [], [0]
    for _ in range(epochs):
        order = np.arange(n) if order_rng is None else order_rng.permutation(n)
        for i in order:
            if y[i] * f[i] > 0:
                counts[-1] += 1
            else:
                idx.append(i)
                counts.append(1)
                f += y[i] * K[i]
    idx = np.asarray(idx, dtype=np.int64)
    return idx, y[idx] if idx.size else np.zeros(0), np.asarray(counts, dtype=np.int64)


def binary_score(K_test: np.ndarray, idx, ylab, counts, vote: str, chunk: int = 1024) -> np.ndarray:
    """Vote score of each test row; ``K_test`` is (n_test, n_train)."""
    out = np.empty(K_test.shape[0])
    for a in range(0, K_test.shape[0], chunk):
        G = K_test[a:a + chunk][:, idx] * ylab  # (rows, M)
        # column j of P is <v_{j+1}, x>: v_1 = 0, then the prefix sums over mistakes
        P = np.concatenate([np.zeros((G.shape[0], 1)), np.cumsum(G, axis=1)], axis=1)
        out[a:a + chunk] = (np.sign(P) if vote == "voted" else P) @ counts
    return out


class VotedPerceptron:
    """Kernel voted perceptron over precomputed kernel blocks.

    Parameters
    ----------
    epochs : int, default 1
        Passes over the training data (Zelenko et al. 2003 used 2).
    seed : int or None, default None
        None visits examples in the given order every epoch (deterministic); an integer
        shuffles the order of each epoch with ``numpy.random.default_rng(seed)``.
    vote : {"voted", "averaged"}, default "voted"
        Freund & Schapire's voted prediction, or their averaged variant.

    Attributes
    ----------
    classes_ : ndarray, shape (n_classes,)
        Sorted class labels.
    positive_ : label or None
        With two classes, the one scored +1 (:func:`~gramtile.pipeline.learn.metrics.positive_class`:
        "+1"/"1"/1/True/... if present, else the larger); None for more classes.
    models_ : list of (idx, ylab, counts)
        One binary perceptron per class (one in total for two classes).
    """

    def __init__(self, epochs: int = 1, seed=None, vote: str = "voted"):
        if isinstance(epochs, bool) or not isinstance(epochs, (int, np.integer)) or epochs < 1:
            raise EvaluationError(f"perceptron: epochs={epochs!r} is not an integer >= 1; use e.g. epochs=2")
        if vote not in VOTES:
            raise EvaluationError(f"perceptron: vote={vote!r}; use one of {list(VOTES)}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
            raise EvaluationError(f"perceptron: seed={seed!r}; use None (no shuffling) or an integer")
        self.epochs, self.seed, self.vote = int(epochs), seed, vote

    def get_params(self, deep=True) -> dict:
        return {"epochs": self.epochs, "seed": self.seed, "vote": self.vote}

    def fit(self, K, y) -> VotedPerceptron:
        """Train on the square block K(train, train), shape (n, n), with labels y, shape (n,)."""
        K = np.asarray(K, dtype=np.float64)
        y = np.asarray(y)
        if K.ndim != 2 or K.shape[0] != K.shape[1] or K.shape[0] != len(y):
            raise EvaluationError(f"perceptron.fit: K has shape {K.shape} for {len(y)} labels; "
                                  "pass K(train, train) of shape (n_train, n_train)")
        if not np.all(np.isfinite(K)):
            raise EvaluationError("perceptron.fit: K has NaN or infinite entries; finish the Gram store first")
        self.classes_ = np.unique(y)
        if len(self.classes_) < 2:
            raise EvaluationError(f"perceptron.fit: one class only ({self.classes_.tolist()!r}); "
                                  "the training part needs at least two classes")
        self.positive_ = positive_class(self.classes_.tolist()) if len(self.classes_) == 2 else None
        targets = [self.positive_] if len(self.classes_) == 2 else self.classes_
        self.models_ = []
        for c in targets:
            rng = None if self.seed is None else np.random.default_rng(self.seed)
            yy = np.where(y == c, 1.0, -1.0)
            self.models_.append(_binary_fit(K, yy, self.epochs, rng))
        self.n_train_ = len(y)
        return self

    def decision_function(self, K_test) -> np.ndarray:
        """Scores from K(test, train), shape (n_test, n_train).

        Returns
        -------
        ndarray, shape (n_test,) for two classes (> 0 means ``positive_``),
        else (n_test, n_classes).
        """
        K_test = np.asarray(K_test, dtype=np.float64)
        if not hasattr(self, "models_"):
            raise EvaluationError("perceptron: call fit() before predicting")
        if K_test.ndim != 2 or K_test.shape[1] != self.n_train_:
            raise EvaluationError(f"perceptron: K_test has shape {K_test.shape}, but the model was trained on "
                                  f"{self.n_train_} examples; pass K(test, train) with columns in training order")
        S = np.stack([binary_score(K_test, *m, self.vote) for m in self.models_], axis=1)
        return S[:, 0] if len(self.classes_) == 2 else S

    def predict(self, K_test) -> np.ndarray:
        """Labels for K(test, train); a binary vote of exactly 0 predicts the negative class."""
        S = self.decision_function(K_test)
        if S.ndim == 1:
            negative = self.classes_[self.classes_ != self.positive_][0]
            return np.where(S > 0, self.positive_, negative)
        return self.classes_[np.argmax(S, axis=1)]

    @property
    def n_mistakes_(self) -> list[int]:
        """Mistakes (vectors beyond v_1) made by each binary perceptron during training."""
        return [len(m[0]) for m in self.models_]
