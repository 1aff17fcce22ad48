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
from gramtile.pipeline.stores.gram_store import ComposedView, GramStore
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
        run_gram(corpus, json.dumps(spec), d / f"{name}.zarr", tile=40, cluster="sequential", progress=False)
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


def test_cli_missing_base_store_lists_what_each_store_holds(stores, capsys):
    sst, _ = stores
    assert main(["evaluate", "--gram", str(sst), "--kernel", json.dumps(SUM), "--split", SPLIT]) == 2
    err = capsys.readouterr().err
    assert "no stored Gram matrix for base kernel" in err and f"{sst} holds" in err
    assert main(["evaluate", "--gram", str(sst), "--gram", str(sst), "--split", SPLIT]) == 2
    assert "no --kernel" in capsys.readouterr().err
