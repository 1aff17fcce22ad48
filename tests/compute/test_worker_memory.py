"""The product path and Nystroem plan for the memory of the process that runs them
(Runtime.task_memory): a runtime with little memory per task makes the blocks smaller with K and
the features unchanged bitwise, and what cannot fit is refused before it starts, with the figures
and the fix."""
import numpy as np
import pytest
from conftest import corpus_store_of, num_trees

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute import feature_sets, product
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.errors import TaskTooLargeError
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.learn import nystroem
from gramtile.pipeline.learn.crossval import evaluate_nystroem
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.nystroem import features_in_place, pick_landmarks
from gramtile.pipeline.learn.sources import ArrayKernelSource

ST = '{"kind": "st", "lam": 0.4}'

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return corpus_store_of(tmp_path_factory.mktemp("corpus") / "num1200.zarr", num_trees(1200), 250)


@pytest.fixture(scope="module")
def sequential(corpus, tmp_path_factory):
    """K on the product path in this process, with the default tile (and its store)."""
    st = run_gram(corpus, ST, tmp_path_factory.mktemp("seq") / "k.zarr", cluster="sequential", path="product")
    return st, st.view().to_numpy()


def feature_set(corpus):
    return feature_sets.load(str(corpus), as_spec(ST))


def runtime_of(per_task_mb: float, profile="threads") -> Runtime:
    """An in-process runtime whose tasks may each use ``per_task_mb``."""
    rt = Runtime(profile)
    rt = Runtime(profile, memory_mb=per_task_mb * rt.slots)
    assert rt.task_memory(product.MEMORY_SHARE).per_task_mb == pytest.approx(per_task_mb)
    return rt


def paths_logged(st):
    return [p["path"] for r in st.read_log() if r.get("event") == "tile" for p in r.get("paths", [])]


def test_product_blocks_shrink_to_the_memory_of_a_task_and_K_stays_bitwise(corpus, sequential, tmp_path):
    seq, K = sequential
    fs = feature_set(corpus)
    small_mb = product.block_bytes(fs, 60, 60, False) / 1e6 * (1 + 1e-9)
    assert product.block_bytes(fs, seq.tile, seq.tile, False) / 1e6 > small_mb  # the default tile would not fit
    st = run_gram(corpus, ST, tmp_path / "k.zarr", cluster=runtime_of(small_mb), path="product")
    assert st.tile == product.largest_tile(fs, small_mb * 1e6, seq.tile) == 60 < seq.tile
    assert set(paths_logged(st)) == {"product"}
    assert np.array_equal(st.view().to_numpy(), K)


def test_a_product_block_that_cannot_fit_is_refused_before_any_tile(corpus, sequential, tmp_path):
    seq, K = sequential
    fs = feature_set(corpus)
    small_mb = product.block_bytes(fs, 60, 60, False) / 1e6 * (1 + 1e-9)
    with pytest.raises(TaskTooLargeError, match=r"the product path of st needs [\d.,]+ MB per tile task \(tile "
                                                rf"{seq.tile}, {fs.n_features:,} features\), but --memory-mb leaves "
                                                r"[\d.,]+ MB per task .* Fix: a new --out with --tile 60, --path "
                                                r"pairwise"):
        run_gram(corpus, ST, tmp_path / "k.zarr", tile=seq.tile, cluster=runtime_of(small_mb), path="product")
    from gramtile.pipeline.stores.gram_store import GramStore
    assert not GramStore.open(tmp_path / "k.zarr").done_mask().any()  # no tile ran
    # auto: that kernel's tiles take the pairwise path, which gives the pairwise K bitwise
    auto = run_gram(corpus, ST, tmp_path / "auto.zarr", tile=seq.tile, cluster=runtime_of(small_mb), path="auto")
    pair = run_gram(corpus, ST, tmp_path / "pair.zarr", tile=seq.tile, cluster="sequential", path="pairwise")
    assert paths_logged(auto) == []  # no tile took (or weighed) the product path
    assert np.array_equal(auto.view().to_numpy(), pair.view().to_numpy())
    assert not np.array_equal(auto.view().to_numpy(), K)  # the product path's K differs in round-off: a real choice


def test_workers_of_a_real_local_cluster_with_little_memory_refuse_the_product_path(no_env, corpus, sequential,
                                                                                    tmp_path):
    """A LocalCluster worker of 340 MiB leaves nothing for a tile task beyond what the worker
    holds itself (paused at 80 %): the product path is refused with the worker's figures, where
    this process (the driver) had plenty."""
    seq, _ = sequential
    f = no_env / "c.yaml"
    f.write_text("profiles:\n  tiny: {type: local, n_workers: 1, threads_per_worker: 1, memory_limit: 340MiB}\n")
    with Runtime("tiny", f) as rt:
        mem = rt.task_memory(product.MEMORY_SHARE)
        assert mem.on_workers and mem.per_task_mb < product.block_bytes(feature_set(corpus), 16, 16, False) / 1e6
        with pytest.raises(TaskTooLargeError, match=r"the product path of st needs [\d.,]+ MB per tile task .* but a "
                                                    r"worker of profile 'tiny' \(357 MB limit, paused at 80%.*Fix: "
                                                    r"--path pairwise \(or auto\), or give the workers more memory"):
            run_gram(corpus, ST, tmp_path / "k.zarr", cluster=rt, path="product")


