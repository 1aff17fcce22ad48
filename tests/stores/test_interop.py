"""Store interop (issue 17): GramView.to_numpy / to_dask / to_xarray / np.asarray, dimension
names, labels as plain strings, a run log Zarr does not warn about, and `gramtile export`
to npy, LIBSVM and SVM-light files. Real NUM_train.dat trees, real SST kernel, real Zarr."""
import dataclasses
import json
import shutil
import warnings

import numpy as np
import pytest
import zarr
from conftest import corpus_store_of, num_trees

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.stores.gram_export import export, export_selection
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.cli import main

pytestmark = pytest.mark.shared_data

N = 130
SST = '{"kind": "sst", "lam": 0.4}'
CLASSES = ("DESC", "NUM", "ENTY")


@pytest.fixture(scope="module")
def docs():
    # text labels (as TREC's), so quoting and numbering of labels is exercised
    return [dataclasses.replace(d, label=CLASSES[i % 3]) for i, d in enumerate(num_trees(N))]


@pytest.fixture(scope="module")
def store(docs, tmp_path_factory):
    corpus = corpus_store_of(tmp_path_factory.mktemp("corpus") / "num.zarr", docs, 64)
    out = tmp_path_factory.mktemp("gram") / "sst.zarr"
    run_gram(corpus, SST, out, tile=40, cluster="sequential")
    return out


@pytest.fixture(scope="module")
def exported(store, tmp_path_factory):
    d = tmp_path_factory.mktemp("npy")
    export(store, d / "K.npy")
    export(store, d / "Kn.npy", normalized=True)
    return np.load(d / "K.npy"), np.load(d / "Kn.npy")


def test_raw_K_holds_only_the_upper_tile_triangle_and_to_dask_mirrors_it(store, exported):
    da = pytest.importorskip("dask.array")
    raw = da.from_zarr(str(store / "K")).compute()
    assert np.isnan(raw).sum() > 0  # documented: raw K is the upper tile triangle only
    view = GramStore.open(store).view()
    lazy = view.to_dask()
    assert lazy.chunks == ((40, 40, 40, 10), (40, 40, 40, 10))
    assert view.chunk_reads == 0  # nothing read until computed
    K, Kn = exported
    assert np.array_equal(lazy.compute(), K) and not np.isnan(K).any()
    assert np.array_equal(view.to_dask(normalized=True).compute(), Kn)
    assert np.array_equal(view.to_numpy(), K)


def test_np_asarray_of_a_view_is_the_matrix(store, exported):
    a = np.asarray(GramStore.open(store).view())
    assert a.shape == (N, N) and a.dtype == np.float64 and np.array_equal(a, exported[0])


def test_to_xarray_has_ids_and_plain_string_labels_and_equals_export(store, exported, docs):
    import xarray  # noqa: F401  (installed by make: the test must not skip in CI)
    x = GramStore.open(store).view().to_xarray()
    assert x.dims == ("row", "col")
    assert np.array_equal(x.values, exported[0])
    assert list(x.row_id.values) == [d.id for d in docs]
    labels = x.row_label.values
    assert labels.dtype.kind == "U" and list(labels) == [d.label for d in docs]  # "DESC", never '"DESC"'
    svm = pytest.importorskip("sklearn.svm")
    svm.SVC(kernel="precomputed").fit(x.values[:100, :100], labels[:100])  # scikit-learn takes the labels
    assert np.array_equal(GramStore.open(store).view().to_xarray(normalized=True, lazy=False).values, exported[1])


def test_xarray_open_zarr_reads_a_store_through_its_dimension_names(store):
    import xarray as xr
    ds = xr.open_zarr(str(store), consolidated=False)
    assert ds["K"].dims == ("row", "col") and ds["row_index"].dims == ("row",)
    meta = json.loads((store / "K" / "zarr.json").read_text())
    assert meta["dimension_names"] == ["row", "col"]


def test_zarr_listing_does_not_warn_about_the_log(store):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = zarr.open_group(str(store), mode="r")
        names = sorted(k for k, _ in g.members(max_depth=None))
    assert "K" in names and "log" in names
    assert not (store / "log.jsonl").exists()
    events = [r["event"] for r in GramStore.open(store).read_log()]
    assert events[0] == "start" and events[-1] == "end"


def test_a_store_with_the_old_top_level_log_is_still_read(store, tmp_path):
    old = tmp_path / "old.zarr"
    shutil.copytree(store, old)
    (old / "log" / "records.jsonl").rename(old / "log.jsonl")
    shutil.rmtree(old / "log")
    st = GramStore.open(old)
    before = st.read_log()
    assert before and before[0]["event"] == "start"
    st2 = GramStore.open(old, mode="r+")
    st2.log({"event": "note", "time": "x"})
    assert [r["event"] for r in GramStore.open(old).read_log()] == [r["event"] for r in before] + ["note"]


def test_export_npy_selection_and_sidecar_ids(store, exported, tmp_path, docs):
    K = exported[0]
    sel = tmp_path / "sel.txt"
    sel.write_text("5\n7\n100\n")
    assert main(["export", str(store), "--out", str(tmp_path / "s.npy"), "--rows", "@" + str(sel),
                 "--cols", "10:20"]) == 0
    assert np.array_equal(np.load(tmp_path / "s.npy"), K[np.ix_([5, 7, 100], range(10, 20))])
    rows = (tmp_path / "s.npy.rows.tsv").read_text().splitlines()
    assert rows[0] == "position\tcorpus_index\tid\tlabel" and rows[1] == f"5\t5\t{docs[5].id}\t{docs[5].label}"
    assert len((tmp_path / "s.npy.cols.tsv").read_text().splitlines()) == 11


