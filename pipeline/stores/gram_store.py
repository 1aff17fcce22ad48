"""The Gram store: a Zarr v3 group holding one (possibly partial) Gram matrix and its provenance.

Layout of ``GRAM.zarr/``::

    zarr.json        group attributes "gramtile": provenance (kernel spec JSON and hash, corpus
                     content hash and path, selections' sha256 and sizes, row/col example ids,
                     tile size, symmetric flag, gramtile version, created/updated times)
    K/               float64 (or float32, ``dtype`` in the attributes) (n_rows, n_cols), chunks
                     (tile, tile), fill NaN,
                     codecs bytes -> crc32c (every chunk carries its checksum);
                     dimension_names ("row", "col")
    diag_rows/       K's dtype (n_rows,), self-kernels of the row examples, chunks (tile,); ("row",)
    diag_cols/       K's dtype (n_cols,); ("col",)
    done/            bool (n_tile_rows, n_tile_cols): tile (i, j) is complete; ("tile_row", "tile_col")
    tile_crc/        uint32 (n_tile_rows, n_tile_cols): crc32c of each done tile's values, recorded
                     by the driver with its done bit; binds a chunk's content to its position, so
                     `verify` catches swapped, copied-over or stale chunks (0 = none recorded;
                     stores made before it have no manifest and are checked by crc32c alone)
    row_index/       int64 corpus indices of the row examples ("row",); col_index/ likewise ("col",)
    log/             an empty uint8 array ("log_byte",) whose directory holds the run log
                     log/records.jsonl: one JSON line per computed tile and per run start/end
                     (inside an array's directory, where Zarr never lists; stores written
                     before it kept log.jsonl at the top, which Zarr warns about on every
                     listing; both are read)
    gramtile.lock    present while a run writes (pid, host, time)

``dtype`` (attributes; absent = ``"float64"``, the stores made before it): ``"float32"`` stores
K and the diagonals in single precision (half the disk, memory and reads). Tiles are computed in
float64 and rounded once, in the task, before the tile is written and its checksum taken, so the
checksum binds the stored float32 values. Blocks read from a float32 store are float32; a
composite (:class:`ComposedView`) refuses stores of different dtypes.

A **landmark store** (``gramtile gram --landmarks M``) is a rectangular store whose columns are
M landmark examples drawn from its rows (:mod:`gramtile.pipeline.stores.landmarks`); its
``landmarks`` attribute records how they were drawn and their positions among the rows, and
``diag_cols`` holds their self-kernels (for normalisation).

Rules (uniform, relied on by every reader):

- **Symmetric matrices store the upper tile triangle only.** The task computing tile (i, j),
  i <= j, writes chunk (i, j); chunk (j, i) is never written (it stays NaN on disk) and both done
  bits are set. Every reader goes through :class:`GramView`, which serves a block below the
  diagonal by reading chunk (j, i) and transposing it. (Format 1 stores also hold the mirrored
  chunks; format 2 stopped writing them: half the bytes written and stored, and half the
  checksum work, for the price of a transpose on read. Both formats read identically.)
- **Write order.** Metadata first (attributes, then arrays); a task writes its whole tile; only
  then the driver writes the tile's diagonal chunks and its done bit(s). A tile
  whose done bit is unset is recomputed on resume, so a crash at any point loses no finished
  tile and never exposes a partial one.
- **One writer per chunk.** ``K`` chunks are written by the task owning the tile; ``done``
  and the diagonals only by the driver, which holds ``gramtile.lock``.

The lock is an exclusive ``flock`` on ``gramtile.lock`` (local filesystems,
:class:`~gramtile.pipeline.stores.locks.StoreLock`): released by the kernel when its holder dies,
so a killed run's lock never blocks the rerun.

A store may also live at an fsspec URL (``file://``, ``s3://``, ``memory://``, ...): every byte
then goes through :mod:`gramtile.pipeline.stores.storage` (Zarr's ``FsspecStore``, a lock object
:class:`~gramtile.pipeline.stores.locks.UrlLock`, and on object stores, which cannot append, one log
object per run ``log/records/<run>.jsonl`` instead of ``log/records.jsonl``; :meth:`GramStore.read_log` merges them).
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import crc32c
import numpy as np
import zarr
from zarr.codecs import BytesCodec, Crc32cCodec

from gramtile.kernels.composite import normalize_block
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline import optional
from gramtile.pipeline.cache import current
from gramtile.pipeline.readers.base import tsv_field
from gramtile.pipeline.stores.choices import DTYPES, EXPORT_FORMATS
from gramtile.pipeline.stores.chunk_cache import chunk_cache, chunk_key
from gramtile.pipeline.stores.chunk_files import chunk_file_bytes, local_chunk_reader, read_chunk
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import IncompleteTileError, StoreCorruptError, StoreError, StoreMismatchError
from gramtile.pipeline.stores.gather import gather, gather_scaled
from gramtile.pipeline.stores.integrity import attr_intact, sealed
from gramtile.pipeline.stores.storage import check_metadata, jsonl_log, location, read_jsonl_log
from gramtile.pipeline.stores.tiles import Tile, TileGrid

FORMAT_VERSION = 2  # 2: symmetric stores no longer write the mirrored chunks (see above)
LOCK_NAME = "gramtile.lock"
LOG_NAME = "log/records.jsonl"
LEGACY_LOG_NAME = "log.jsonl"  # stores written before the log moved under log/
#: the dtypes a Gram store may hold K in
#: uint32 (n_tile_rows, n_tile_cols): crc32c of each done tile's values, bound to its position
TILE_CRC = "tile_crc"
DIMS = {"K": ("row", "col"), "diag_rows": ("row",), "diag_cols": ("col",), "done": ("tile_row", "tile_col"),
        "row_index": ("row",), "col_index": ("col",), "log": ("log_byte",), TILE_CRC: ("tile_row", "tile_col")}
_DONE_CHUNK = 256


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def selection_hash(idx: np.ndarray) -> str:
    """sha256 of a selection's int64 little-endian bytes."""
    return hashlib.sha256(np.ascontiguousarray(idx, dtype="<i8").tobytes()).hexdigest()


