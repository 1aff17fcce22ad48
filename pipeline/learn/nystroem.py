"""Nystroem approximation from a Gram store: a linear model on K[:, landmarks] features.

For n too large for an n x n matrix in memory. With m landmark examples L (chosen among the
training examples: seeded, uniform or stratified by label), the feature map is

    phi(x) = K(x, L) K_LL^{-1/2},   K_LL^{-1/2} = U diag(s)^{-1/2} over eigenpairs with s > cutoff * s_max

so phi(x) . phi(y) = K(x, L) K_LL^+ K(L, y), which equals K(x, y) when L holds every training
example (m = n, up to the eigenvalue cutoff). Only the column block K[rows, L] is read (once
per split, in bands, K_LL copied out of it), so a store loads only the chunks of the landmark
columns. The cutoff is relative (``CUTOFF`` = 1e-10 of the largest eigenvalue), so features are
bounded: ||phi(x)||^2 = K(x, L) K_LL^+ K(L, x) <= K(x, x) (a projection), 1 for a normalised
kernel.

Memory: one n x m float64 array per evaluation (:func:`features_in_place`): K(rows, L) is read
into it band by band, then each band is replaced by its n x rank features; training and test
rows are used through index arrays, and the linear SVM (:mod:`gramtile.pipeline.learn.dcd`,
LIBLINEAR's dual coordinate descent, squared hinge loss by default, one-vs-rest) reads them in place. Peak
memory is that array plus O(m^2 + band m + n) (scikit-learn's LinearSVC copied the training
features into LIBLINEAR's sparse format, 16 bytes a value, besides the block, the features and
their train/test copies).

Two ways to get the landmark columns:

- from a square store, m landmarks are drawn per split among its training examples
  (:func:`pick_landmarks`) and K[split rows, L] is read;
- from a **landmark store** (``gramtile gram --landmarks M``: K(all, L) for one landmark set L
  drawn once from all the rows, :mod:`gramtile.pipeline.stores.landmarks`), opened as a
  :class:`LandmarkSource`. Each split then uses ``L & train``, the landmarks in its training
  part (``protocol="train"``, the default): no test example is a landmark, and the map of a
  fold is exactly the one a square store gives with those landmarks. ``protocol="all"`` keeps
  every landmark in every split (transductive Nystroem: test examples may be landmarks, i.e.
  unlabelled points that shape the feature map; their labels are never used). In both, the
  stratified draw of L saw the labels of all rows (for class shares only): with 5 folds about
  80 % of L falls in each training part, the shares within a training part then follow that
  part's labels only approximately.
"""
from __future__ import annotations

import time
from importlib.metadata import version

import numpy as np

from gramtile.pipeline.compute.runtime import Runtime, TaskMemory
from gramtile.pipeline.learn import dcd
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.fits import read_block
from gramtile.pipeline.learn.models import SavedModel, kernel_reps, stored_resources
from gramtile.pipeline.learn.parallel import MEMORY_SHARE
from gramtile.pipeline.learn.sources import store_labels
from gramtile.pipeline.readers.labels import read_label_file
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.landmarks import choose_landmarks

#: how a landmark store's landmarks are used per split (see module docstring)
PROTOCOLS = ("train", "all")
#: eigenvalues of K_LL below CUTOFF * the largest are dropped from the map (see the module docstring)
CUTOFF = 1e-10
#: the linear SVM's stopping tolerance and outer-iteration limit (LIBLINEAR's eps and max_iter)
TOL, MAX_ITER = 1e-4, 20000
#: the linear SVM's loss: the squared hinge (LinearSVC's default), whose dual converges in tens
#: of passes where the hinge's took thousands or did not converge (docs/learning.md)
LOSS = "squared_hinge"


def pick_landmarks(labels, candidates, m: int, seed: int = 0, stratified: bool = True) -> np.ndarray:
    """m landmark positions among ``candidates`` (sorted).

    Stratified: each class gets a share of m proportional to its size among the candidates
    (largest remainders; at least one per class when m >= n_classes); uniform: a seeded sample.
    The draw is :func:`gramtile.pipeline.stores.landmarks.choose_landmarks`, the one
    ``gramtile gram --landmarks`` makes.
    """
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise EvaluationError(f"nystroem: m={m!r} landmarks; give an integer >= 1")
    return choose_landmarks(labels, candidates, m, seed, stratified)


