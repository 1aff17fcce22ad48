"""Relation workflows (workflows/recipes/relations.py) through ``gramtile run``'s recipe hook, on reduced
configurations of workflows/conll04_relations.yaml and workflows/semeval2010_relations.yaml."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import require_data

from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.workflows.errors import WorkflowError
from gramtile.workflows.runner import RecipeWorkflow, load_workflow, run_workflow

REPO = Path(__file__).resolve().parents[2]


def reduced(tmp_path, name, **changes):
    raw = yaml.safe_load((REPO / "workflows" / name).read_text())
    raw.update(changes)
    p = tmp_path / name
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


def test_shipped_workflows_load():
    for name in ("conll04_relations.yaml", "semeval2010_relations.yaml"):
        wf = load_workflow(REPO / "workflows" / name)
        assert isinstance(wf, RecipeWorkflow) and wf.raw["task"] in ("conll04", "semeval2010")


def test_conll04_reduced_runs_and_resumes(tmp_path):
    require_data("conll04")
    raw = yaml.safe_load((REPO / "workflows" / "conll04_relations.yaml").read_text())
    raw["protocol"]["learning_curve"] = [0.5, 1.0]
    wf = reduced(tmp_path, "conll04_relations.yaml", limit={"train": 200, "dev": 60, "test": 100}, parser="none",
                 protocol=raw["protocol"])
    out = tmp_path / "out"
    rows = run_workflow(load_workflow(wf), out, cluster="sequential")
    methods = [(r["relation"], r["kernel"], r["model"]) for r in rows]
    for rel in ("Work_For", "OrgBased_In"):
        assert [m[1:] for m in methods if m[0] == rel] == [
            ("features", "naive_bayes"), ("features", "winnow"), ("features", "linear_svm"),
            ("contiguous", "perceptron"), ("contiguous", "svm"), ("sparse", "perceptron"), ("sparse", "svm")]
    for r in rows:
        p, rc, f = r["precision"], r["recall"], r["f1"]
        assert 0 <= p <= 1 and 0 <= rc <= 1 and f == pytest.approx(2 * p * rc / (p + rc) if p + rc else 0.0)
    # C chosen by the shipped selection (cross-validation by sentence on train + dev) from each
    # SVM's grid; learners without C have none
    key = {"dev": "dev_f1", "cv": "cv_f1"}[raw["protocol"].get("select", "dev")]
    for r in rows:
        if r["model"] == "svm":
            assert r["C"] in raw["protocol"]["C"] and 0 <= r[key] <= 1
        elif r["model"] == "linear_svm":
            assert r["C"] in raw["protocol"]["feature_C"] and 0 <= r[key] <= 1
        else:
            assert r["C"] is None and r[key] is None
    # the kernels learn something on held-out sentences
    assert max(r["f1"] for r in rows if r["kernel"] == "sparse") > 0.3
    saved = json.loads((out / "results.json").read_text())
    assert saved["rows"] == json.loads(json.dumps(rows))
    curves = saved["learning_curves"]
    assert {c["fraction"] for c in curves} == {0.5, 1.0}
    assert {(c["kernel"], c["model"]) for c in curves} >= {("sparse", "svm"), ("features", "linear_svm")}
    assert (out / "learning_curve_Work_For.png").stat().st_size > 0
    md = (out / "results.md").read_text()
    assert "## Work_For" in md and "| sparse | svm |" in md
    # rerun: stores reused, same numbers
    stamp = (out / "Work_For" / "corpus.zarr" / "zarr.json").stat().st_mtime_ns
    again = run_workflow(load_workflow(wf), out, cluster="sequential")
    assert [(r["f1"], r["precision"]) for r in again] == [(r["f1"], r["precision"]) for r in rows]
    assert (out / "Work_For" / "corpus.zarr" / "zarr.json").stat().st_mtime_ns == stamp


def test_conll04_cv_selection_is_the_mean_fold_f1_of_the_grid(tmp_path):
    """select: cv chooses each SVM's C by the mean F1 over sentence folds of train + dev: the chosen
    C's cv_f1 equals a cross-validation redone here with the same folds, and no C of the grid
    scores higher; select: dev (train -> dev) gives other scores on the same data."""
    import numpy as np
    from sklearn.svm import LinearSVC

    from gramtile.pipeline.learn.metrics import binary_prf
    from gramtile.pipeline.learn.relation_features import feature_matrix
    from gramtile.pipeline.readers.conll04 import load_split, read_corp
    from gramtile.workflows.recipes.relations import conll04_documents, sentence_folds

    data = require_data("conll04")
    limit = {"train": 120, "dev": 40, "test": 30}
    kernels = {"sparse": {"kind": "relation_subtree", "lam": 0.5, "type_weight": 1}}
    proto = {"select": "cv", "cv_folds": 3, "C": [0.1, 1, 10], "feature_C": [0.01, 0.1, 1],
             "feature_learners": ["linear_svm"], "learning_curve": []}
    wf = reduced(tmp_path, "conll04_relations.yaml", limit=limit, parser="none", relations=["Work_For"],
                 kernels=kernels, protocol=proto, scope="sentence")
    rows = run_workflow(load_workflow(wf), tmp_path / "out", cluster="sequential")
    by = {r["model"]: r for r in rows}
    assert set(by) == {"linear_svm", "perceptron", "svm"} and "dev_f1" not in by["svm"]
    corp = read_corp(data / "conll04.corp")
    sents = [s for k in ("train", "dev") for s in load_split(data, k, corp)[:limit[k]]]
    docs = conll04_documents(sents, "Work_For", scope="sentence")
    assert docs[0].structures["relation"].type == "Sentence"
    folds = sentence_folds([d.id for d in docs], 3, 0)
    # the feature SVM's mean fold F1 redone here: each fold's vocabulary from its training sentences
    y = np.array([d.label for d in docs])
    grid = {}
    for c in (0.01, 0.1, 1.0):
        f1 = []
        for f in folds:
            Xa, vocab = feature_matrix([docs[i].structures["relation"] for i in f.train])
            Xb, _ = feature_matrix([docs[i].structures["relation"] for i in f.test], vocab)
            f1.append(binary_prf(y[f.test], LinearSVC(C=c, max_iter=20000).fit(Xa, y[f.train]).predict(Xb), "1")[2])
        grid[c] = float(np.mean(f1))
    assert by["linear_svm"]["cv_f1"] == pytest.approx(grid[by["linear_svm"]["C"]], abs=1e-12)
    assert by["linear_svm"]["cv_f1"] == max(grid.values())
    # the kernel SVM's cv_f1 recomputed from the kernel itself on the same folds
    from sklearn.svm import SVC

    from gramtile.kernels.relation_subtree import RelationSubtreeKernel
    from gramtile.pipeline.learn.metrics import binary_prf
    from gramtile.pipeline.representations.encode import encode
    from gramtile.pipeline.representations.vocab import Vocabularies

    K = RelationSubtreeKernel(lam=0.5, type_weight=1).block(encode([d.structures["relation"] for d in docs],
                                                                   Vocabularies()))
    mean = {c: np.mean([binary_prf(y[f.test], SVC(kernel="precomputed", C=c).fit(K[np.ix_(f.train, f.train)],
                                                                                 y[f.train]).predict(
        K[np.ix_(f.test, f.train)]), "1")[2] for f in folds]) for c in (0.1, 1.0, 10.0)}
    assert by["svm"]["cv_f1"] == pytest.approx(mean[by["svm"]["C"]], abs=1e-12) == max(mean.values())


def test_sentence_folds_keep_a_sentence_together_and_are_seeded():
    from gramtile.pipeline.learn.errors import EvaluationError
    from gramtile.workflows.recipes.relations import sentence_folds

    ids = [f"conll04:{s}:{a}-{a + 1}:{a + 2}-{a + 3}" for s in range(40) for a in range(s % 3 + 1)]
    folds = sentence_folds(ids, 5, seed=0)
    assert [f.name for f in folds] == [f"fold-{k}" for k in range(5)]
    everything = np.concatenate([f.test for f in folds])
    assert sorted(everything.tolist()) == list(range(len(ids)))  # every example in exactly one fold
    for f in folds:
        assert np.intersect1d(f.train, f.test).size == 0 and f.train.size + f.test.size == len(ids)
        sentences = {ids[i].rsplit(":", 2)[0] for i in f.test}
        assert sentences.isdisjoint({ids[i].rsplit(":", 2)[0] for i in f.train})
        assert len(sentences) == 8  # 40 sentences over 5 folds
    again = sentence_folds(ids, 5, seed=0)
    assert all(np.array_equal(a.test, b.test) for a, b in zip(folds, again))
    other = sentence_folds(ids, 5, seed=1)
    assert not all(np.array_equal(a.test, b.test) for a, b in zip(folds, other))
    for bad in (1, 41, True):
        with pytest.raises(EvaluationError, match="cv_folds"):
            sentence_folds(ids, bad)


def test_semeval_reduced_runs(tmp_path, monkeypatch):
    require_data("semeval2010_task8_train")
    raw = yaml.safe_load((REPO / "workflows" / "semeval2010_relations.yaml").read_text())
    kernels = {k: raw["kernels"][k] for k in ("DP", "BOW")}
    kernels["SUM"] = {"kind": "sum", "kernels": [{"weight": 1, "kernel": raw["kernels"][k]} for k in ("DP", "BOW")]}
    wf = reduced(tmp_path, "semeval2010_relations.yaml", limit=150, kernels=kernels,
                 protocol={"folds": 2, "seed": 0, "C": 1, "multiclass": "ovo"})
    rows = run_workflow(load_workflow(wf), tmp_path / "out", cluster="sequential")
    assert [r["kernel"] for r in rows] == ["DP", "BOW", "SUM"]
    for r in rows:
        assert 0 < r["macro_f1"] < 1 and 0 < r["accuracy"] < 1 and r["folds"] == 2
    # the corpus store is keyed by the example builders' code: same code -> reused, other -> rebuilt
    import gramtile.workflows.recipes.relations as relations

    store = tmp_path / "out" / "corpus.zarr"
    assert CorpusStore.open(store).manifest["options"]["builder"] == relations.builder_digest()
    stamp = (store / "zarr.json").stat().st_mtime_ns
    run_workflow(load_workflow(wf), tmp_path / "out", cluster="sequential")
    assert (store / "zarr.json").stat().st_mtime_ns == stamp
    monkeypatch.setattr(relations, "builder_digest", lambda: "changed builder code")
    run_workflow(load_workflow(wf), tmp_path / "out", cluster="sequential")
    assert CorpusStore.open(store).manifest["options"]["builder"] == "changed builder code"


@pytest.mark.parametrize("change,key", [({"relations": ["Works_For"]}, "relations"),
                                        ({"parser": "stanford"}, "parser"),
                                        ({"scope": "document"}, "scope"),
                                        ({"protocol": {"select": "test"}}, "protocol.select"),
                                        ({"protocol": {"cv_folds": 1}}, "protocol.cv_folds"),
                                        ({"colour": "red"}, "colour"),
                                        ({"task": "ace2004"}, "task")])
def test_bad_conll04_config_names_the_key(tmp_path, change, key):
    wf = reduced(tmp_path, "conll04_relations.yaml", **change)
    with pytest.raises(WorkflowError, match=f"key '{key}'"):
        run_workflow(load_workflow(wf), tmp_path / "out", cluster="sequential")


def test_bad_recipe_names_the_key(tmp_path):
    wf = reduced(tmp_path, "conll04_relations.yaml", recipe="gramtile.workflows.recipes.relations:nothing")
    with pytest.raises(WorkflowError, match="key 'recipe'"):
        load_workflow(wf)
