"""Train/test splits of a labelled corpus: fixed splits, seeded stratified k-fold, and seeded
group k-fold (every group, e.g. a question and its candidate answers, in one fold).

Folds are a function of the labels, the number of folds and the seed only, so every kernel
evaluated on one corpus can share them. :func:`load_or_make_folds` saves them as JSON beside a
store (``folds-k<k>-seed<s>-labels<hash>.json``, keyed by the labels so stores of other labels
in one directory never share a file) and reuses that file later; the file records the number of
examples and a hash of the labels, and a file made for other labels is refused rather than
silently reused.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gramtile.pipeline import optional
from gramtile.pipeline.learn.errors import EvaluationError


@dataclass(frozen=True)
class Split:
    """One train/test split.

    Attributes
    ----------
    train : ndarray of int64, shape (n_train,)
        Sorted row indices of the training examples.
    test : ndarray of int64, shape (n_test,)
        Sorted row indices of the test examples.
    name : str
        ``"fold-<i>"`` for k-fold splits, ``"split"`` for a fixed split.
    """

    train: np.ndarray
    test: np.ndarray
    name: str = "split"

    def to_dict(self) -> dict:
        return {"name": self.name, "train": self.train.tolist(), "test": self.test.tolist()}

    @classmethod
    def from_dict(cls, d) -> Split:
        return cls(np.asarray(d["train"], dtype=np.int64), np.asarray(d["test"], dtype=np.int64),
                   str(d.get("name", "split")))


def labels_hash(labels) -> str:
    """sha256 of the labels in order, as strings (what a folds file is valid for)."""
    h = hashlib.sha256()
    for y in labels:
        h.update(str(y).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def stratified_kfold(labels, k: int, seed: int = 0) -> list[Split]:
    """Seeded stratified k-fold splits (scikit-learn ``StratifiedKFold(shuffle=True)``).

    Parameters
    ----------
    labels : sequence, shape (n,)
        Class label of each example.
    k : int
        Number of folds, 2 <= k <= size of the smallest class.
    seed : int
        ``random_state`` of the shuffle; the same labels, k and seed give the same folds.

    Returns
    -------
    list of Split, length k; fold i's test indices are the i-th test part.
    """
    StratifiedKFold = optional.sklearn("model_selection").StratifiedKFold

    y = np.asarray(labels)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise EvaluationError(f"folds: k={k!r} is not an integer >= 2; use --folds 5 or --folds 10")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise EvaluationError(f"folds: seed={seed!r} is not an integer; pass an integer such as --seed 0")
    classes, counts = np.unique(y, return_counts=True)
    if len(classes) < 2:
        raise EvaluationError(f"folds: the labels have a single class {classes.tolist()!r}; "
                              "k-fold evaluation needs at least two classes (check the label source)")
    smallest = int(counts.min())
    if k > smallest:
        rare = classes[counts.argmin()]
        raise EvaluationError(f"folds: k={k} is larger than the smallest class ({rare!r}, {smallest} "
                              f"examples), so some test folds would miss it; use --folds <= {smallest}")
    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=int(seed))
    out = []
    for i, (tr, te) in enumerate(skf.split(np.zeros(len(y)), y)):
        out.append(Split(np.sort(tr).astype(np.int64), np.sort(te).astype(np.int64), f"fold-{i}"))
    return out


def group_kfold(groups, k: int, seed: int = 0) -> list[Split]:
    """Seeded k-fold splits that never divide a group: every example of a group is in the same
    test part (what ranking needs: the candidates of one query are ranked together).

    The groups are shuffled with ``numpy.random.default_rng(seed)``, then taken from the largest to
    the smallest (ties in the shuffled order) and each is put in the fold that holds the fewest
    examples so far (the first such fold), so the folds' sizes differ by at most the largest
    group. Classes are not stratified.

    Parameters
    ----------
    groups : sequence, shape (n,)
        The group id of each example (any hashable, sortable values).
    k : int
        Number of folds, 2 <= k <= number of groups.
    seed : int

    Returns
    -------
    list of Split, length k, named ``fold-<i>``.
    """
    g = np.asarray(groups)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
        raise EvaluationError(f"folds: k={k!r} is not an integer >= 2; use --folds 5 or --folds 10")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise EvaluationError(f"folds: seed={seed!r} is not an integer; pass an integer such as --seed 0")
    if g.ndim != 1:
        raise EvaluationError(f"folds: the group ids have shape {g.shape}; give one group id per example")
    _, code, sizes = np.unique(g, return_inverse=True, return_counts=True)
    if k > sizes.size:
        raise EvaluationError(f"folds: k={k} is larger than the number of groups ({sizes.size}), so some test "
                              f"folds would be empty; use --folds <= {sizes.size}")
    shuffled = np.random.default_rng(int(seed)).permutation(sizes.size)
    order = shuffled[np.argsort(-sizes[shuffled], kind="stable")]
    load = np.zeros(k, dtype=np.int64)
    fold_of = np.empty(sizes.size, dtype=np.int64)
    for grp in order.tolist():
        f = int(np.argmin(load))
        fold_of[grp] = f
        load[f] += sizes[grp]
    where = fold_of[code]
    every = np.arange(g.size, dtype=np.int64)
    return [Split(every[where != i], every[where == i], f"fold-{i}") for i in range(k)]


def fixed_split(train, test, n: int) -> Split:
    """A fixed split from explicit index arrays, checked against ``n`` examples.

    Raises
    ------
    EvaluationError
        If an index is out of range, a side is empty, or train and test overlap.
    """
    tr = np.unique(np.asarray(train, dtype=np.int64))
    te = np.unique(np.asarray(test, dtype=np.int64))
    for side, idx in (("train", tr), ("test", te)):
        if idx.size == 0:
            raise EvaluationError(f"split: the {side} part is empty; give it at least one example")
        if idx[0] < 0 or idx[-1] >= n:
            bad = idx[0] if idx[0] < 0 else idx[-1]
            raise EvaluationError(f"split: {side} index {int(bad)} is outside 0..{n - 1} "
                                  f"(the store has {n} examples); fix the {side} range")
    both = np.intersect1d(tr, te)
    if both.size:
        raise EvaluationError(f"split: {both.size} example(s) are in both train and test (first: "
                              f"{int(both[0])}); make the train and test ranges disjoint")
    return Split(tr, te, "split")


_PART = re.compile(r"^\s*(train|test)\s*:\s*(\d+)\s*:\s*(\d+)\s*$")


def parse_split(text: str, n: int) -> Split:
    """Parse ``"train:a:b,test:c:d"`` (half-open index ranges; parts may repeat) into a Split.

    Examples
    --------
    ``"train:0:5483,test:5483:5983"`` trains on rows 0..5482 and tests on 5483..5982.
    """
    parts = {"train": [], "test": []}
    for piece in str(text).split(","):
        m = _PART.match(piece)
        if not m:
            raise EvaluationError(f"--split: cannot read {piece!r} in {text!r}; write parts as "
                                  "train:START:END or test:START:END, e.g. train:0:5000,test:5000:5500")
        side, a, b = m.group(1), int(m.group(2)), int(m.group(3))
        if b <= a:
            raise EvaluationError(f"--split: range {piece.strip()!r} is empty (END <= START); "
                                  "END is exclusive, so use START < END")
        parts[side].append(np.arange(a, b, dtype=np.int64))
    for side in parts:
        if not parts[side]:
            raise EvaluationError(f"--split {text!r} has no {side} part; add {side}:START:END")
    return fixed_split(np.concatenate(parts["train"]), np.concatenate(parts["test"]), n)


def folds_path(directory, k: int, seed: int, labels=None) -> Path:
    """Where the folds file for (k, seed) and these ``labels`` lives in ``directory``:
    ``folds-k<k>-seed<seed>-labels<first 12 hex of the labels' sha256>.json``, so stores of other
    labels sharing a directory never collide (without ``labels``: the name of older versions,
    ``folds-k<k>-seed<seed>.json``)."""
    if labels is None:
        return Path(directory) / f"folds-k{k}-seed{seed}.json"
    return Path(directory) / f"folds-k{k}-seed{seed}-labels{labels_hash(labels)[:12]}.json"


def save_folds(path, splits, labels, k: int, seed: int) -> None:
    """Write ``splits`` as JSON (atomically: a temporary file renamed into place)."""
    path = Path(path)
    doc = {"k": int(k), "seed": int(seed), "n": int(len(labels)), "labels_sha256": labels_hash(labels),
           "folds": [s.to_dict() for s in splits]}
    # a unique temporary name: runs sharing --folds-dir never rename each other's file
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp")
    try:
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_folds(path, labels) -> list[Split]:
    """Read a folds file, refusing it when it was made for other labels.

    Raises
    ------
    EvaluationError
        If the file is unreadable or its ``n`` / labels hash differ from ``labels``.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
        splits = [Split.from_dict(d) for d in doc["folds"]]
        n, h = int(doc["n"]), doc["labels_sha256"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise EvaluationError(f"{path}: not a readable folds file ({e}); delete it to make new folds") from e
    if n != len(labels) or h != labels_hash(labels):
        raise EvaluationError(f"{path}: these folds were made for other labels (n={n}, labels sha256 "
                              f"{h[:12]}..., now n={len(labels)}, {labels_hash(labels)[:12]}...); delete "
                              "the file or evaluate with --out in another directory")
    for s in splits:
        if s.train.size and (s.train.min() < 0 or s.train.max() >= n) or \
                s.test.size and (s.test.min() < 0 or s.test.max() >= n):
            raise EvaluationError(f"{path}: fold {s.name} has indices outside 0..{n - 1}; delete the file")
    return splits


def load_or_make_folds(directory, labels, k: int, seed: int = 0) -> list[Split]:
    """Stratified k-fold splits, reused from ``directory`` if saved there before.

    Parameters
    ----------
    directory : path
        Folder that holds (or will hold) the file :func:`folds_path` names; created if missing. A
        file of the older name ``folds-k<k>-seed<seed>.json`` made for these labels is reused; one
        made for other labels is left alone.
    labels : sequence, shape (n,)
    k, seed : int
        As in :func:`stratified_kfold`.
    """
    path = folds_path(directory, k, seed, labels)
    if path.exists():
        return load_folds(path, labels)
    old = folds_path(directory, k, seed)
    if old.exists():
        try:
            return load_folds(old, labels)
        except EvaluationError:
            pass  # made for other labels (or unreadable): not ours, make our own file
    splits = stratified_kfold(labels, k, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_folds(path, splits, labels, k, seed)
    return splits
