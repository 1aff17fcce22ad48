"""The tiled Gram engine: plan the tiles not yet done, execute them, record each one.

:func:`run_gram` ties a corpus store, a kernel spec and a Gram store together:

1. open the corpus store (it must be complete: its content hash is part of the provenance);
2. take the Gram store's writer lock, then create the store or reopen it (a different kernel,
   corpus, selection or tile size raises :class:`StoreMismatchError`);
3. plan = all tiles of the grid minus those marked done;
4. execute the plan on the run's executor (:class:`~gramtile.pipeline.compute.runtime.Runtime`:
   ``sequential``, worker ``threads`` of this process, or Dask from a ``--cluster`` profile of
   cluster.yaml or a scheduler address); for every finished tile the
   driver writes its diagonal chunks and its done bit and appends a line to ``<store>/log.jsonl``
   (``{"event": "tile", "run": RUN_ID, "tile": [i, j], "evaluations", "seconds", "cpu_seconds",
   "time", "worker"}``, and ``"paths"`` for kernels with a feature map: the path each took, with
   its cost estimates, :mod:`~gramtile.pipeline.compute.product`);
5. log a ``"start"`` and an ``"end"`` line per run and print a summary.

The numbers in the store depend only on the spec, the corpus and the selections: executor,
cluster profile, worker count and tile size change speed, never a value beyond float64
round-off of the kernel's own pair evaluation order (tests: bitwise equal across executors).
"""
from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import as_spec, has_map, no_map_reason
from gramtile.pipeline.compute import product
from gramtile.pipeline.compute.compilation import announce, mark_compiled, pending
from gramtile.pipeline.compute.product import PATHS
from gramtile.pipeline.compute.product import ensure as ensure_features
from gramtile.pipeline.compute.resource_builds import ensure_for_spec
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.compute.tile_task import TileJob, compute_tile, store_token, warm_up
from gramtile.pipeline.progress import log, progress_bar
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.gram_format import check_dtype, selection_hash
from gramtile.pipeline.stores.gram_store import GramStore, store_lock
from gramtile.pipeline.stores.landmarks import landmark_columns, landmark_meta
from gramtile.pipeline.stores.storage import location
from gramtile.pipeline.stores.tiles import TileGrid, as_selection, check_tile, choose_tile, parse_selection, plan

if TYPE_CHECKING:
    from gramtile.kernels.spec import KernelSpec
    from gramtile.pipeline.compute.tile_task import TileResult
    from gramtile.pipeline.stores.storage import FsspecLocation, LocalLocation

    #: rows or columns of a Gram matrix: None (all), "all", "a:b", "@file.txt", a slice, a range or corpus indices
    Selection = str | slice | range | Sequence[int] | np.ndarray[Any, np.dtype[np.integer[Any]]] | None


def _open_corpus(corpus: str | os.PathLike[str] | CorpusStore) -> CorpusStore:

    cs = corpus if isinstance(corpus, CorpusStore) else CorpusStore.open(corpus)
    if not cs.complete or not cs.content_hash:
        raise StoreError(f"corpus store {cs.path} is incomplete (no content hash yet); finish it by rerunning "
                         f"`gramtile prepare` with the same arguments")
    return cs


def _selection(sel: Selection, n: int, name: str) -> np.ndarray[Any, np.dtype[np.int64]]:
    if isinstance(sel, str):
        return parse_selection(sel, n, f"--{name}")
    return as_selection(sel, n, name)


def _start_warm_up(job: TileJob, ridx: np.ndarray[Any, np.dtype[np.int64]]) -> threading.Thread:
    """Warm the kernel in a daemon thread while a Dask cluster starts (see
    :func:`~gramtile.pipeline.compute.tile_task.warm_up`); a failure there is left to the tiles to report."""


    def run() -> None:
        try:
            warm_up(job, ridx)
        except Exception:  # noqa: BLE001  (the first tile raises the same error with its context)
            pass

    t = threading.Thread(target=run, name="gramtile-warm-up", daemon=True)
    t.start()
    return t


def _check_out(out: LocalLocation | FsspecLocation) -> None:
    if out.exists() and not out.exists("zarr.json"):
        junk = [name for name in out.listdir() if name != "gramtile.lock"]
        if junk:
            raise StoreError(f"--out {out} exists and is not a Gram store (it holds {junk[:3]}); "
                             f"choose another --out")


#: Bytes of tile-sized arrays one tile task may hold, when a worker has more than four times that.
TILE_BUDGET = 256 * 2**20


def tile_budget(rt: Runtime) -> int:
    """The tile task's memory budget on ``rt``: :data:`TILE_BUDGET`, or a quarter of one worker's
    memory when that is less (a worker also holds its shard cache and the kernel's inputs)."""
    return int(min(TILE_BUDGET, rt.worker_memory_mb() * 1e6 / 4))


