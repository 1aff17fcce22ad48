"""Damaged Gram stores are never read as complete: a recreated K drops the done bits of the
tiles it lost, and a lost diagonal chunk stops normalisation instead of changing its numbers."""
import shutil
import subprocess
import sys

import numpy as np
import pytest
import zarr
from conftest import corpus_store_of, num_trees

from gramtile.kernels.errors import GramtileError
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.repair import repair
from gramtile.pipeline.learn.sources import open_gram_source
from gramtile.pipeline.stores.errors import StoreCorruptError
from gramtile.pipeline.stores.gram_export import export
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_verify import verify
from gramtile.pipeline.stores.tiles import Tile

SST = {"kind": "sst", "lam": 0.4}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return corpus_store_of(tmp_path_factory.mktemp("c") / "c.zarr", num_trees(80), 40)


@pytest.mark.parametrize("lost", ["K/zarr.json", "K", "diag_rows", "diag_cols"])
def test_rerun_after_a_lost_array_recomputes_instead_of_trusting_done_bits(corpus, tmp_path, lost):
    out = tmp_path / "g.zarr"
    good = run_gram(corpus, SST, out, tile=20, cluster="sequential").view().block()
    gone = out / lost
    gone.unlink() if gone.is_file() else shutil.rmtree(gone)
    st = run_gram(corpus, SST, out, tile=20, cluster="sequential")  # what `status` advises
    assert st.complete
    again = GramStore.open(out).view().block()
    assert not np.isnan(again).any()
    assert np.array_equal(again, good)
    assert any(r.get("event") == "reset" for r in GramStore.open(out).read_log())


def test_a_missing_diagonal_chunk_stops_normalised_reads(corpus, tmp_path):
    out = tmp_path / "g.zarr"
    run_gram(corpus, SST, out, tile=20, cluster="sequential")
    (out / "diag_rows" / "c" / "1").unlink()  # rows 20:40 lose their self-kernels
    with pytest.raises(GramtileError, match="verify --repair"):
        GramStore.open(out).view().block(normalized=True)
    with pytest.raises(GramtileError, match="verify --repair"):
        open_gram_source(out, normalized=True).block(np.arange(80), np.arange(80))


def flip_byte(path, at=20):
    raw = bytearray(path.read_bytes())
    raw[min(at, len(raw) - 5)] ^= 0xFF
    path.write_bytes(bytes(raw))


def test_a_flipped_byte_in_the_done_mask_is_reported_and_rebuilt_by_repair(corpus, tmp_path):
    out = tmp_path / "g.zarr"
    good = run_gram(corpus, SST, out, tile=20, cluster="sequential").view().block()
    flip_byte(out / "done" / "c" / "0" / "0")
    with pytest.raises(StoreCorruptError, match="verify --repair"):
        GramStore.open(out).done_mask()
    rep = verify(out)
    assert rep.done_damaged and not rep.ok
    (out / "K" / "c" / "1" / "3").unlink()  # and one stored tile is lost as well
    rep = repair(out)
    assert rep.ok and len(rep.rebuilt) == 9  # 10 planned tiles (4 x 4 upper triangle), one lost
    st = GramStore.open(out)
    assert st.complete and np.array_equal(st.view().block(), good)


def test_verify_finds_infinite_values_and_repair_only_claims_what_verifies(corpus, tmp_path):
    out = tmp_path / "g.zarr"
    run_gram(corpus, SST, out, tile=20, cluster="sequential")
    K = zarr.open_array(str(out / "K"), mode="r+")
    K[0, 25] = np.inf  # inside done tile (0, 1)
    rep = verify(out)
    assert [tuple(t) for t, _ in rep.bad] == [(0, 1)] and "infinite" in rep.bad[0][1]
    rep = repair(out)
    assert rep.ok and rep.repaired == [Tile(0, 1)] and verify(out).bad == []


def test_swapped_chunks_are_caught_by_the_checksum_manifest_and_repaired(corpus, tmp_path):
    out = tmp_path / "g.zarr"
    good = run_gram(corpus, SST, out, tile=20, cluster="sequential").view().block()
    a, b = out / "K" / "c" / "0" / "1", out / "K" / "c" / "0" / "2"
    ab, bb = a.read_bytes(), b.read_bytes()
    a.write_bytes(bb)
    b.write_bytes(ab)  # each chunk's own crc32c still passes: only its position is wrong
    rep = verify(out)
    assert sorted(tuple(t) for t, _ in rep.bad) == [(0, 1), (0, 2)]
    assert all("recorded when its tile was computed" in why for _, why in rep.bad)
    rep = repair(out)
    assert rep.ok and sorted(rep.repaired) == [Tile(0, 1), Tile(0, 2)]
    assert np.array_equal(GramStore.open(out).view().block(), good)


