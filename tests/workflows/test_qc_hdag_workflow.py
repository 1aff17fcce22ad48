"""workflows/trec_qc_hdag.yaml on a CI-sized subset: real questions parsed by spaCy with entities,
real stores under tmp_path, the sequential executor."""
import json
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import require_data

from gramtile.workflows.errors import WorkflowError
from gramtile.workflows.runner import load_workflow, run_workflow

REPO = Path(__file__).resolve().parents[2]


def small_workflow(tmp_path, **options):
    """The repository's trec_qc_hdag.yaml cut to 150 train / 40 test questions, BOW and HDAG."""
    require_data("trec_qc")
    raw = yaml.safe_load((REPO / "workflows" / "trec_qc_hdag.yaml").read_text())
    raw["data"]["limit"] = {"train": 150, "test": 40}
    raw["kernels"] = {k: raw["kernels"][k] for k in ("BOW", "HDAG")}
    raw["protocol"]["C"] = [1, 10]
    raw["options"].update({"folds": 3, "grid": {"HDAG": {"p": [1, 2], "lam": [0.5]}}, "per": {"HDAG": "p"}, "first": {}},
                          **options)
    path = tmp_path / "qc_small.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("qc")
    path = small_workflow(tmp)
    rows = run_workflow(load_workflow(path), tmp / "out", cluster="sequential")
    return path, tmp / "out", rows


def test_rows_and_cv_choice(ran):
    _, out, rows = ran
    assert [r["kernel"] for r in rows] == ["BOW", "HDAG", "HDAG (p=1)", "HDAG (p=2)"]
    hd = rows[1]
    assert sorted((g["p"], g["C"]) for g in hd["grid"]) == [(1, 1), (1, 10), (2, 1), (2, 10)]
    assert hd["cv_accuracy"] == round(max(g["cv_accuracy"] for g in hd["grid"]), 4)
    for r, p in zip(rows[2:], (1, 2)):  # options.per: the best setting among those with that p
        assert r["params"]["p"] == p == r["spec"]["kernel"]["p"]
        assert r["cv_accuracy"] == round(max(g["cv_accuracy"] for g in hd["grid"] if g["p"] == p), 4)
    assert any(r["spec"] == hd["spec"] and r["accuracy"] == hd["accuracy"] for r in rows[2:])
    assert hd["spec"]["kind"] == "normalized" and hd["spec"]["kernel"]["kind"] == "hdag"
    assert hd["params"]["p"] == hd["spec"]["kernel"]["p"]
    for r in rows:
        assert (r["n_train"], r["n_test"]) == (150, 40)
        assert 1 / 6 < r["accuracy"] <= 1 and 0 < r["mrr"] <= 1
    assert "| HDAG |" in (out / "results.md").read_text()
    assert json.loads((out / "results.json").read_text())[1]["accuracy"] == hd["accuracy"]


def test_hdag_numbers_match_a_direct_computation(ran):
    """Accuracy and MRR recomputed from HDAGKernel.block on the stored HDAGs (no Gram store)."""
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.svm import SVC

    from gramtile.kernels.composite import normalize_block
    from gramtile.kernels.registry import as_spec
    from gramtile.pipeline.learn.metrics import neighbour_mrr
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    _, out, rows = ran
    hd = rows[1]
    cs = CorpusStore.open(out / "corpus.zarr")
    X = cs.load("hdag", 0, cs.n)
    base = as_spec(hd["spec"]["kernel"])
    K = base.block(X)
    d = np.diag(K)
    K = normalize_block(K, d, d)
    y = np.array([str(v) for v in cs.labels])
    m = OneVsRestClassifier(SVC(kernel="precomputed", C=hd["C"])).fit(K[:150, :150], y[:150])
    acc = np.mean(m.predict(K[150:, :150]) == y[150:])
    assert hd["accuracy"] == pytest.approx(acc, abs=1e-4)
    assert hd["mrr"] == pytest.approx(neighbour_mrr(K[150:, 150:], y[150:]), abs=1e-4)


