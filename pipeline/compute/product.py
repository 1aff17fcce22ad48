"""The product path: Gram blocks of kernels with a finite feature map as matrix products.

For a base spec with a map (``gramtile.kernels.maps``), ``K = Phi_X diag(w) Phi_Y^T`` with
``Phi`` the unweighted feature rows (counts, or sums of occurrence weights) and ``w_f = base **
order_f``. A block is computed as a dense part over the *frequent* features (those held by at
least a fraction :func:`dense_threshold` of the corpus: a BLAS product) plus a sparse part over
the rare ones (SciPy's sparse product, whose cost is the sum over features of row-count x
column-count). Both parts hold exact products of the same numbers the pairwise core multiplies,
so the two paths agree to float64 round-off (tests: 1e-12 relative).

The engine (:func:`tile_products`, called by each tile task) chooses per tile and base kernel:
``path="pairwise"`` or ``"product"`` forces one; ``"auto"`` takes the product path when its
estimated cost beats the pairwise estimate (:func:`estimate`, from the stored feature
frequencies and the examples' sizes). The choice and both estimates go into the store's log.

Memory: a tile task on the product path holds, besides the block, the feature set's per-feature
arrays, the sparse product's postings over every feature, the tile's feature rows and the dense
parts (:func:`block_bytes`). The driver plans this against the memory one task may use where the
tiles run (:meth:`~gramtile.pipeline.compute.runtime.Runtime.task_memory`: one worker's limit on
a cluster, this process's memory otherwise; :func:`within_memory`): a new store's default tile
is made small enough for it; a base kernel whose product block cannot fit a task takes the
pairwise path under ``auto`` and is refused, with the figures and the fix, under ``product``.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gramtile.kernels.maps import feature_map, weights
from gramtile.kernels.maps.product import mirror_upper, sparse_block
from gramtile.kernels.maps.subsequence import occurrences
from gramtile.pipeline.compute import feature_sets as fsets
from gramtile.pipeline.compute.errors import TaskTooLargeError
from gramtile.pipeline.compute.feature_sets import FeatureVocab, rows_of
from gramtile.pipeline.compute.runtime import TaskMemory
from gramtile.pipeline.progress import log
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import FeatureSetTooLargeError, FeatureSetWriteError, StoreError

PATHS = ("auto", "pairwise", "product")

#: Cost constants of the estimates, in ns of one core's CPU time, measured with
#: ``bench/features.py`` and a 1000 x 1000 block of the NUM trees (BENCHMARKS.md):
#: one multiply-add of the sparse part, one of the dense (BLAS) part, one entry of a block
#: (allocation, the scatter's pass, the dense part's sum, the mirror), one stored row entry
#: gathered for the block.
NS_SPARSE, NS_DENSE, NS_ENTRY, NS_NNZ = 1.5, 0.2, 15.0, 30.0
#: Pairwise CPU ns per evaluation, ``a + b * (mean size of x + mean size of y)`` for the tree,
#: route and bag cores, ``a + b * n * |x| |y|`` for the subsequence dynamic programme (fitted to
#: the pairwise rates of the same benchmark: ST 480-530 ns on the NUM trees of 30 nodes, route
#: 75-135 ns).
PAIR_COST = {"st": (60.0, 8.0), "bow": (15.0, 2.0), "route": (20.0, 1.5), "subsequence": (40.0, 1.2)}
#: Feature sets larger than this many occurrences are not enumerated by ``auto`` (subsequence).
MAX_OCCURRENCES = 50_000_000
#: At most this many frequent features go to the dense part.
MAX_DENSE = 2048
#: Share of the memory available now that a product tile task in this process plans for (on
#: workers: what one worker may hold; :meth:`Runtime.task_memory`).
MEMORY_SHARE = 0.6
#: Bytes per feature of a product block beyond the loaded feature set: the sparse product's
#: posting pointers, fill and cursor (int64 each) and the dense/sparse split's mask (one byte).
FEATURE_BYTES = 3 * 8 + 1
#: Bytes per stored feature value of a tile's rows: the rows read (value and int64 index), their
#: sparse part, the int64 copies handed to the core, the row ids of the split and the postings.
NNZ_BYTES = 80
#: Feature-row shards a process keeps decoded (the feature-set shard cache of :mod:`~gramtile.pipeline.compute.feature_sets`).
CACHED_SHARDS = 64


def dense_threshold() -> float:
    """Fraction of examples above which a feature is cheaper in the dense part: a dense feature
    costs every entry of the block once (NS_DENSE), a sparse one (df_x df_y) NS_SPARSE."""
    return float(np.sqrt(NS_DENSE / NS_SPARSE))


def features(spec, X, vocab: FeatureVocab | None = None):
    """The explicit feature rows of examples X under a base spec with a map.

    Parameters
    ----------
    spec : base KernelSpec with a feature map (``gramtile.kernels.registry.has_map``)
    X : Batch (or mapping representation name -> Batch)
    vocab : FeatureVocab, optional
        Feature ids to extend (e.g. to encode a second set of examples with the same ids).

    Returns
    -------
    (Phi, w, vocab): ``Phi`` a SciPy CSR matrix (len(X) x n_features), unweighted; ``w`` the
    feature weights (``K = Phi diag(w) Phi^T``); the vocabulary.
    """
    fmap = fsets.map_of(spec)
    batch = X if hasattr(X, "kind") else X[spec.rep_name]
    vocab = FeatureVocab() if vocab is None else vocab
    lf = fmap.local(spec, batch)
    gid = vocab.intern(lf)
    phi = rows_of(lf, gid, len(vocab))
    return phi, weights(fmap, spec, vocab.order), vocab


def _rows_split(phi: sp.csr_matrix, dense: np.ndarray):
    """(the ``dense`` columns of ``phi`` as an array, the other columns as CSR)."""
    n = phi.shape[0]
    if dense.shape[0] == 0:
        return np.zeros((n, 0)), phi
    D = phi[:, dense].toarray()
    mask = np.ones(phi.shape[1], np.bool_)
    mask[dense] = False
    keep = mask[phi.indices]
    row = np.repeat(np.arange(n), np.diff(phi.indptr))
    indptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(row[keep], minlength=n), out=indptr[1:])
    return D, sp.csr_matrix((phi.data[keep], phi.indices[keep], indptr), shape=phi.shape)


def block(phi_x, w, dense=None, phi_y=None):
    """``(K, diag_x, diag_y)`` of ``Phi_X diag(w) Phi_Y^T`` (``phi_y=None``: Y = X, symmetric).

    ``dense`` lists the feature ids computed in the dense (BLAS) part; the rest go through a
    sparse product. A symmetric block is made exactly symmetric (its upper triangle mirrored),
    as the pairwise cores make theirs.
    """
    dense = np.zeros(0, np.int64) if dense is None else np.asarray(dense, np.int64)
    Dx, Rx = _rows_split(phi_x, dense)
    wd = w[dense]
    if phi_y is None:
        Dy, Ry = Dx, Rx
    else:
        Dy, Ry = _rows_split(phi_y, dense)
    # the dense part first, written by BLAS into the block itself; the sparse part adds to it
    K = (Dx * wd) @ Dy.T if dense.shape[0] else np.zeros((phi_x.shape[0], Ry.shape[0]))
    sparse_block(Rx.indptr.astype(np.int64), Rx.indices.astype(np.int64), Rx.data, Ry.indptr.astype(np.int64),
                 Ry.indices.astype(np.int64), Ry.data, np.ascontiguousarray(w, np.float64), int(phi_x.shape[1]),
                 phi_y is None, K)
    # diagonals row by row from the rows alone (a CSR product sums each row in one order, so an
    # example's self-kernel is the same number in every tile it appears in)
    dx = _self(phi_x, w)
    if phi_y is None:
        mirror_upper(K)  # exactly symmetric, as the pairwise cores' blocks
        return K, dx, dx
    return K, dx, _self(phi_y, w)


def _self(phi: sp.csr_matrix, w: np.ndarray) -> np.ndarray:
    """Self-kernels sum_f w_f phi_f(x)^2 of each row."""
    return np.asarray(phi.multiply(phi) @ w, dtype=np.float64).reshape(-1)


def frequent(fs) -> np.ndarray:
    """Ids of the features of a stored feature set that go to the dense part (computed once per
    loaded feature set)."""
    ids = fs.dense_ids
    if ids is None:
        ids = fs.dense_ids = _frequent(fs)
    return ids


def _frequent(fs) -> np.ndarray:
    thr = dense_threshold() * fs.n
    ids = np.flatnonzero(fs.df >= max(thr, 1))
    if ids.shape[0] > MAX_DENSE:
        ids = np.sort(ids[np.argsort(-fs.df[ids], kind="stable")[:MAX_DENSE]])
    return ids


def estimate(base, fs, r: int, c: int, symmetric: bool, size_x: float, size_y: float) -> dict:
    """Estimated ns of a block of ``r`` x ``c`` examples on each path.

    Product: sum over rare features of (df r / n)(df c / n) sparse multiply-adds, r c k dense
    ones for the k frequent features, plus the block's entries and the rows gathered.
    Pairwise: evaluations (r (r + 1) / 2 for a symmetric block) times :data:`PAIR_COST`.
    """
    n = max(fs.n, 1)
    dense = frequent(fs)
    sums = fs.df_sums
    if sums is None:
        df = fs.df.astype(np.float64)
        sums = fs.df_sums = (float((df * df).sum() - (df[dense] ** 2).sum()), float(df.sum()))
    rare2, nnz = sums
    prod = (NS_SPARSE * rare2 * (r / n) * (c / n) * (0.5 if symmetric else 1.0)
            + NS_DENSE * r * c * dense.shape[0] + NS_ENTRY * r * c + NS_NNZ * nnz * (r + c) / n)
    evals = r * (r + 1) / 2 if symmetric else r * c
    a, b = PAIR_COST.get(base.kind, (100.0, 10.0))
    if base.kind == "subsequence":
        per = a + b * base.n * size_x * size_y
    else:
        per = a + b * (size_x + size_y)
    return {"product": prod, "pairwise": evals * per}


def bases_with_map(spec) -> list:
    return [b for b in spec.base_specs() if feature_map(b) is not None]


def ensure(corpus_path, spec, path: str) -> dict:
    """Driver side: build the feature sets the run may use (none for ``path="pairwise"``).

    Returns ``{base spec hash: feature-set attribute}``. With ``auto``, a subsequence kernel whose
    corpus would enumerate more than :data:`MAX_OCCURRENCES` occurrences, or whose feature set's
    build is refused because its vocabulary could not fit in memory
    (:func:`~gramtile.pipeline.compute.feature_sets.too_large`; with ``product`` that is an error),
    keeps the pairwise path,
    and so does every kernel when the corpus store cannot be written (the feature set is built
    into it).
    """
    if path == "pairwise":
        return {}
    out = {}
    for b in bases_with_map(spec):
        if path == "auto" and b.kind == "subsequence":
            if occurrences(b, CorpusStore.open(corpus_path).sizes(b.rep_name)) > MAX_OCCURRENCES:
                continue
        try:
            out[b.spec_hash] = fsets.ensure(corpus_path, b, pairwise=True)
        except FeatureSetTooLargeError as e:
            if path == "product":
                raise
            log.info(f"gramtile gram: no feature set for {b.kind} ({e}); tiles take the pairwise path")
        except (OSError, FeatureSetWriteError) as e:
            if path == "product":
                raise StoreError(f"--path product: cannot build the feature set of {b.to_json()} into corpus "
                                 f"store {corpus_path} ({e}). Fix: make the store writable once, or use --path "
                                 f"pairwise") from None
            # auto on a corpus store this process cannot write (e.g. a shared read-only copy)
            log.info(f"gramtile gram: no feature set for {b.kind} (corpus store {corpus_path} is not writable: "
                     f"{e}); tiles take the pairwise path")
    return out


def block_bytes(fs, r: int, c: int, symmetric: bool) -> float:
    """Bytes a tile task holds for the product block of ``r`` x ``c`` examples of feature set
    ``fs``: its per-feature arrays (frequencies, orders, weights; kept loaded) and
    :data:`FEATURE_BYTES` per feature, the decoded shards it caches, :data:`NNZ_BYTES` per feature
    value of the tile's rows (mean values per example), the dense parts (examples x frequent
    features, and the weighted copy of the rows') and the block itself."""
    nf, n = int(fs.n_features), max(int(fs.n), 1)
    nnz = float(fs.meta.get("nnz", 0))
    shards = max(1, len(fs.meta.get("shards", ())))
    k = int(frequent(fs).shape[0])
    examples = r if symmetric else r + c
    return float(fs.df.nbytes + fs.order.nbytes + fs.w.nbytes + FEATURE_BYTES * nf
                 + 16 * nnz * min(1.0, CACHED_SHARDS / shards) + NNZ_BYTES * nnz / n * examples
                 + 8 * k * (r + examples) + 8 * r * c)