def run_gram(corpus: str | os.PathLike[str] | CorpusStore, spec: KernelSpec | dict[str, Any] | str,
             out: str | os.PathLike[str] | LocalLocation | FsspecLocation, rows: Selection = None,
             cols: Selection = None, tile: int | None = None, cluster: str | Runtime | None = "local",
             memory_budget: int | None = None, max_in_flight: int | None = None,
             on_tile: Callable[[TileResult], object] | None = None, path: str = "auto", dtype: str = "float64",
             landmarks: int | None = None, landmark_seed: int = 0) -> GramStore:
    """Compute (or finish) the Gram matrix K(rows, cols) of ``spec`` over a corpus store.

    Parameters
    ----------
    corpus : path, fsspec URL or CorpusStore
        A complete corpus store (at a URL, every worker must be able to read that URL).
    spec : KernelSpec, dict, or JSON string (``@file`` allowed)
    out : path or fsspec URL
        The Gram store (created, or resumed when it exists for the same inputs). With workers
        on other machines, both stores must be on storage they share (a URL or a shared mount).
    rows, cols : None, "all", "a:b", "@file.txt", slice, or array of corpus indices
        Row and column examples; ``cols=None`` means cols = rows, a symmetric Gram matrix of
        which only tiles i <= j are computed.
    tile : int, optional
        Tile edge; default: the existing store's, else :func:`~gramtile.pipeline.stores.tiles.choose_tile`.
    cluster : str or Runtime
        Where the tiles run (:class:`~gramtile.pipeline.compute.runtime.Runtime`): a profile of
        cluster.yaml (``"sequential"`` runs in-process without Dask), a scheduler address, or a
        Runtime a caller made (its cluster is reused across calls while it is open). Its
        ``progress`` shows a bar over tiles; the timing summary is logged either way.
    memory_budget : int, optional
        Bytes per task for :func:`~gramtile.pipeline.stores.tiles.choose_tile` (new stores only):
        default :data:`TILE_BUDGET`, or a quarter of one worker's memory when that is less (the
        profile's memory per worker process; :meth:`Runtime.worker_memory_mb`).
    max_in_flight : int, optional
        Tasks submitted at a time (Dask: default 2 x worker threads, at least 4; ``threads``:
        2 x threads).
    on_tile : callable, optional
        Called with each :class:`~gramtile.pipeline.compute.tile_task.TileResult` after it is recorded.
    path : {"auto", "pairwise", "product"}
        For base kernels with a finite feature map (:mod:`gramtile.pipeline.compute.product`):
        ``auto`` computes a tile as a matrix product of stored feature rows when that is
        estimated cheaper, the others force a path. Each tile's choice is in the log. A product
        block must fit the memory of one task (:meth:`Runtime.task_memory`;
        :func:`~gramtile.pipeline.compute.product.within_memory`): a new store's default tile is
        made small enough; a kernel whose block fits no task takes the pairwise path under
        ``auto`` and is refused (:class:`TaskTooLargeError`) under ``product``, before any tile.
    dtype : {"float64", "float32"}
        K's dtype in the store (tiles are computed in float64 and rounded once, in the task).
    landmarks : int, optional
        Compute only K(rows, L) for this many landmarks L drawn from the rows (stratified by
        the corpus labels when every row has one, else uniform; seeded by ``landmark_seed``;
        :mod:`gramtile.pipeline.stores.landmarks`): a rectangular landmark store. Not with ``cols``.
    landmark_seed : int

    Returns
    -------
    GramStore
    """

    spec = as_spec(spec)
    tile = check_tile(tile)
    if path not in PATHS:
        raise KernelSpecError(f"path {path!r}: use one of {list(PATHS)} (--path)")
    if path == "product":
        for b in spec.base_specs():
            if not has_map(b):
                raise KernelSpecError(f"--path product: kernel {b.to_json()} has no explicit feature map "
                                      f"({no_map_reason(b)}); use --path auto or pairwise")
    dtype = check_dtype(dtype)
    if landmarks is not None and cols is not None:
        raise StoreError("--landmarks chooses the columns itself (landmarks drawn from the rows); drop --cols")
    if landmarks is not None:
        # a landmark store evaluates every pair as the square store over its rows does, pair by
        # pair (tile_task.oriented_block), so that it equals that store's columns bitwise; a
        # matrix product sums in an order that depends on the tile's shape
        if path == "product":
            raise KernelSpecError("--path product does not go with --landmarks (a landmark store is computed "
                                  "pair by pair, to equal the square store's columns bitwise); use --path auto")
        path = "pairwise"
    rt = Runtime.of(cluster)  # a bad profile fails before any work
    cs = _open_corpus(corpus)
    reps = tuple(spec.reps())
    have = cs.representations
    for r in reps:
        if r not in have and cs.fields:
            raise KernelSpecError(f"kernel {spec.to_json()} reads representation {r!r}, but corpus store {cs.path} "
                                  f"holds examples of the fields {list(cs.fields)}, each field's representations "
                                  f"under <field>.<representation> ({sorted(have)}); set the kernel's 'rep' to the "
                                  f"one it compares, e.g. \"rep\": \"{cs.fields[0]}.{r.rpartition('.')[2]}\"")
        if r not in have:
            raise KernelSpecError(f"kernel {spec.to_json()} reads representation {r!r}, but corpus store {cs.path} "
                                  f"holds {sorted(have)}; set the kernel's 'rep' to one of those or prepare the "
                                  f"corpus with it (gramtile prepare --reps {','.join(sorted({*have, r}))}: "
                                  "tree, ptree and seq are derived from a dependency tree, ptree from a tree)")
    n = cs.n
    r_idx = _selection(rows, n, "rows")
    lm = None
    if landmarks is not None:
        if isinstance(landmarks, bool) or not isinstance(landmarks, (int, np.integer)) or landmarks < 1:
            raise StoreError(f"--landmarks {landmarks!r}: give the number of landmarks, an integer >= 1")
        c_idx, pos, strat = landmark_columns(r_idx, cs.labels, int(landmarks), int(landmark_seed))
        lm = landmark_meta(int(landmarks), int(landmark_seed), strat, pos)
        symmetric = False  # even when every row is a landmark: the store is K(rows, L), marked as such
    else:
        symmetric = cols is None or (not isinstance(cols, str) and cols is rows)
        c_idx = r_idx if symmetric else _selection(cols, n, "cols")
        if not symmetric and np.array_equal(r_idx, c_idx):
            symmetric, c_idx = True, r_idx
    out = location(out)
    _check_out(out)
    # provenance and tasks name the corpus by its absolute path, or by its URL as given
    corpus_at = location(cs.path).canonical()
    if not rt.in_process:
        unseen = [str(loc) for loc in (location(cs.path), out) if loc.process_local]
        if unseen:
            raise StoreError(f"{unseen[0]} lives in this process's memory, which the worker processes of cluster "
                             f"profile {rt.name!r} cannot see. Fix: use --cluster threads or sequential, or put the "
                             f"stores on storage the workers share (a path, file:// or s3:// URL)")
    out.makedirs()
    ids = None
    if cs.n <= 200_000:
        all_ids = cs.ids
        ids = ([all_ids[i] for i in r_idx], [all_ids[i] for i in c_idx])

    with store_lock(out):
        # the corpus resources the kernel reads (similarity matrices, domain spaces): built now,
        # in the driver, if the corpus store lacks them; their content hashes join the provenance
        resources = ensure_for_spec(corpus_at, spec)
        feature_sets = ensure_features(corpus_at, spec, path)  # explicit features: built here too
        default_tile = choose_tile(len(r_idx), len(c_idx), memory_budget or tile_budget(rt), len(spec.base_specs()))
        task_memory = rt.task_memory(product.MEMORY_SHARE) if feature_sets else None
        if task_memory is not None:  # the product path's blocks sized from one task's memory too
            default_tile = product.fitting_tile(corpus_at, spec, feature_sets, default_tile, task_memory)
        store = GramStore.create_or_open(
            out, spec=spec, corpus_hash=cs.content_hash, corpus_path=corpus_at, resources=resources,
            rows=r_idx, cols=c_idx, tile=tile, symmetric=symmetric,
            row_ids=None if ids is None else ids[0], col_ids=None if ids is None else ids[1],
            dtype=dtype, landmarks=lm, default_tile=default_tile)
        if task_memory is not None:  # refused (product) or left to the pairwise path (auto) before any tile
            feature_sets = product.within_memory(corpus_at, spec, feature_sets, store.tile, len(r_idx), len(c_idx),
                                                 task_memory, path)
        grid = TileGrid(r_idx, c_idx, store.tile, symmetric=symmetric)
        done = store.done_mask()
        todo = plan(grid, done)
        total_tiles = len(grid.tiles())
        n_done_before = total_tiles - len(todo)
        log.debug(f"gramtile gram: corpus {corpus_at} ({cs.n} examples), store {out.canonical()}; K {len(r_idx)} x "
                  f"{len(c_idx)}{' symmetric' if symmetric else ''} {store.dtype}, tile {store.tile} (default for "
                  f"this memory: {default_tile}); {len(todo)} of {total_tiles} tiles to compute; path {path}"
                  + (f", explicit features {', '.join(h[:12] for h in feature_sets)}" if feature_sets else "")
                  + (f", resources {', '.join(str(k) for k in resources)}" if resources else "")
                  + f"; cluster {rt.name!r} ({rt.kind})")
        run_id = uuid.uuid4().hex[:12]
        job = TileJob(corpus_path=corpus_at, corpus_hash=cs.content_hash,
                      spec_json=spec.to_json(), spec_hash=spec.spec_hash, reps=reps,
                      store_path=out.canonical(), tile=store.tile, symmetric=symmetric,
                      token=store_token(cs.content_hash, selection_hash(r_idx), selection_hash(c_idx), store.tile),
                      store_uid=store.meta.get("uid"), run=run_id, path=path if feature_sets else "pairwise",
                      dtype=store.dtype, col_positions=None if lm is None else tuple(lm["row_positions"]),
                      product_bases=tuple(feature_sets))
        store.log({"event": "start", "run": run_id, "time": time.time(), "tiles_todo": len(todo),
                   "tiles_total": total_tiles, "executor": rt.kind, "cluster": rt.name, "path": path,
                   "feature_sets": {h[:16]: {"n_features": m["n_features"], "build_seconds": m["build_seconds"]}
                                    for h, m in feature_sets.items()}})
        store.touch(run=run_id)  # fences the tasks of any earlier run (write_tile checks it)
        todo_evals = sum(grid.evaluations(t) for t in todo)
        bar = None
        progress = rt.progress
        if progress:
            bar = progress_bar(len(todo), "tile", f"gram {spec.kind}", dynamic_ncols=True)
        state = {"evals": 0, "t0": time.perf_counter(), "tiles": 0}

        def record(res: TileResult) -> None:
            store.mark_done(res.tile, res.diag_r, res.diag_c, res.crc)
            line = {"event": "tile", "run": run_id, "tile": [res.tile.i, res.tile.j],
                    "evaluations": int(res.evaluations), "seconds": round(res.seconds, 6),
                    "cpu_seconds": round(res.cpu_seconds, 6), "time": time.time(), "worker": res.worker}
            if res.paths:
                line["paths"] = res.paths  # product or pairwise, per base kernel with a feature map
            store.log(line)
            state["evals"] += res.evaluations
            state["tiles"] += 1
            if bar is not None:
                el = max(time.perf_counter() - state["t0"], 1e-9)
                bar.set_postfix_str(f"{state['evals'] / el:,.0f} evals/s, {state['evals']:,}/{todo_evals:,} evals")
                bar.update(1)
            if on_tile is not None:
                on_tile(res)

        # a kernel whose Numba cores are not in the cache yet is compiled once here, in the driver,
        # before worker processes get tiles: otherwise every worker compiles the same cores at the
        # same time on the same cores of the machine, and all of them then load the driver's cache
        cold = bool(todo) and bool(pending(spec))
        if todo and progress:
            announce(spec)  # a first run compiles the kernel's Numba cores: say so, once
        stopped = None
        try:
            if todo:
                # the kernel's cores compile in a thread while a cluster starts; worker processes wait
                # for it (they then load the cache), threads of this process do not
                warming = _start_warm_up(job, grid.row_index(todo[0].i)) \
                    if rt.kind == "dask" and (rt.in_process or cold) else None
                with rt.session() as ex:
                    if warming is not None and not rt.in_process:
                        warming.join()
                    tasks = ((t, (job, t, grid.row_index(t.i), grid.col_index(t.j))) for t in todo)
                    done_now = lambda: f"{n_done_before + state['tiles']}/{total_tiles} tiles done"  # noqa: E731
                    for _, res in ex.imap(compute_tile, tasks, window=max_in_flight, key=job.key, retries=3,
                                          status=done_now, what="tile",
                                          hint="give the workers more memory or use a smaller --tile"):
                        record(res)
            if state["tiles"]:
                mark_compiled(spec)
        except BaseException as e:
            stopped = getattr(e, "signal_name", "SIGINT") if isinstance(e, KeyboardInterrupt) else type(e).__name__
            raise
        finally:
            if bar is not None:
                bar.close()
            el = time.perf_counter() - state["t0"]
            d = store.done_mask()
            n_done = sum(bool(d[t.i, t.j]) for t in grid.tiles())
            store.log({"event": "end", "run": run_id, "time": time.time(), "tiles_computed": state["tiles"],
                       "evaluations": state["evals"], "seconds": round(el, 3), "tiles_done": n_done,
                       "tiles_total": total_tiles, **({"stopped": stopped} if stopped else {})})
            store.touch()
        # the timing summary is logged with or without the progress bar (`gramtile --quiet` hides it)
        rate = state["evals"] / el if el > 0 else 0.0
        log.info(f"gramtile gram: {state['tiles']} tile(s) computed this run ({state['evals']:,} evaluations, "
                 f"{el:.1f} s, {rate:,.0f} evals/s); {n_done}/{total_tiles} tiles done; "
                 f"K {grid.n_rows} x {grid.n_cols}, tile {store.tile}, store {out}")
    return GramStore.open(out)
