"""The Gram store: one (possibly partial) Gram matrix in a Zarr v3 group, its provenance, its
writer lock and the worker-side tile write; the on-disk layout and its rules are
:mod:`gramtile.pipeline.stores.gram_format`.
"""
from __future__ import annotations

import datetime as _dt
import json
import uuid
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path

import numpy as np
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec

from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.cache import current
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError, StoreMismatchError
from gramtile.pipeline.stores.gram_format import (
    DIMS,
    DONE_CHUNK,
    FORMAT_VERSION,
    LEGACY_LOG_NAME,
    LOCK_NAME,
    LOG_NAME,
    TILE_CRC,
    check_dtype,
    selection_hash,
    tile_checksum,
)
from gramtile.pipeline.stores.gram_view import GramView
from gramtile.pipeline.stores.integrity import attr_intact, sealed
from gramtile.pipeline.stores.storage import check_metadata, jsonl_log, location, read_jsonl_log
from gramtile.pipeline.stores.tiles import Tile, TileGrid


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _crc_array(group, name, shape, chunks, dtype, fill):
    return group.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill,
                              serializer=BytesCodec(), compressors=[Crc32cCodec()], filters=None,
                              overwrite=True, dimension_names=DIMS[name])


def _new_done(group, gshape):
    """A new done mask with every chunk written (all False). Zarr leaves a chunk equal to the fill
    value unwritten, so a mask whose first tile was being marked when the process died would have
    no chunk file beside a manifest that holds the tile: indistinguishable from a lost file, which
    :func:`~gramtile.pipeline.stores.gram_verify.verify` reports. Written out, a missing chunk file always means a lost one."""
    done = _crc_array(group, "done", gshape, (min(gshape[0], DONE_CHUNK), min(gshape[1], DONE_CHUNK)), "bool",
                      False).with_config({"write_empty_chunks": True})
    done[...] = np.zeros(gshape, dtype=bool)



# ---- lock ----------------------------------------------------------------------------------

@contextmanager
def store_lock(path):
    """Hold the Gram store's exclusive writer lock for the duration of the block.

    Raises
    ------
    StoreLockedError
        When another live process holds it (see :mod:`gramtile.pipeline.stores.locks`).
    """
    loc = location(path)
    with loc.lock(LOCK_NAME, f"Gram store {loc}"):
        yield


# ---- the store -----------------------------------------------------------------------------