def test_stores_without_a_manifest_still_verify_and_gain_one_on_resume(corpus, tmp_path):
    out = tmp_path / "g.zarr"
    run_gram(corpus, SST, out, tile=20, cluster="sequential")
    shutil.rmtree(out / "tile_crc")  # as a store made before the manifest existed
    assert GramStore.open(out).tile_crc is None and verify(out).ok
    st = GramStore.open(out, mode="r+")
    st.clear_done([Tile(0, 0)])
    st = run_gram(corpus, SST, out, tile=20, cluster="sequential")
    assert st.tile_crc is not None and np.count_nonzero(np.asarray(st.tile_crc[...])) == 1  # the recomputed tile
    assert verify(out).ok


@pytest.mark.parametrize("edit", ["n_rows", "row_index", "tile"])
def test_edited_metadata_fails_verify_and_is_not_repaired(corpus, tmp_path, edit):
    out = tmp_path / "g.zarr"
    run_gram(corpus, SST, out, tile=20, cluster="sequential")
    if edit == "row_index":
        ri = zarr.open_array(str(out / "row_index"), mode="r+")
        ri[3] = 77
    else:
        g = zarr.open_group(str(out), mode="r+")
        meta = dict(g.attrs["gramtile"])
        meta[edit] = meta[edit] + (1 if edit == "n_rows" else 5)
        g.attrs["gramtile"] = meta
    rep = verify(out)
    assert not rep.ok and "inconsistent" in rep.metadata
    assert repair(out).metadata and not repair(out).repaired


def test_readers_refuse_nan_and_swapped_chunks_instead_of_returning_them(corpus, tmp_path):
    out = tmp_path / "g.zarr"
    run_gram(corpus, SST, out, tile=20, cluster="sequential")
    K = zarr.open_array(str(out / "K"), mode="r+")
    K[0, 25] = np.nan  # a done tile (0, 1) with a NaN, as a lost chunk reads back
    with pytest.raises(StoreCorruptError, match="NaN or infinite.*verify"):
        GramStore.open(out).view().block()
    with pytest.raises(StoreCorruptError, match="NaN or infinite"):
        export(out, tmp_path / "K.npy")
    assert not (tmp_path / "K.npy").exists()
    r = subprocess.run([sys.executable, "-m", "gramtile", "export", str(out), "--out", str(tmp_path / "K2.npy")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "NaN or infinite" in r.stderr and not (tmp_path / "K2.npy").exists()
    repair(out)
    a, b = out / "K" / "c" / "1" / "2", out / "K" / "c" / "1" / "3"
    ab, bb = a.read_bytes(), b.read_bytes()
    a.write_bytes(bb)
    b.write_bytes(ab)
    with pytest.raises(StoreCorruptError, match="does not match the checksum recorded"):
        GramStore.open(out).view().block(slice(20, 40), slice(40, 80))


def test_a_tile_interrupted_between_its_checksum_and_its_done_bit_is_not_damage(corpus, tmp_path):
    """The driver records a tile's checksum, then its done bit. A process stopped between the two on
    the store's first tile (Ctrl-C in a `threads` run: tile_crc written, done not yet) left no done
    chunk file at all, which verify took for a lost one. Every done chunk is now written when the
    mask is made, and stays a file when all its bits are cleared."""
    from gramtile.kernels.registry import as_spec
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    out = tmp_path / "g.zarr"
    cs = CorpusStore.open(corpus)
    idx = np.arange(cs.n)
    st = GramStore.create_or_open(out, spec=as_spec(SST), corpus_hash=cs.content_hash, corpus_path=str(corpus),
                                  rows=idx, cols=idx, tile=20, symmetric=True)
    assert (out / "done" / "c" / "0" / "0").is_file()
    st.tile_crc[0, 0] = 12345  # the checksum of tile (0, 0) recorded, its done bit not yet
    assert verify(out).ok
    good = run_gram(corpus, SST, tmp_path / "ref.zarr", tile=20, cluster="sequential").view().block()
    done = run_gram(corpus, SST, out, tile=20, cluster="sequential")
    assert done.complete and np.array_equal(done.view().block(), good)
    # clearing every done bit of a chunk (as a reset does) keeps the chunk's file, so verify still
    # tells a lost done chunk (reported) from one that is all False
    st = GramStore.open(out, mode="r+")
    st.clear_done(list(st.grid().tiles()))
    assert (out / "done" / "c" / "0" / "0").is_file() and verify(out).ok
    (out / "done" / "c" / "0" / "0").unlink()
    assert verify(out).done_damaged