def largest_tile(fs, budget_bytes: float, upto: int) -> int | None:
    """The largest tile edge (16 .. ``upto``) whose product blocks fit ``budget_bytes``
    (off-diagonal blocks, the larger), or None when not even a tile of 16 fits."""
    lo, hi = 16, max(16, int(upto))
    if block_bytes(fs, lo, lo, False) > budget_bytes:
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if block_bytes(fs, mid, mid, False) <= budget_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo


def fitting_tile(corpus_path, spec, feature_sets: dict, tile: int, memory: TaskMemory) -> int:
    """A new store's default tile made no larger than the product blocks of its feature sets
    allow in ``memory`` (a feature set that fits no tile leaves it as it is: that kernel takes
    the pairwise path, or is refused, in :func:`within_memory`)."""
    budget = memory.per_task_mb * 1e6
    for b in bases_with_map(spec):
        if b.spec_hash in feature_sets:
            t = largest_tile(fsets.load(corpus_path, b), budget, tile)
            if t is not None:
                tile = min(tile, t)
    return tile


def within_memory(corpus_path, spec, feature_sets: dict, tile: int, n_rows: int, n_cols: int,
                  memory: TaskMemory, path: str) -> dict:
    """The feature sets whose product blocks fit the memory of one tile task (``memory``, from
    :meth:`~gramtile.pipeline.compute.runtime.Runtime.task_memory`), checked before any tile runs.

    Under ``auto`` a base kernel whose block would not fit takes the pairwise path (said in the
    log); under ``product`` the run is refused with the figures and the fix.

    Raises
    ------
    TaskTooLargeError
        ``path="product"`` and a product block needs more than one task may use.
    """
    r, c = min(int(tile), int(n_rows)), min(int(tile), int(n_cols))
    keep = {}
    for b in bases_with_map(spec):
        if b.spec_hash not in feature_sets:
            continue
        fs = fsets.load(corpus_path, b)
        need_mb = block_bytes(fs, r, c, False) / 1e6
        if need_mb <= memory.per_task_mb:
            keep[b.spec_hash] = feature_sets[b.spec_hash]
            continue
        fits = largest_tile(fs, memory.per_task_mb * 1e6, tile)
        figures = (f"the product path of {b.kind} needs {need_mb:,.0f} MB per tile task (tile {tile}, "
                   f"{fs.n_features:,} features), but {memory.where} leaves {memory.per_task_mb:,.0f} MB per "
                   f"task ({memory.tasks} at once)")
        if path == "product":
            smaller = f"a new --out with --tile {fits}, " if fits is not None and fits < tile else ""
            raise TaskTooLargeError(f"{figures}; the worker would pause and the run stall. Fix: {smaller}--path "
                                    "pairwise (or auto), or give the workers more memory (the profile's memory / "
                                    "memory_limit, or --memory-mb)")
        log.info(f"gramtile gram: {figures}; its tiles take the pairwise path")
    return keep


