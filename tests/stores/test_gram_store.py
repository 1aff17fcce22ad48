"""The Gram store: provenance, mismatch and lock errors, incomplete reads, lazy views, verify/repair,
composites from stored base matrices. Real NUM_train.dat trees, real SST/ST kernels, real Zarr."""
import json

import numpy as np
import pytest
from conftest import corpus_store_of, lock_holder, num_trees

import gramtile
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.cache import Cache
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.repair import repair
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import IncompleteTileError, StoreCorruptError, StoreLockedError, StoreMismatchError
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_export import export
from gramtile.pipeline.stores.gram_store import GramStore, store_lock
from gramtile.pipeline.stores.gram_verify import verify
from gramtile.pipeline.stores.tiles import Tile

N = 240
SST = '{"kind": "sst", "lam": 0.4}'
ST = '{"kind": "st", "lam": 0.4}'


class Stop(Exception):
    pass


@pytest.fixture(scope="module")
def docs():
    return num_trees(N)


@pytest.fixture(scope="module")
def corpus(docs, tmp_path_factory):
    return corpus_store_of(tmp_path_factory.mktemp("corpus") / "num.zarr", docs, 64)


@pytest.fixture(scope="module")
def sst_store(corpus, tmp_path_factory):
    out = tmp_path_factory.mktemp("gram") / "sst.zarr"
    run_gram(corpus, SST, out, tile=50, cluster="sequential")
    return out


def test_store_holds_the_in_memory_gram_and_its_provenance(sst_store, corpus, docs):
    st = GramStore.open(sst_store)
    K = st.view().block()
    assert np.array_equal(K, gramtile.gram(SST, docs))
    assert np.array_equal(st.view().block(normalized=True),
                          gramtile.gram({"kind": "normalized", "kernel": json.loads(SST)}, docs))
    m = st.meta
    spec = as_spec(SST)
    assert m["kernel_hash"] == spec.spec_hash and json.loads(m["kernel_json"]) == spec.to_dict()
    assert m["corpus_hash"] == CorpusStore.open(corpus).content_hash
    assert m["corpus_path"] == str(corpus.resolve())
    assert m["tile"] == 50 and m["symmetric"] is True and m["n_rows"] == N
    assert m["row_ids"] == CorpusStore.open(corpus).ids
    assert m["gramtile_version"] == gramtile.__version__ and m["created"] and m["updated"]
    # chunks are the tiles and carry crc32c checksums
    assert st.K.chunks == (50, 50)
    assert "crc32c" in json.dumps(json.loads((sst_store / "K" / "zarr.json").read_text())["codecs"])
    assert np.array_equal(st.view().diag()[0], np.diag(K))
    assert st.complete and st.tiles_done() == (15, 15)


def test_view_reads_only_the_chunks_it_needs(sst_store, docs):
    v = GramStore.open(sst_store).view()
    full = gramtile.gram(SST, docs)
    rows, cols = [3, 7, 49], [55, 60, 99]
    assert np.array_equal(v.block(rows, cols), full[np.ix_(rows, cols)])
    assert v.chunk_reads == 1
    # a block below the diagonal is read from the tile above it, transposed
    assert np.array_equal(v.block(cols, rows), full[np.ix_(cols, rows)])
    assert v.chunk_reads == 2
    sel = [230, 0, 120]
    assert np.array_equal(v.block(sel, slice(None)), full[sel])
    # row tiles {0, 2, 4} x column tiles {0..4}: 15 tiles, of which (2, 0), (4, 0) and (4, 2) are the
    # mirrors of (0, 2), (0, 4) and (2, 4), read once for both: 12 stored chunks
    assert v.chunk_reads == 2 + 12
    assert np.array_equal(v[sel, 60:62], full[np.ix_(sel, [60, 61])])
    assert v.chunk_reads == 2 + 12 + 3
    assert np.array_equal(v[5:6], full[5:6])


