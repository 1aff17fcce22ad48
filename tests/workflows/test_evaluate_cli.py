"""`gramtile evaluate` reports (issue 17): composite kernels over several --gram stores, nested C
selection, the full kernel and model parameters in their own columns, std for every model,
--report, fold files keyed by labels. Real NUM trees, real SST / ST stores, real scikit-learn."""
import json

import numpy as np
import pytest
from conftest import corpus_store_of, num_trees

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.learn.crossval import evaluate
from gramtile.pipeline.learn.folds import parse_split
from gramtile.pipeline.learn.sources import ViewKernelSource, store_labels
from gramtile.pipeline.stores.errors import StoreMismatchError
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.cli import main

pytestmark = pytest.mark.shared_data

SST = {"kind": "sst", "lam": 0.4}
ST = {"kind": "st", "lam": 0.4}
SUM = {"kind": "sum", "kernels": [{"weight": 0.5, "kernel": {"kind": "normalized", "kernel": SST}},
                                  {"weight": 2.0, "kernel": {"kind": "normalized", "kernel": ST}}]}
SPLIT = "train:0:90,test:90:130"


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    every = num_trees(6000)  # the file is sorted by label: interleave the two classes
    pos, neg = [d for d in every if d.label == "1"][:40], [d for d in every if d.label != "1"][:90]
    docs = [d for pair in zip(neg[:40], pos) for d in pair] + neg[40:]
    d = tmp_path_factory.mktemp("ev")
    corpus = corpus_store_of(d / "c.zarr", docs, 64)
    for name, spec in (("sst", SST), ("st", ST)):
        run_gram(corpus, json.dumps(spec), d / f"{name}.zarr", tile=40, cluster="sequential")
    return d / "sst.zarr", d / "st.zarr"


def test_composed_view_takes_a_list_of_stores_and_names_what_each_holds(stores):
    sst, st = stores
    spec = as_spec(SUM)
    by_hash = {s.kernel_hash: s for s in map(GramStore.open, stores)}
    assert np.array_equal(ComposedView(spec, [sst, st]).block(), ComposedView(spec, by_hash).block())
    with pytest.raises(StoreMismatchError, match=r"among the stores given \(.*sst\.zarr holds .*\"sst\""):
        ComposedView(spec, [sst])


def test_cli_two_store_sum_equals_the_python_composed_view(stores, tmp_path):
    sst, st = stores
    assert main(["evaluate", "--gram", str(sst), "--gram", str(st), "--kernel", json.dumps(SUM), "--split", SPLIT,
                 "--C", "1", "--out", str(tmp_path)]) == 0
    res = json.loads((tmp_path / "results.json").read_text())
    view = ComposedView(as_spec(SUM), [sst, st])
    labels = store_labels(GramStore.open(sst))
    ev = evaluate(ViewKernelSource(view), labels, [parse_split(SPLIT, 130)], C=[1.0])
    (key, (idx, pred)), = ev.predictions.items()
    assert res["predictions"][key]["predicted"] == pred.tolist()
    assert res["rows"][0]["accuracy"] == ev.rows[0]["accuracy"]
    assert res["kernel"] == as_spec(SUM).to_dict() and res["gram"] == [str(sst), str(st)]
    # the composite's readable name lists its weighted terms
    assert res["rows"][0]["kernel"] == ("sum(0.5*normalized(sst(lam=0.4, leaves=false, typed_leaves=false)), "
                                        "2*normalized(st(lam=0.4)))")


def test_cli_missing_base_store_lists_what_each_store_holds(stores, capsys):
    sst, _ = stores
    assert main(["evaluate", "--gram", str(sst), "--kernel", json.dumps(SUM), "--split", SPLIT]) == 2
    err = capsys.readouterr().err
    assert "no stored Gram matrix for base kernel" in err and f"{sst} holds" in err
    assert main(["evaluate", "--gram", str(sst), "--gram", str(sst), "--split", SPLIT]) == 2
    assert "no --kernel" in capsys.readouterr().err


