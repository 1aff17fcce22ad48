"""Reading a Gram store: :class:`GramView`, the lazy block reader every learner, export and
composite goes through (a block below the diagonal of a symmetric store is read from its
mirror chunk; chunks are checked against the tile manifest as they are read).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from gramtile.kernels.composite import normalize_block
from gramtile.pipeline import optional
from gramtile.pipeline.stores.chunk_cache import chunk_cache, chunk_key
from gramtile.pipeline.stores.chunk_files import chunk_file_bytes, local_chunk_reader, read_chunk
from gramtile.pipeline.stores.errors import IncompleteTileError, StoreCorruptError, StoreError
from gramtile.pipeline.stores.gather import gather, gather_scaled
from gramtile.pipeline.stores.gram_format import (
    TILE_CRC,
    tile_checksum,
    write_npy_header,
)
from gramtile.pipeline.stores.tiles import Tile

if TYPE_CHECKING:
    from gramtile.pipeline.stores.gram_store import GramStore


# ---- reading -------------------------------------------------------------------------------

def positions(sel, n: int, what: str) -> np.ndarray:
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
        r, c = positions(rows, nr, "row"), positions(cols, nc, "column")
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
            r, c = positions(rows, nr, "row"), positions(cols, nc, "column")
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
