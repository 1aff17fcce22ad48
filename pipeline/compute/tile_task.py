"""The tile task: what every executor runs for one tile of a Gram store.

:func:`compute_tile`

1. loads the row and column examples of its tile from the corpus store through the run's cache
   (:mod:`gramtile.pipeline.cache`: namespaces ``ranges``, the assembled tile ranges, and
   ``shards``, keyed by corpus path, content hash, representation(s) and range), so a process
   reads each shard once and assembles each tile row's examples once, not once per tile,
2. evaluates the spec on them with :func:`~gramtile.pipeline.compute.inmemory.evaluate_block`,
3. **writes its whole tile into the Gram store itself** (symmetric stores keep tiles i <= j only),
4. returns only the tile's diagonals and timing to the driver.

The driver then writes the diagonal chunks and the tile's done bit (driver-side done bits:
the done array then has one writer, and a tile is marked done only after its chunk write has
returned). So K chunks have exactly one writer each (the task of their tile), and ``done``/diag
chunks have exactly one writer (the driver).

Task keys are deterministic: ``gram-<spec_hash[:16]>-<store token>-<run>-<i>-<j>``. The store
token (a hash of corpus content hash, selections and tile size) keeps two runs of the same
kernel over different corpora on one shared scheduler from ever sharing a key. A re-run task
(a worker lost mid-task) rewrites the same chunk with the same numbers. Which executor runs the
tasks is :mod:`gramtile.pipeline.compute.executors`' business.
"""
from __future__ import annotations

import hashlib
import os
import socket
import time
from dataclasses import dataclass

import numpy as np

from gramtile.kernels.batches import Batch
from gramtile.kernels.registry import parse_spec
from gramtile.pipeline.cache import current
from gramtile.pipeline.compute.inmemory import evaluate_block
from gramtile.pipeline.compute.product import tile_products
from gramtile.pipeline.resources.keys import resource_names
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreMismatchError
from gramtile.pipeline.stores.gram_format import tile_checksum
from gramtile.pipeline.stores.gram_store import write_tile
from gramtile.pipeline.stores.resource_store import load_for_spec
from gramtile.pipeline.stores.tiles import Tile


@dataclass(frozen=True)
class TileJob:
    """Everything a tile task needs, small enough to send with every task."""

    corpus_path: str
    corpus_hash: str
    spec_json: str
    spec_hash: str
    reps: tuple
    store_path: str
    tile: int
    symmetric: bool
    token: str
    store_uid: str | None = None
    #: the run that planned the tasks; a task writes only while it is the store's current run
    run: str | None = None
    #: "auto", "pairwise" or "product" for the kernels with a feature map (compute/product.py)
    path: str = "pairwise"
    #: the store's dtype: the task rounds the tile (and its diagonals) to it before writing and checksumming
    dtype: str = "float64"
    #: a landmark store's landmark positions among its rows (see :func:`oriented_block`), else None
    col_positions: tuple | None = None
    #: spec hashes of the base kernels planned for the product path (``product.within_memory``);
    #: None: every one with a stored feature set
    product_bases: tuple | None = None

    def key(self, t: Tile) -> str:
        """Deterministic Dask key of tile ``t`` within its run (a rerun's keys differ, so a task of
        an interrupted run still running on a shared scheduler is never taken for the rerun's)."""
        run = f"-{self.run}" if self.run else ""
        return f"gram-{self.spec_hash[:16]}-{self.token}{run}-{t.i}-{t.j}"


def store_token(corpus_hash: str, rows_sha: str, cols_sha: str, tile: int) -> str:
    return hashlib.sha256(f"{corpus_hash}|{rows_sha}|{cols_sha}|{tile}".encode()).hexdigest()[:8]


@dataclass
class TileResult:
    """What a task returns to the driver (the tile itself is already in the store)."""

    tile: Tile
    diag_r: np.ndarray
    diag_c: np.ndarray
    evaluations: int
    seconds: float
    worker: str
    cpu_seconds: float = 0.0
    #: crc32c of the tile's values (gram_format.tile_checksum), recorded in the store's manifest
    crc: int = 0
    #: the path each base kernel with a feature map took, with its cost estimates (for the log)
    paths: list | None = None


# ---- what a process keeps between tile tasks: the run's cache (gramtile.pipeline.cache) -----

def _corpus(path: str, content_hash: str):
    def open_checked():
        cs = CorpusStore.open(path)
        if cs.content_hash != content_hash:
            raise StoreMismatchError(
                f"corpus store {path} changed: content hash {cs.content_hash}, the Gram run expects "
                f"{content_hash}; rerun against the corpus the store was created from, or use a new --out")
        return cs
    return current().load("corpora", (path, content_hash), open_checked)