def test_several_C_mean_nested_selection_inside_the_training_parts(stores, tmp_path, capsys):
    sst, _ = stores
    assert main(["evaluate", "--gram", str(sst), "--folds", "3", "--C", "0.01,1,100", "--normalized",
                 "--folds-dir", str(tmp_path), "--out", str(tmp_path / "r")]) == 0
    out = capsys.readouterr().out
    assert "nested 3-fold" in out and "C_chosen" in out
    res = json.loads((tmp_path / "r" / "results.json").read_text())
    assert res["C_selection"] == "nested" and len(res["rows"]) == 1
    row = res["rows"][0]
    assert row["C"] is None and row["C_grid"] == "0.01,1,100" and len(row["C_chosen"].split(",")) == 3
    # each split's C is the one the inner folds of its training part choose: recompute it without the test part
    from gramtile.pipeline.learn.crossval import choose_C
    from gramtile.pipeline.learn.folds import load_or_make_folds
    K = GramStore.open(sst).view().block(normalized=True)
    y = np.asarray(store_labels(GramStore.open(sst)))
    folds = load_or_make_folds(tmp_path, list(y), 3, 0)
    want = [choose_C(K[np.ix_(sp.train, sp.train)], y[sp.train], [0.01, 1, 100], folds=3, seed=0)[0] for sp in folds]
    assert [float(c) for c in row["C_chosen"].split(",")] == want
    assert [r["C_chosen"] for r in res["fold_rows"]] == want


