"""Verifying a Gram store: its metadata against itself, and every done chunk re-read against its
crc32c, its tile manifest and the diagonals (:func:`verify`; recomputing bad tiles is
:func:`gramtile.pipeline.compute.repair.repair`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gramtile.pipeline.stores.errors import StoreCorruptError
from gramtile.pipeline.stores.gram_format import (
    selection_hash,
    tile_checksum,
)
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.integrity import attr_intact
from gramtile.pipeline.stores.tiles import Tile

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
