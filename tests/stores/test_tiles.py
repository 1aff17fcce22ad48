"""Tile planning: coverage of the matrix, resume plans, selections and the tile-size formula."""
import numpy as np
import pytest

from gramtile.kernels.errors import GramtileError
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.stores.tiles import Tile, TileGrid, as_selection, check_tile, choose_tile, parse_selection, plan


def _coverage(grid):
    """How many planned tiles cover each entry (mirrors counted for symmetric grids)."""
    cov = np.zeros((grid.n_rows, grid.n_cols), dtype=np.int64)
    for t in grid.tiles():
        a, b = grid.row_span(t.i)
        c, d = grid.col_span(t.j)
        cov[a:b, c:d] += 1
        if grid.symmetric and t.i != t.j:
            cov[c:d, a:b] += 1
    return cov


@pytest.mark.parametrize("n,tile", [(700, 100), (700, 77), (5, 10), (13, 1)])
def test_symmetric_grid_plans_upper_tiles_covering_every_entry_once(n, tile):
    idx = np.arange(n)
    g = TileGrid(idx, idx, tile)
    assert g.symmetric
    tiles = g.tiles()
    assert all(t.i <= t.j for t in tiles)
    m = -(-n // tile)
    assert len(tiles) == m * (m + 1) // 2
    assert (_coverage(g) == 1).all()
    # evaluations: the upper triangle incl. diagonal
    assert g.total_evaluations() == n * (n + 1) // 2


def test_rectangular_grid_covers_test_by_train():
    rows, cols = np.arange(100, 150), np.arange(0, 83)
    g = TileGrid(rows, cols, 20)
    assert not g.symmetric and g.shape == (3, 5)
    assert (_coverage(g) == 1).all()
    assert list(g.row_index(2)) == list(range(140, 150))
    assert list(g.col_index(4)) == list(range(80, 83))
    assert g.total_evaluations() == 50 * 83


def test_plan_is_all_tiles_minus_done():
    idx = np.arange(50)
    g = TileGrid(idx, idx, 10)
    done = np.zeros(g.shape, dtype=bool)
    done[0, 0] = done[1, 3] = done[3, 1] = True
    rest = plan(g, done)
    assert Tile(0, 0) not in rest and Tile(1, 3) not in rest
    assert len(rest) == len(g.tiles()) - 2
    assert plan(g, np.ones(g.shape, bool)) == []
    with pytest.raises(GramtileError, match="done mask has shape"):
        plan(g, np.zeros((2, 2), bool))


def test_plan_puts_the_most_expensive_tiles_first():
    # 25 examples, tile 10: full off-diagonal tiles (100 pairs) first, then the half-price full
    # diagonal tiles (55), then the narrow last column (50) ... down to the last diagonal (15)
    idx = np.arange(25)
    g = TileGrid(idx, idx, 10, symmetric=True)
    order = plan(g)
    assert order == [Tile(0, 1), Tile(0, 0), Tile(1, 1), Tile(0, 2), Tile(1, 2), Tile(2, 2)]
    costs = [g.evaluations(t) for t in order]
    assert costs == sorted(costs, reverse=True) and costs[0] == 100 and costs[-1] == 15
    done = np.zeros(g.shape, dtype=bool)
    done[0, 1] = True
    assert plan(g, done) == order[1:]


def test_symmetric_needs_identical_selections():
    with pytest.raises(GramtileError):
        TileGrid(np.arange(5), np.arange(1, 6), 2, symmetric=True)
    with pytest.raises(GramtileError, match="tile size"):
        TileGrid(np.arange(5), np.arange(5), 0)


def test_choose_tile_follows_the_memory_formula():
    # large n: the memory bound decides: sqrt(256 MiB / (8 * 6)) = 2364
    assert choose_tile(10**6, 10**6) == 2364
    # more base kernels -> smaller tiles
    assert choose_tile(10**6, 10**6, n_base=3) < choose_tile(10**6, 10**6, n_base=1)
    # small n: at least 8 tiles along, never below 16
    assert choose_tile(5483, 5483) == 686
    assert choose_tile(40, 40) == 16
    assert choose_tile(10**7, 10**7, memory_budget=2**40) == 4096


def test_parse_selection_syntax(tmp_path):
    assert list(parse_selection("all", 5)) == [0, 1, 2, 3, 4]
    assert list(parse_selection("1:3", 5)) == [1, 2]
    assert list(parse_selection(":2", 5)) == [0, 1]
    assert list(parse_selection("3:", 5)) == [3, 4]
    f = tmp_path / "sel.txt"
    f.write_text("# test examples\n4\n0\n\n2  # third\n")
    assert list(parse_selection(f"@{f}", 5)) == [4, 0, 2]
    f.write_text("1\nx\n")
    with pytest.raises(CorpusFormatError) as e:
        parse_selection(f"@{f}", 5)
    assert e.value.line == 2 and str(f) in str(e.value)
    f.write_text("7\n")
    with pytest.raises(GramtileError, match="index 7, outside the corpus of 5"):
        parse_selection(f"@{f}", 5)
    with pytest.raises(GramtileError, match="outside the corpus of 5"):  # was silently clipped to nothing
        parse_selection("9:12", 5)
    with pytest.raises(GramtileError, match="selects no example"):
        parse_selection("3:3", 5)

    with pytest.raises(GramtileError, match="'all', 'a:b' or '@file.txt'"):
        parse_selection("first ten", 5)
    with pytest.raises(GramtileError, match="cannot read selection file"):
        parse_selection(f"@{tmp_path / 'missing.txt'}", 5)


def test_as_selection_rejects_bad_indices():
    assert list(as_selection(None, 3)) == [0, 1, 2]
    assert list(as_selection(slice(1, None), 3)) == [1, 2]
    with pytest.raises(GramtileError, match="outside the corpus"):
        as_selection([0, -1], 3)
    with pytest.raises(GramtileError, match="integer"):
        as_selection([0.5], 3)
    with pytest.raises(GramtileError, match="empty"):
        as_selection([], 3)


@pytest.mark.parametrize("tile", [0, -1, 10 ** 9, 2.5, True])
def test_bad_tile_sizes_are_refused_not_taken_for_the_default(tile):
    with pytest.raises(GramtileError, match="omit --tile"):
        check_tile(tile)
    assert check_tile(None) is None and check_tile(100) == 100


@pytest.mark.parametrize("text", ["0:99999", "-200:5", "5:200"])
def test_a_selection_past_the_corpus_is_an_error_not_clipped(text):
    with pytest.raises(GramtileError, match="outside the corpus of 100"):
        parse_selection(text, 100)
    assert parse_selection("90:100", 100).tolist() == list(range(90, 100))
    assert parse_selection("-10:", 100).tolist() == list(range(90, 100))