class GramStore:
    """A Gram store on disk or at an fsspec URL (its layout: :mod:`gramtile.pipeline.stores.gram_format`).

    Open with :meth:`open` or :meth:`create_or_open`. ``path`` is a :class:`Path` for a local
    store and the URL string for a store at a URL; ``loc`` is its storage location.
    """

    _ARRAYS = ("row_index", "col_index", "K", "diag_rows", "diag_cols", "done")

    def __init__(self, path, group):
        self.loc = location(path)
        self.path = self.loc.path
        self.group = group
        self.meta = dict(group.attrs["gramtile"])
        self.K = self.diag_rows = self.diag_cols = self.done = None
        if not self._missing_arrays():
            self._bind()

    def _missing_arrays(self) -> list:
        # existence by file, not by listing the group: listing warns about log.jsonl and the lock
        return [name for name in self._ARRAYS if not self.loc.exists(f"{name}/zarr.json")]

    def _bind(self):
        g = self.group
        self.K, self.diag_rows, self.diag_cols = g["K"], g["diag_rows"], g["diag_cols"]
        # every chunk of the done mask stays a file, all False included (see _new_done)
        self.done = g["done"].with_config({"write_empty_chunks": True})
        # stores made before the manifest existed have none: their tiles are checked by crc32c only
        self.tile_crc = g[TILE_CRC] if self.loc.exists(f"{TILE_CRC}/zarr.json") else None

    def _new_manifest(self, gshape):
        _crc_array(self.group, TILE_CRC, gshape, (min(gshape[0], DONE_CHUNK), min(gshape[1], DONE_CHUNK)),
                   "uint32", 0)
        self.__dict__.pop("_crc_mem", None)

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, path, mode: str = "r", check: bool = True) -> GramStore:
        """Open an existing store (``mode`` "r" or "r+") at a path or URL.

        ``check`` (the default) refuses attributes that do not match their recorded sha256 and,
        for reading, a landmark store whose columns are not its rows at the recorded positions
        (:class:`StoreCorruptError`); :func:`~gramtile.pipeline.stores.gram_verify.verify` opens without it and reports them."""
        loc = location(path)
        p = loc.path
        check_metadata(loc, "Gram store", f"its description is lost; delete {p} and rerun the `gramtile gram` "
                                          "command that made it (the tiles cannot be trusted without it)")
        try:
            g = zarr.open_group(loc.zarr_store(), mode=mode)
            if "gramtile" not in g.attrs:
                raise KeyError("gramtile")
            st = cls(loc, g)
        except (FileNotFoundError, KeyError, zarr.errors.BaseZarrError):
            if loc.exists("zarr.json"):  # a Zarr group of something else (e.g. a corpus store)
                raise StoreError(f"{p} is a Zarr group but not a gramtile Gram store (no 'gramtile' attributes). Fix: "
                                 "point at a store made by `gramtile gram`, or give `gramtile gram` another --out") \
                    from None
            raise StoreError(f"{p} is not a gramtile Gram store (no 'gramtile' attributes); "
                             f"create it with `gramtile gram --out {p}`") from None
        if st.K is None and mode == "r":
            raise StoreError(f"Gram store {p} was not fully created (missing {st._missing_arrays()}); rerun the "
                             f"`gramtile gram` command that created it")
        if check and attr_intact(st.meta) is False:
            raise StoreCorruptError(f"the attributes of Gram store {p} ({p}/zarr.json: kernel, sizes, ids, landmark "
                                    f"positions) do not match their recorded sha256 (edited or damaged). Fix: they "
                                    f"cannot be repaired by recomputing tiles; recompute the store into a new --out")
        if check and mode == "r" and st.K is not None and st.landmarks is not None:
            problem = st.landmark_problem()
            if problem:
                raise StoreCorruptError(problem)
        return st

    @classmethod
    def create_or_open(cls, path, *, spec, corpus_hash: str, corpus_path: str, rows: np.ndarray,
                       cols: np.ndarray, tile: int | None, symmetric: bool, row_ids=None, col_ids=None,
                       default_tile: int = 100, resources: dict | None = None, dtype: str = "float64",
                       landmarks: dict | None = None) -> GramStore:
        """Create a store, or reopen one created for exactly this kernel, corpus and selection.

        ``resources`` maps the corpus-resource groups the kernel reads to their content hashes
        (:func:`gramtile.pipeline.stores.resource_builds.ensure_for_spec`, called by the engine
        before the store is opened); they join the provenance, so a store reopened after a
        resource changed is a mismatch. ``dtype`` (``"float64"`` or ``"float32"``) is K's and the
        diagonals'; ``landmarks`` (:func:`gramtile.pipeline.stores.landmarks.landmark_meta`) marks
        a landmark store. Both are checked on reopening.

        Raises
        ------
        StoreMismatchError
            The existing store holds another kernel, corpus, selection or tile size.
        """
        loc = location(path)
        want = {
            "kernel_hash": spec.spec_hash,
            "corpus_hash": corpus_hash,
            "rows_sha256": selection_hash(rows),
            "cols_sha256": selection_hash(cols),
            "symmetric": bool(symmetric),
        }
        if resources:
            want["resources"] = resources
        dtype = check_dtype(dtype)
        if dtype != "float64":
            want["dtype"] = dtype  # absent means float64: stores made before dtypes existed
        if landmarks is not None:
            want["landmarks"] = landmarks
        if loc.exists("zarr.json"):
            st = cls.open(loc, mode="r+")
            st._check_same(want, tile)
            st._ensure_arrays(rows, cols)
            return st
        t = int(tile or default_tile)
        meta = {
            "format": FORMAT_VERSION,
            "gramtile_version": version("gramtile"),
            "kernel": spec.to_dict(),
            "kernel_json": spec.to_json(),
            **want,
            "corpus_path": str(corpus_path),
            "n_rows": int(rows.shape[0]),
            "n_cols": int(cols.shape[0]),
            "row_ids": None if row_ids is None else [str(x) for x in row_ids],
            "col_ids": None if (col_ids is None or symmetric) else [str(x) for x in col_ids],
            "tile": t,
            "mirror": "symmetric stores write tiles i <= j only; tile (j, i) is read as tile (i, j) transposed",
            "uid": uuid.uuid4().hex,
            "created": _now(),
            "updated": _now(),
        }
        # metadata first: attributes, then the arrays (their creation is idempotent on resume)
        # create_group keeps files already in the directory (the lock taken before creation)
        st = cls(loc, zarr.create_group(loc.zarr_store(), attributes={"gramtile": sealed(meta)}))
        st._ensure_arrays(rows, cols)
        return st

    def _ensure_arrays(self, rows, cols):
        g, t = self.group, self.tile
        nr, nc = self.meta["n_rows"], self.meta["n_cols"]
        gshape = (-(-nr // t), -(-nc // t))
        have = set(self._ARRAYS) - set(self._missing_arrays())
        if "done" in have and not {"K", "diag_rows", "diag_cols"} <= have:
            # recreating K or a diagonal drops every tile stored in it: their done bits (and checksums)
            # must go too, or the store would claim tiles whose chunks are gone (all NaN)
            have.discard("done")  # recreated below, with the manifest
            self.log({"event": "reset", "time": _now(),
                      "why": f"arrays {sorted({'K', 'diag_rows', 'diag_cols'} - have)} were missing and are "
                             f"recreated empty: every tile is recomputed"})
        if "row_index" not in have:
            g.create_array("row_index", data=np.asarray(rows, dtype=np.int64), chunks=(max(1, nr),), overwrite=True,
                           dimension_names=DIMS["row_index"])
        if "col_index" not in have:
            g.create_array("col_index", data=np.asarray(cols, dtype=np.int64), chunks=(max(1, nc),), overwrite=True,
                           dimension_names=DIMS["col_index"])
        if "K" not in have:
            _crc_array(g, "K", (nr, nc), (t, t), self.dtype, np.nan)
        if "diag_rows" not in have:
            _crc_array(g, "diag_rows", (nr,), (t,), self.dtype, np.nan)
        if "diag_cols" not in have:
            _crc_array(g, "diag_cols", (nc,), (t,), self.dtype, np.nan)
        if "done" not in have:
            _new_done(g, gshape)
        if "done" not in have or not self.loc.exists(f"{TILE_CRC}/zarr.json"):
            self._new_manifest(gshape)
        self._bind()

    def _check_same(self, want: dict, tile):
        m = self.meta
        what = {"kernel_hash": "kernel spec", "corpus_hash": "corpus content",
                "rows_sha256": "row selection", "cols_sha256": "column selection", "symmetric": "symmetric flag",
                "resources": "corpus resource content (similarity matrix / domain space)", "dtype": "dtype",
                "landmarks": "landmark choice (--landmarks / --landmark-seed)"}
        for key, label in what.items():
            if key == "dtype" and check_dtype(m.get(key)) != check_dtype(want.get(key)):
                raise StoreMismatchError(
                    f"Gram store {self.path} holds {check_dtype(m.get(key))} values, this run asks for "
                    f"{check_dtype(want.get(key))}: rerun with --dtype {check_dtype(m.get(key))} to resume it, or use "
                    f"a new --out")
            if key != "dtype" and m.get(key) != want.get(key):
                raise StoreMismatchError(
                    f"Gram store {self.path} was created for another {label}: stored {key} {m.get(key)!r}, "
                    f"this run has {want.get(key)!r}. Use a new --out for this run, or delete {self.path} "
                    f"to recompute it from scratch.")
        if tile is not None and int(tile) != self.tile:
            raise StoreMismatchError(
                f"Gram store {self.path} was created with tile size {self.tile}, this run asks for {tile}; "
                f"tiles are the store's chunks and cannot change: omit --tile (or pass --tile {self.tile}) to "
                f"resume, or use a new --out")

    # -- provenance ------------------------------------------------------------------------
    @property
    def tile(self) -> int:
        return int(self.meta["tile"])

    @property
    def symmetric(self) -> bool:
        return bool(self.meta["symmetric"])

    @property
    def dtype(self) -> str:
        """``"float64"`` or ``"float32"``: the dtype of K and the diagonals."""
        return check_dtype(self.meta.get("dtype"))

    @property
    def landmarks(self) -> dict | None:
        """The landmark record of a landmark store (``gramtile gram --landmarks``), else None."""
        return self.meta.get("landmarks")

    @property
    def kernel_hash(self) -> str:
        return self.meta["kernel_hash"]

    @property
    def corpus_hash(self) -> str:
        return self.meta["corpus_hash"]

    @property
    def shape(self) -> tuple:
        return (int(self.meta["n_rows"]), int(self.meta["n_cols"]))

    @property
    def spec(self):

        return spec_from_dict(self.meta["kernel"])

    def rows(self) -> np.ndarray:
        """Corpus indices of the row examples, checked once per open against the row selection's
        sha256 recorded at creation (a read-only array).

        Raises
        ------
        StoreCorruptError
            ``row_index`` cannot be read or does not match (damaged or edited).
        """
        return self._index("row_index", "rows_sha256", "row")

    def cols(self) -> np.ndarray:
        """Corpus indices of the column examples, checked as :meth:`rows`."""
        return self._index("col_index", "cols_sha256", "column")

    def _index(self, name: str, key: str, what: str) -> np.ndarray:
        got = self.__dict__.get(f"_{name}")
        if got is not None:
            return got
        try:
            got = np.asarray(self.group[name][:], dtype=np.int64)
        except Exception as e:  # noqa: BLE001  (a failed checksum, a lost chunk file, a damaged zarr.json)
            raise StoreCorruptError(f"{self.path}/{name} cannot be read ({type(e).__name__}: {e}). Fix: the {what} "
                                    f"selection cannot be recomputed from the tiles; recompute the store into a new "
                                    f"--out") from None
        if selection_hash(got) != self.meta.get(key):
            raise StoreCorruptError(f"{self.path}/{name} does not match the {what} selection sha256 recorded when the "
                                    f"store was created (damaged or edited). Fix: recompute the store into a new --out")
        got.flags.writeable = False
        self.__dict__[f"_{name}"] = got
        return got

    def landmark_problem(self) -> str | None:
        """For a landmark store: what breaks the identity col_index = row_index[row_positions]
        (the landmarks are the rows at their recorded positions), else None."""
        lm = self.landmarks
        if lm is None:
            return None
        try:
            pos = np.asarray(lm.get("row_positions"), dtype=np.int64)
            rows, cols = self.rows(), self.cols()
            ok = (pos.ndim == 1 and pos.size == cols.size and (pos.size == 0 or (pos.min() >= 0 and
                  pos.max() < rows.size)) and np.array_equal(rows[pos], cols) and int(lm.get("taken", -1)) == pos.size)
        except StoreCorruptError as e:
            return str(e)
        except (TypeError, ValueError):
            ok = False
        if ok:
            return None
        return (f"landmark store {self.path}: its landmark columns (col_index) are not the rows at the positions its "
                f"attributes record (row_positions); the store was edited or damaged. Fix: recompute it into a new "
                f"--out")

    def grid(self) -> TileGrid:
        r = self.rows()
        c = r if self.symmetric else self.cols()
        return TileGrid(r, c, self.tile, symmetric=self.symmetric)

    def touch(self, **extra):
        """Update the ``updated`` time (and any extra provenance) in the attributes."""
        self.meta.update(extra)
        self.meta["updated"] = _now()
        self.meta = sealed(self.meta)  # the attributes bound to themselves (a store made before gets it here)
        self.group.attrs["gramtile"] = self.meta

    # -- tiles -----------------------------------------------------------------------------
    def done_mask(self) -> np.ndarray:
        """bool array (n_tile_rows, n_tile_cols).

        Raises
        ------
        StoreCorruptError
            The done mask fails its checksum or cannot be decoded.
        """
        try:
            return np.asarray(self.done[...], dtype=bool)
        except Exception as e:  # a failed crc32c check surfaces as a codec error
            raise StoreCorruptError(
                f"the done mask of Gram store {self.path} is damaged ({type(e).__name__}: {e}). Fix: run "
                f"`gramtile verify --repair {self.path}`, which rebuilds it from the stored tiles") from None

    def tile_intact(self, t: Tile, crc: int = 0) -> bool:
        """True when tile ``t``'s K chunk and both diagonal chunks read back finite (checksums pass)
        and, when ``crc`` (its manifest entry) is given, the chunk's values have that checksum."""
        r0, r1, c0, c1 = self.spans(t)
        try:
            v = np.asarray(self.K[r0:r1, c0:c1])
            return bool(np.isfinite(v).all()
                        and np.isfinite(np.asarray(self.diag_rows[r0:r1])).all()
                        and np.isfinite(np.asarray(self.diag_cols[c0:c1])).all()
                        and (not crc or tile_checksum(v) == crc))
        except Exception:  # noqa: BLE001  (checksum mismatch, truncated chunk, ...)
            return False

    def rebuild_done(self) -> list:
        """Recreate a damaged done mask from the stored tiles: a planned tile is done when its chunk
        and its diagonal chunks are intact (:meth:`tile_intact`). Call under the store's lock.

        Returns
        -------
        list of Tile kept as done (the others are recomputed by the next run).
        """
        nr, nc, t = self.meta["n_rows"], self.meta["n_cols"], self.tile
        gshape = (-(-nr // t), -(-nc // t))
        _new_done(self.group, gshape)
        self._bind()
        try:
            manifest = None if self.tile_crc is None else np.asarray(self.tile_crc[...])
        except Exception:  # noqa: BLE001  (the manifest itself is damaged: start it afresh)
            self._new_manifest(gshape)
            self._bind()
            manifest = None
        kept = [tl for tl in self.grid().tiles()
                if self.tile_intact(tl, 0 if manifest is None else int(manifest[tl.i, tl.j]))]
        mask = np.zeros(gshape, dtype=bool)
        for tl in kept:
            mask[tl.i, tl.j] = True
            if self.symmetric:
                mask[tl.j, tl.i] = True
        self.done[...] = mask
        self.log({"event": "rebuild_done", "time": _now(), "tiles_kept": len(kept)})
        return kept

    def tiles_done(self) -> tuple:
        """(tiles done, tiles to compute) counting only planned tiles (i <= j when symmetric)."""
        g = self.grid()
        d = self.done_mask()
        planned = g.tiles()
        return sum(bool(d[t.i, t.j]) for t in planned), len(planned)

    @property
    def complete(self) -> bool:
        done, total = self.tiles_done()
        return done == total

    def spans(self, t: Tile) -> tuple:
        """(r0, r1, c0, c1) array positions of tile ``t``."""
        nr, nc = self.shape
        s = self.tile
        return t.i * s, min((t.i + 1) * s, nr), t.j * s, min((t.j + 1) * s, nc)

    def mark_done(self, t: Tile, diag_r: np.ndarray, diag_c: np.ndarray, crc: int = 0):
        """Driver side: write the tile's diagonal chunks and its checksum (``crc``, from
        :func:`tile_checksum`, into the ``tile_crc`` manifest), then its done bit (and the mirror's).

        Each diagonal chunk is written once per store object (its values do not depend on the
        tile that computed them); the done bits go out as one write per touched ``done`` chunk.
        """
        r0, r1, c0, c1 = self.spans(t)
        if not hasattr(self, "_diag_written"):
            self._diag_written, self._done_mem = set(), self.done_mask()
        todo = [("r", t.i, r0, r1, diag_r), ("c", t.j, c0, c1, diag_c)]
        if self.symmetric:
            # the column examples are the row examples: keep both diagonals complete
            todo += [("r", t.j, c0, c1, diag_c), ("c", t.i, r0, r1, diag_r)]
        for which, k, a, b, vals in todo:
            if (which, k) not in self._diag_written:
                (self.diag_rows if which == "r" else self.diag_cols)[a:b] = vals
                self._diag_written.add((which, k))
        cells = [(t.i, t.j)] + ([(t.j, t.i)] if self.symmetric and t.i != t.j else [])
        if crc and self.tile_crc is not None:
            if "_crc_mem" not in self.__dict__:
                self._crc_mem = np.asarray(self.tile_crc[...], dtype=np.uint32)
            self._crc_mem[t.i, t.j] = crc
            ci, cj = self.tile_crc.chunks
            bi, bj = t.i // ci, t.j // cj
            sl = (slice(bi * ci, (bi + 1) * ci), slice(bj * cj, (bj + 1) * cj))
            self.tile_crc[sl] = self._crc_mem[sl]
        for i, j in cells:
            self._done_mem[i, j] = True
        ci, cj = self.done.chunks
        for bi, bj in {(i // ci, j // cj) for i, j in cells}:
            sl = (slice(bi * ci, (bi + 1) * ci), slice(bj * cj, (bj + 1) * cj))
            self.done[sl] = self._done_mem[sl]

    def clear_done(self, tiles):
        """Unset the done bits of ``tiles`` (and their mirrors in a symmetric store)."""
        for t in tiles:
            self.done[t.i, t.j] = False
            if self.symmetric:
                self.done[t.j, t.i] = False
        self.__dict__.pop("_done_mem", None)
        self.__dict__.pop("_diag_written", None)
        self.__dict__.pop("_crc_mem", None)

    def chunk_path(self, t: Tile) -> Path:
        """File holding K's chunk for tile ``t`` (local stores, default chunk key encoding)."""
        return self.path / self.chunk_key(t)

    @staticmethod
    def chunk_key(t: Tile) -> str:
        """Key of K's chunk for tile ``t`` inside the store (default chunk key encoding)."""
        return f"K/c/{t.i}/{t.j}"

    def log(self, record: dict):
        """Record one JSON line: appended to ``log/records.jsonl`` (one write call per line), or on
        an object store into this run's object ``log/records/<run>.jsonl``
        (:mod:`gramtile.pipeline.stores.storage`). The first record creates the empty ``log``
        array whose directory holds them (so Zarr sees an array there, not a stray object)."""
        w = self.__dict__.get("_log_writer")
        if w is None:
            if not self.loc.exists("log/zarr.json"):
                self.group.create_array("log", shape=(0,), dtype="uint8", dimension_names=DIMS["log"],
                                        attributes={"gramtile": "run log: JSON lines in log/records.jsonl "
                                                                "(GramStore.read_log)"}, overwrite=True)
            w = self._log_writer = jsonl_log(self.loc, LOG_NAME)
        w.write(record)

    def read_log(self) -> list:
        """The records of the run log, oldest first: a store's old top-level ``log.jsonl`` (and
        its per-run objects) first, then ``log/records.jsonl`` (and its per-run objects).

        A line torn by a driver killed mid-write does not parse and is skipped (the next run
        starts on a fresh line): the log is a record of work, the done mask is the truth.
        """
        w = self.__dict__.get("_log_writer")
        if w is not None:
            w.flush()
        # (the old per-run objects were log/<run>.jsonl, beside today's log/records.jsonl)
        return read_jsonl_log(self.loc, LEGACY_LOG_NAME, exclude=("records.jsonl",)) + read_jsonl_log(self.loc, LOG_NAME)

    def ids(self, which: str = "row") -> list:
        """Example ids of the rows (``which="row"``) or columns, as plain strings.

        Taken from the provenance, else from the corpus store (ids of the selected examples)."""
        key = "row_ids" if which == "row" or self.symmetric else "col_ids"
        ids = self.meta.get(key)
        if ids is not None:
            return [str(x) for x in ids]
        sel = self.rows() if which == "row" else self.cols()
        all_ids = self.corpus_store().ids
        return [str(all_ids[i]) for i in sel]

    def corpus_store(self, fix: str = "pass the labels yourself") -> CorpusStore:
        """The corpus store named in the provenance, checked to hold the content K was computed from.

        ``fix`` is the alternative the messages offer (the CLI's is ``pass --labels FILE``).

        Raises
        ------
        StoreError, StoreMismatchError
        """
        path = self.meta.get("corpus_path")
        if not path:
            raise StoreError(f"{self.path} names no corpus store in its provenance; {fix}")
        try:
            cs = CorpusStore.open(path)
        except StoreError as e:
            raise StoreError(f"the corpus store {path} named by {self.path} cannot be opened ({e}); restore the "
                             f"corpus store at that path, or {fix}") from None
        if cs.content_hash != self.corpus_hash:
            raise StoreMismatchError(f"corpus store {path} has content hash {cs.content_hash}, but {self.path} was "
                                     f"computed from {self.corpus_hash}; restore the original corpus store, or {fix}")
        return cs

    def labels(self, which: str = "row", fix: str = "pass the labels yourself") -> list:
        """Labels of the row (or column) examples as read from the corpus store (plain Python
        values: a string label is a ``str``, never its JSON quoting); ``fix`` as in :meth:`corpus_store`."""
        sel = self.rows() if which == "row" or self.symmetric else self.cols()
        labels = self.corpus_store(fix).labels
        return [labels[i] for i in sel]

    def view(self) -> GramView:
        return GramView(self)

    def summary(self) -> dict:
        done, total = self.tiles_done()
        m = self.meta
        return {"path": str(self.path), "tiles_done": done, "tiles_total": total, "complete": done == total,
                "shape": list(self.shape), "tile": self.tile, "symmetric": self.symmetric,
                "dtype": self.dtype, "landmarks": None if self.landmarks is None else
                {k: v for k, v in self.landmarks.items() if k != "row_positions"},
                "kernel": m["kernel_json"], "kernel_hash": m["kernel_hash"], "corpus_path": m["corpus_path"],
                "corpus_hash": m["corpus_hash"], "gramtile_version": m["gramtile_version"],
                "created": m["created"], "updated": m["updated"]}


def check_owner(store_path, uid: str | None, run: str | None, t=None) -> None:
    """Raise StoreMismatchError unless the store at ``store_path`` has identity ``uid`` and current
    run ``run`` (either None: not checked), reading its attributes from storage, not a cache."""
    loc = location(store_path)
    what = f"tile {tuple(t)} of " if t is not None else ""
    try:
        meta = json.loads(loc.read_bytes("zarr.json"))["attributes"]["gramtile"]
    except (OSError, ValueError, KeyError, TypeError):
        raise StoreMismatchError(f"{what}a run of Gram store {loc}: the store there is gone or unreadable; "
                                 f"nothing written. Fix: rerun `gramtile gram` to resume it") from None
    if uid is not None and meta.get("uid") != uid:
        raise StoreMismatchError(
            f"{what}a run of Gram store {loc} (uid {uid[:8]}): the store at that path is now another store "
            f"(uid {str(meta.get('uid'))[:8]}), recreated since the run started; nothing written. This task "
            f"belonged to an interrupted run and is discarded")
    if run is not None and meta.get("run") != run:
        raise StoreMismatchError(
            f"{what}run {run} of Gram store {loc}: run {meta.get('run')} has taken the store over since; "
            f"nothing written. This task belonged to an interrupted run and is discarded")


def write_tile(store_path, t: Tile, block: np.ndarray, tile: int, symmetric: bool, uid: str | None = None,
               run: str | None = None):
    """Worker side: write tile ``t``'s whole chunk of K (the upper-triangle chunk only when symmetric).

    Opens the ``K`` array by path or URL so it can run in any process that sees the store; the handle
    is kept per process under (path, store uid), so a store recreated at the same path is reopened.
    ``write_empty_chunks`` is on because a computed tile is never the NaN fill value: zarr's
    check for it would scan every chunk for nothing.

    Fencing: with ``uid`` (the store's identity) and ``run`` (the run that planned the tile), the
    store's attributes are read from storage right before the write, and the tile is written only
    if the store there is still that store and that run is still its current run. A task of an
    interrupted run (cancelling a future does not stop a running task) therefore never writes into
    a store recreated at the same path, nor into a store a newer run has taken over.

    Raises
    ------
    StoreMismatchError
        The store at ``store_path`` is another store, or another run owns it; nothing is written.
    """
    if uid is not None or run is not None:
        check_owner(store_path, uid, run, t)
    def open_K():
        return zarr.open_array(location(store_path).zarr_store("K"), mode="r+").with_config({"write_empty_chunks": True})
    K = current().load("gram-K", (str(store_path), uid), open_K) if uid is not None else open_K()
    nr, nc = K.shape
    r0, r1 = t.i * tile, min((t.i + 1) * tile, nr)
    c0, c1 = t.j * tile, min((t.j + 1) * tile, nc)
    if block.shape != (r1 - r0, c1 - c0):
        raise StoreError(f"tile {tuple(t)} block has shape {block.shape}, expected {(r1 - r0, c1 - c0)}")
    if symmetric and t.i > t.j:
        raise StoreError(f"tile {tuple(t)} is below the diagonal of a symmetric store; only tiles i <= j are written")
    K[r0:r1, c0:c1] = block