def _spec(spec_json: str):
    return current().load("specs", spec_json, lambda: parse_spec(spec_json))


def _shard(cs, path, content_hash, rep, a, b) -> Batch:
    return current().load("shards", (path, content_hash, rep, a, b), lambda: cs.load(rep, a, b))


def _shard_ranges(cs) -> list:
    rngs = [(int(a), int(b)) for a, b in cs.shard_ranges]
    return rngs if rngs else [(0, int(cs.n))]


def _range_key(idx: np.ndarray):
    if idx.size and idx[-1] - idx[0] + 1 == idx.size and (idx.size == 1 or bool(np.all(np.diff(idx) == 1))):
        return ("range", int(idx[0]), int(idx[-1]) + 1)
    return ("index", hashlib.sha1(idx.tobytes()).hexdigest())


def load_examples(corpus_path: str, content_hash: str, reps, idx: np.ndarray) -> dict:
    """Examples ``idx`` (corpus indices, any order) of each representation.

    The run's cache serves it (:mod:`gramtile.pipeline.cache`): tile ranges already assembled (a
    tile row's examples are reused by every tile of that row; namespace ``ranges``, bounded by
    count and bytes) and the corpus shards they are cut from (``shards``).

    Returns
    -------
    dict representation name -> Batch with ``len(idx)`` examples in the order of ``idx``.
    """
    idx = np.asarray(idx, dtype=np.int64)
    key = (corpus_path, content_hash, tuple(reps), _range_key(idx))
    return current().load("ranges", key, lambda: _assemble(corpus_path, content_hash, reps, idx),
                          lambda out: sum(batch_nbytes(b) for b in out.values()))


def batch_nbytes(b: Batch) -> int:
    """Bytes of a batch's arrays (offsets, node columns, child CSR)."""
    arrays = [b.offsets, b.child_ptr, b.child_idx, *b.columns.values()]
    return int(sum(a.nbytes for a in arrays if a is not None))


def _assemble(corpus_path: str, content_hash: str, reps, idx: np.ndarray) -> dict:
    """The examples ``idx`` of each representation, cut from the corpus shards they lie in.

    Each shard's examples are taken from that shard and only those pieces are concatenated, so the
    memory and copying follow the examples asked for, not the shards they are spread over (a few
    thousand landmarks drawn from the whole corpus lie in nearly every shard: concatenating whole
    shards first cost O(n) per call). A whole shard asked for in order is the cached shard itself."""
    cs = _corpus(corpus_path, content_hash)
    rngs = _shard_ranges(cs)
    starts = np.asarray([a for a, _ in rngs], dtype=np.int64)
    sh = np.searchsorted(starts, idx, side="right") - 1
    order = np.argsort(sh, kind="stable")  # positions of idx grouped by shard, idx order inside
    bounds = np.flatnonzero(np.diff(sh[order])) + 1
    groups = np.split(order, bounds) if idx.size else [order]  # no examples: an empty piece of shard 0
    out = {}
    for rep in reps:
        parts = []
        for g in groups:
            s = int(sh[g[0]]) if g.size else 0
            a, b = rngs[s]
            bt = _shard(cs, corpus_path, content_hash, rep, a, b)
            local = idx[g] - a
            whole = local.size == bt.n and np.array_equal(local, np.arange(bt.n))
            parts.append(bt if whole else bt.take(local))
        joined = parts[0] if len(parts) == 1 else Batch.concat(parts)
        if np.array_equal(order, np.arange(order.size)):
            out[rep] = joined
        else:  # back to the order of idx: joined example k is idx[order[k]]
            inv = np.empty_like(order)
            inv[order] = np.arange(order.size)
            out[rep] = joined.take(inv)
    return out


def corpus_resources(corpus_path: str, content_hash: str, spec, reps) -> dict:
    """The corpus resources a spec's kernels name (soft-matching similarity matrices, domain
    spaces), **loaded** from the corpus store's ``resources/`` groups (:mod:`gramtile.pipeline.resources.build`)
    once per process. Tasks never build them: the driver did, before submitting tiles (the Gram
    store's creation calls :func:`~gramtile.pipeline.resources.build.ensure_for_spec`), or
    ``gramtile prepare --resources`` did. ``{}`` when the spec needs none."""

    if not any(resource_names(b) for b in spec.base_specs()):
        return {}
    def load():
        _corpus(corpus_path, content_hash)  # the store must still be the one the run expects
        return load_for_spec(corpus_path, spec)
    return current().load("resources", ("spec", corpus_path, content_hash, spec.spec_hash), load)