def tile_products(corpus_path: str, spec, path: str, ridx, cidx, X, Y, symmetric: bool, bases=None):
    """Tile side: the blocks of the base kernels that take the product path on this tile.

    Returns ``(done, choices)``: ``done`` maps base spec hash -> (K, diag_rows, diag_cols) for
    :func:`~gramtile.pipeline.compute.inmemory.evaluate_block`; ``choices`` lists, per base
    kernel with a map, ``{"kernel", "path", "estimate_ns": {...}}`` for the log. ``bases``:
    the spec hashes of the base kernels that may take the product path (None: every one with a
    stored feature set), as the driver planned them (:func:`within_memory`).
    """
    done, choices = {}, []
    if path == "pairwise":
        return done, choices
    for b in bases_with_map(spec):
        if bases is not None and b.spec_hash not in bases:
            continue
        meta = fsets.info(corpus_path, b)
        if meta is None:  # auto left it out (too many occurrences)
            continue
        fs = fsets.load(corpus_path, b)
        bx = X[b.rep_name]
        by = bx if Y is None else Y[b.rep_name]
        est = estimate(b, fs, len(ridx), len(cidx), symmetric, float(np.mean(bx.sizes())) if bx.n else 0.0,
                       float(np.mean(by.sizes())) if by.n else 0.0)
        chosen = "product" if path == "product" or est["product"] < est["pairwise"] else "pairwise"
        choices.append({"kernel": b.kind, "path": chosen,
                        "estimate_ns": {k: round(v) for k, v in est.items()}})
        if chosen == "product":
            dense = frequent(fs)
            px = fs.rows(ridx)
            done[b.spec_hash] = block(px, fs.w, dense, None if symmetric else fs.rows(cidx))
    return done, choices