def test_export_svmlight_reads_back_bitwise_with_sklearn(store, exported, tmp_path):
    datasets = pytest.importorskip("sklearn.datasets")
    assert main(["export", str(store), "--out", str(tmp_path / "k.svm"), "--format", "svmlight",
                 "--normalized"]) == 0
    X, y = datasets.load_svmlight_file(str(tmp_path / "k.svm"), zero_based=False, n_features=N)
    assert np.array_equal(X.toarray(), exported[1])
    classes = (tmp_path / "k.svm.classes.tsv").read_text().splitlines()[1:]
    assert [c.split("\t")[1] for c in classes] == sorted(CLASSES)
    assert [sorted(CLASSES)[int(v)] for v in y] == [CLASSES[i % 3] for i in range(N)]


def test_export_libsvm_precomputed_format(store, exported, tmp_path):
    datasets = pytest.importorskip("sklearn.datasets")
    assert main(["export", str(store), "--out", str(tmp_path / "k.libsvm"), "--format", "libsvm",
                 "--rows", "0:50"]) == 0
    first = (tmp_path / "k.libsvm").read_text().splitlines()[0].split()
    assert first[1] == "0:1" and len(first) == 2 + 50  # label, serial, then every column (zeros included)
    X, _ = datasets.load_svmlight_file(str(tmp_path / "k.libsvm"), zero_based=True, n_features=51)
    X = X.toarray()
    assert np.array_equal(X[:, 0], np.arange(1, 51)) and np.array_equal(X[:, 1:], exported[0][:50, :50])


def test_export_refuses_unknown_format_and_leaves_nothing(store, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["export", str(store), "--out", str(tmp_path / "x"), "--format", "csv"])
    from gramtile.pipeline.stores.errors import StoreError
    with pytest.raises(StoreError, match="not one of"):
        export_selection(store, tmp_path / "x", "csv")
    assert list(tmp_path.iterdir()) == []


def test_corpus_store_labels_are_plain_strings_and_hash_as_before(docs, tmp_path):
    from gramtile.pipeline.stores.corpus_store import CorpusStore
    odd = [dataclasses.replace(docs[0], label=None), dataclasses.replace(docs[1], label=["A", "B"]),
           dataclasses.replace(docs[2], label="\x00x")] + list(docs[3:20])
    path = corpus_store_of(tmp_path / "c.zarr", odd, 8)
    raw = zarr.open_group(str(path), mode="r")["labels"][:]
    assert list(raw[3:6]) == [d.label for d in odd[3:6]] and raw[3] == "DESC"  # not '"DESC"'
    cs = CorpusStore.open(path)
    assert cs.labels == [d.label for d in odd]
    h = cs.content_hash
    # a store of the older layout (labels as JSON, no labels_encoding) reads the same and hashes equal
    g = zarr.open_group(str(path), mode="r+")
    g["labels"][:] = np.array([json.dumps(d.label, ensure_ascii=False) for d in odd], dtype=object)
    m = dict(g.attrs["manifest"])
    del m["labels_encoding"]
    g.attrs["manifest"] = m
    old = CorpusStore.open(path)
    assert old.labels_encoding == "json" and old.labels == [d.label for d in odd]
    assert old.compute_content_hash() == h


def test_an_exported_libsvm_file_trains_libsvm_to_the_accuracy_of_gramtile_evaluate(tmp_path):
    """LIBSVM's own svm-train -t 4 (the PyPI libsvm-official bindings) on `gramtile export
    --format libsvm` files scores the fixed split exactly as `gramtile evaluate` does."""
    from libsvm import svmutil  # installed by make (libsvm-official): never skipped
    every = num_trees(6000)  # the NUM task's own labels, 1 / -1 (the file is sorted by label: interleave them)
    pos, neg = [d for d in every if d.label == "1"][:40], [d for d in every if d.label != "1"][:90]
    binary = neg[40:] + [d for pair in zip(neg[:40], pos) for d in pair]  # both classes in train 0:90 and test
    corpus = corpus_store_of(tmp_path / "num.zarr", binary, 64)
    out = tmp_path / "g.zarr"
    run_gram(corpus, SST, out, tile=40, cluster="sequential")
    assert main(["export", str(out), "--out", str(tmp_path / "train.libsvm"), "--format", "libsvm",
                 "--rows", "0:90", "--cols", "0:90", "--normalized"]) == 0
    assert main(["export", str(out), "--out", str(tmp_path / "test.libsvm"), "--format", "libsvm",
                 "--rows", "90:130", "--cols", "0:90", "--normalized"]) == 0
    ytr, xtr = svmutil.svm_read_problem(str(tmp_path / "train.libsvm"))
    yte, xte = svmutil.svm_read_problem(str(tmp_path / "test.libsvm"))
    m = svmutil.svm_train(ytr, xtr, "-t 4 -c 1 -q")
    _, (acc, _, _), _ = svmutil.svm_predict(yte, xte, m, "-q")
    assert main(["evaluate", "--gram", str(out), "--split", "train:0:90,test:90:130", "--C", "1", "--normalized",
                 "--out", str(tmp_path / "ev")]) == 0
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert res["rows"][0]["accuracy"] == pytest.approx(acc / 100, abs=1e-12)
    assert res["rows"][0]["accuracy"] > 0.5 and res["rows"][0]["recall"] > 0  # a real two-class test part
