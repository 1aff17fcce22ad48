"""Landmark choice for Nystroem: which examples become the columns of a landmark store.

``gramtile gram --landmarks M [--landmark-seed S]`` computes only K(rows, L) for M landmarks L
drawn from the rows, into a rectangular Gram store (the ordinary rectangular store: the
columns are the landmark selection). How they are drawn (:func:`choose_landmarks`, also what
:func:`gramtile.pipeline.learn.nystroem.pick_landmarks` uses inside each training part):

- **stratified** when every row has a label in the corpus store: each class gets a share of M
  proportional to its size among the rows (largest remainders, at least one per class when
  M >= the number of classes), and within a class a seeded uniform sample;
- **uniform** otherwise: a seeded sample of M rows;
- M >= the number of rows takes every row.

The store records the choice in its ``landmarks`` attribute (:func:`landmark_meta`): M asked and
taken, seed, ``"stratified"`` or ``"uniform"``, ``chosen_from`` (``"rows"``) and the landmarks'
positions among the store's rows (``row_positions``); their corpus indices and ids are the
store's ``col_index`` and ``col_ids``, their self-kernels its ``diag_cols``.
"""
from __future__ import annotations

import numpy as np

from gramtile.pipeline.stores.errors import StoreError


def choose_landmarks(labels, candidates, m: int, seed: int = 0, stratified: bool = True) -> np.ndarray:
    """m landmark positions among ``candidates`` (sorted int64), seeded.

    Parameters
    ----------
    labels : sequence or None
        One label per position (indexed by the candidates); None (or ``stratified=False``) draws
        uniformly.
    candidates : array of int
        The positions to draw from.
    m : int
        Landmarks wanted (>= 1); all candidates when m >= their number.
    seed : int
    stratified : bool

    Raises
    ------
    StoreError
        m is not an integer >= 1.
    """
    cand = np.asarray(candidates, dtype=np.int64)
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise StoreError(f"landmarks: m={m!r}; give an integer >= 1 (--landmarks M)")
    if m >= cand.size:
        return np.sort(cand)
    rng = np.random.default_rng(seed)
    if not stratified or labels is None:
        return np.sort(rng.choice(cand, m, replace=False))
    y = np.asarray(labels)[cand]
    classes, counts = np.unique(y, return_counts=True)
    share = counts / counts.sum() * m
    take = np.floor(share).astype(int)
    if m >= len(classes):
        take = np.maximum(take, 1)
    while take.sum() > m:
        take[np.argmax(take)] -= 1
    for c in np.argsort(-(share - np.floor(share))):
        if take.sum() >= m:
            break
        if take[c] < counts[c]:
            take[c] += 1
    out = [rng.choice(cand[y == c], int(t), replace=False) for c, t in zip(classes, take) if t > 0]
    return np.sort(np.concatenate(out))


def landmark_columns(rows: np.ndarray, labels, m: int, seed: int) -> tuple:
    """(corpus indices of the landmarks, their positions among ``rows``, stratified?) for a
    landmark store over the corpus indices ``rows``; ``labels`` are the corpus store's labels
    (all of them, indexed by corpus index), stratified only when every row has one."""
    rows = np.asarray(rows, dtype=np.int64)
    y = None
    if labels is not None:
        ys = [labels[i] for i in rows]
        if all(v is not None and not (isinstance(v, str) and not v.strip()) for v in ys):
            y = np.asarray([str(v) for v in ys])
    pos = choose_landmarks(y, np.arange(rows.size), m, seed, stratified=y is not None)
    return rows[pos], pos, y is not None


def landmark_meta(m: int, seed: int, stratified: bool, positions: np.ndarray) -> dict:
    """The ``landmarks`` attribute of a landmark store (see module docstring)."""
    return {"m": int(m), "taken": int(len(positions)), "seed": int(seed),
            "how": "stratified" if stratified else "uniform", "chosen_from": "rows",
            "row_positions": [int(p) for p in positions]}
