"""Store identity end to end: a tile task of an interrupted run never writes into a store
recreated at the same path, nor into a store a newer run has taken over."""
import shutil

import numpy as np
import pytest
from conftest import corpus_store_of, num_trees

import gramtile
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.tile_task import TileJob, compute_tile, store_token
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreMismatchError
from gramtile.pipeline.stores.gram_format import selection_hash
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.tiles import Tile, TileGrid

ST = {"kind": "st", "lam": 0.4}
SST = {"kind": "sst", "lam": 0.4}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return corpus_store_of(tmp_path_factory.mktemp("c") / "c.zarr", num_trees(90), 30)


def job_of(corpus, store: GramStore) -> TileJob:
    """The job a run of ``store`` sends with its tasks (as the engine builds it)."""
    cs = CorpusStore.open(corpus)
    spec = store.spec
    rows = store.rows()
    return TileJob(corpus_path=str(corpus), corpus_hash=cs.content_hash, spec_json=spec.to_json(),
                   spec_hash=spec.spec_hash, reps=tuple(sorted({b.rep_name for b in spec.base_specs()})),
                   store_path=str(store.path), tile=store.tile, symmetric=True,
                   token=store_token(cs.content_hash, selection_hash(rows), selection_hash(rows), store.tile),
                   store_uid=store.meta["uid"], run=store.meta["run"])


def test_an_old_runs_task_never_writes_into_a_store_recreated_at_its_path(corpus, tmp_path):
    out = tmp_path / "g.zarr"
    old = run_gram(corpus, ST, out, tile=30, cluster="sequential")
    job = job_of(corpus, old)
    shutil.rmtree(out)
    new = run_gram(corpus, SST, out, tile=30, cluster="sequential")
    before = new.view().block()
    grid = TileGrid(new.rows(), new.rows(), new.tile, symmetric=True)
    t = Tile(0, 1)
    with pytest.raises(StoreMismatchError, match="now another store"):
        compute_tile(job, t, grid.row_index(t.i), grid.col_index(t.j))
    assert np.array_equal(GramStore.open(out).view().block(), before)  # not one cell of the ST kernel
    assert np.allclose(before, gramtile.gram(as_spec(SST), [d.structures["tree"] for d in num_trees(90)]))


def test_an_interrupted_runs_task_is_fenced_once_a_new_run_owns_the_store(corpus, tmp_path):
    out = tmp_path / "g.zarr"
    first = run_gram(corpus, ST, out, tile=30, cluster="sequential")
    job = job_of(corpus, first)
    st = GramStore.open(out, mode="r+")
    st.clear_done([Tile(0, 2)])
    again = run_gram(corpus, ST, out, tile=30, cluster="sequential")  # a new run resumes
    assert again.meta["run"] != job.run
    grid = TileGrid(again.rows(), again.rows(), again.tile, symmetric=True)
    with pytest.raises(StoreMismatchError, match="has taken the store over"):
        compute_tile(job, Tile(0, 2), grid.row_index(0), grid.col_index(2))
    # the current run's own job still writes
    fresh = job_of(corpus, GramStore.open(out))
    res = compute_tile(fresh, Tile(0, 2), grid.row_index(0), grid.col_index(2))
    assert res.tile == Tile(0, 2)
