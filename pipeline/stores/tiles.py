"""Tile planning (pure): which blocks of a Gram matrix exist and which remain to compute.

A Gram matrix K(rows, cols) is computed over two *selections* — integer index arrays into a
corpus (the row examples and the column examples). ``TileGrid`` cuts it into square tiles of
``tile`` x ``tile`` entries (edge tiles are smaller); tile ``Tile(i, j)`` covers selection
positions ``i*tile : (i+1)*tile`` by ``j*tile : (j+1)*tile``. The tile shape equals the chunk
shape of the Gram store, so every chunk has exactly one writer.

When the row and column selections are the same array the grid is *symmetric*: only tiles
with ``i <= j`` are planned (and stored: readers transpose tile (i, j) for tile (j, i)).

Tile size from a memory budget (:func:`choose_tile`)::

    t_mem = floor( sqrt( budget_bytes / (8 * (4 + 2 * n_base)) ) )
    t     = clip( min(t_mem, ceil(max(n_rows, n_cols) / min_tiles_along)), 16, 4096 )

A task holds, per tile, the float64 result, its encoded copy (zarr's crc32c codec copies the chunk), the combined block and two
blocks per base kernel (block and a temporary of the combination), hence ``4 + 2 * n_base``
tile-sized float64 arrays; ``min_tiles_along`` (default 8) keeps enough tiles for the workers
to share and for a stopped run to lose little work.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from gramtile.kernels.errors import GramtileError
from gramtile.pipeline.representations.errors import CorpusFormatError


class Tile(NamedTuple):
    """One block of the Gram matrix: tile row ``i``, tile column ``j``."""

    i: int
    j: int


def as_selection(sel, n: int, name: str = "rows") -> np.ndarray:
    """Normalise a selection of examples to an int64 index array into a corpus of ``n``.

    Parameters
    ----------
    sel : None (all examples), slice, range, or sequence/array of integer indices
    n : int
        Number of examples in the corpus.
    name : str
        Parameter name used in error messages.

    Returns
    -------
    ndarray of int64, shape (m,)
    """
    if sel is None:
        return np.arange(n, dtype=np.int64)
    if isinstance(sel, slice):
        return np.arange(n, dtype=np.int64)[sel]
    arr = np.asarray(sel)
    if arr.ndim != 1 or (arr.size and not np.issubdtype(arr.dtype, np.integer)):
        raise GramtileError(f"selection {name!r} must be a 1-d array of integer example indices, got "
                            f"shape {arr.shape} dtype {arr.dtype}; pass e.g. range(0, 100) or [0, 5, 7]")
    arr = arr.astype(np.int64)
    if arr.size == 0:
        raise GramtileError(f"selection {name!r} is empty; select at least one example")
    bad = (arr < 0) | (arr >= n)
    if bad.any():
        raise GramtileError(f"selection {name!r} holds index {int(arr[bad][0])}, outside the corpus of "
                            f"{n} examples (valid: 0..{n - 1}); fix the selection")
    return arr


@dataclass(frozen=True, eq=False)
class TileGrid:
    """Tiles over ``rows`` x ``cols`` selections.

    Parameters
    ----------
    rows : ndarray of int64, shape (n_rows,)
        Corpus indices of the row examples.
    cols : ndarray of int64, shape (n_cols,)
        Corpus indices of the column examples.
    tile : int
        Tile edge (entries); edge tiles are smaller.
    symmetric : bool or None
        None: symmetric iff ``rows`` and ``cols`` are equal arrays.
    """

    rows: np.ndarray
    cols: np.ndarray
    tile: int
    symmetric: bool | None = None

    def __post_init__(self):
        if not isinstance(self.tile, (int, np.integer)) or isinstance(self.tile, bool) or self.tile < 1:
            raise GramtileError(f"tile size must be an integer >= 1, got {self.tile!r}; pass --tile 100 or omit it")
        object.__setattr__(self, "tile", int(self.tile))
        same = self.rows.shape == self.cols.shape and bool(np.array_equal(self.rows, self.cols))
        if self.symmetric is None:
            object.__setattr__(self, "symmetric", same)
        elif self.symmetric and not same:
            raise GramtileError("a symmetric grid needs identical row and column selections")

    @property
    def n_rows(self) -> int:
        return int(self.rows.shape[0])

    @property
    def n_cols(self) -> int:
        return int(self.cols.shape[0])

    @property
    def shape(self) -> tuple:
        """Number of tiles along rows and columns: (n_tile_rows, n_tile_cols)."""
        return (math.ceil(self.n_rows / self.tile), math.ceil(self.n_cols / self.tile))

    def row_span(self, i: int) -> tuple:
        """Selection positions (start, stop) covered by tile row ``i``."""
        return i * self.tile, min((i + 1) * self.tile, self.n_rows)

    def col_span(self, j: int) -> tuple:
        return j * self.tile, min((j + 1) * self.tile, self.n_cols)

    def row_index(self, i: int) -> np.ndarray:
        """Corpus indices of the examples of tile row ``i``."""
        a, b = self.row_span(i)
        return self.rows[a:b]

    def col_index(self, j: int) -> np.ndarray:
        a, b = self.col_span(j)
        return self.cols[a:b]

    def tiles(self) -> list:
        """Every tile to compute, row-major; ``i <= j`` only when symmetric."""
        nr, nc = self.shape
        return [Tile(i, j) for i in range(nr) for j in range(i if self.symmetric else 0, nc)]

    def evaluations(self, t: Tile) -> int:
        """Kernel evaluations a tile needs (pairs; a symmetric diagonal tile needs its upper triangle)."""
        a, b = self.row_span(t.i)
        c, d = self.col_span(t.j)
        if self.symmetric and t.i == t.j:
            m = b - a
            return m * (m + 1) // 2
        return (b - a) * (d - c)

    def total_evaluations(self) -> int:
        return sum(self.evaluations(t) for t in self.tiles())


#: Largest tile edge: a tile is held in memory as a few float64 blocks of tile x tile entries.
MAX_TILE = 16384


def check_tile(tile) -> int | None:
    """Validate a requested tile size (None = choose one): an integer in 1..:data:`MAX_TILE`.

    Raises
    ------
    GramtileError
        Naming the value and the valid range (0 is not "the default": omit the option for that).
    """
    if tile is None:
        return None
    if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or not 1 <= int(tile) <= MAX_TILE:
        raise GramtileError(f"tile size {tile!r} is not an integer from 1 to {MAX_TILE} (a tile of T x T float64 "
                            f"entries takes 8 T^2 bytes per block); pass --tile 100, or omit --tile to choose one "
                            f"from the memory budget")
    return int(tile)


def plan(grid: TileGrid, done_mask=None) -> list:
    """Tiles of ``grid`` still to compute, the most expensive first.

    Parameters
    ----------
    grid : TileGrid
    done_mask : ndarray of bool, shape ``grid.shape``, or None (nothing done)

    Returns
    -------
    list of Tile, by decreasing :meth:`TileGrid.evaluations`, row-major among equals.

    Largest-first is the classic longest-processing-time rule: the cheap tiles (the half-price
    diagonal tiles of a symmetric grid, the narrow last row and column) are left to fill the
    workers' idle ends, so the run does not end with one worker busy on a full tile while the
    others wait. The order never changes a stored value.
    """
    tiles = grid.tiles()
    if done_mask is not None:
        done_mask = np.asarray(done_mask, dtype=bool)
        if done_mask.shape != grid.shape:
            raise GramtileError(f"done mask has shape {done_mask.shape}, the grid has {grid.shape} tiles")
        tiles = [t for t in tiles if not done_mask[t.i, t.j]]
    return sorted(tiles, key=lambda t: -grid.evaluations(t))  # stable: row-major among equals


def choose_tile(n_rows: int, n_cols: int, memory_budget: int = 256 * 2**20, n_base: int = 1,
                min_tiles_along: int = 8) -> int:
    """Tile edge from a per-task memory budget (formula in the module docstring).

    Parameters
    ----------
    n_rows, n_cols : int
        Selection sizes.
    memory_budget : int
        Bytes one task may use for tile-sized float64 arrays.
    n_base : int
        Number of distinct base kernels in the spec.
    min_tiles_along : int
        Lower bound on tiles along the longer side, so work can be shared.

    Returns
    -------
    int
    """
    t_mem = int(math.isqrt(int(memory_budget) // (8 * (4 + 2 * max(1, int(n_base))))))
    t_par = math.ceil(max(n_rows, n_cols) / max(1, int(min_tiles_along)))
    return int(min(4096, max(16, min(t_mem, t_par))))


def parse_selection(text: str, n: int, name: str = "--rows") -> np.ndarray:
    """Parse a CLI selection into corpus indices.

    Syntax: ``all`` (every example), ``a:b`` (examples a..b-1, Python slice rules, either end
    may be omitted), or ``@file.txt`` (one integer index per line; blank lines and ``#``
    comments ignored).

    Parameters
    ----------
    text : str
    n : int
        Corpus size.
    name : str
        Option name for error messages.

    Returns
    -------
    ndarray of int64
    """
    text = text.strip()
    if text in ("", "all"):
        return np.arange(n, dtype=np.int64)
    if text.startswith("@"):
        path = text[1:]
        idx = []
        try:
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    s = line.split("#", 1)[0].strip()
                    if not s:
                        continue
                    try:
                        idx.append(int(s))
                    except ValueError:
                        raise CorpusFormatError(f"selection entry {s!r} is not an integer index", path, lineno,
                                                "write one 0-based example index per line") from None
        except OSError as e:
            raise GramtileError(f"{name}: cannot read selection file {path!r}: {e.strerror}") from None
        return as_selection(np.asarray(idx, dtype=np.int64), n, name)
    if ":" in text:
        a, _, b = text.partition(":")
        try:
            sl = slice(int(a) if a.strip() else None, int(b) if b.strip() else None)
        except ValueError:
            raise GramtileError(f"{name} {text!r} is not a selection; use 'all', 'a:b' or '@file.txt'") from None
        for end, v in (("start", sl.start), ("stop", sl.stop)):
            if v is not None and not -n <= v <= n:
                raise GramtileError(f"{name} {text!r}: {end} {v} lies outside the corpus of {n} examples; "
                                    f"valid range 0:{n} (negative values count from the end)")
        out = np.arange(n, dtype=np.int64)[sl]
        if out.size == 0:
            raise GramtileError(f"{name} {text!r} selects no example of the corpus of {n}; valid range 0:{n}")
        return out
    raise GramtileError(f"{name} {text!r} is not a selection; use 'all', 'a:b' or '@file.txt'")