def test_view_blocks_read_each_stored_chunk_once_for_all_pairs(sst_store, docs):
    full = gramtile.gram(SST, docs)
    rng = np.random.default_rng(3)
    for _ in range(5):
        train = np.sort(rng.choice(N, 120, replace=False))
        test = rng.permutation(np.setdiff1d(np.arange(N), train))[:40]  # unsorted positions too
        v = GramStore.open(sst_store).view()
        got = v.blocks([(train, train), (test, train)], normalized=True)
        d = np.sqrt(np.diag(full))
        Kn = full / np.outer(d, d)
        np.testing.assert_array_equal(got[0], v.block(train, train, normalized=True))
        np.testing.assert_array_equal(got[1], v.block(test, train, normalized=True))
        np.testing.assert_allclose(got[0], Kn[np.ix_(train, train)], rtol=1e-14)
        np.testing.assert_allclose(got[1], Kn[np.ix_(test, train)], rtol=1e-14)
        t = GramStore.open(sst_store).tile
        tiles = {(min(a, b), max(a, b)) for r, c in ((train, train), (test, train))
                 for a in np.unique(r // t) for b in np.unique(c // t)}
        v2 = GramStore.open(sst_store).view()
        v2.blocks([(train, train), (test, train)])
        assert v2.chunk_reads == len(tiles)


def test_reopen_with_other_kernel_corpus_selection_or_tile_raises(sst_store, corpus):
    with pytest.raises(StoreMismatchError) as e:
        run_gram(corpus, ST, sst_store, cluster="sequential")
    msg = str(e.value)
    assert as_spec(ST).spec_hash in msg and as_spec(SST).spec_hash in msg and "new --out" in msg
    with pytest.raises(StoreMismatchError, match="row selection"):
        run_gram(corpus, SST, sst_store, rows="0:100", cluster="sequential")
    with pytest.raises(StoreMismatchError, match="tile size 50"):
        run_gram(corpus, SST, sst_store, tile=40, cluster="sequential")
    # the store is untouched and still complete
    assert GramStore.open(sst_store).complete


def test_reopen_against_another_corpus_names_both_hashes(sst_store, docs, tmp_path):
    other = tmp_path / "other.zarr"
    cs = CorpusStore.create(other, shard_size=300)
    cs.write_shard(0, list(reversed(docs)))
    cs.finish()
    cs.close()
    with pytest.raises(StoreMismatchError) as e:
        run_gram(other, SST, sst_store, cluster="sequential")
    assert CorpusStore.open(other).content_hash in str(e.value)
    assert GramStore.open(sst_store).corpus_hash in str(e.value)


def test_second_writer_is_refused_and_a_dead_writers_lock_is_taken_over(corpus, tmp_path):
    out = tmp_path / "locked.zarr"
    out.mkdir()
    with lock_holder(out) as holder:
        with pytest.raises(StoreLockedError, match=f"locked by process {holder.pid}"):
            run_gram(corpus, SST, out, rows="0:60", cluster="sequential")
    # the holder died without releasing: its lock is stale and the next run proceeds
    assert (out / "gramtile.lock").exists()
    st = run_gram(corpus, SST, out, rows="0:60", tile=30, cluster="sequential")
    assert st.complete and not (out / "gramtile.lock").exists()
    with store_lock(out):
        with pytest.raises(StoreLockedError):
            with store_lock(out):
                pass


def test_unfinished_tiles_cannot_be_read_or_exported(corpus, docs, tmp_path):
    out = tmp_path / "partial.zarr"
    seen = []

    def stop_after_three(res):
        assert (out / "gramtile.lock").exists()  # held from before the store's creation
        seen.append(res.tile)
        if len(seen) == 3:
            raise Stop

    with pytest.raises(Stop):
        run_gram(corpus, SST, out, tile=50, cluster="sequential", on_tile=stop_after_three)
    st = GramStore.open(out)
    assert st.tiles_done() == (3, 15) and not st.complete
    assert seen == [Tile(0, 1), Tile(0, 2), Tile(0, 3)]  # the plan's order: full off-diagonal tiles first
    v = st.view()
    full = gramtile.gram(SST, docs)
    assert np.array_equal(v.block(slice(0, 50), slice(50, 200)), full[:50, 50:200])
    with pytest.raises(IncompleteTileError, match=r"tile \(0, 0\).*3 of 15"):
        v.block(slice(0, 100), slice(0, 100))
    with pytest.raises(IncompleteTileError, match="incomplete"):
        export(st, tmp_path / "K.npy")
    assert not (tmp_path / "K.npy").exists()
    # a torn last log line (driver killed mid-write) costs only that line
    with open(out / "log" / "records.jsonl", "a") as f:
        f.write('{"event": "tile", "ru')
    # resuming computes only the 12 missing tiles
    run_gram(corpus, SST, out, cluster="sequential")
    log = GramStore.open(out).read_log()
    runs = [r["run"] for r in log if r["event"] == "start"]
    assert len(runs) == 2
    second = [tuple(r["tile"]) for r in log if r["event"] == "tile" and r["run"] == runs[1]]
    assert len(second) == 12 and not set(second) & {(0, 1), (0, 2), (0, 3)}
    export(out, tmp_path / "K.npy")
    assert np.array_equal(np.load(tmp_path / "K.npy"), full)


def test_verify_reports_flipped_bytes_and_repair_restores_them(corpus, sst_store, tmp_path):
    import shutil

    out = tmp_path / "copy.zarr"
    shutil.copytree(sst_store, out)
    good = GramStore.open(out).view().block()
    assert verify(out).bad == []
    st = GramStore.open(out)
    chunk = st.chunk_path(Tile(1, 2))
    raw = bytearray(chunk.read_bytes())
    raw[100] ^= 0xFF
    chunk.write_bytes(bytes(raw))
    assert not st.chunk_path(Tile(4, 0)).exists()  # symmetric: only tiles i <= j are on disk
    (st.chunk_path(Tile(0, 4))).unlink()  # a lost chunk reads back as NaN fill
    rep = verify(out)
    bad = {tuple(t) for t, _ in rep.bad}
    assert bad == {(1, 2), (0, 4)}
    assert any("unreadable" in why for _, why in rep.bad)
    with pytest.raises(StoreCorruptError, match="verify"):
        GramStore.open(out).view().block(slice(50, 100), slice(100, 150))
    rep = repair(out)
    assert sorted(rep.repaired) == [Tile(0, 4), Tile(1, 2)]
    assert verify(out).bad == []
    assert np.array_equal(GramStore.open(out).view().block(), good)


def test_rectangular_test_by_train_store(corpus, docs, tmp_path):
    out = tmp_path / "rect.zarr"
    st = run_gram(corpus, SST, out, rows="200:240", cols="0:130", tile=32, cluster="sequential")
    assert not st.symmetric and st.shape == (40, 130) and st.tiles_done() == (10, 10)
    K = st.view().block()
    assert np.allclose(K, gramtile.gram(SST, docs[200:240], docs[0:130]), rtol=1e-12, atol=0)
    dr, dc = st.view().diag()
    assert np.allclose(dr, np.diag(gramtile.gram(SST, docs[200:240])), rtol=1e-12)
    assert np.allclose(dc, np.diag(gramtile.gram(SST, docs[0:130])), rtol=1e-12)


def test_composite_from_stored_base_matrices(corpus, sst_store, docs, tmp_path):
    st_out = tmp_path / "st.zarr"
    run_gram(corpus, ST, st_out, tile=50, cluster="sequential")
    comp = as_spec({"kind": "sum", "kernels": [
        {"weight": 0.5, "kernel": {"kind": "normalized", "kernel": json.loads(SST)}},
        {"weight": 2.0, "kernel": {"kind": "polynomial", "kernel": json.loads(ST), "degree": 2, "offset": 1}}]})
    stores = {s.kernel_hash: s for s in (GramStore.open(sst_store), GramStore.open(st_out))}
    cv = ComposedView(comp, stores)
    rows, cols = np.arange(10, 70), np.arange(100, 240)
    want = gramtile.gram(comp, docs)
    assert np.allclose(cv.block(rows, cols), want[np.ix_(rows, cols)], rtol=1e-12, atol=0)
    assert np.allclose(cv.block(normalized=True),
                       gramtile.gram({"kind": "normalized", "kernel": comp.to_dict()}, docs), rtol=1e-12, atol=1e-15)
    with pytest.raises(StoreMismatchError, match="no stored Gram matrix"):
        ComposedView(comp, {GramStore.open(sst_store).kernel_hash: GramStore.open(sst_store)})


def test_tasks_read_each_shard_once_through_the_run_cache(corpus, tmp_path):
    with Cache().active() as c:  # the run uses the cache opened around it
        run_gram(corpus, SST, tmp_path / "lru.zarr", tile=30, cluster="sequential")
    shards, ranges = c.counts("shards"), c.counts("ranges")
    # 4 shards of 64 read once; 8 tile ranges assembled once (from 8 + 2 straddling shard reads,
    # the rest hits); 36 tiles: 8 diagonal tiles need their row, 28 off-diagonal ones row + column
    assert shards["loads"] == 4
    assert shards["hits"] == 8 + 3 - 4
    assert ranges["loads"] == 8 and ranges["hits"] == 8 + 2 * 28 - 8


def test_a_run_owns_its_cache_and_empties_it_when_it_ends(corpus, tmp_path):
    rt = Runtime("threads")
    with rt:
        run_gram(corpus, SST, tmp_path / "own.zarr", tile=30, cluster=rt)
        assert rt.cache.size("shards")[0] == 4 and rt.cache.counts("shards")["loads"] == 4
    assert rt.cache.size("shards") == (0, 0) and rt.cache.size("ranges") == (0, 0)


def test_the_range_cache_holds_at_most_its_byte_budget_and_values_do_not_change(corpus, tmp_path):
    with Cache().active() as c:
        run_gram(corpus, SST, tmp_path / "all.zarr", tile=20, cluster="sequential")
    n_all, bytes_all = c.size("ranges")
    per_range = bytes_all / n_all
    assert n_all >= 8 and per_range > 0  # every tile range of the 160 examples stays cached
    # a budget of about two ranges: the LRU keeps at most that many bytes (and always the newest)
    small = Cache()
    small.limit("ranges", nbytes=int(2.5 * per_range))
    with small.active():
        run_gram(corpus, SST, tmp_path / "small.zarr", tile=20, cluster="sequential")
    n_small, bytes_small = small.size("ranges")
    assert 1 <= n_small < n_all and bytes_small <= 2.5 * per_range * 1.5
    a, b = GramStore.open(tmp_path / "all.zarr").view(), GramStore.open(tmp_path / "small.zarr").view()
    assert np.array_equal(a.block(), b.block())


def test_a_store_whose_creation_was_cut_short_is_finished_by_the_rerun(corpus, docs, tmp_path):
    import shutil

    from gramtile.pipeline.stores.errors import StoreError

    out = tmp_path / "cut.zarr"
    run_gram(corpus, SST, out, rows="0:40", tile=20, cluster="sequential")
    # a crash right after the attributes were written: no arrays yet
    for name in ("K", "diag_rows", "diag_cols", "done", "row_index", "col_index"):
        shutil.rmtree(out / name)
    shutil.rmtree(out / "log")
    with pytest.raises(StoreError, match="not fully created"):
        GramStore.open(out)
    st = run_gram(corpus, SST, out, rows="0:40", cluster="sequential")
    assert st.complete and st.tile == 20
    assert np.array_equal(st.view().block(), gramtile.gram(SST, docs[:40]))