class LandmarkSource:
    """A kernel source over a landmark store (``gramtile gram --landmarks``): K(rows, L).

    ``block(rows, cols)`` takes positions among the store's rows for both arguments, like a
    square store's source, but ``cols`` must be landmarks (positions in :attr:`landmarks`);
    only the landmark columns are stored. ``n`` is the number of rows.

    Raises
    ------
    EvaluationError
        The store is not a landmark store, or a column asked for is not a landmark.
    """

    def __init__(self, store, normalized: bool = False):
        lm = store.landmarks
        if lm is None:
            raise EvaluationError(f"Gram store {store.path} is not a landmark store (made by `gramtile gram "
                                  f"--landmarks M`)")
        self.store, self.view, self.normalized = store, store.view(), bool(normalized)
        self.n = int(store.shape[0])
        #: positions of the landmarks among the rows (sorted), i.e. column c is row landmarks[c]
        self.landmarks = np.asarray(lm["row_positions"], dtype=np.int64)
        if self.landmarks.size != store.shape[1]:
            raise EvaluationError(f"landmark store {store.path} records {self.landmarks.size} landmark positions "
                                  f"for {store.shape[1]} columns; it is damaged: recompute it into a new --out")

    @property
    def chunk_reads(self) -> int:
        return self.view.chunk_reads

    def block(self, rows, cols) -> np.ndarray:
        cols = np.asarray(cols, dtype=np.int64)
        at = np.searchsorted(self.landmarks, cols)
        ok = (at < self.landmarks.size) & (self.landmarks[np.minimum(at, self.landmarks.size - 1)] == cols)
        if not ok.all():
            raise EvaluationError(f"row {int(cols[~ok][0])} is not a landmark of {self.store.path}; a landmark "
                                  "store holds only its landmark columns")
        try:
            return self.view.block(np.asarray(rows, dtype=np.int64), at, normalized=self.normalized)
        except StoreError as e:
            raise EvaluationError(str(e)) from None


class NystroemMap:
    """The feature map phi(x) = K(x, L) K_LL^{-1/2} fitted on the landmark block K_LL.

    Parameters
    ----------
    cutoff : float
        Eigenvalues below ``cutoff * largest`` are dropped (K_LL is often singular: repeated
        examples, low-rank kernels).

    Attributes
    ----------
    W : ndarray, shape (m, r)
        U_r diag(s_r)^{-1/2}; features are K(x, L) @ W.
    rank : int
    """

    def __init__(self, cutoff: float = CUTOFF):
        if not 0 <= cutoff < 1:
            raise EvaluationError(f"nystroem: cutoff={cutoff!r}; use a small non-negative number, e.g. {CUTOFF:g}")
        self.cutoff = cutoff

    def fit(self, K_LL) -> NystroemMap:
        K_LL = np.asarray(K_LL, dtype=np.float64)
        # symmetrise: stored blocks are symmetric up to round-off, eigh reads one triangle only
        s, U = np.linalg.eigh((K_LL + K_LL.T) / 2)
        keep = s > self.cutoff * max(s.max(), 0.0)
        if not keep.any():
            raise EvaluationError("nystroem: the landmark kernel block has no positive eigenvalue "
                                  "(all landmarks have zero self-similarity?); choose other landmarks")
        self.W = U[:, keep] / np.sqrt(s[keep])
        self.rank = int(keep.sum())
        return self

    def transform(self, K_xL) -> np.ndarray:
        return np.asarray(K_xL, dtype=np.float64) @ self.W


#: Bytes of K(band, L) a band read holds at most (the band's values, their copy into the feature
#: array and the chunks read for them are about three times that)
BAND_BYTES = 1 << 25
#: Rows per product of the map: fixed, so that the features are the same numbers whatever the band
#: read (BLAS may sum a product's entries in another order for another number of rows)
TRANSFORM_ROWS = 256


