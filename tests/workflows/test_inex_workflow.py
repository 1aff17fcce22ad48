"""workflows/inex2005.yaml on a CI-sized subset: the real file with smaller limits and grids.

Real INEX trees, real corpus and Gram stores under tmp_path, the sequential executor.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import require_data

from gramtile.workflows.errors import WorkflowError
from gramtile.workflows.runner import load_workflow, run_workflow

REPO = Path(__file__).resolve().parents[2]


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
                 "ST": {"lam": [0.4]},
                 "SST": {"lam": [0.4]},
                 "poly SST": {"lam": [0.4], "degree": [2]},
                 "ST (no leaves)": {"lam": [0.4]},
                 "SST (no leaves)": {"lam": [0.4]},
                 "poly SST (no leaves)": {"lam": [0.4], "degree": [2]}}
    o.update(options)
    path = tmp_path / "inex_small.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inex")
    path = small_workflow(tmp)
    rows = run_workflow(load_workflow(path), tmp / "out", cluster="sequential")
    return path, tmp / "out", rows


def test_table_rows(ran):
    path, out, rows = ran
    names = [r["kernel"] for r in rows]
    assert names == ["route (label)", "route (production)", "PT", "ST", "SST", "poly SST", "ST (no leaves)",
                     "SST (no leaves)", "poly SST (no leaves)"]
    # Table 1 of Aiolli et al. 2009: (test, validation) error; "(no leaves)" rows compare to the same
    paper = {"ST": (11.27, 13.15), "SST": (11.21, 12.79), "poly SST": (10.67, 12.09), "PT": (2.96, 2.96),
             "route (label)": (3.06, 3.10), "route (production)": (3.52, 3.31)}
    for r in rows:
        assert (r["paper_error"], r["paper_valid_error"]) == paper[r["kernel"].replace(" (no leaves)", "")]
        assert r["valid_error"] == pytest.approx(100 * (1 - r["valid_accuracy"]), abs=0.006)
        assert 0 <= r["test_error"] <= 100
        assert r["difference"] == pytest.approx(r["test_error"] - r["paper_error"], abs=0.011)
        assert (r["n_fit"], r["n_valid"], r["n_train"], r["n_test"]) == (150, 50, 200, 100)
    assert rows[0]["variants"] == 8 and rows[5]["spec"]["kind"] == "polynomial"
    md = (out / "results.md").read_text()
    assert "| route (label) | 3.06 |" in md
    assert " | 3.1 | " in md and " | 13.15 | " in md  # the paper's validation column
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
    assert stores == ["pt", "route", "route", "route", "sst", "sst", "st", "st"]


def _base(spec):
    while "kernel" in spec:
        spec = spec["kernel"]
    return spec


def test_paper_rows_match_leaves_and_svmlighttk_rows_do_not(ran):
    """ST, SST and poly SST follow the paper's eq. (2) (equal leaves match); the "(no leaves)"
    rows are SVM-Light-TK's default; the two conventions give different Gram matrices here."""
    from gramtile.pipeline.stores.gram_store import GramStore

    _, out, rows = ran
    by = {r["kernel"]: r for r in rows}
    for name in ("ST", "SST", "poly SST"):
        assert _base(by[name]["spec"])["leaves"] is True, name
        assert _base(by[name + " (no leaves)"]["spec"]).get("leaves", False) is False, name
    st = {}
    for p in out.glob("gram-st-*.zarr"):
        g = GramStore.open(p)
        st[bool(g.spec.leaves)] = (g.spec.lam, g.view().block(np.arange(50), np.arange(50)))
    assert set(st) == {True, False}
    # the stores differ by exactly lam x (pairs of equal leaves), counted here from the raw trees
    from collections import Counter
    from itertools import islice

    from gramtile.pipeline.readers.inex import read_inex

    trees = [x.structures["tree"] for x in islice(read_inex(require_data("inex2005") / "inex05.train.elastic.tree"), 50)]
    counts = [Counter(t.leaves()) for t in trees]
    pairs = np.array([[sum(c * b[w] for w, c in a.items()) for b in counts] for a in counts], dtype=float)
    lam = st[True][0]
    assert pairs.sum() > 0
    np.testing.assert_allclose(st[True][1] - st[False][1], lam * pairs, rtol=1e-12, atol=1e-12)