def test_stored_hdags_are_the_parsed_questions(ran):
    from gramtile.pipeline.readers.plain import read_trec
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    _, out, _ = ran
    cs = CorpusStore.open(out / "corpus.zarr")
    qs = list(islice(read_trec(require_data("trec_qc") / "train.txt"), 3))
    for doc, q in zip(cs.documents(0, 3), qs):
        h = doc.structures["hdag"]
        words = [h.attrs[v][0] for v in range(len(h)) if v not in h.parent]
        assert words == [w.lower() for w in q.text.split() if w not in ("?", ".", ",")]


def test_two_stage_grid(tmp_path):
    """options.first: lam by CV at p = 2 only, then p = 1 and 3 at the chosen lam (4 points, not 6)."""
    path = small_workflow(tmp_path, grid={"HDAG": {"p": [1, 2, 3], "lam": [0.1, 1.0]}}, first={"HDAG": {"p": 2}})
    raw = yaml.safe_load(path.read_text())
    raw["kernels"] = {"HDAG": raw["kernels"]["HDAG"]}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = tmp_path / "out"
    rows = run_workflow(load_workflow(path), out, cluster="sequential")
    hd = rows[0]
    grid = {(g["p"], g["lam"]) for g in hd["grid"]}
    stage1 = [g for g in hd["grid"] if g["p"] == 2]
    lam = max(stage1, key=lambda g: g["cv_accuracy"])["lam"]
    assert {g["lam"] for g in stage1} == {0.1, 1.0}
    assert grid == {(2, 0.1), (2, 1.0), (1, lam), (3, lam)}
    assert len(list(out.glob("gram-hdag-*.zarr"))) == 4
    assert [r["kernel"] for r in rows] == ["HDAG", "HDAG (p=1)", "HDAG (p=2)", "HDAG (p=3)"]
    assert [r["params"]["lam"] for r in rows[1:] if r["params"]["p"] != 2] == [lam, lam]
    assert hd["cv_accuracy"] == round(max(g["cv_accuracy"] for g in hd["grid"]), 4)
    assert "two-stage grid" in (out / "results.md").read_text()


def test_staged_points():
    from gramtile.workflows.recipes.qc_hdag import staged

    vs = [(None, {"p": p, "lam": lam}) for p in (1, 2, 3) for lam in (0.1, 0.5)]
    assert [q for _, q in staged(vs, {"p": 2}, {"p": 2, "lam": 0.5})] == [{"p": 1, "lam": 0.5}, {"p": 3, "lam": 0.5}]
    assert [q for _, q in staged(vs, {"lam": 0.1}, {"p": 3, "lam": 0.1})] == [{"p": 3, "lam": 0.5}]


@pytest.mark.parametrize("edit, key", [({"folds": 1}, "options.folds"),
                                       ({"first": {"HDAG": {"p": 7}}}, "options.first.HDAG.p"),
                                       ({"first": {"HDAG": {"p": 1, "lam": 0.5}}}, "options.first.HDAG"),
                                       ({"first": {"HDAG": []}}, "options.first.HDAG"),
                                       ({"grid": {"HDAG": {"depth": [1]}}}, "options.grid.HDAG.depth"),
                                       ({"grid": {"SVM": {"lam": [1]}}}, "options.grid.SVM"),
                                       ({"per": {"HDAG": "depth"}}, "options.per.HDAG")])
def test_bad_options_name_the_key(tmp_path, edit, key):
    path = small_workflow(tmp_path, **edit)
    with pytest.raises(WorkflowError) as e:
        run_workflow(load_workflow(path), tmp_path / "out", cluster="sequential")
    assert f"'{key}'" in str(e.value)


def test_hdag_representation_is_required(tmp_path):
    raw = yaml.safe_load(small_workflow(tmp_path).read_text())
    raw["data"]["representations"] = ["seq"]
    raw["kernels"] = {"BOW": raw["kernels"]["BOW"]}
    raw["options"]["grid"] = {}
    raw["options"]["per"] = {}
    path = tmp_path / "no_hdag.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(WorkflowError, match="data.representations"):
        run_workflow(load_workflow(path), tmp_path / "out", cluster="sequential")
