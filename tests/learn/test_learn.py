"""Learning from kernel sources and Gram stores: folds, k-fold / fixed-split evaluation equal to
scikit-learn in memory, lazy chunk reads from a real store, learning curves, the CLI."""
import json
import shutil

import numpy as np
import pytest
from conftest import require_data
from sklearn.metrics import f1_score
from sklearn.model_selection import cross_val_predict
from sklearn.multiclass import OneVsRestClassifier
from sklearn.svm import SVC

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.inmemory import gram
from gramtile.pipeline.learn.crossval import evaluate, learning_curve, nested_order, parse_class_weight, source_mrr
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.folds import (
    Split,
    fixed_split,
    folds_path,
    load_folds,
    load_or_make_folds,
    parse_split,
    stratified_kfold,
)
from gramtile.pipeline.learn.metrics import neighbour_mrr
from gramtile.pipeline.learn.parallel import source_ref
from gramtile.pipeline.learn.perceptron import VotedPerceptron
from gramtile.pipeline.learn.report import markdown_table, plot_learning_curve
from gramtile.pipeline.learn.sources import (
    ArrayKernelSource,
    ViewKernelSource,
    open_gram_source,
    read_labels,
    store_labels,
)
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import IncompleteTileError, StoreError, StoreMismatchError
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.cli import main

SST = {"kind": "sst", "lam": 0.4}
N = 240
TILE = 64


@pytest.fixture(scope="module")
def num_docs():
    """A seeded, shuffled sample of TREC NUM-vs-rest trees (the file is ordered by label)."""
    train = list(read(require_data("trec_qc_num_constituency") / "NUM_train.dat", "svmlighttk"))
    rng = np.random.default_rng(1)
    return [train[i] for i in rng.choice(len(train), N, replace=False)]


@pytest.fixture(scope="module")
def num_K(num_docs):
    return gram(SST, num_docs)


@pytest.fixture(scope="module")
def num_y(num_docs):
    return np.array([d.label for d in num_docs])


