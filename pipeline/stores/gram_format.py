"""The Gram store's format: a Zarr v3 group holding one (possibly partial) Gram matrix and its
provenance, the names and rules every writer and reader of it shares.

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

import hashlib

import crc32c
import numpy as np

from gramtile.pipeline.stores.choices import DTYPES
from gramtile.pipeline.stores.errors import StoreError

FORMAT_VERSION = 2  # 2: symmetric stores no longer write the mirrored chunks (see above)
LOCK_NAME = "gramtile.lock"
LOG_NAME = "log/records.jsonl"
LEGACY_LOG_NAME = "log.jsonl"  # stores written before the log moved under log/
#: uint32 (n_tile_rows, n_tile_cols): crc32c of each done tile's values, bound to its position
TILE_CRC = "tile_crc"
DIMS = {"K": ("row", "col"), "diag_rows": ("row",), "diag_cols": ("col",), "done": ("tile_row", "tile_col"),
        "row_index": ("row",), "col_index": ("col",), "log": ("log_byte",), TILE_CRC: ("tile_row", "tile_col")}
DONE_CHUNK = 256


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


def write_npy_header(f, dtype, shape):
    """The .npy header of a C-order array of ``dtype`` and ``shape`` (its values follow in order)."""
    np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype).newbyteorder("<")),
                                             "fortran_order": False, "shape": tuple(int(x) for x in shape)})
