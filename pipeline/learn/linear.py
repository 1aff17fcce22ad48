"""Linear learning on explicit features (a feature store written by ``gramtile features``).

With rows ``x = phi(x) sqrt(w)`` (``gramtile.pipeline.stores.feature_store.linear_rows``),
``<x, y> = K(x, y)``: a linear SVM on the rows learns with the kernel without a Gram matrix.
The learner is scikit-learn's LinearSVC (liblinear: squared hinge loss, one-vs-rest, the
intercept regularised like a weight), so its models are close to, not equal to, those of the
kernel SVC. :func:`evaluate` runs stratified k-fold over a C grid; :func:`train` fits one model,
which :class:`LinearModel` saves and reloads and which predicts from feature rows alone.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.metrics import accuracy
from gramtile.pipeline.stores.feature_store import open_store


def _fit(X, y, C: float, class_weight):
    svm = optional.sklearn("svm")
    clf = svm.LinearSVC(C=C, class_weight=class_weight, max_iter=10_000)
    return clf.fit(X, y)


def evaluate(X, labels, folds: int = 5, seed: int = 0, Cs=(1.0,), class_weight=None) -> dict:
    """Stratified ``folds``-fold accuracy of LinearSVC for each C of ``Cs``.

    Returns ``{"folds", "seed", "C": {C: {"accuracy": mean, "per_fold": [...]}}, "best_C"}``.
    """
    y = np.asarray(labels, dtype=object)
    if X.shape[0] != y.shape[0]:
        raise EvaluationError(f"{X.shape[0]} feature rows but {y.shape[0]} labels")
    if len(set(y.tolist())) < 2:
        raise EvaluationError("linear evaluation needs at least two classes among the labels")
    splits = stratified_kfold(list(y), folds, seed)
    out = {}
    for C in Cs:
        accs = []
        for s in splits:
            clf = _fit(X[s.train], y[s.train], float(C), class_weight)
            accs.append(accuracy(list(y[s.test]), list(clf.predict(X[s.test]))))
        out[float(C)] = {"accuracy": float(np.mean(accs)), "per_fold": [float(a) for a in accs]}
    best = max(out, key=lambda c: out[c]["accuracy"])
    return {"folds": folds, "seed": seed, "C": out, "best_C": best}


class LinearModel:
    """A trained linear model over feature ids: ``coef`` (classes x features, or 1 x features
    for two classes), ``intercept``, ``classes`` and the feature store's attribute."""

    def __init__(self, coef, intercept, classes, meta: dict):
        self.coef = np.asarray(coef, np.float64)
        self.intercept = np.asarray(intercept, np.float64)
        self.classes = list(classes)
        self.meta = dict(meta)

    def decision_function(self, X) -> np.ndarray:
        if X.shape[1] < self.coef.shape[1]:
            raise EvaluationError(f"feature rows have {X.shape[1]} features, the model {self.coef.shape[1]}; "
                                  f"use rows of the same feature store")
        return np.asarray(X[:, :self.coef.shape[1]] @ self.coef.T) + self.intercept

    def predict(self, X) -> list:
        s = self.decision_function(X)
        if len(self.classes) == 2:
            return [self.classes[int(v > 0)] for v in s.reshape(-1)]
        return [self.classes[i] for i in np.argmax(s, axis=1)]

    def save(self, directory) -> Path:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=False)
        np.savez(d / "linear.npz", coef=self.coef, intercept=self.intercept)
        (d / "linear.json").write_text(json.dumps({"classes": self.classes, "features": self.meta}, indent=1),
                                       encoding="utf-8")
        return d

    @classmethod
    def load(cls, directory) -> LinearModel:
        d = Path(directory)
        if not (d / "linear.npz").is_file():
            raise EvaluationError(f"{d} holds no linear model (linear.npz); train one with gramtile.pipeline.learn."
                                  f"linear.train")
        a = np.load(d / "linear.npz")
        info = json.loads((d / "linear.json").read_text(encoding="utf-8"))
        return cls(a["coef"], a["intercept"], info["classes"], info["features"])


def train(X, labels, C: float = 1.0, class_weight=None, meta: dict | None = None) -> LinearModel:
    """Fit LinearSVC (one-vs-rest) on all rows."""
    y = np.asarray(labels, dtype=object)
    clf = _fit(X, y, float(C), class_weight)
    return LinearModel(clf.coef_, clf.intercept_, [c for c in clf.classes_], meta or {})


def evaluate_store(path, folds: int = 5, seed: int = 0, Cs=(1.0,), class_weight=None) -> dict:
    """:func:`evaluate` on a feature store (``gramtile evaluate --features F.zarr --model linear``)."""
    X, labels, meta = open_store(path)
    res = evaluate(X, labels, folds=folds, seed=seed, Cs=Cs, class_weight=class_weight)
    res.update(features=str(path), kernel=meta["spec"], n=int(X.shape[0]), n_features=int(X.shape[1]))
    return res


def train_store(path, out, C: float = 1.0, class_weight=None) -> LinearModel:
    """Train on every row of a feature store and save the model into the new directory ``out``
    (``gramtile train --features F.zarr --model linear``)."""
    X, labels, meta = open_store(path)
    model = train(X, labels, C=C, class_weight=class_weight, meta=meta)
    model.save(out)
    return model


def table(res: dict) -> str:
    """The markdown table of an :func:`evaluate_store` result."""
    lines = [f"linear SVM on {res['n']} x {res['n_features']} explicit features of {res['kernel']}, "
             f"{res['folds']}-fold (seed {res['seed']})", "", "| C | accuracy |", "|---:|---:|"]
    for C, r in sorted(res["C"].items()):
        lines.append(f"| {C:g} | {r['accuracy']:.4f} |")
    return "\n".join(lines)