def tile_checksum(block) -> int:
    """crc32c of a tile's values as float64 in C order, as recorded in the store's ``tile_crc``
    manifest when the tile is computed (never 0: 0 marks "nothing recorded"). A float32 tile
    is checked on its float32 values (widened exactly to float64)."""
    return int(crc32c.crc32c(np.ascontiguousarray(block, dtype=np.float64))) or 1  # its buffer, not a bytes copy


def check_dtype(dtype) -> str:
    """The dtype name of a Gram store (``"float64"`` or ``"float32"``), or a StoreError naming the fix."""
    name = "float64" if dtype is None else np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in DTYPES:
        raise StoreError(f"--dtype {dtype!r}: a Gram store holds float64 or float32; pass --dtype float64 "
                         f"(the default) or --dtype float32")
    return name


def _crc_array(group, name, shape, chunks, dtype, fill):
    return group.create_array(name, shape=shape, chunks=chunks, dtype=dtype, fill_value=fill,
                              serializer=BytesCodec(), compressors=[Crc32cCodec()], filters=None,
                              overwrite=True, dimension_names=DIMS[name])


def _new_done(group, gshape):
    """A new done mask with every chunk written (all False). Zarr leaves a chunk equal to the fill
    value unwritten, so a mask whose first tile was being marked when the process died would have
    no chunk file beside a manifest that holds the tile: indistinguishable from a lost file, which
    :func:`verify` reports. Written out, a missing chunk file always means a lost one."""
    done = _crc_array(group, "done", gshape, (min(gshape[0], _DONE_CHUNK), min(gshape[1], _DONE_CHUNK)), "bool",
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
    """A Gram store on disk or at an fsspec URL (see module docstring).

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
        _crc_array(self.group, TILE_CRC, gshape, (min(gshape[0], _DONE_CHUNK), min(gshape[1], _DONE_CHUNK)),
                   "uint32", 0)
        self.__dict__.pop("_crc_mem", None)

    # -- opening ---------------------------------------------------------------------------
    @classmethod
    def open(cls, path, mode: str = "r", check: bool = True) -> GramStore:
        """Open an existing store (``mode`` "r" or "r+") at a path or URL.

        ``check`` (the default) refuses attributes that do not match their recorded sha256 and,
        for reading, a landmark store whose columns are not its rows at the recorded positions
        (:class:`StoreCorruptError`); :func:`verify` opens without it and reports them."""
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
        (:func:`gramtile.pipeline.stores.resource_store.ensure_for_spec`, called by the engine
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


# ---- reading -------------------------------------------------------------------------------

def _positions(sel, n: int, what: str) -> np.ndarray:
    if sel is None:
        return np.arange(n, dtype=np.int64)
    if isinstance(sel, slice):
        return np.arange(n, dtype=np.int64)[sel]
    arr = np.asarray(sel, dtype=np.int64).reshape(-1)
    if arr.size and (arr.min() < 0 or arr.max() >= n):
        bad = arr[(arr < 0) | (arr >= n)][0]
        raise StoreError(f"{what} position {int(bad)} is outside the stored matrix ({n} {what}s); "
                         f"positions index the store's own row/column selection, 0..{n - 1}")
    return arr


class GramView:
    """Lazy reader of a Gram store: :meth:`block` reads only the chunks it needs.

    ``chunk_reads`` counts chunks of K read so far (tests assert laziness with it).
    """

    def __init__(self, store: GramStore):
        self.store = store
        self.chunk_reads = 0
        self._done = store.done_mask()

    @property
    def shape(self):
        return self.store.shape

    def _read_chunk(self, a: int, b: int) -> np.ndarray:
        """Tile (a, b) of K; below the diagonal of a symmetric store, tile (b, a) transposed (read
        from the store, not the chunk cache: the callers stream every chunk once)."""
        if self.store.symmetric and a > b:
            return self._stored_chunk(b, a).T
        return self._stored_chunk(a, b)

    def _chunk_cache(self):
        """This process's chunk cache (:mod:`.chunk_cache`) if it serves this store, else None. Only a
        store whose stored chunks all fit the cache is cached: learners sweep every chunk of a
        training part in turn, and an LRU smaller than the sweep would evict each chunk before its
        next use, holding memory for no hit."""
        cache = chunk_cache()
        return cache if cache is not None and self._stored_bytes() <= cache.limit else None

    def _cached_chunk(self, cache, a: int, b: int) -> np.ndarray:
        """:meth:`_stored_chunk` through ``cache`` (from :meth:`_chunk_cache`; None: read), read-only."""
        key = chunk_key(self.store, a, b) if cache is not None else None
        if key is None:
            return self._stored_chunk(a, b)
        got = cache.get(key)
        if got is None:
            return cache.put(key, self._stored_chunk(a, b))
        self.chunk_reads += 1  # counts the chunks blocks touch, read or found in the cache
        return got

    def _stored_bytes(self) -> int:
        """Bytes of every chunk the store holds (tiles above the diagonal of a symmetric store, at
        most full tiles)."""
        nr, nc = self.shape
        t = self.store.tile
        ti, tj = -(-nr // t), -(-nc // t)
        tiles = ti * (ti + 1) // 2 if self.store.symmetric else ti * tj
        return int(tiles * t * t * np.dtype(self.store.dtype).itemsize)

    def _stored_chunk(self, a: int, b: int, scratch: np.ndarray | None = None, padded: bool = False) -> np.ndarray:
        """The chunk stored for tile (a, b) (a <= b in a symmetric store), checked: finite values,
        and the checksum recorded when the tile was computed. ``scratch``: memory a local store's
        chunk file may be read into (:func:`~.chunk_files.read_chunk`; the result is then a view of
        it, valid until the next read into it). ``padded``: an edge tile's chunk may come whole
        (tile x tile, C-contiguous; only its part inside the matrix is checked and meaningful)."""
        r0, r1, c0, c1 = self.store.spans(Tile(a, b))
        self.chunk_reads += 1
        direct = self.__dict__.get("_direct")
        if direct is None:
            direct = self._direct = local_chunk_reader(self.store)
        if direct:  # the chunk file itself, GIL-free (chunk_files.py); a missing one is refused there
            got = read_chunk(self.store, a, b, (r1 - r0, c1 - c0), scratch, padded)
        else:
            try:
                got = np.asarray(self.store.K[r0:r1, c0:c1])
            except Exception as e:  # noqa: BLE001  (zarr reports checksum failures as ValueError and others)
                raise StoreCorruptError(f"chunk of tile {(a, b)} in {self.store.path} cannot be read ({e}); run "
                                        f"`gramtile verify {self.store.path} --repair`") from None
        v = got[:r1 - r0, :c1 - c0]  # the part inside the matrix (all of it unless padded)
        # every reader (blocks, export, learners) refuses values a done tile cannot hold and chunks
        # that are not the ones recorded for this position (swapped, copied over, stale)
        if not np.isfinite(v).all():
            raise StoreCorruptError(f"tile {(a, b)} of {self.store.path} holds NaN or infinite values (a chunk "
                                    f"missing or damaged); run `gramtile verify {self.store.path} --repair`")
        crc = self._manifest_entry(a, b)
        if crc and tile_checksum(v) != crc:
            raise StoreCorruptError(f"chunk of tile {(a, b)} in {self.store.path} does not match the checksum recorded "
                                    f"when the tile was computed (swapped or stale); run "
                                    f"`gramtile verify {self.store.path} --repair`")
        return got

    def _manifest_entry(self, a: int, b: int) -> int:
        """The recorded checksum of tile (a, b) (0: none recorded, or a store without a manifest)."""
        m = self.__dict__.get("_manifest")
        if m is None:
            arr = self.store.tile_crc
            try:
                m = np.zeros((0, 0), dtype=np.uint32) if arr is None else np.asarray(arr[...], dtype=np.uint32)
            except Exception:  # noqa: BLE001
                raise StoreCorruptError(f"the tile checksum manifest of {self.store.path} ({TILE_CRC}) is damaged; run "
                                        f"`gramtile verify {self.store.path} --repair`") from None
            self._manifest = m
        return int(m[a, b]) if a < m.shape[0] and b < m.shape[1] else 0

    def __getitem__(self, key):
        """``view[rows, cols]`` (or ``view[rows]`` for every column): :meth:`block`, unnormalised."""
        rows, cols = key if isinstance(key, tuple) else (key, None)
        return self.block(rows, cols)

    def diag(self, rows=None, cols=None) -> tuple:
        """(diag over the row positions, diag over the column positions)."""
        nr, nc = self.shape
        r, c = _positions(rows, nr, "row"), _positions(cols, nc, "column")
        return self._diag("diag_rows")[r], self._diag("diag_cols")[c]

    def _diag(self, name: str) -> np.ndarray:
        try:
            return np.asarray(getattr(self.store, name)[...])
        except Exception as e:  # noqa: BLE001  (a chunk failing its crc32c, truncated, ...)
            raise StoreCorruptError(f"{self.store.path}/{name} cannot be read ({type(e).__name__}: {e}); run "
                                    f"`gramtile verify {self.store.path} --repair`") from None

    def block(self, rows=None, cols=None, normalized: bool = False) -> np.ndarray:
        """``K[rows][:, cols]`` as a dense array of the store's dtype (float64, or float32).

        Parameters
        ----------
        rows, cols : None (all), slice, or integer positions into the store's row/column selection
        normalized : bool
            Divide by sqrt(K(x,x) K(y,y)) (0 where either self-kernel is 0).

        Returns
        -------
        ndarray, shape (len(rows), len(cols))

        Raises
        ------
        IncompleteTileError
            A needed tile is not marked done.
        """
        return self.blocks([(rows, cols)], normalized)[0]

    def blocks(self, pairs, normalized: bool = False, out=None) -> list:
        """``[self.block(rows, cols, normalized) for rows, cols in pairs]``, reading each stored chunk
        once for all of them (a fit's K(train, train) and K(test, train) touch the same chunks), one
        chunk in memory at a time beside the blocks (chunks come through this process's chunk cache,
        :mod:`~gramtile.pipeline.stores.chunk_cache`). ``out``: arrays to fill, one per pair (C order,
        the store's dtype and the block's shape; any other entry, or None, is allocated)."""
        nr, nc = self.shape
        t = self.store.tile
        plans, parts = [], {}
        for k, (rows, cols) in enumerate(pairs):
            r, c = _positions(rows, nr, "row"), _positions(cols, nc, "column")
            ti, tj = r // t, c // t
            rsel = {int(a): np.nonzero(ti == a)[0] for a in np.unique(ti)}
            csel = {int(b): np.nonzero(tj == b)[0] for b in np.unique(tj)}
            for a in rsel:
                for b in csel:
                    if not self._done[a, b]:
                        d, tot = self.store.tiles_done()
                        raise IncompleteTileError(
                            f"tile {(a, b)} of {self.store.path} is not computed yet ({d} of {tot} tiles "
                            f"done); finish it by rerunning the same `gramtile gram` command")
                    # in a symmetric store, tiles (a, b) and (b, a) come from the one chunk above the diagonal
                    key = (min(a, b), max(a, b)) if self.store.symmetric else (a, b)
                    parts.setdefault(key, []).append((k, a, b))
            buf = out[k] if out is not None else None
            if not (isinstance(buf, np.ndarray) and buf.shape == (r.size, c.size) and buf.dtype == self.store.dtype
                    and buf.flags.c_contiguous and buf.flags.writeable):
                buf = np.empty((r.size, c.size), dtype=self.store.dtype)
            plans.append((r, c, rsel, csel, buf))
        scales = [self._scales(r, c) if normalized else None for r, c, *_ in plans]
        cache = self._chunk_cache()
        # without the cache each chunk is used only until the next one is read: one buffer serves them all
        scratch = np.empty(chunk_file_bytes(self.store), dtype=np.uint8) if cache is None and parts else None
        for (sa, sb), need in parts.items():
            chunk = self._stored_chunk(sa, sb, scratch, padded=True) if cache is None else self._cached_chunk(cache, sa, sb)
            for k, a, b in need:
                r, c, rsel, csel, buf = plans[k]
                ri, ci = rsel[a], csel[b]
                if scales[k] is None:
                    gather(buf, chunk, ri, ci, r[ri] - a * t, c[ci] - b * t, (a, b) != (sa, sb))
                else:
                    gather_scaled(buf, chunk, ri, ci, r[ri] - a * t, c[ci] - b * t, (a, b) != (sa, sb),
                                  scales[k][0], scales[k][1])
        got = []
        for (_, _, _, _, buf), sc in zip(plans, scales):
            if sc is not None:  # normalize_block's zeros: a row or column whose self-kernel is not positive
                buf[sc[2], :] = 0.0
                buf[:, sc[3]] = 0.0
            got.append(buf)
        return got

    def _scales(self, r, c):
        """(sqrt of the row self-kernels, of the column ones, rows and columns whose self-kernel is not
        positive) for normalising the block of rows ``r`` and columns ``c``, as normalize_block does."""
        dr, dc = self.diag(r, c)
        dr, dc = np.asarray(dr, dtype=np.float64), np.asarray(dc, dtype=np.float64)
        if not (np.isfinite(dr).all() and np.isfinite(dc).all()):
            normalize_block(np.empty((0, 0)), dr, dc)  # raises its error, which names the repair
        return np.sqrt(np.where(dr > 0, dr, 1.0)), np.sqrt(np.where(dc > 0, dc, 1.0)), dr <= 0, dc <= 0

    # -- interop: numpy, dask, xarray ------------------------------------------------------
    def _require_complete(self, what: str):
        done, total = self.store.tiles_done()
        if done != total:
            raise IncompleteTileError(
                f"{self.store.path} is incomplete ({done} of {total} tiles done); finish it by rerunning the "
                f"same `gramtile gram` command before {what}")

    def to_numpy(self, normalized: bool = False) -> np.ndarray:
        """The whole matrix (both triangles of a symmetric store) as a dense array of the store's dtype."""
        self._require_complete("reading the whole matrix")
        return self.block(normalized=normalized)

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(view)``: :meth:`to_numpy` (never a 0-d object array)."""
        out = self.to_numpy()
        return out if dtype is None else out.astype(dtype, copy=False)

    def tile_block(self, a: int, b: int, normalized: bool = False) -> np.ndarray:
        """Tile (a, b) as an array (below the diagonal of a symmetric store: tile (b, a) transposed),
        normalised with the same arithmetic as :meth:`export`."""
        blk = self._read_chunk(int(a), int(b))
        if normalized:
            t = self.store.tile
            nr, nc = self.shape
            dr, dc = self.diag(slice(a * t, min((a + 1) * t, nr)), slice(b * t, min((b + 1) * t, nc)))
            blk = normalize_block(blk, dr, dc)
        return blk

    def to_dask(self, normalized: bool = False):
        """A dask array of the whole matrix, one chunk per tile, read lazily.

        Unlike ``dask.array.from_zarr(store, "K")`` (which shows the NaN of the never-written
        lower tile triangle of a symmetric store), each chunk below the diagonal is the stored
        chunk above it, transposed. Refuses an incomplete store.
        """
        da = optional.dask_array()
        dask = optional.load("dask")
        self._require_complete("reading it as a dask array")
        nr, nc = self.shape
        t = self.store.tile
        rows = []
        for a in range(-(-nr // t)):
            h = min((a + 1) * t, nr) - a * t
            row = []
            for b in range(-(-nc // t)):
                w = min((b + 1) * t, nc) - b * t
                d = dask.delayed(self.tile_block, pure=True)(a, b, normalized,
                                                             dask_key_name=f"gramtile-{self.store.meta['uid']}-"
                                                                           f"{int(normalized)}-{a}-{b}")
                row.append(da.from_delayed(d, shape=(h, w), dtype=np.dtype(self.store.dtype)))
            rows.append(row)
        return da.block(rows)

    def to_xarray(self, normalized: bool = False, lazy: bool = True, labels: bool | None = None):
        """An ``xarray.DataArray`` of the matrix with dimensions ("row", "col").

        Coordinates: ``row_id`` / ``col_id`` (example ids), ``row_index`` / ``col_index``
        (corpus positions) and ``row_label`` / ``col_label`` (labels, plain strings, from the
        corpus store). ``lazy`` wraps :meth:`to_dask`, else :meth:`to_numpy`. ``labels=None``
        adds the labels when the corpus store can be opened, ``True`` requires them.
        """
        xr = optional.xarray()
        data = self.to_dask(normalized) if lazy else self.to_numpy(normalized)
        st = self.store
        coords = {"row_id": ("row", np.array(st.ids("row"), dtype=str)),
                  "col_id": ("col", np.array(st.ids("col"), dtype=str)),
                  "row_index": ("row", st.rows()),
                  "col_index": ("col", st.rows() if st.symmetric else st.cols())}
        if labels is not False:
            try:
                coords["row_label"] = ("row", np.array([str(x) for x in st.labels("row")], dtype=str))
                coords["col_label"] = ("col", np.array([str(x) for x in st.labels("col")], dtype=str))
            except StoreError:
                if labels:
                    raise
        return xr.DataArray(data, dims=("row", "col"), coords=coords, name="K",
                            attrs={"kernel": st.meta["kernel_json"], "kernel_hash": st.kernel_hash,
                                   "normalized": int(bool(normalized)), "store": str(st.path)})

    def export(self, out_npy, normalized: bool = False):
        """Write the full matrix to ``out_npy`` (.npy), tile by tile; refuses an incomplete store."""
        self._require_complete("exporting")
        nr, nc = self.shape
        t = self.store.tile
        out = Path(out_npy)
        tmp = out.with_name(out.name + ".partial")  # the output appears only when complete
        try:
            dr, dc = self.diag() if normalized else (None, None)
            with open(tmp, "wb") as f:  # written in order, no memory map: a full disk is an OSError here
                write_npy_header(f, self.store.dtype, (nr, nc))
                for a in range(-(-nr // t)):
                    r0, r1 = a * t, min((a + 1) * t, nr)
                    band = np.empty((r1 - r0, nc), dtype=self.store.dtype)
                    for b in range(-(-nc // t)):
                        c0, c1 = b * t, min((b + 1) * t, nc)
                        blk = self._read_chunk(a, b)
                        if normalized:
                            blk = normalize_block(blk, dr[r0:r1], dc[c0:c1])
                        band[:, c0:c1] = blk
                    f.write(memoryview(band).cast("B"))
            tmp.replace(out)
        finally:
            if tmp.exists():
                tmp.unlink()
        return out


def write_npy_header(f, dtype, shape):
    """The .npy header of a C-order array of ``dtype`` and ``shape`` (its values follow in order)."""
    np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype).newbyteorder("<")),
                                             "fortran_order": False, "shape": tuple(int(x) for x in shape)})


def export(store, out_npy, normalized: bool = False):
    """Write a complete store's K (optionally normalized) to ``out_npy``; see :meth:`GramView.export`."""
    st = store if isinstance(store, GramStore) else GramStore.open(store)
    return st.view().export(out_npy, normalized=normalized)


def numeric_labels(labels) -> tuple:
    """LIBSVM labels are numbers: (codes, mapping). Labels that all read as numbers are kept
    (mapping None); otherwise label ``sorted(set(labels))[k]`` is written as ``k``."""
    try:
        vals = [float(str(y)) for y in labels]
        if all(np.isfinite(vals)):
            return [str(y).strip() for y in labels], None
    except ValueError:
        pass
    classes = sorted({str(y) for y in labels})
    code = {c: k for k, c in enumerate(classes)}
    return [str(code[str(y)]) for y in labels], classes


def export_selection(store, out, fmt: str = "npy", rows=None, cols=None, normalized: bool = False,
                     labels=None) -> list:
    """Write ``K[rows][:, cols]`` of a store in one of :data:`EXPORT_FORMATS`, plus the ids and labels beside it.

    - ``npy``: a .npy of shape (len(rows), len(cols)) in the store's dtype (float64 or float32);
    - ``libsvm``: LIBSVM's precomputed-kernel format (``svm-train -t 4``), one line per row
      ``label 0:i 1:K(r,c_1) ... m:K(r,c_m)`` with ``i`` the row's 1-based serial number in the
      row selection (LIBSVM needs it equal to the training example's number when rows are the
      training columns; for test rows it is ignored); every value is written, zeros included;
    - ``svmlight``: the same rows without the ``0:i`` serial, features 1..m, so
      ``sklearn.datasets.load_svmlight_file(f)[0]`` is exactly K[rows][:, cols] (for
      ``SVC(kernel="precomputed")``).

    Values are written with 17 significant digits (they read back bitwise; a float32 store's
    values read back as the same float32 numbers, widened). Beside ``out``:
    ``OUT.rows.tsv`` (position in the store, corpus index, id, label) and, when the columns
    differ from the rows, ``OUT.cols.tsv``; with text labels in a text format also
    ``OUT.classes.tsv`` (number written -> label). ``rows``/``cols`` are positions in the
    store's own row/column selection (None: all). Returns the paths written.

    Raises
    ------
    StoreError
        Unknown format; labels unavailable for a text format.
    IncompleteTileError
        A needed tile is not computed.
    """
    if fmt not in EXPORT_FORMATS:
        raise StoreError(f"export format {fmt!r} is not one of {', '.join(EXPORT_FORMATS)}")
    st = store if isinstance(store, GramStore) else GramStore.open(store)
    v = st.view()
    nr, nc = st.shape
    r = _positions(rows, nr, "row")
    same = cols is None and st.symmetric and rows is not None
    c = r if same else _positions(cols, nc, "column")
    out = Path(out)
    if labels is None:
        try:
            all_labels = st.labels("row")
        except StoreError as e:
            if fmt != "npy":
                raise StoreError(f"the {fmt} format needs one label per row: {e}") from None
            all_labels = None
        row_labels = None if all_labels is None else [all_labels[i] for i in r]
    else:
        labels = list(labels)
        if len(labels) != nr:
            raise StoreError(f"{len(labels)} labels given for a store of {nr} rows; give one per row, in row order")
        row_labels = [labels[i] for i in r]
    ids_r = st.ids("row")
    written = []
    tmp = out.with_name(out.name + ".partial")
    try:
        t = st.tile
        if fmt == "npy":
            with open(tmp, "wb") as f:  # written in order, no memory map: a full disk is an OSError here
                write_npy_header(f, st.dtype, (r.size, c.size))
                for k in range(0, r.size, t):
                    blk = np.ascontiguousarray(v.block(r[k:k + t], c, normalized=normalized), dtype=st.dtype)
                    f.write(memoryview(blk).cast("B"))
        else:
            codes, classes = numeric_labels(row_labels)
            first = 1 if fmt == "libsvm" else 0
            with open(tmp, "w", encoding="ascii") as f:
                for k in range(0, r.size, t):
                    blk = v.block(r[k:k + t], c, normalized=normalized)
                    for i, row in enumerate(blk):
                        head = f"{codes[k + i]} 0:{k + i + 1} " if first else f"{codes[k + i]} "
                        f.write(head + " ".join(f"{j}:{x:.17g}" for j, x in enumerate(row, 1)) + "\n")
            if classes is not None:
                cl = out.with_name(out.name + ".classes.tsv")
                cl.write_text("code\tlabel\n" + "".join(f"{k}\t{tsv_field(lab)}\n" for k, lab in enumerate(classes)),
                              encoding="utf-8")
                written.append(cl)
        tmp.replace(out)
    finally:
        if tmp.exists():
            tmp.unlink()
    written.insert(0, out)
    idx_r = st.rows()
    side = out.with_name(out.name + ".rows.tsv")
    side.write_text("position\tcorpus_index\tid\tlabel\n" + "".join(
        f"{p}\t{idx_r[p]}\t{tsv_field(ids_r[p])}\t{'' if row_labels is None else tsv_field(row_labels[k])}\n"
        for k, p in enumerate(r)),
        encoding="utf-8")
    written.append(side)
    if not (same or (cols is None and rows is None and st.symmetric)):
        ids_c, idx_c = st.ids("col"), (st.rows() if st.symmetric else st.cols())
        side = out.with_name(out.name + ".cols.tsv")
        side.write_text("position\tcorpus_index\tid\n" + "".join(
            f"{p}\t{idx_c[p]}\t{tsv_field(ids_c[p])}\n" for p in c), encoding="utf-8")
        written.append(side)
    return written


class ComposedView:
    """A composite kernel read from stored base matrices, without recomputing any pair.

    Parameters
    ----------
    spec : KernelSpec
        The composite (or base) spec.
    stores : mapping base spec_hash -> GramStore, or a sequence of GramStores / paths / URLs
        One store per distinct base spec of ``spec``, all over the same corpus and selections.
        A sequence is matched to the base kernels by each store's kernel hash (extra stores
        are ignored).

    Raises
    ------
    StoreMismatchError
        A base kernel has no store among those given (the message lists what each holds), the
        stores cover different corpora or selections, or they hold different dtypes (a float32
        store mixed with a float64 one: the composite would silently be float32-accurate).
    """

    def __init__(self, spec, stores):
        self.spec = spec
        bases = spec.base_specs()
        if not isinstance(stores, dict):
            given = [st if isinstance(st, GramStore) else GramStore.open(st) for st in stores]
            stores = {st.kernel_hash: st for st in given}
        missing = [b for b in bases if b.spec_hash not in stores]
        if missing:
            held = "; ".join(f"{st.path} holds {st.meta['kernel_json']} (hash {h[:12]})"
                             for h, st in stores.items()) or "no store was given"
            raise StoreMismatchError(
                f"no stored Gram matrix for base kernel {missing[0].to_json()} (hash {missing[0].spec_hash[:12]}) "
                f"among the stores given ({held}); pass its store too, or compute it with "
                f"`gramtile gram --kernel '{missing[0].to_json()}'`")
        self.views = {}
        ref = None
        for b in bases:
            st = stores[b.spec_hash]
            if st.kernel_hash != b.spec_hash:
                raise StoreMismatchError(f"store {st.path} holds kernel hash {st.kernel_hash}, "
                                         f"not {b.spec_hash} ({b.to_json()}); pass the right store for it")
            key = (st.corpus_hash, st.meta["rows_sha256"], st.meta["cols_sha256"])
            if ref is None:
                ref = (key, st.path)
            elif key != ref[0]:
                raise StoreMismatchError(f"stores {ref[1]} and {st.path} cover different corpora or selections "
                                         f"(corpus hashes {ref[0][0]} vs {key[0]}); compute both over the same "
                                         f"--corpus/--rows/--cols")
            self.views[b.spec_hash] = GramView(st)
        dtypes = {v.store.dtype: v.store.path for v in self.views.values()}
        if len(dtypes) > 1:
            raise StoreMismatchError(
                f"a composite kernel mixes Gram stores of different dtypes ({dtypes['float32']} holds float32, "
                f"{dtypes['float64']} float64); recompute {dtypes['float32']} with --dtype float64 (or "
                f"{dtypes['float64']} with --dtype float32) so every base kernel has the same precision")
        self.dtype = next(iter(dtypes), "float64")

    @property
    def shape(self):
        return next(iter(self.views.values())).shape

    @property
    def chunk_reads(self) -> int:
        return sum(v.chunk_reads for v in self.views.values())

    def block(self, rows=None, cols=None, normalized: bool = False) -> np.ndarray:
        base = {}
        for h, v in self.views.items():
            dr, dc = v.diag(rows, cols)
            base[h] = (v.block(rows, cols), dr, dc)
        K, dr, dc = self.spec.combine(base)
        K = np.asarray(K, dtype=self.dtype)
        return (normalize_block(K, dr, dc) if normalized else K).astype(self.dtype, copy=False)


# ---- verification --------------------------------------------------------------------------

@dataclass
class VerifyReport:
    """Result of :func:`verify`: tiles checked and the bad ones with reasons."""

    path: str
    checked: int = 0
    bad: list = field(default_factory=list)  # [(Tile, reason)]
    repaired: list = field(default_factory=list)
    #: the reason when the done mask itself is damaged (no tile could be checked), else None
    done_damaged: str | None = None
    #: tiles kept when a damaged done mask was rebuilt (repair)
    rebuilt: list | None = None
    #: what is inconsistent in the store's metadata (sizes, selections, tile), else None
    metadata: str | None = None

    @property
    def ok(self) -> bool:
        """True when nothing was found, or everything found was repaired."""
        if self.metadata or (self.done_damaged and self.rebuilt is None):
            return False
        return not self.bad


def metadata_problem(st: GramStore) -> str | None:
    """What contradicts itself in a store's metadata (recorded sizes, selection hashes, tile size,
    array shapes), or None. Such a store cannot be repaired by recomputing tiles: its provenance no
    longer says which examples its rows and columns are."""
    m = st.meta
    try:
        rows, cols = (np.asarray(st.group[n][:], dtype=np.int64) for n in ("row_index", "col_index"))
        kshape, kchunks, kdtype = tuple(st.K.shape), tuple(st.K.chunks), np.dtype(st.K.dtype).name
    except Exception as e:  # noqa: BLE001
        return f"row_index / col_index / K cannot be read ({type(e).__name__}: {e})"
    checks = [
        (rows.shape[0] == m.get("n_rows") == kshape[0], f"n_rows {m.get('n_rows')}, row_index has {rows.shape[0]} "
                                                        f"entries, K has {kshape[0]} rows"),
        (cols.shape[0] == m.get("n_cols") == kshape[1], f"n_cols {m.get('n_cols')}, col_index has {cols.shape[0]} "
                                                        f"entries, K has {kshape[1]} columns"),
        (selection_hash(rows) == m.get("rows_sha256"), "row_index does not match the recorded row selection hash"),
        (selection_hash(cols) == m.get("cols_sha256"), "col_index does not match the recorded column selection hash"),
        (kchunks == (m.get("tile"), m.get("tile")), f"tile {m.get('tile')} but K is chunked {kchunks}"),
        (not m.get("symmetric") or np.array_equal(rows, cols), "a symmetric store whose rows and columns differ"),
        (kdtype == m.get("dtype", "float64"), f"dtype {m.get('dtype', 'float64')} recorded but K holds {kdtype}"),
    ]
    bad = [why for ok, why in checks if not ok]
    if attr_intact(m) is False:
        bad.append("the attributes do not match their recorded sha256")
    if not bad and st.landmarks is not None:
        return st.landmark_problem()
    if not bad:
        return None
    return (f"metadata of Gram store {st.path} is inconsistent: {'; '.join(bad)}. Fix: it was edited or damaged "
            f"and cannot be repaired by recomputing tiles; recompute it into a new --out")


def verify(store) -> VerifyReport:
    """Re-read every done chunk; report checksum / decode failures and NaN inside done tiles.

    Only checks: recomputing the bad tiles is :func:`gramtile.pipeline.compute.repair.repair`.

    Parameters
    ----------
    store : GramStore, path or URL

    Returns
    -------
    VerifyReport
    """
    st = store if isinstance(store, GramStore) else GramStore.open(store, check=False)
    rep = VerifyReport(str(st.path))
    problem = metadata_problem(st)
    if problem:
        rep.metadata = problem
        return rep
    try:
        done = st.done_mask()
        manifest = None if st.tile_crc is None else np.asarray(st.tile_crc[...], dtype=np.uint32)
    except StoreCorruptError as e:
        rep.done_damaged = str(e)
        return rep
    except Exception as e:  # noqa: BLE001  (the manifest fails its own crc32c)
        rep.done_damaged = f"the tile checksum manifest of {st.path} is damaged ({type(e).__name__}: {e})"
        return rep
    if manifest is not None:
        # a lost chunk file of the done mask reads as "nothing done": the manifest still holds its tiles
        cs = st.done.chunks
        for a, b in sorted({(i // cs[0], j // cs[1]) for i, j in zip(*np.nonzero(manifest))}):
            if not st.loc.exists(f"done/c/{a}/{b}"):
                rep.done_damaged = (f"the done mask's chunk done/c/{a}/{b} of {st.path} is missing, but the checksum "
                                    "manifest holds tiles of it")
                return rep
    nr, nc = st.shape

    diag_bad_rows, diag_bad_cols = set(), set()
    for name, n, bad in (("diag_rows", nr, diag_bad_rows), ("diag_cols", nc, diag_bad_cols)):
        arr = st.group[name]
        for a in range(-(-n // st.tile)):
            if not (done[a, :].any() if name == "diag_rows" else done[:, a].any()):
                continue
            s0, s1 = a * st.tile, min((a + 1) * st.tile, n)
            try:
                v = np.asarray(arr[s0:s1])
                if not np.isfinite(v).all():
                    bad.add(a)
            except Exception:  # noqa: BLE001
                bad.add(a)

    for a, b in zip(*np.nonzero(done)):
        if st.symmetric and a > b:
            continue  # stored once, as tile (b, a)
        t = Tile(int(a), int(b))
        r0, r1, c0, c1 = st.spans(t)
        rep.checked += 1
        try:
            v = np.asarray(st.K[r0:r1, c0:c1])
        except Exception as e:  # noqa: BLE001  (checksum mismatch, truncated chunk, ...)
            rep.bad.append((t, f"unreadable chunk: {type(e).__name__}: {e}"))
            continue
        if np.isnan(v).any():
            rep.bad.append((t, "NaN inside a done tile (chunk missing or partly written)"))
        elif not np.isfinite(v).all():
            rep.bad.append((t, "infinite value inside a done tile"))
        elif manifest is not None and manifest[t.i, t.j] and tile_checksum(v) != manifest[t.i, t.j]:
            rep.bad.append((t, "chunk does not match the checksum recorded when its tile was computed "
                               "(a chunk swapped, copied over or written by another run)"))
        elif t.i in diag_bad_rows or t.j in diag_bad_cols:
            rep.bad.append((t, "diagonal chunk of this tile's rows/columns unreadable or NaN"))

    return rep
