"""K's chunk files of a local Gram store read directly, without Zarr's decode loop.

A Gram store's ``K`` array has one layout (``gram_store.create``): a regular grid of tile x tile
chunks, the default ``c/i/j`` chunk key encoding, and the codecs ``bytes`` (little endian) then
``crc32c``, so a chunk file is the tile's values in C order followed by the 4-byte little-endian
crc32c of those bytes. Zarr v3 decodes every chunk on its one event-loop thread, where the
checksum and the copies hold the GIL: a 1000 x 1000 float64 chunk, every check included, took
6.5 ms serially and ran 1.19x faster on two threads, against 4.7 ms and 2.45x here
(``open``/``readinto``, the crc32c check and NumPy's views, which all release the GIL for a
buffer this size; bench/learn_memory.py in BENCHMARKS.md). The check is the one Zarr makes: a file whose trailing checksum does not match
its bytes is refused.

:func:`local_chunk_reader` says whether a store's ``K`` has exactly that layout on a local
filesystem; anything else (a store at an fsspec URL, another codec chain) is read through Zarr as
before, so the two readers are interchangeable (``tests/stores/test_chunk_files.py``).
"""
from __future__ import annotations

import crc32c
import numpy as np

from gramtile.pipeline.stores.errors import StoreCorruptError
from gramtile.pipeline.stores.storage import LocalLocation
from gramtile.pipeline.stores.tiles import Tile


def local_chunk_reader(store) -> bool:
    """True when ``store``'s K chunks can be read by :func:`read_chunk`: a local store whose K has
    the regular tile grid, the default ``/`` chunk keys and the codecs bytes (little) -> crc32c."""
    if not isinstance(store.loc, LocalLocation):
        return False
    try:
        md = store.K.metadata.to_dict()
    except Exception:  # noqa: BLE001  (an array without v3 metadata: read through Zarr)
        return False
    codecs = [(c.get("name"), c.get("configuration") or {}) for c in md.get("codecs", [])]
    grid = md.get("chunk_grid", {})
    keys = md.get("chunk_key_encoding", {})
    return (len(codecs) == 2 and codecs[0][0] == "bytes" and codecs[0][1].get("endian", "little") == "little"
            and codecs[1][0] == "crc32c" and grid.get("name") == "regular"
            and list(grid.get("configuration", {}).get("chunk_shape", [])) == [store.tile, store.tile]
            and keys.get("name") == "default" and keys.get("configuration", {}).get("separator", "/") == "/")


def read_chunk(store, a: int, b: int, shape: tuple, scratch: np.ndarray | None = None,
               padded: bool = False) -> np.ndarray:
    """The values of tile (a, b)'s K chunk, cut to ``shape`` (an edge tile's part inside the matrix).

    ``scratch``: a uint8 array of :func:`chunk_file_bytes` bytes to read into (a reader that uses
    each chunk only until it reads the next one saves a fresh allocation per chunk); the result is
    then a view of it. Without it the result owns its memory (an edge tile's part copied out).
    ``padded``: return the whole tile x tile chunk, C-contiguous, whose part outside ``shape`` is
    Zarr's fill (NaN): for readers that index only inside ``shape``.

    Raises
    ------
    StoreCorruptError
        The chunk file is missing, of the wrong size, or fails its crc32c, naming the repair.
    """
    tile = store.tile
    dtype = np.dtype(store.dtype).newbyteorder("<")
    path = store.chunk_path(Tile(a, b))
    size = chunk_file_bytes(store)
    nbytes = size - 4
    own = not (isinstance(scratch, np.ndarray) and scratch.dtype == np.uint8 and scratch.size == size
               and scratch.flags.c_contiguous and scratch.flags.writeable)
    buf = np.empty(size, dtype=np.uint8) if own else scratch
    try:
        with open(path, "rb", buffering=0) as f:
            got = f.readinto(memoryview(buf))
            extra = f.read(1) if got == buf.size else b""
    except FileNotFoundError:
        raise StoreCorruptError(f"chunk of tile {(a, b)} is missing from {store.path} (no file {path}); run "
                                f"`gramtile verify {store.path} --repair`") from None
    except OSError as e:
        raise StoreCorruptError(f"chunk {path} of tile {(a, b)} cannot be read ({e}); run "
                                f"`gramtile verify {store.path} --repair`") from None
    if got != buf.size or extra:
        size = f"more than {buf.size}" if extra else str(got)
        raise StoreCorruptError(f"chunk {path} of tile {(a, b)} holds {size} bytes, not the {buf.size} of a "
                                f"{tile} x {tile} {dtype.name} chunk and its checksum (truncated or replaced); run "
                                f"`gramtile verify {store.path} --repair`")
    body = buf[:nbytes]
    if crc32c.crc32c(body) != int.from_bytes(buf[nbytes:].tobytes(), "little"):
        raise StoreCorruptError(f"chunk {path} of tile {(a, b)} fails its crc32c check (damaged on disk); "
                                f"run `gramtile verify {store.path} --repair`")
    vals = body.view(dtype).reshape(tile, tile)
    r, c = shape
    if padded or (r, c) == (tile, tile):
        return vals
    return vals[:r, :c] if not own else vals[:r, :c].copy()  # an edge tile: just its part, as Zarr gives


def chunk_file_bytes(store) -> int:
    """Size of one K chunk file of ``store``: tile x tile values and the 4-byte crc32c."""
    return store.tile * store.tile * np.dtype(store.dtype).itemsize + 4