def _band_rows(source, m: int, free_mb: float | None = None) -> int:
    """Rows per band read: about 32 MB of K(band, L), or a sixth of ``free_mb`` (the memory left
    beside the feature array) when that is less, a multiple of the store's tile when the source
    is a Gram store (so each chunk is read once) and that fits."""
    limit = BAND_BYTES if free_mb is None else max(0.0, min(BAND_BYTES, free_mb * 1e6 / 6))
    want = max(1, int(limit) // (8 * max(1, m)))
    tile = getattr(getattr(source, "store", None), "tile", None)
    if isinstance(tile, int) and tile > 0 and want >= tile:
        want = want // tile * tile
    return want


def need_mb(n: int, m: int) -> float:
    """MB that the features of n examples over m landmarks need: the n x m array, K_LL, its
    symmetrised copy, eigenvectors and map (4 m^2), and a band of one tile of rows read."""
    return 8 * (n * m + 4 * m * m + 3 * 64 * m) / 1e6


def nystroem_memory(cluster=None) -> TaskMemory:
    """The memory of this process for features made here (``train --model nystroem``): the
    Runtime's ``memory_mb``, else :data:`~gramtile.pipeline.learn.parallel.MEMORY_SHARE` of what
    is available now, whatever the profile (:meth:`Runtime.task_memory` of an in-process run)."""
    rt = Runtime.of(cluster)
    here = rt if rt.in_process else Runtime("sequential", memory_mb=rt.memory_mb)
    return here.task_memory(MEMORY_SHARE)


def check_memory(n: int, m: int, memory: TaskMemory) -> None:
    """Refuse, before anything is read, features of n examples x m landmarks that cannot fit
    ``memory`` (what one fit may use where it runs)."""
    need = need_mb(n, m)
    if need > memory.per_task_mb:
        raise EvaluationError(
            f"nystroem: {n:,} examples x {m:,} landmarks need {need:,.0f} MB per fit (the {8 * n * m / 1e6:,.0f} "
            f"MB feature array and the landmark block's eigendecomposition), but {memory.where} leaves "
            f"{memory.per_task_mb:,.0f} MB per fit ({memory.tasks} at once). Fix: fewer landmarks (--landmarks), "
            "the linear learner on explicit features (--model linear), or more memory (--memory-mb, or the "
            "profile's memory per worker)")


def features_in_place(source, rows, L, buf, cutoff: float = CUTOFF, what: str = "examples x landmarks",
                      band: int | None = None, memory_mb: float | None = None):
    """Nystroem features of ``rows`` (sorted positions; must contain the landmarks ``L``) in the
    flat float64 buffer ``buf`` (at least len(rows) * len(L) values), without a second n x m array.

    K(rows, L) is read in bands into ``buf`` (viewed as (len(rows), m)); K_LL is copied out of
    it (m x m) and the map fitted; then each block of :data:`TRANSFORM_ROWS` rows is replaced by
    its features K(rows, L) W, front to back, into ``buf`` viewed as (len(rows), rank): since
    rank <= m, a block's features end before the next block's kernel values begin. Returns
    (features (len(rows), rank), a C-contiguous view of ``buf``, and the :class:`NystroemMap`).
    Memory beyond ``buf``: O(m^2 + band * m + TRANSFORM_ROWS * rank) (``band``: rows per read,
    default about 32 MB of values, less when ``memory_mb``, what the process may use, leaves less
    beside ``buf``). The features do not depend on ``band``.

    Raises
    ------
    EvaluationError
        A block with NaN / infinite entries (an unfinished store) or of the wrong shape.
    """
    rows, L = np.asarray(rows, dtype=np.int64), np.asarray(L, dtype=np.int64)
    n, m = rows.size, L.size
    if buf.dtype != np.float64 or buf.ndim != 1 or buf.size < n * m:
        raise EvaluationError(f"nystroem: feature buffer of {buf.size} float64 for {n} x {m}")
    where = np.searchsorted(rows, L)
    if np.any(where >= n) or np.any(rows[np.minimum(where, n - 1)] != L):
        raise EvaluationError("nystroem: every landmark must be among the rows whose features are made")
    raw = buf[:n * m].reshape(n, m)
    if band is None:
        band = _band_rows(source, m, None if memory_mb is None else memory_mb - 8 * (n * m + 4 * m * m) / 1e6)
    band = int(band)
    for a in range(0, n, band):
        raw[a:a + band] = read_block(source, rows[a:a + band], L, what)
    fmap = NystroemMap(cutoff).fit(raw[where])
    r = fmap.rank
    F = buf[:n * r].reshape(n, r)
    for a in range(0, n, TRANSFORM_ROWS):  # whatever the band: the same products, the same bits
        F[a:a + TRANSFORM_ROWS] = raw[a:a + TRANSFORM_ROWS] @ fmap.W  # made before F's rows are written
    return F, fmap


def train_nystroem(corpus_path, gram, spec, C: float = 1.0, class_weight=None, cutoff: float = CUTOFF,
                   max_iter: int = MAX_ITER, provenance=None, tol: float = TOL,
                   loss: str = LOSS, labels_file=None, cluster=None) -> SavedModel:
    """Train the Nystroem linear SVM on every row of a landmark store and return it as a
    :class:`~gramtile.pipeline.learn.models.SavedModel` over the landmarks.

    The decision function of class c is phi(x) . w_c + b_c = K(x, L) (W w_c) + b_c, so the model
    is saved as a kernel expansion over the landmark examples (coefficients W w_c): ``gramtile
    predict`` then evaluates only K(x, L), M kernel values per input. Memory O(n M): one n x M
    array holding K(rows, L) and then, in place, the n x rank features (:func:`features_in_place`).

    Parameters
    ----------
    corpus_path : path
        The corpus store the landmark store was computed from (its rows' labels, the landmark
        examples and any stored resources come from it).
    gram : path or GramStore
        A landmark store (``gramtile gram --landmarks M``).
    spec : KernelSpec
        The store's kernel, or ``normalized`` of it.
    labels_file : path, optional
        One label per line for the store's rows, in row order, instead of the corpus store's.
    cluster : Runtime or profile, optional
        The run's Runtime: the features are made in this process and planned for its memory
        (:func:`nystroem_memory`; refused before anything is read when they cannot fit).

    Raises
    ------
    EvaluationError
        Not a landmark store, another kernel, an incomplete store, one class only.
    """
    st = gram if isinstance(gram, GramStore) else GramStore.open(gram)
    normalized = spec.kind == "normalized"
    base = spec.kernel if normalized else spec
    if base.spec_hash != st.kernel_hash:
        raise EvaluationError(f"landmark store {st.path} holds {st.meta['kernel_json']}, not {base.to_json()}; train "
                              f"with --kernel set to its kernel (or normalized of it)")
    src = LandmarkSource(st, normalized=normalized)
    cs = CorpusStore.open(corpus_path)
    if cs.content_hash != st.corpus_hash:
        raise EvaluationError(f"landmark store {st.path} was computed from another corpus (content hash "
                              f"{st.corpus_hash[:12]}), not {corpus_path} ({str(cs.content_hash)[:12]}); pass its "
                              f"corpus store ({st.meta.get('corpus_path')})")
    y = np.asarray([str(v) for v in (store_labels(st) if labels_file is None else
                                     read_label_file(labels_file, src.n, f"rows of {st.path}"))])
    classes = sorted(np.unique(y).tolist())
    if len(classes) < 2:
        raise EvaluationError(f"the rows of {st.path} have one class only ({classes!r}); training needs two")
    L = src.landmarks
    rows = np.arange(src.n)
    memory = nystroem_memory(cluster)
    check_memory(rows.size, L.size, memory)
    F, fmap = features_in_place(src, rows, L, np.empty(rows.size * L.size), cutoff, "rows x landmarks",
                                memory_mb=memory.process_mb)
    clf = dcd.fit(F, rows, y, C=float(C), class_weight=class_weight, loss=loss, tol=tol, max_iter=max_iter)
    del F
    A = fmap.W @ np.atleast_2d(clf.coef).T  # (M, n_functions)
    b = np.atleast_1d(clf.intercept)
    funcs = [{"sv": list(range(L.size)), "coef": A[:, k].tolist(), "intercept": float(b[k])} for k in range(A.shape[1])]
    reps = kernel_reps(spec)
    col_idx = st.cols()
    found = {}
    for a, b in cs.shard_ranges:  # decode each shard holding landmarks once, keep only those
        want = col_idx[(col_idx >= a) & (col_idx < b)]
        if want.size:
            docs = cs.documents(a, b)
            for i in want:
                doc = docs[int(i) - a]
                doc.structures = {r: doc.structures[r] for r in reps if r in doc.structures}
                found[int(i)] = doc
    support = [found[int(i)] for i in col_idx]
    sv_self = {st.kernel_hash: np.asarray(st.view().diag()[1], dtype=np.float64)}
    lm = st.landmarks
    return SavedModel(spec=spec, learner="nystroem", scheme="binary" if len(classes) == 2 else "ovr",
                      classes=[str(c) for c in clf.classes], functions=funcs, support=support, sv_self=sv_self,
                      params={"C": float(C), "class_weight": class_weight, "m": int(L.size), "rank": fmap.rank,
                              "cutoff": cutoff, "loss": loss, "tol": tol, "converged": clf.converged,
                              "iterations": max(f.iterations for f in clf.fits), "landmarks": {k: v for k, v in lm.items() if k != "row_positions"}},
                      resources=stored_resources(corpus_path, spec, {st.kernel_hash: st}),
                      provenance={"gramtile_version": version("gramtile"),
                                  "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "n_train": int(src.n), "gram": [str(st.path)], "corpus": str(corpus_path),
                                  "corpus_hash": cs.content_hash, **(provenance or {})})
