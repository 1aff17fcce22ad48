"""The commands as Python functions (gramtile.prepare, gram, features, evaluate, train, predict,
export, open): the same options and results as the command line, stores on a LocalCluster,
in-memory examples through the tiled engine, bad options refused in the command's words."""
import json

import distributed
import numpy as np
import pytest

import gramtile
from gramtile.pipeline.compute.errors import ClusterConfigError
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.stores.errors import StoreError, StoreMismatchError
from gramtile.workflows.cli import main
from gramtile.workflows.errors import UsageError

SST = {"kind": "sst", "lam": 0.4}
NOUNS = ["dog", "cat", "bird", "man", "fox", "girl", "choir", "wolf", "owl", "boy", "crow", "tenor"]


def trees(k: int = 12) -> list[str]:
    """k bracket trees of two classes (barks / sings), varied in their nouns and adverbs."""
    out = []
    for i in range(k):
        verb = "barks" if i % 2 == 0 else "sings"
        adv = f" (ADV {'loudly' if i % 3 == 0 else 'well'})" if i % 4 else ""
        out.append(f"(S (NP (D {'the' if i % 3 else 'a'}) (N {NOUNS[i % len(NOUNS)]})) (VP (V {verb}){adv}))")
    return out


@pytest.fixture
def tree_file(tmp_path):
    f = tmp_path / "trees.dat"
    f.write_text("".join(f"{'+1' if 'barks' in t else '-1'} |BT| {t} |ET|\n" for t in trees()), encoding="utf-8")
    return f


@pytest.mark.timeout(300)
def test_gram_in_memory_on_threads_and_into_stores_agree(tmp_path):
    X, Y = trees(9), trees(12)[9:]
    K = gramtile.gram(SST, X)
    assert K.shape == (9, 9) and np.all(np.diag(K) > 0)
    np.testing.assert_array_equal(gramtile.gram(SST, X, cluster="threads"), K)
    view = gramtile.gram(SST, X, out=tmp_path / "sst.zarr", cluster="sequential", tile=4)
    np.testing.assert_array_equal(view.to_numpy(), K)
    assert isinstance(gramtile.open(tmp_path / "sst.zarr"), gramtile.GramStore)
    assert isinstance(gramtile.open(tmp_path / "sst.zarr.corpus.zarr"), gramtile.CorpusStore)
    # rows X, columns Y: one corpus store holds both
    rect = gramtile.gram(SST, X, Y, out=tmp_path / "xy.zarr", cluster="threads")
    np.testing.assert_array_equal(rect.to_numpy(), gramtile.gram(SST, X, Y))
    assert rect.shape == (9, 3)
    # the same examples again: the complete store is read back; other examples are refused, not mixed in
    np.testing.assert_array_equal(gramtile.gram(SST, X, out=tmp_path / "sst.zarr", cluster="sequential").to_numpy(), K)
    with pytest.raises(StoreMismatchError, match="documents in memory"):
        gramtile.gram(SST, X[::-1], out=tmp_path / "sst.zarr", cluster="sequential")


@pytest.mark.timeout(300)
def test_gram_on_a_local_cluster_into_a_store_and_back(tmp_path, tree_file):
    corpus = gramtile.prepare(tree_file, tmp_path / "c.zarr", format="svmlighttk", reps="tree,ptree")
    assert corpus.n == 12 and corpus.labels[:2] == ["+1", "-1"]
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as lc, \
            distributed.Client(lc) as client:
        with distributed.get_task_stream(client) as ts:
            view = gramtile.gram(SST, corpus=tmp_path / "c.zarr", out=tmp_path / "k.zarr", cluster=client, tile=4,
                                 no_progress=True)
        assert len({t["worker"] for t in ts.data}) == 2  # the tiles ran on both workers of that cluster
        in_memory = gramtile.gram(SST, trees(), cluster=client)
    store = gramtile.open(tmp_path / "k.zarr")
    assert store.complete and store.tiles_done() == (6, 6)
    np.testing.assert_array_equal(view.to_numpy(), gramtile.gram(SST, trees()))
    np.testing.assert_array_equal(in_memory, view.to_numpy())
    assert view.to_dask().compute().shape == (12, 12)


@pytest.mark.timeout(300)
def test_evaluate_train_predict_export_as_the_command_line(tmp_path, tree_file):
    gramtile.prepare(tree_file, tmp_path / "c.zarr", format="svmlighttk")
    gramtile.gram(SST, corpus=tmp_path / "c.zarr", out=tmp_path / "k.zarr", cluster="sequential")
    res = gramtile.evaluate(gram=tmp_path / "k.zarr", folds=3, C=[0.1, 1], normalized=True)
    assert main(["evaluate", "--gram", str(tmp_path / "k.zarr"), "--folds", "3", "--C", "0.1,1", "--normalized",
                 "--out", str(tmp_path / "cli")]) == 0
    cli = json.loads((tmp_path / "cli" / "results.json").read_text())
    assert res["rows"] == cli["rows"] and res["splits"] == cli["splits"] and res["selection"] == "nested"
    assert len(res["predictions"]) == 1 and len(next(iter(res["predictions"].values()))["row"]) == 12

    model = gramtile.train(tmp_path / "model", corpus=tmp_path / "c.zarr", gram=tmp_path / "k.zarr", kernel=SST, C=1,
                           normalized=True)
    assert isinstance(gramtile.open(tmp_path / "model"), type(model))
    got = gramtile.predict(tmp_path / "model", tree_file, format="svmlighttk")
    assert [g["id"] for g in got] == gramtile.open(tmp_path / "c.zarr").ids
    assert all(g["predicted"] == g["gold"] for g in got)  # the training examples, separable
    written = gramtile.predict(tmp_path / "model", tree_file, format="svmlighttk", out=tmp_path / "p.tsv")
    assert written.read_text().count("\n") == 12

    npy = gramtile.export(tmp_path / "k.zarr", tmp_path / "k.npy", normalized=True)
    np.testing.assert_array_equal(np.load(npy), gramtile.open(tmp_path / "k.zarr").view().to_numpy(normalized=True))


def test_options_are_checked_by_the_command(tmp_path, tree_file):
    with pytest.raises(UsageError, match=r"unknown option foldz=; it takes .*folds"):
        gramtile.evaluate(gram=tmp_path / "k.zarr", foldz=3)
    with pytest.raises(UsageError, match=r"gramtile.evaluate\(\): argument --folds: '1' is not an integer >= 2"):
        gramtile.evaluate(gram=tmp_path / "k.zarr", folds=1)
    with pytest.raises(UsageError, match=r"normalized=1; give True or False"):
        gramtile.evaluate(gram=tmp_path / "k.zarr", normalized=1)
    with pytest.raises(UsageError, match="takes no cluster="):
        gramtile.export(tmp_path / "k.zarr", tmp_path / "k.npy", cluster="local")
    with pytest.raises(UsageError, match="not both"):
        gramtile.gram(SST, trees(2), corpus=tmp_path / "c.zarr", out=tmp_path / "k.zarr")
    with pytest.raises(UsageError, match="tile= needs out="):
        gramtile.gram(SST, trees(2), tile=4)
    with pytest.raises(StoreError, match="no gramtile store or model directory"):
        gramtile.open(tmp_path / "nothing")
    with pytest.raises(ClusterConfigError, match="distributed.Client or a gramtile Runtime"):
        Runtime.of(42)
    assert not (tmp_path / "k.zarr").exists()  # nothing was written by a refused call