def test_test_error_matches_an_independent_fit(ran):
    """The chosen route variant, refitted from kernel values computed directly (no stores)."""
    from itertools import islice

    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import SVC

    from gramtile.pipeline.compute.inmemory import evaluate_block
    from gramtile.pipeline.readers.inex import read_inex
    from gramtile.pipeline.representations.encode import encode
    from gramtile.pipeline.representations.vocab import Vocabularies

    _, _, rows = ran
    r = rows[0]
    d = require_data("inex2005")
    tr = list(islice(read_inex(d / "inex05.train.elastic.tree"), 200))
    te = list(islice(read_inex(d / "inex05.test.elastic.tree"), 100))
    X = encode([x.structures["ptree"] for x in tr + te], Vocabularies())
    K, _, _ = evaluate_block(r["spec"], X)  # the chosen variant may be composite (normalised, polynomial)
    Ktr, Kte = K[:200, :200], K[200:, :200]
    scale = 1.0 if r["normalized"] else np.mean(np.diag(Ktr))
    m = OneVsRestClassifier(SVC(kernel="precomputed", C=r["C"])).fit(Ktr / scale, [x.label for x in tr])
    err = 100 * (1 - np.mean(m.predict(Kte / scale) == np.array([x.label for x in te])))
    assert r["test_error"] == pytest.approx(err, abs=0.01)


def test_rerun_reuses_stores_and_scores(ran):
    path, out, rows = ran
    logs = {p: len((p / "log" / "records.jsonl").read_text().splitlines()) for p in out.glob("gram-*.zarr")}
    again = run_workflow(load_workflow(path), out, cluster="sequential")
    assert [r["test_error"] for r in again] == [r["test_error"] for r in rows]
    for p, n in logs.items():
        events = [json.loads(x) for x in (p / "log" / "records.jsonl").read_text().splitlines()[n:]]
        assert all(e["event"] != "tile" for e in events)  # no tile recomputed


@pytest.mark.parametrize("options, key", [({"fit": 500}, "options.fit"),
                                          ({"grid": {"PT": {"depth": [1]}}}, "options.grid.PT.depth"),
                                          ({"grid": {"nope": {"lam": [1]}}}, "options.grid.nope"),
                                          ({"grid": {"ST": {"mu": [0.4]}}}, "options.grid.ST.mu"),
                                          ({"paper_valid": {"ST": "13.15"}}, "options.paper_valid.ST"),
                                          ({"paper": {"TK": 1.0}}, "options.paper.TK"),
                                          ({"colour": 1}, "options.colour")])
def test_bad_options_name_the_key(tmp_path, options, key):
    path = small_workflow(tmp_path, **options)
    with pytest.raises(WorkflowError) as e:
        run_workflow(load_workflow(path), tmp_path / "out", cluster="sequential")
    assert f"'{key}'" in str(e.value) and str(path) in str(e.value)


def _class_sorted_labels(n=200):
    """Class labels of the first ``n`` INEX training trees, as a file sorted by class has them."""
    d = require_data("inex2005")
    lines = (d / "inex05.train.elastic.tree").read_text().splitlines()[:n]
    return np.array(sorted(line.split(":")[0] for line in lines))


