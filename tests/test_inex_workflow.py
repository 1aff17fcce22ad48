"""workflows/inex2005.yaml on a CI-sized subset: the real file with smaller limits and grids.

Real INEX trees, real corpus and Gram stores under tmp_path, the sequential executor.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from gramtile.kernels.errors import WorkflowError
from gramtile.pipeline.workflow import load_workflow, run_workflow

from conftest import require_data

REPO = Path(__file__).resolve().parents[1]


def small_workflow(tmp_path, **options):
    """The repository's inex2005.yaml cut to 200 train / 100 test trees and a few grid points."""
    require_data("inex2005")
    raw = yaml.safe_load((REPO / "workflows" / "inex2005.yaml").read_text())
    raw["data"]["limit"] = {"train": 200, "test": 100}
    raw["protocol"]["C"] = [0.1, 10]
    o = raw["options"]
    o["fit"] = 150
    o["grid"] = {"route (label)": {"lam": [0.5, 2.0], "degree": [1, 2], "normalized": [True, False]},
                 "route (production)": {"lam": [0.5]},
                 "PT": {"lam": [0.4], "mu": [0.4]},
                 "SST": {"lam": [0.4]},
                 "poly SST": {"lam": [0.4], "degree": [2]},
                 "ST": {"lam": [0.4]},
                 "SST-bow": {"lam": [0.4]},
                 "poly SST-bow": {"lam": [0.4], "degree": [2]}}
    o.update(options)
    path = tmp_path / "inex_small.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inex")
    path = small_workflow(tmp)
    rows = run_workflow(load_workflow(path), tmp / "out", cluster="sequential", progress=False)
    return path, tmp / "out", rows


def test_table_rows(ran):
    path, out, rows = ran
    names = [r["kernel"] for r in rows]
    assert names == ["route (label)", "route (production)", "PT", "SST", "poly SST", "ST", "SST-bow",
                     "poly SST-bow"]
    paper = {"ST": 11.27, "SST": 11.21, "poly SST": 10.67, "PT": 2.96, "route (label)": 3.06,
             "route (production)": 3.52, "SST-bow": 11.21, "poly SST-bow": 10.67}
    for r in rows:
        assert r["paper_error"] == paper[r["kernel"]]
        assert 0 <= r["test_error"] <= 100
        assert r["difference"] == pytest.approx(r["test_error"] - r["paper_error"], abs=0.011)
        assert (r["n_fit"], r["n_valid"], r["n_train"], r["n_test"]) == (150, 50, 200, 100)
    assert rows[0]["variants"] == 8 and rows[4]["spec"]["kind"] == "polynomial"
    md = (out / "results.md").read_text()
    assert "| route (label) | 3.06 |" in md
    # route trees are easy: far better than the 11-class chance level even on 150 training trees
    assert rows[0]["test_error"] < 30


def test_selection_is_the_best_validation_score(ran):
    _, out, rows = ran
    trials = json.loads((out / "selection.json").read_text())
    for r in rows:
        mine = [t for t in trials if t["kernel"] == r["kernel"] and "valid_accuracy" in t]
        assert len(mine) == r["variants"] * 2  # two C values
        assert r["valid_accuracy"] == max(t["valid_accuracy"] for t in mine)


def test_one_store_per_base_kernel(ran):
    """SST and polynomial SST share their base store; route degrees and normalisation are derived."""
    _, out, _ = ran
    stores = sorted(p.name.split("-")[1] for p in out.glob("gram-*.zarr"))
    assert stores == ["pt", "route", "route", "route", "sst", "sst", "st"]


def test_test_error_matches_an_independent_fit(ran):
    """The chosen route variant, refitted from kernel values computed directly (no stores)."""
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import SVC

    from gramtile.pipeline.evaluate import as_spec
    from gramtile.pipeline.encode import encode
    from gramtile.pipeline.readers.inex import read_inex
    from gramtile.pipeline.vocab import Vocabularies
    from itertools import islice

    _, _, rows = ran
    r = rows[0]
    d = require_data("inex2005")
    tr = list(islice(read_inex(d / "inex05.train.elastic.tree"), 200))
    te = list(islice(read_inex(d / "inex05.test.elastic.tree"), 100))
    X = encode([x.structures["ptree"] for x in tr + te], Vocabularies())
    K = as_spec(r["spec"]).block(X)
    Ktr, Kte = K[:200, :200], K[200:, :200]
    scale = 1.0 if r["normalized"] else np.mean(np.diag(Ktr))
    m = OneVsRestClassifier(SVC(kernel="precomputed", C=r["C"])).fit(Ktr / scale, [x.label for x in tr])
    err = 100 * (1 - np.mean(m.predict(Kte / scale) == np.array([x.label for x in te])))
    assert r["test_error"] == pytest.approx(err, abs=0.01)


def test_rerun_reuses_stores_and_scores(ran):
    path, out, rows = ran
    logs = {p: len((p / "log.jsonl").read_text().splitlines()) for p in out.glob("gram-*.zarr")}
    again = run_workflow(load_workflow(path), out, cluster="sequential", progress=False)
    assert [r["test_error"] for r in again] == [r["test_error"] for r in rows]
    for p, n in logs.items():
        events = [json.loads(x) for x in (p / "log.jsonl").read_text().splitlines()[n:]]
        assert all(e["event"] != "tile" for e in events)  # no tile recomputed


@pytest.mark.parametrize("options, key", [({"fit": 500}, "options.fit"),
                                          ({"grid": {"PT": {"depth": [1]}}}, "options.grid.PT.depth"),
                                          ({"grid": {"nope": {"lam": [1]}}}, "options.grid.nope"),
                                          ({"grid": {"ST": {"mu": [0.4]}}}, "options.grid.ST.mu"),
                                          ({"colour": 1}, "options.colour")])
def test_bad_options_name_the_key(tmp_path, options, key):
    path = small_workflow(tmp_path, **options)
    with pytest.raises(WorkflowError) as e:
        run_workflow(load_workflow(path), tmp_path / "out", cluster="sequential", progress=False)
    assert f"'{key}'" in str(e.value) and str(path) in str(e.value)