# ---- Nystroem ----------------------------------------------------------------------------------


class CountingSource(ArrayKernelSource):
    """An in-memory source that records the rows of every block read."""

    def __init__(self, K):
        super().__init__(K)
        self.bands = []

    def block(self, rows, cols=None):
        self.bands.append(len(rows))
        return super().block(rows, cols)


def rbf(n, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = rng.normal(size=(n, 4)) + rng.normal(size=(3, 4))[y] * 1.5
    sq = (X * X).sum(1)
    K = np.exp(-0.2 * np.maximum(sq[:, None] + sq[None, :] - 2 * X @ X.T, 0))
    return K, np.array([f"c{v}" for v in y])


def test_nystroem_bands_shrink_to_the_memory_of_the_fit_and_features_stay_bitwise():
    K, y = rbf(1500)
    rows = np.arange(1500)
    L = pick_landmarks(y, rows, 200, seed=0)
    wide = CountingSource(K)
    F, fmap = features_in_place(wide, rows, L, np.empty(rows.size * L.size))
    assert wide.bands == [1500]  # the default band holds every row here
    need = 8 * (rows.size * L.size + 4 * L.size ** 2) / 1e6
    narrow = CountingSource(K)
    G, gmap = features_in_place(narrow, rows, L, np.empty(rows.size * L.size),
                                memory_mb=need + 6 * 8 * 100.5 * L.size / 1e6)
    assert narrow.bands == [100] * 15  # a sixth of what is left beside the feature array: 100 rows
    assert gmap.rank == fmap.rank and np.array_equal(G, F)


def test_nystroem_fits_plan_for_the_memory_of_the_runtime_and_refuse_what_cannot_fit():
    K, y = rbf(600)
    splits = stratified_kfold(y, 3, seed=0)
    src = CountingSource(K)
    with pytest.raises(EvaluationError, match=r"nystroem: 600 examples x 150 landmarks need [\d.]+ MB per fit \(the "
                                              r"[\d.]+ MB feature array .*\), but --memory-mb leaves [\d.]+ MB per fit "
                                              r"\(1 at once\). Fix: fewer landmarks \(--landmarks\)"):
        evaluate_nystroem(src, y, splits, m=150, cluster=Runtime("sequential", memory_mb=0.5))
    assert src.bands == []  # refused before anything was read
    # with the memory it needs, the same evaluation runs, in bands sized from that memory, and
    # predicts as one with all the memory of this process
    small = evaluate_nystroem(src, y, splits, m=150, cluster=Runtime("sequential", memory_mb=2.0))
    assert src.bands and max(src.bands) < 600
    big = evaluate_nystroem(CountingSource(K), y, splits, m=150, cluster="sequential")
    assert np.array_equal(small[0]["predictions"][1], big[0]["predictions"][1])
    assert small[0]["accuracy"] == big[0]["accuracy"] and small[0]["rank"] == big[0]["rank"]


def test_nystroem_in_worker_processes_plans_for_one_worker(no_env):
    """On a LocalCluster of 340 MiB workers a fit has nothing left beside what the worker holds:
    the Nystroem evaluation is refused before any task, with the worker's figures."""
    K, y = rbf(600)
    splits = stratified_kfold(y, 3, seed=0)
    f = no_env / "c.yaml"
    f.write_text("profiles:\n  tiny: {type: local, n_workers: 1, threads_per_worker: 1, memory_limit: 340MiB}\n")
    src = CountingSource(K)
    with Runtime("tiny", f) as rt:
        with pytest.raises(EvaluationError, match=r"need [\d.]+ MB per fit .* but a worker of profile 'tiny' \(357 MB "
                                                  r"limit, paused at 80%"):
            evaluate_nystroem(src, y, splits, m=150, cluster=rt)
    assert src.bands == []


def test_train_nystroem_plans_for_this_process_whatever_the_profile():
    """``train --model nystroem`` makes its features in the driver: a worker profile does not size them."""
    assert nystroem.nystroem_memory(Runtime("sequential", memory_mb=123.0)).process_mb == 123.0
    assert nystroem.nystroem_memory(Runtime("local", memory_mb=77.0)).process_mb == 77.0
    assert not nystroem.nystroem_memory("local").on_workers