def test_validation_split_is_stratified_on_a_class_sorted_file(tmp_path, caplog):
    # was: the fit part was the first `fit` examples, so on a class-sorted file the validation
    # part held only the last classes (here 2 of 11) and the fit part lacked one, silently
    from types import SimpleNamespace

    from gramtile.workflows.recipes.inex import validation_split

    y = _class_sorted_labels()
    wf = SimpleNamespace(path=tmp_path / "w.yaml")
    train = np.arange(y.size)
    classes = set(y.tolist())
    with caplog.at_level("WARNING", logger="gramtile"):
        fit, val = validation_split(wf, y, train, 150)
    assert not caplog.records
    assert fit.size == 150 and val.size == 50 and not set(fit) & set(val) and set(fit) | set(val) == set(train)
    assert set(y[fit].tolist()) == classes and set(y[val].tolist()) == classes
    for c in classes:  # proportions kept to within one example per class
        assert abs(np.sum(y[val] == c) - 50 * np.mean(y == c)) <= 1
    again = validation_split(wf, y, train, 150)
    assert all(np.array_equal(a, b) for a, b in zip((fit, val), again))  # seeded
    other = validation_split(wf, y, train, 150, seed=1)
    assert not np.array_equal(other[0], fit)


def test_first_n_split_warns_naming_the_missing_classes(tmp_path, caplog):
    from types import SimpleNamespace

    from gramtile.workflows.recipes.inex import validation_split

    y = _class_sorted_labels()
    wf = SimpleNamespace(path=tmp_path / "w.yaml")
    with caplog.at_level("WARNING", logger="gramtile"):
        fit, val = validation_split(wf, y, np.arange(y.size), 150, "first")
    np.testing.assert_array_equal(fit, np.arange(150))
    missing_val = sorted(set(y.tolist()) - set(y[val].tolist()))
    assert missing_val  # the file is sorted: the first 150 hold most classes entirely
    msgs = [r.getMessage() for r in caplog.records]
    assert any("validation part" in m and str(missing_val) in m and "split: stratified" in m for m in msgs), msgs
    # a class with a single training example goes to the fit part, and the warning names it
    y2 = np.concatenate([y, ["99"]])
    caplog.clear()
    with caplog.at_level("WARNING", logger="gramtile"):
        fit, val = validation_split(wf, y2, np.arange(y2.size), 150)
    assert y2.size - 1 in fit
    assert any("validation part" in r.getMessage() and "['99']" in r.getMessage() for r in caplog.records)


def test_bad_split_options_name_the_key(tmp_path):
    for options, key in [({"split": "random"}, "options.split"), ({"seed": -1}, "options.seed")]:
        path = small_workflow(tmp_path, **options)
        with pytest.raises(WorkflowError) as e:
            run_workflow(load_workflow(path), tmp_path / "out", cluster="sequential")
        assert f"'{key}'" in str(e.value)


class _ArrayView:
    """A view over a matrix in memory (what validation_scores reads blocks from)."""

    def __init__(self, K):
        self.K, self.shape = K, K.shape

    def block(self, rows, cols):
        return self.K[np.ix_(rows, cols)]


def test_validation_scores_are_one_vs_all_svm_accuracies_and_none_for_non_finite_kernels():
    """Each C's accuracy is that of OneVsRestClassifier(SVC) fitted on the fit part and scored on the
    validation part; a variant with an infinite kernel value is skipped (None), not an error."""
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import SVC

    from gramtile.pipeline.learn.folds import Split
    from gramtile.workflows.recipes.inex import validation_scores

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = np.array(["a", "b", "c"])[np.argmax(X[:, :3] + 0.5 * rng.normal(size=(60, 3)), axis=1)]
    K = X @ X.T
    held = Split(np.arange(40), np.arange(40, 60), "validation")
    got = validation_scores(_ArrayView(K), True, y, held, [0.1, 10], "k", "sequential")
    ref = [float(np.mean(OneVsRestClassifier(SVC(kernel="precomputed", C=C)).fit(K[:40, :40], y[:40])
                         .predict(K[40:, :40]) == y[40:])) for C in (0.1, 10)]
    assert got == ref
    bad = K.copy()
    bad[50, 3] = np.inf  # in K(validation, fit)
    assert validation_scores(_ArrayView(bad), True, y, held, [0.1, 10], "k", "sequential") is None
