"""K's chunk files read directly (stores/chunk_files.py) give what Zarr gives, and refuse what Zarr
refuses: every chunk of real float64 and float32 stores (edge tiles included) bit-equal to Zarr's
decode; a flipped byte, a truncated file and a missing file are clear StoreCorruptErrors naming the
repair. Real NUM trees, real SST kernel, real Zarr stores on disk."""
import shutil

import numpy as np
import pytest
from conftest import corpus_store_of, num_trees

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.stores import chunk_cache as cc
from gramtile.pipeline.stores.chunk_files import local_chunk_reader, read_chunk
from gramtile.pipeline.stores.errors import StoreCorruptError
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.tiles import Tile

SST = '{"kind": "sst", "lam": 0.4}'


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    d = tmp_path_factory.mktemp("chunkfiles")
    corpus = corpus_store_of(d / "c.zarr", num_trees(130), 40)
    out = {}
    for dtype in ("float64", "float32"):
        out[dtype] = d / f"{dtype}.zarr"  # 130 rows in tiles of 48: the last tile row and column are edges
        run_gram(corpus, SST, out[dtype], tile=48, cluster="sequential", dtype=dtype)
    rect = d / "rect.zarr"
    run_gram(corpus, SST, rect, rows="0:100", cols="30:130", tile=48, cluster="sequential")
    out["rect"] = rect
    return out


@pytest.mark.parametrize("which", ["float64", "float32", "rect"])
def test_every_chunk_read_directly_is_bit_equal_to_zarrs_decode(stores, which):
    st = GramStore.open(stores[which])
    assert local_chunk_reader(st)
    nr, nc = st.grid().shape
    seen = 0
    for i in range(nr):
        for j in range(i if st.symmetric else 0, nc):
            r0, r1, c0, c1 = st.spans(Tile(i, j))
            got = read_chunk(st, i, j, (r1 - r0, c1 - c0))
            want = np.asarray(st.K[r0:r1, c0:c1])
            assert got.dtype == want.dtype == np.dtype(st.dtype) and got.shape == want.shape
            assert np.array_equal(got, want) and np.isfinite(got).all()
            seen += 1
    assert seen == (6 if st.symmetric else 9)


def test_a_view_gives_the_same_blocks_with_either_reader(stores, monkeypatch):
    monkeypatch.setenv(cc.ENV, "0")  # every block read from the files, not a cache
    st = GramStore.open(stores["float64"])
    direct = st.view().block()
    v = st.view()
    v._direct = False  # force Zarr's decode
    assert np.array_equal(direct, v.block()) and np.allclose(direct, direct.T, rtol=0, atol=0)


def _copy(stores, tmp_path):
    dst = tmp_path / "g.zarr"
    shutil.copytree(stores["float64"], dst)
    return dst


def test_a_flipped_byte_is_refused_by_its_crc32c(stores, tmp_path, monkeypatch):
    monkeypatch.setenv(cc.ENV, "0")
    out = _copy(stores, tmp_path)
    f = GramStore.open(out).chunk_path(Tile(0, 1))
    raw = bytearray(f.read_bytes())
    raw[1234] ^= 0x10
    f.write_bytes(bytes(raw))
    with pytest.raises(StoreCorruptError, match=r"tile \(0, 1\).*crc32c.*verify .*--repair"):
        GramStore.open(out).view().block(slice(0, 48), slice(48, 96))
    # the other tiles still read
    assert GramStore.open(out).view().block(slice(0, 48), slice(0, 48)).shape == (48, 48)


def test_a_truncated_or_missing_chunk_file_is_refused_naming_the_repair(stores, tmp_path, monkeypatch):
    monkeypatch.setenv(cc.ENV, "0")
    out = _copy(stores, tmp_path)
    st = GramStore.open(out)
    f = st.chunk_path(Tile(1, 2))
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(StoreCorruptError, match=r"tile \(1, 2\).*bytes.*truncated.*--repair"):
        GramStore.open(out).view().block(slice(48, 96), slice(96, 130))
    f.unlink()
    with pytest.raises(StoreCorruptError, match=r"tile \(1, 2\) is missing.*--repair"):
        GramStore.open(out).view().block(slice(48, 96), slice(96, 130))