def test_C_on_test_keeps_the_per_C_table_and_says_so(stores, tmp_path, capsys):
    sst, _ = stores
    assert main(["evaluate", "--gram", str(sst), "--split", SPLIT, "--C", "0.01,1", "--C-on-test"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("C chosen on test (--C-on-test)")
    assert "| svm | 0.01 |" in out and "| svm | 1 |" in out


def test_rows_show_the_full_kernel_parameters_in_own_columns_std_and_report(stores, tmp_path, capsys):
    sst, _ = stores
    assert main(["evaluate", "--gram", str(sst), "--folds", "3", "--model", "perceptron", "--epochs", "3",
                 "--perceptron-seed", "0", "--normalized", "--folds-dir", str(tmp_path), "--report"]) == 0
    out = capsys.readouterr().out
    header, _, row = out.splitlines()[:3]
    cols = [c.strip() for c in header.strip("|").split("|")]
    cells = dict(zip(cols, [c.strip() for c in row.strip("|").split("|")]))
    assert cells["kernel"] == "normalized(sst(lam=0.4, leaves=false, typed_leaves=false))" and cells["epochs"] == "3"
    assert "C" not in cols or cells["C"] == "-"
    assert "confusion matrix" in out and "| truth \\ predicted | -1 | 1 |" in out and "| class | precision |" in out
    assert main(["evaluate", "--gram", str(sst), "--folds", "3", "--model", "nystroem", "--landmarks", "30",
                 "--folds-dir", str(tmp_path), "--out", str(tmp_path / "ny")]) == 0
    ny = json.loads((tmp_path / "ny" / "results.json").read_text())["rows"][0]
    assert ny["accuracy_std"] > 0 and "accuracy_std" in capsys.readouterr().out
    assert ny["loss"] == "squared_hinge"
    assert main(["evaluate", "--gram", str(sst), "--folds", "3", "--model", "nystroem", "--landmarks", "30",
                 "--linear-loss", "hinge", "--folds-dir", str(tmp_path), "--out", str(tmp_path / "ny-hinge")]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "ny-hinge" / "results.json").read_text())["rows"][0]["loss"] == "hinge"
    # nested C selection for Nystroem, as for the kernel SVM: one row, the C chosen inside the training part
    assert main(["evaluate", "--gram", str(sst), "--model", "nystroem", "--landmarks", "30", "--C", "1,10",
                 "--split", SPLIT, "--out", str(tmp_path / "ny-nested")]) == 0
    capsys.readouterr()
    rows = json.loads((tmp_path / "ny-nested" / "results.json").read_text())["rows"]
    assert len(rows) == 1 and rows[0]["C_grid"] == "1,10" and rows[0]["C_chosen"] in ("1", "10")


def test_train_takes_the_composite_over_two_stores_and_names_a_missing_one(stores, tmp_path, capsys):
    sst, st = stores
    corpus = GramStore.open(sst).meta["corpus_path"]
    assert main(["train", "--corpus", corpus, "--gram", str(sst), "--gram", str(st), "--kernel", json.dumps(SUM),
                 "--out", str(tmp_path / "m")]) == 0
    from gramtile.pipeline.learn.models import SavedModel
    m = SavedModel.load(tmp_path / "m")
    assert m.spec.spec_hash == as_spec(SUM).spec_hash
    assert main(["train", "--corpus", corpus, "--gram", str(st), "--kernel", json.dumps(SUM),
                 "--out", str(tmp_path / "m2")]) == 2
    err = capsys.readouterr().err
    assert f"{st} holds" in err and not (tmp_path / "m2").exists()


def test_train_with_a_C_grid_chooses_by_inner_cross_validation_and_saves_that_model(stores, tmp_path, capsys):
    """`train --C a,b,c` chooses C by 3-fold stratified cross-validation on the training examples (pooled
    accuracy, ties to the smaller C), recomputed here with scikit-learn's SVC fold by fold, and saves the
    model that `train --C <chosen>` saves."""
    from sklearn.svm import SVC

    from gramtile.pipeline.learn.folds import stratified_kfold
    from gramtile.pipeline.learn.models import SavedModel

    sst, _ = stores
    st = GramStore.open(sst)
    corpus = st.meta["corpus_path"]
    spec = json.dumps({"kind": "normalized", "kernel": SST})
    grid = (0.001, 0.1, 10.0)
    assert main(["train", "--corpus", corpus, "--gram", str(sst), "--kernel", spec, "--C", "0.001,0.1,10",
                 "--out", str(tmp_path / "grid")]) == 0
    chosen = SavedModel.load(tmp_path / "grid")
    K = ComposedView(as_spec(spec), [sst]).block()
    y = np.asarray(store_labels(st))
    hits = dict.fromkeys(grid, 0)
    for f in stratified_kfold(y, 3, 0):
        for C in grid:
            pred = SVC(kernel="precomputed", C=C).fit(K[np.ix_(f.train, f.train)], y[f.train]).predict(
                K[np.ix_(f.test, f.train)])
            hits[C] += int(np.sum(pred == y[f.test]))
    want = max(grid, key=lambda c: (hits[c], -c))
    assert len(set(hits.values())) > 1  # the grid separates the values: the choice is not a tie
    sel = chosen.params["selection"]
    assert chosen.params["C"] == want and sel["chosen"] == {"C": want} and sel["grid"] == {"C": list(grid)}
    assert [r["accuracy"] for r in sel["inner_accuracy"]] == [hits[c] / y.size for c in grid]
    assert main(["train", "--corpus", corpus, "--gram", str(sst), "--kernel", spec, "--C", f"{want:g}",
                 "--out", str(tmp_path / "one")]) == 0
    one = SavedModel.load(tmp_path / "one")
    assert "selection" not in one.params and one.functions == chosen.functions
    docs = [d for d in num_trees(7000)[-60:]]
    assert chosen.predict(docs).tolist() == one.predict(docs).tolist()
    # a grid option the learner does not take is refused before any work
    capsys.readouterr()
    assert main(["train", "--corpus", corpus, "--gram", str(sst), "--kernel", spec, "--epochs", "1,2",
                 "--out", str(tmp_path / "bad")]) == 2
    assert "--model svm takes no --epochs" in capsys.readouterr().err and not (tmp_path / "bad").exists()


def test_evaluate_and_train_refuse_a_regression_or_ranking_model_on_class_labels(stores, tmp_path, capsys):
    sst, _ = stores
    # the NUM store holds class labels only: no targets for a regression, no groups for a ranking
    for model, fix in (("svr", "there are no targets in corpus store"),
                       ("krr", "a regression learns real targets. Fix: prepare the corpus with --target-col COLUMN"),
                       ("rank", "there are no group ids in corpus store")):
        assert main(["evaluate", "--gram", str(sst), "--split", SPLIT, "--model", model,
                     "--out", str(tmp_path / model)]) == 2
        assert fix in capsys.readouterr().err and not (tmp_path / model).exists()
        corpus = GramStore.open(sst).meta["corpus_path"]
        assert main(["train", "--corpus", corpus, "--gram", str(sst), "--kernel", json.dumps(SST), "--model", model,
                     "--out", str(tmp_path / f"t-{model}")]) == 2
        assert "in the training examples, and a" in capsys.readouterr().err and not (tmp_path / f"t-{model}").exists()