@pytest.fixture(scope="module")
def num_store(num_docs, tmp_path_factory):
    """A real corpus store and a real Gram store (tile 64 over 240 examples: 4 x 4 chunks)."""
    root = tmp_path_factory.mktemp("learn")
    cs = CorpusStore.create(root / "num.zarr", shard_size=100)
    for k in range(0, N, 100):
        cs.write_shard(k // 100, num_docs[k:k + 100])
    cs.finish()
    cs.close()
    run_gram(root / "num.zarr", SST, root / "sst.zarr", tile=TILE, cluster="sequential")
    return root / "sst.zarr"


def _pooled(ev, key, n):
    idx, pred = ev.predictions[key]
    out = np.empty(n, dtype=object)
    out[idx] = pred
    assert sorted(idx.tolist()) == list(range(n))  # k-fold tests every example once
    return out


# ---- folds ---------------------------------------------------------------------------------

def test_stratified_kfold_partitions_and_stratifies(num_y):
    folds = stratified_kfold(num_y, 5, seed=3)
    tests = np.concatenate([f.test for f in folds])
    assert sorted(tests.tolist()) == list(range(N))
    share = np.mean(num_y == "1")
    for f in folds:
        assert np.intersect1d(f.train, f.test).size == 0 and f.train.size + f.test.size == N
        assert abs(np.mean(num_y[f.test] == "1") - share) < 0.03
    assert [f.test.tolist() for f in stratified_kfold(num_y, 5, seed=3)] == [f.test.tolist() for f in folds]
    assert [f.test.tolist() for f in stratified_kfold(num_y, 5, seed=4)] != [f.test.tolist() for f in folds]


def test_folds_saved_and_reused(num_y, tmp_path):
    folds = load_or_make_folds(tmp_path, num_y, 4, seed=2)
    path = folds_path(tmp_path, 4, 2, num_y)
    assert path.name.startswith("folds-k4-seed2-labels") and path.exists()
    doc = json.loads(path.read_text())
    # reuse means reading the file: edit one fold's test part and get the edit back
    doc["folds"][0]["test"] = doc["folds"][0]["test"][:-1]
    path.write_text(json.dumps(doc))
    again = load_or_make_folds(tmp_path, num_y, 4, seed=2)
    assert again[0].test.tolist() == folds[0].test.tolist()[:-1]
    assert [f.train.tolist() for f in again] == [f.train.tolist() for f in folds]
    other = num_y.copy()
    other[0] = "-1" if other[0] == "1" else "1"
    with pytest.raises(EvaluationError, match="other labels"):
        load_folds(path, other)
    # a store of other labels in the same directory gets its own file (issue 17: no collision)
    mine = load_or_make_folds(tmp_path, other, 4, seed=2)
    assert folds_path(tmp_path, 4, 2, other).exists() and folds_path(tmp_path, 4, 2, other) != path
    assert [f.test.tolist() for f in mine] == [f.test.tolist() for f in stratified_kfold(other, 4, 2)]
    # a file of the older name (no labels in it) made for these labels is still reused
    path.rename(folds_path(tmp_path, 4, 2))
    assert load_or_make_folds(tmp_path, num_y, 4, seed=2)[0].test.tolist() == folds[0].test.tolist()[:-1]


def test_fold_and_split_errors():
    y = ["a"] * 5 + ["b"] * 2
    with pytest.raises(EvaluationError, match="smallest class"):
        stratified_kfold(y, 3)
    with pytest.raises(EvaluationError, match="k=1"):
        stratified_kfold(y, 1)
    with pytest.raises(EvaluationError, match="single class"):
        stratified_kfold(["a"] * 4, 2)
    s = parse_split("train:0:4, test:4:7", 7)
    assert s.train.tolist() == [0, 1, 2, 3] and s.test.tolist() == [4, 5, 6]
    assert parse_split("train:0:2,train:5:7,test:2:5", 7).train.tolist() == [0, 1, 5, 6]
    with pytest.raises(EvaluationError, match="both train and test"):
        parse_split("train:0:5,test:4:7", 7)
    with pytest.raises(EvaluationError, match="outside 0..6"):
        parse_split("train:0:4,test:4:9", 7)
    with pytest.raises(EvaluationError, match="cannot read"):
        parse_split("train=0:4,test:4:7", 7)
    with pytest.raises(EvaluationError, match="no test part"):
        parse_split("train:0:4", 7)
    with pytest.raises(EvaluationError, match="empty"):
        fixed_split([], [1], 3)


# ---- evaluation equals scikit-learn in memory ----------------------------------------------

def test_kfold_svm_equals_sklearn_cross_val_predict(num_K, num_y):
    folds = stratified_kfold(num_y, 5, seed=0)
    src = ArrayKernelSource(num_K)
    ev = evaluate(src, num_y, folds, model="svm", C=[0.5, 4.0], kernel="sst", select="test")
    assert src.reads == 2 * len(folds)  # two blocks per fold, shared by the whole C grid
    cv = [(f.train, f.test) for f in folds]
    for C in (0.5, 4.0):
        want = cross_val_predict(SVC(kernel="precomputed", C=C), num_K, num_y, cv=cv)
        got = _pooled(ev, f"svm C={C:g}", N)
        assert (got == want).all()
        row = next(r for r in ev.rows if r["C"] == C)
        assert row["kernel"] == "sst" and row["positive"] == "1"
        assert row["accuracy"] == pytest.approx(np.mean(want == num_y))
        assert row["f1"] == pytest.approx(f1_score(num_y, want, pos_label="1"))
    assert len(ev.fold_rows) == 2 * len(folds)


def test_kfold_balanced_class_weight_equals_sklearn(num_K, num_y):
    folds = stratified_kfold(num_y, 3, seed=1)
    ev = evaluate(ArrayKernelSource(num_K), num_y, folds, C=1.0, class_weight="balanced")
    want = cross_val_predict(SVC(kernel="precomputed", class_weight="balanced"), num_K, num_y,
                             cv=[(f.train, f.test) for f in folds])
    assert (_pooled(ev, "svm C=1", N) == want).all()
    assert ev.rows[0]["class_weight"] == "balanced"


def test_kfold_perceptron_equals_per_fold_fits(num_K, num_y):
    folds = stratified_kfold(num_y, 4, seed=0)
    ev = evaluate(ArrayKernelSource(num_K), num_y, folds, model="perceptron", epochs=2)
    got = _pooled(ev, "perceptron epochs=2", N)
    for f in folds:
        m = VotedPerceptron(epochs=2).fit(num_K[np.ix_(f.train, f.train)], num_y[f.train])
        assert (got[f.test] == m.predict(num_K[np.ix_(f.test, f.train)])).all()
    assert ev.rows[0]["model"] == "perceptron" and ev.rows[0]["C"] is None


@pytest.fixture(scope="module")
def trec6():
    """300 TREC-10 questions, 6 coarse classes, bag-of-words kernel from KeLP's lemma vectors."""
    docs = list(read(require_data("trec_qc_kelp_trees") / "TREC_10.coarse.klp.gz", "kelp"))
    docs = [d for d in docs if d.label != "ABBR"][:300]  # ABBR has 9 examples: too few for 3 folds
    K = gram({"kind": "bow", "rep": "bow"}, docs)
    return K, np.array([d.label for d in docs])


@pytest.mark.parametrize("scheme", ["ovr", "ovo"])
def test_multiclass_equals_sklearn(trec6, scheme):
    K, y = trec6
    folds = stratified_kfold(y, 3, seed=0)
    ev = evaluate(ArrayKernelSource(K), y, folds, C=[1.0], multiclass=scheme)
    svc = SVC(kernel="precomputed", C=1.0)
    want = cross_val_predict(OneVsRestClassifier(svc) if scheme == "ovr" else svc, K, y,
                             cv=[(f.train, f.test) for f in folds])
    assert (_pooled(ev, "svm C=1", len(y)) == want).all()
    row = ev.rows[0]
    assert row["macro_f1"] == pytest.approx(f1_score(y, want, average="macro"))
    assert row["micro_f1"] == pytest.approx(np.mean(want == y)) == row["accuracy"]
    assert row["multiclass"] == scheme and "positive" not in row
    assert set(ev.reports["svm C=1"]["per_class"]) == set(y)


def test_evaluate_rejects_bad_input(num_K, num_y):
    src = ArrayKernelSource(num_K)
    folds = stratified_kfold(num_y, 3)
    with pytest.raises(EvaluationError, match="labels for a kernel over"):
        evaluate(src, num_y[:-1], folds)
    with pytest.raises(EvaluationError, match="C=-1"):
        evaluate(src, num_y, folds, C=[1, -1])
    with pytest.raises(EvaluationError, match="model="):
        evaluate(src, num_y, folds, model="tree")
    with pytest.raises(EvaluationError, match="'\\+1', which is not a label"):
        evaluate(src, num_y, folds, class_weight=parse_class_weight("+1:5"))
    with pytest.raises(EvaluationError, match="positive class 'yes'"):
        evaluate(src, num_y, folds, positive="yes")
    with pytest.raises(EvaluationError, match="cannot read"):
        parse_class_weight("1:x")
    one_class = Split(np.flatnonzero(num_y == "-1")[:10], np.arange(3), "split")
    with pytest.raises(EvaluationError, match="one class"):
        evaluate(src, num_y, [one_class])
    K = num_K.copy()
    K[5, 7] = np.nan
    with pytest.raises(EvaluationError, match="NaN"):
        evaluate(ArrayKernelSource(K), num_y, folds)


# ---- the real Gram store: lazy reads, labels from the corpus store ----------------------------

def _tiles(idx):
    return np.unique(np.asarray(idx) // TILE).size


def _stored(pairs):
    """Stored chunks of a symmetric store that blocks over ``pairs`` (rows, cols) touch."""
    return len({(min(a, b), max(a, b)) for r, c in pairs for a in np.unique(np.asarray(r) // TILE)
                for b in np.unique(np.asarray(c) // TILE)})


def test_store_fixed_split_reads_only_needed_chunks(num_store, num_K, num_y):
    src = open_gram_source(num_store)
    labels = store_labels(src.store)
    assert labels == num_y.tolist()
    split = parse_split("train:0:100,test:192:240", src.n)
    ev = evaluate(src, labels, [split], C=[1.0, 10.0], select="test")
    # train x train touches tiles {0,1} x {0,1} (stored: (0,0), (0,1), (1,1)); test x train touches
    # {3} x {0,1} (stored above the diagonal: (0,3), (1,3)): 5 of the 10 stored chunks, each read once
    assert src.chunk_reads == 3 + 2
    mem = evaluate(ArrayKernelSource(num_K), num_y, [split], C=[1.0, 10.0], select="test")
    for key in ("svm C=1", "svm C=10"):
        assert (ev.predictions[key][1] == mem.predictions[key][1]).all()
    assert ev.rows == mem.rows


def test_store_kfold_reads_the_chunks_each_fold_needs(num_store, num_K, num_y):
    src = open_gram_source(num_store, normalized=True)
    folds = stratified_kfold(num_y, 3, seed=5)
    ev = evaluate(src, num_y, folds, model="perceptron", epochs=2)
    # each fold reads the stored chunks (above the diagonal) its two blocks touch, each once
    assert src.chunk_reads == sum(_stored(((f.train, f.train), (f.test, f.train))) for f in folds)
    d = np.sqrt(np.diag(num_K))
    np.testing.assert_allclose(src.block(np.arange(N), np.arange(N)), num_K / np.outer(d, d), rtol=1e-12)
    mem = evaluate(ArrayKernelSource(num_K, normalized=True), num_y, folds, model="perceptron", epochs=2)
    assert (ev.predictions["perceptron epochs=2"][1] == mem.predictions["perceptron epochs=2"][1]).all()
    assert ev.rows == mem.rows


@pytest.mark.parametrize("ties", ["pessimistic", "expected"])
def test_store_mrr_in_row_blocks_equals_in_memory(num_store, num_K, num_y, ties):
    src = open_gram_source(num_store, normalized=True)
    d = np.sqrt(np.diag(num_K))
    want = neighbour_mrr(num_K / np.outer(d, d), num_y, ties=ties)
    assert source_mrr(src, num_y, ties=ties, block_rows=100) == pytest.approx(want, rel=1e-12)
    assert 0.5 < want < 1  # same-label questions are usually the nearest


def test_incomplete_store_refuses(num_store, num_y, tmp_path):
    copy = tmp_path / "partial.zarr"
    shutil.copytree(num_store, copy)
    st = GramStore.open(copy, mode="r+")
    st.clear_done([next(t for t in st.grid().tiles() if t.i == 0 and t.j == 1)])
    src = open_gram_source(copy)
    with pytest.raises(IncompleteTileError, match="not computed"):
        evaluate(src, num_y, [parse_split("train:0:100,test:192:240", N)])


def test_labels_need_the_corpus_the_store_was_computed_from(num_store, num_docs, tmp_path):
    copy = tmp_path / "moved.zarr"
    shutil.copytree(num_store, copy)
    other = CorpusStore.create(tmp_path / "other.zarr", shard_size=100)
    other.write_shard(0, num_docs[:50])
    other.finish()
    other.close()
    GramStore.open(copy, mode="r+").touch(corpus_path=str(tmp_path / "other.zarr"))
    with pytest.raises(StoreMismatchError, match="restore the original corpus store"):
        store_labels(GramStore.open(copy))
    GramStore.open(copy, mode="r+").touch(corpus_path=str(tmp_path / "gone.zarr"))
    with pytest.raises(StoreError, match="--labels FILE"):
        store_labels(GramStore.open(copy))


def test_labels_file(tmp_path):
    p = tmp_path / "labels.txt"
    p.write_text("a\nb\n\n")
    assert read_labels(p, 2) == ["a", "b"]
    with pytest.raises(CorpusFormatError, match="2 labels for a Gram store of 3"):
        read_labels(p, 3)
    p.write_text("a\n\nb\n")
    with pytest.raises(CorpusFormatError, match="line 2"):
        read_labels(p)


# ---- learning curves and tables ----------------------------------------------------------------

def test_nested_order_prefixes_are_stratified_and_nested(num_y):
    order = nested_order(num_y, seed=0)
    assert sorted(order.tolist()) == list(range(N))
    share = np.mean(num_y == "1")
    for m in (10, 40, 120):
        assert abs(np.mean(num_y[order[:m]] == "1") - share) <= 1 / m + 1e-9
    assert nested_order(num_y, seed=0).tolist() == order.tolist()
    assert nested_order(num_y, seed=1).tolist() != order.tolist()


def test_learning_curve_rows_equal_explicit_subsets(num_K, num_y, tmp_path):
    src = ArrayKernelSource(num_K)
    folds = stratified_kfold(num_y, 3, seed=0)
    rows = learning_curve(src, num_y, folds, fractions=[0.25, 1.0], C=[1.0], seed=4, kernel="sst")
    assert src.reads == 2 * len(folds) * 2  # each (split, fraction) fit reads its own two blocks
    for cluster in ("threads", "local"):  # the fits as tasks: the serial run's rows
        assert learning_curve(src, num_y, folds, fractions=[0.25, 1.0], C=[1.0], seed=4, kernel="sst",
                              cluster=cluster) == rows
    assert [r["fraction"] for r in rows] == [0.25, 1.0]
    assert rows[1]["n_train"] == pytest.approx(np.mean([f.train.size for f in folds]))
    for r, frac in zip(rows, (0.25, 1.0)):
        subsets = []
        for f in folds:
            order = f.train[nested_order(num_y[f.train], 4)]
            subsets.append(Split(order[:int(np.ceil(frac * f.train.size))], f.test, f.name))
        ev = evaluate(ArrayKernelSource(num_K), num_y, subsets, C=[1.0], kernel="sst")
        assert r["accuracy"] == ev.rows[0]["accuracy"] and r["f1"] == ev.rows[0]["f1"]
        assert r["n_train"] == pytest.approx(np.mean([s.train.size for s in subsets]))
    png = tmp_path / "curve.png"
    plot_learning_curve(rows, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(EvaluationError, match="fractions"):
        learning_curve(src, num_y, folds, fractions=[0.0, 0.5])


def test_markdown_table():
    rows = [{"kernel": "sst", "model": "svm", "C": 0.5, "accuracy": 0.91234, "f1": 0.5},
            {"kernel": "a|b", "model": "perceptron", "C": None, "epochs": 2, "accuracy": 1.0}]
    lines = markdown_table(rows).splitlines()
    assert lines[0] == "| kernel | model | C | epochs | accuracy | f1 |"
    assert lines[1] == "|---|---|---|---|---|---|"
    assert lines[2] == "| sst | svm | 0.5 | - | 0.9123 | 0.5000 |"
    assert lines[3] == "| a\\|b | perceptron | - | 2 | 1.0000 | - |"


# ---- the CLI -----------------------------------------------------------------------------------

def test_cli_evaluate_writes_results_and_reuses_folds(num_store, num_K, num_y, tmp_path, capsys):
    out = tmp_path / "res"
    argv = ["evaluate", "--gram", str(num_store), "--folds", "3", "--fold-seed", "1", "--C", "0.5,2", "--C-on-test", "--name", "sst",
            "--curve", "0.5,1", "--mrr", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "| sst | svm | 0.5 |" in printed and "| sst | svm | 2 |" in printed
    res = json.loads((out / "results.json").read_text())
    folds_file = folds_path(num_store.parent, 3, 1, num_y)
    assert folds_file.exists()
    folds = load_or_make_folds(num_store.parent, num_y, 3, 1)
    ev = evaluate(ArrayKernelSource(num_K), num_y, folds, C=[0.5, 2.0], kernel="sst", select="test")
    assert [r["accuracy"] for r in res["rows"]] == [r["accuracy"] for r in ev.rows]
    assert [r["f1"] for r in res["rows"]] == [r["f1"] for r in ev.rows]
    assert len(res["curve"]) == 4
    assert res["neighbour_mrr"] == pytest.approx(neighbour_mrr(num_K, num_y), rel=1e-12)
    for key, (idx, pred) in ev.predictions.items():
        assert res["predictions"][key]["row"] == idx.tolist()
        assert res["predictions"][key]["predicted"] == pred.tolist()
        assert res["predictions"][key]["gold"] == num_y[idx].tolist()
    assert (out / "results.md").read_text().count("| sst | svm |") >= 2
    assert (out / "learning_curve.png").exists()
    before = folds_file.stat().st_mtime_ns
    assert main(argv[:-2]) == 0
    assert folds_file.stat().st_mtime_ns == before


def test_cli_evaluate_errors(num_store, tmp_path, capsys):
    assert main(["evaluate", "--gram", str(num_store), "--split", "train:0:100,test:90:120"]) == 2
    assert "both train and test" in capsys.readouterr().err
    assert main(["evaluate", "--gram", str(num_store), "--folds", "3", "--split", "train:0:9,test:9:20"]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(["evaluate", "--gram", str(tmp_path / "missing.zarr")]) == 2
    assert "not a gramtile Gram store" in capsys.readouterr().err
    bad = tmp_path / "labels.txt"
    bad.write_text("1\n-1\n")
    assert main(["evaluate", "--gram", str(num_store), "--labels", str(bad)]) == 2
    assert "2 labels for a Gram store of 240" in capsys.readouterr().err
    assert main(["evaluate", "--gram", str(num_store), "--C", "one"]) == 2
    assert "--C" in capsys.readouterr().err


def test_cli_nystroem_equals_the_api_and_refuses_what_it_cannot_do(num_store, num_y, tmp_path, capsys):
    from gramtile.pipeline.learn.crossval import evaluate_nystroem
    from gramtile.pipeline.learn.sources import open_gram_source

    out = tmp_path / "ny"
    argv = ["evaluate", "--gram", str(num_store), "--model", "nystroem", "--landmarks", "60", "--folds", "3",
            "--C", "1,10", "--C-on-test", "--name", "sst", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "| sst | nystroem | 1 |" in printed and "| sst | nystroem | 10 |" in printed
    res = json.loads((out / "results.json").read_text())
    folds = load_or_make_folds(num_store.parent, num_y, 3, 0)
    api = evaluate_nystroem(open_gram_source(num_store), num_y, folds, m=60, C=[1.0, 10.0], seed=0, kernel="sst")
    assert [r["accuracy"] for r in res["rows"]] == [r["accuracy"] for r in api]
    assert [r["m"] for r in res["rows"]] == [60, 60]
    idx, pred = api[1]["predictions"]
    assert res["predictions"]["nystroem C=10"]["predicted"] == pred.tolist()
    # a learning curve and nested selection go through the same loop as for the kernel SVM
    assert main(argv[:-2] + ["--curve", "0.5,1", "--out", str(tmp_path / "curve")]) == 0
    curve = json.loads((tmp_path / "curve" / "results.json").read_text())["curve"]
    assert [(r["fraction"], r["C"]) for r in curve] == [(0.5, 1.0), (0.5, 10.0), (1.0, 1.0), (1.0, 10.0)]
    assert [r["n_train"] for r in curve] == [80, 80, 160, 160] and all(r["rank"] <= 60 for r in curve)
    capsys.readouterr()
    nested = [a for a in argv if a != "--C-on-test"]
    nested[nested.index("--out") + 1] = str(tmp_path / "nested")
    assert main(nested) == 0
    row = json.loads((tmp_path / "nested" / "results.json").read_text())["rows"][0]
    assert row["C_grid"] == "1,10" and len(row["C_chosen"].split(",")) == 3 and row["C"] is None
    assert main(argv + ["--multiclass", "ovo"]) == 2
    assert "one-vs-rest" in capsys.readouterr().err
    assert main(argv[:5] + ["--landmarks", "0"]) == 2
    assert "landmarks" in capsys.readouterr().err


def test_cli_perceptron_fixed_split_with_labels_file(num_store, num_y, tmp_path, capsys):
    lab = tmp_path / "labels.txt"
    lab.write_text("\n".join(num_y) + "\n")
    assert main(["evaluate", "--gram", str(num_store), "--model", "perceptron", "--epochs", "1",
                 "--split", "train:0:180,test:180:240", "--labels", str(lab), "--normalized"]) == 0
    captured = capsys.readouterr()
    assert "| normalized(sst(lam=0.4, leaves=false, typed_leaves=false)) | perceptron | 1 |" in captured.out
    assert "ordered by label" not in captured.err
    # labels sorted by class: the data-order perceptron gets a note suggesting a seed
    lab.write_text("\n".join(sorted(num_y)) + "\n")
    argv = ["evaluate", "--gram", str(num_store), "--model", "perceptron", "--split", "train:40:240,test:0:40",
            "--labels", str(lab)]
    assert main(argv) == 0
    assert "ordered by label" in capsys.readouterr().err
    assert main(argv + ["--perceptron-seed", "0"]) == 0
    assert "ordered by label" not in capsys.readouterr().err




def test_scaled_view_source_divides_every_block_and_travels_to_workers(num_store, num_y):
    """ViewKernelSource(scale=s) serves K / s (the same numbers as dividing the block read without
    it), through block and blocks, and a task's SourceRef reopens it with the same scale; an
    evaluation over it equals one over the divided matrix in memory."""
    st = GramStore.open(num_store)
    view = ComposedView(st.spec, [st])
    plain, s = ViewKernelSource(view), 37.5
    src = ViewKernelSource(view, scale=s)
    rows, cols = np.arange(0, 240, 3), np.arange(1, 240, 2)
    K = plain.block(np.arange(240), np.arange(240))
    assert np.array_equal(src.block(rows, cols), plain.block(rows, cols) / s)
    assert all(np.array_equal(a, b) for a, b in zip(src.blocks([(rows, cols), (cols, rows)]),
                                                     [K[np.ix_(rows, cols)] / s, K[np.ix_(cols, rows)] / s]))
    ref = source_ref(src)
    assert ref.scale == s and ref.key != source_ref(plain).key
    assert np.array_equal(ref._open().block(rows, cols), src.block(rows, cols))
    sp = stratified_kfold(num_y, 3, 0)
    a = evaluate(src, num_y, sp, C=[0.1, 1.0])
    b = evaluate(ArrayKernelSource(K / s), num_y, sp, C=[0.1, 1.0])
    assert [r["accuracy"] for r in a.rows] == [r["accuracy"] for r in b.rows]
    with pytest.raises(EvaluationError, match="scale"):
        ViewKernelSource(view, scale=0.0)
