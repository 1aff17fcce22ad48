"""Feature stores (``gramtile features``) and linear learning on them (pipeline/learn/linear.py)."""
import json

import numpy as np
import pytest
from conftest import corpus_store_of, evaluate_features, num_trees

from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.feature_sets import write_store
from gramtile.pipeline.learn import linear
from gramtile.pipeline.learn.linear_models import LinearModel
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.feature_store import open_store
from gramtile.workflows.cli import main


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    every = num_trees(5483)  # labelled 1 / -1 (NUM against the other coarse classes); positives come later
    docs = [d for d in every if d.label == "1"][:150] + [d for d in every if d.label == "-1"][:250]
    return corpus_store_of(tmp_path_factory.mktemp("c") / "num400.zarr", docs, 150)


@pytest.mark.parametrize("spec", ['{"kind": "st", "lam": 0.4}',
                                  '{"kind": "normalized", "kernel": {"kind": "st", "lam": 0.4}}'])
def test_feature_store_rows_reproduce_the_gram_matrix(corpus, tmp_path, spec):
    assert main(["-q", "features", "--corpus", str(corpus), "--kernel", spec, "--out", str(tmp_path / "f.zarr")]) == 0
    X, labels, meta = open_store(tmp_path / "f.zarr")
    assert X.shape[0] == 400 == len(labels) and meta["n_features"] == X.shape[1]
    K = run_gram(corpus, spec, tmp_path / "g.zarr", cluster="sequential",
                 path="pairwise").view().to_numpy()
    G = (X @ X.T).toarray()
    assert np.max(np.abs(G - K)) <= 1e-12 * np.max(np.abs(K))


def test_feature_store_refuses_bad_input_and_leaves_nothing(corpus, tmp_path, capsys):
    assert main(["-q", "features", "--corpus", str(corpus), "--kernel", '{"kind": "sst"}', "--out",
                 str(tmp_path / "f.zarr")]) == 2
    assert "no explicit feature map" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
    (tmp_path / "taken.zarr").mkdir()
    with pytest.raises(StoreError, match="exists"):
        write_store(corpus, as_spec('{"kind": "st"}'), tmp_path / "taken.zarr")
    with pytest.raises(KernelSpecError, match="normalized"):
        write_store(corpus, as_spec('{"kind": "polynomial", "kernel": {"kind": "st"}}'), tmp_path / "p.zarr")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.zarr"]


def test_linear_learner_k_fold_train_save_predict(corpus, tmp_path):
    main(["-q", "features", "--corpus", str(corpus), "--kernel",
          '{"kind": "normalized", "kernel": {"kind": "st", "lam": 0.4}}', "--out", str(tmp_path / "f.zarr")])
    X, labels, meta = open_store(tmp_path / "f.zarr")
    res = evaluate_features(tmp_path / "f.zarr", folds=3, seed=1, Cs=(0.1, 1.0), class_weight="balanced")
    assert [r["C"] for r in res.rows] == [0.1, 1.0]
    best = max(res.rows, key=lambda r: (r["accuracy"], -r["C"]))
    majority = max(labels.count(c) for c in set(labels)) / len(labels)
    assert best["accuracy"] > majority  # learns something beyond the majority class
    model = linear.train_store(tmp_path / "f.zarr", tmp_path / "m", C=best["C"])
    again = LinearModel.load(tmp_path / "m")
    assert again.predict(X) == model.predict(X)
    assert again.meta["feature_set"] == meta["feature_set"]


def test_cli_evaluate_and_train_with_features(corpus, tmp_path, capsys):
    f = str(tmp_path / "f.zarr")
    assert main(["-q", "features", "--corpus", str(corpus), "--kernel", '{"kind": "st"}', "--out", f]) == 0
    capsys.readouterr()
    assert main(["-q", "evaluate", "--features", f, "--model", "linear", "--folds", "3", "--C", "0.1,1",
                 "--class-weight", "balanced", "--C-on-test"]) == 0
    out = capsys.readouterr().out
    assert "| linear | 0.1 |" in out and "| linear | 1 |" in out and "selection on test data" in out
    # several C without --C-on-test: nested selection, one row, the C chosen per split
    assert main(["-q", "evaluate", "--features", f, "--model", "linear", "--folds", "3", "--C", "0.1,1",
                 "--inner-folds", "2", "--out", str(tmp_path / "nested")]) == 0
    out = capsys.readouterr().out
    assert "C_chosen" in out and "nested 2-fold" in out
    assert sum(line.startswith("| st(lam=0.4) | linear |") for line in out.splitlines()) == 1  # no per-C rows
    saved = json.loads((tmp_path / "nested" / "results.json").read_text())
    assert saved["C_selection"] == "nested" and len(saved["rows"]) == 1
    assert set(saved["rows"][0]["C_chosen"].split(",")) <= {"0.1", "1"} and len(saved["fold_rows"]) == 3
    assert main(["-q", "train", "--features", f, "--model", "linear", "--out", str(tmp_path / "m")]) == 0
    X, labels, _ = open_store(f)
    m = LinearModel.load(tmp_path / "m")
    assert len(m.predict(X)) == 400 and set(m.predict(X)) <= set(labels)
    # misuse is one line, exit 2
    assert main(["-q", "evaluate", "--features", f]) == 2
    assert main(["-q", "train", "--features", f, "--model", "svm", "--out", str(tmp_path / "m2")]) == 2
    assert main(["-q", "evaluate", "--model", "svm"]) == 2
    assert not (tmp_path / "m2").exists()