def compute_tile(job: TileJob, t: Tile, ridx: np.ndarray, cidx: np.ndarray) -> TileResult:
    """Compute tile ``t`` and write it into the store (see module docstring)."""

    t = Tile(int(t[0]), int(t[1]))
    t0, c0 = time.perf_counter(), time.thread_time()
    spec = _spec(job.spec_json)
    X = load_examples(job.corpus_path, job.corpus_hash, job.reps, ridx)
    res = corpus_resources(job.corpus_path, job.corpus_hash, spec, job.reps)
    if res:
        X = {**X, **res}  # a copy: the cached tile range stays resource-free
    on_diag = job.symmetric and t.i == t.j
    n = len(ridx)
    evals = n * (n + 1) // 2 if on_diag else n * len(cidx)
    if job.col_positions is not None and not on_diag:
        # a landmark store: pairwise, in the square store's pair orientation (engine forces it)
        K, dr, dc = oriented_block(job, spec, t, X, ridx, cidx, res)
        paths = None
    else:
        Y = None if on_diag else load_examples(job.corpus_path, job.corpus_hash, job.reps, cidx)
        done, paths = tile_products(job.corpus_path, spec, job.path, ridx, cidx, X, Y, on_diag,
                                     job.product_bases)
        K, dr, dc = evaluate_block(spec, X, Y, done=done)
    if job.dtype != "float64":  # rounded once, here: the checksum is of the values stored
        K, dr, dc = (np.asarray(a, dtype=job.dtype) for a in (K, dr, dc))
    write_tile(job.store_path, t, K, job.tile, job.symmetric, job.store_uid, job.run)
    return TileResult(t, np.asarray(dr, dtype=np.float64), np.asarray(dc, dtype=np.float64), evals,
                      time.perf_counter() - t0, f"{socket.gethostname()}:{os.getpid()}", time.thread_time() - c0,
                      tile_checksum(K), paths or None)


def oriented_block(job: TileJob, spec, t: Tile, X, ridx, cidx, res):
    """A landmark store's tile K(rows, L) with every pair evaluated in the orientation a symmetric
    store over the same rows uses, K(x_p, x_q) with row positions p <= q, so the landmark store
    equals that store's landmark columns bitwise (a kernel core's sums run in its arguments'
    order, so K(x, y) and K(y, x) may differ in the last bit).

    Landmarks after every row of the tile: K(X, Y); before every row: K(Y, X) transposed; the few
    inside the tile's row span get both, entry by entry (so the extra work is about
    tile / n of the tile's)."""
    rpos = t.i * job.tile + np.arange(len(ridx))
    cpos = np.asarray(job.col_positions[t.j * job.tile:t.j * job.tile + len(cidx)], dtype=np.int64)
    K = np.empty((len(ridx), len(cidx)), dtype=np.float64)
    dc = np.empty(len(cidx), dtype=np.float64)
    dr = None
    high, low = cpos >= rpos[-1], cpos < rpos[0]
    mid = ~(high | low)

    # the tile column's landmarks are assembled once (the range cache keeps them for every tile
    # row); the parts before, after and inside this tile's rows are taken from them, since those
    # parts differ from one tile row to the next and, assembled from the corpus, each would read
    # every shard the landmarks lie in
    landmarks = load_examples(job.corpus_path, job.corpus_hash, job.reps, cidx)

    def load(mask):
        if mask.all():
            return landmarks
        pos = np.flatnonzero(mask)
        return {rep: b.take(pos) for rep, b in landmarks.items()}

    if high.any():
        K[:, high], dr, dc[high] = evaluate_block(spec, X, load(high))
    if low.any():
        Kl, dc[low], dr_l = evaluate_block(spec, {**load(low), **res}, X)
        K[:, low] = Kl.T
        dr = dr_l if dr is None else dr
    if mid.any():
        Y = load(mid)
        Ka, dr_m, dc[mid] = evaluate_block(spec, X, Y)
        Kb = evaluate_block(spec, {**Y, **res}, X)[0]
        K[:, mid] = np.where(rpos[:, None] <= cpos[mid][None, :], Ka, Kb.T)
        dr = dr_m if dr is None else dr
    return K, dr, dc


def warm_up(job: TileJob, ridx: np.ndarray):
    """Evaluate the spec on the first (at most two) row examples, writing nothing.

    This loads the kernel's compiled cores (Numba's on-disk cache) and the first shard into this
    process. The engine runs it in a thread while the in-process cluster of a ``local`` profile
    with ``processes: false`` starts, so its worker threads find both ready instead of waiting
    for them. (The ``threads`` executor starts no cluster, so there is nothing to overlap.)
    Kernels with corpus resources are skipped (building those belongs to the first tile).
    """

    spec = _spec(job.spec_json)
    if any(resource_names(b) for b in spec.base_specs()) or len(ridx) == 0:
        return
    evaluate_block(spec, load_examples(job.corpus_path, job.corpus_hash, job.reps, np.asarray(ridx[:2])))
