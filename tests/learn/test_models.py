"""Saved models (pipeline/learn/models.py, gramtile train / predict) on real data.

Predictions of a saved and reloaded model must equal scikit-learn's (or the perceptron's) in-memory
predict on the full K(test, train), while the model evaluates the kernel against its support
examples only.
"""
import json

import numpy as np
import pytest
from conftest import require_data
from sklearn.svm import SVC

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.inmemory import gram
from gramtile.pipeline.learn.errors import EvaluationError
from gramtile.pipeline.learn.learners.base import Problem
from gramtile.pipeline.learn.learners.registry import make
from gramtile.pipeline.learn.models import SavedModel
from gramtile.pipeline.learn.training import train
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.integrity import write_manifest
from gramtile.workflows.cli import main

N_TRAIN, N_TEST = 150, 60
SST_BOW = {"kind": "sum", "kernels": [
    {"weight": 1.0, "kernel": {"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4, "rep": "grct"}}},
    {"weight": 0.5, "kernel": {"kind": "normalized", "kernel": {"kind": "bow", "rep": "bow"}}}]}


@pytest.fixture(scope="module")
def qc():
    """TREC-10 questions (6 coarse classes) with KeLP's GRCT tree and bag of words."""
    path = require_data("trec_qc_kelp_trees") / "TREC_10.coarse.klp.gz"
    docs = list(read(path, "kelp"))[:N_TRAIN + N_TEST]
    for d in docs:
        d.structures = {k: d.structures[k] for k in ("grct", "bow")}
    K = gram(SST_BOW, {r: [d.structures[r] for d in docs] for r in ("grct", "bow")})
    return docs, K, np.array([d.label for d in docs])


CASES = [("svm", "ovr"), ("svm", "ovo"), ("perceptron", "ovr"), ("svm", "binary"), ("perceptron", "binary")]


@pytest.mark.parametrize("learner,scheme", CASES)
def test_saved_model_predicts_as_in_memory(qc, tmp_path, learner, scheme):
    docs, K, y = qc
    if scheme == "binary":  # NUM vs rest
        y = np.where(y == "NUM", "+1", "-1")
        docs = [type(d)(id=d.id, label=lab, structures=d.structures) for d, lab in zip(docs, y)]
    tr, te = slice(0, N_TRAIN), slice(N_TRAIN, N_TRAIN + N_TEST)
    m = train(docs[tr], SST_BOW, K=K[tr, tr], learner=learner, C=2.0, multiclass=scheme if scheme != "binary"
              else "ovr")
    m.save(tmp_path / "model")
    m2 = SavedModel.load(tmp_path / "model")
    assert m2.scheme == scheme and m2.learner == learner

    Ksv = m2.kernel_to_support(docs[te])
    # only the support columns are evaluated, and they are the right columns of K(test, train)
    assert Ksv.shape == (N_TEST, m2.n_support)
    assert 0 < m2.n_support < N_TRAIN
    pos = {d.id: i for i, d in enumerate(docs[tr])}
    cols = [pos[d.id] for d in m2.support]
    np.testing.assert_allclose(Ksv, K[te][:, cols], rtol=1e-12, atol=1e-12)

    lr = make(learner)
    point = lr.grid({"epochs": 2} if learner == "perceptron" else {"C": 2.0})[0]
    est = lr.estimator(point, Problem(tuple(sorted(set(y))), multiclass="ovo" if scheme == "ovo" else "ovr"))
    est.fit(K[tr, tr], y[tr])
    expected = est.predict(K[te, tr])
    got = m2.predict(docs[te])
    assert got.tolist() == expected.tolist()
    if learner == "svm" and scheme != "ovr":
        # the reconstructed decision values are sklearn's own (ovo pairs in sklearn's order)
        est.decision_function_shape = "ovo"
        np.testing.assert_allclose(m2.decision_function(Ksv), est.decision_function(K[te, tr]), atol=1e-9)
    assert len(set(got.tolist())) > 1


def test_ovo_layout_is_needed(qc, tmp_path):
    """A deliberately wrong OvO layout (row i for every pair) changes the predictions."""
    docs, K, y = qc
    tr, te = slice(0, N_TRAIN), slice(N_TRAIN, N_TRAIN + N_TEST)
    m = train(docs[tr], SST_BOW, K=K[tr, tr], C=2.0, multiclass="ovo")
    est = SVC(kernel="precomputed", C=2.0).fit(K[tr, tr], y[tr])
    est.decision_function_shape = "ovo"
    n_cl = len(est.classes_)
    bad = SavedModel.from_estimator(est, SST_BOW, docs[tr])
    starts = np.concatenate([[0], np.cumsum(est.n_support_)])
    p = 0
    for i in range(len(est.classes_)):
        for j in range(i + 1, len(est.classes_)):
            n_i, n_j = est.n_support_[i], est.n_support_[j]
            bad.functions[p]["coef"] = np.concatenate(
                [est.dual_coef_[i % (n_cl - 1), starts[i]:starts[i] + n_i], est.dual_coef_[i % (n_cl - 1), starts[j]:starts[j] + n_j]]
            ).tolist()
            p += 1
    Ksv = m.kernel_to_support(docs[te])
    assert not np.allclose(bad.decision_function(Ksv), est.decision_function(K[te, tr]))


def test_train_predict_cli_from_corpus_and_gram_store(qc, tmp_path, capsys):
    docs, K, y = qc
    spec = SST_BOW["kernels"][0]["kernel"]  # normalized SST on grct; its base is stored
    cs = CorpusStore.create(tmp_path / "c.zarr", shard_size=100)
    for k in range(0, N_TRAIN, 100):
        cs.write_shard(k // 100, docs[k:min(k + 100, N_TRAIN)])
    cs.finish()
    cs.close()
    run_gram(tmp_path / "c.zarr", spec["kernel"], tmp_path / "g.zarr", tile=64, cluster="sequential")
    assert main(["train", "--corpus", str(tmp_path / "c.zarr"), "--gram", str(tmp_path / "g.zarr"),
                 "--kernel", json.dumps(spec), "--C", "2", "--out", str(tmp_path / "m1")]) == 0
    # the same model computed in memory
    m_mem = train(docs[:N_TRAIN], spec, C=2.0)
    m1 = SavedModel.load(tmp_path / "m1")
    assert [d.id for d in m1.support] == [d.id for d in m_mem.support]
    for f1, f2 in zip(m1.functions, m_mem.functions):
        np.testing.assert_allclose(f1["coef"], f2["coef"], rtol=1e-6, atol=1e-8)
    assert m1.provenance["corpus_hash"] == CorpusStore.open(tmp_path / "c.zarr").content_hash
    assert m1.provenance["gramtile_version"]

    # predict on the KeLP file's test questions: read from a file in tmp_path
    src = require_data("trec_qc_kelp_trees") / "TREC_10.coarse.klp.gz"
    import gzip

    lines = gzip.open(src, "rt", encoding="utf-8").read().splitlines()[N_TRAIN:N_TRAIN + N_TEST]
    (tmp_path / "test.klp").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    assert main(["predict", "--model-dir", str(tmp_path / "m1"), "--input", str(tmp_path / "test.klp"),
                 "--format", "kelp"]) == 0
    out, err = capsys.readouterr()
    pred = [ln.split("\t")[1] for ln in out.strip().splitlines()]
    test_docs = list(read(tmp_path / "test.klp", "kelp"))
    assert pred == m_mem.predict(test_docs).tolist()
    assert f"{N_TEST} examples x {m1.n_support} support examples" in err


def test_train_predict_raw_text(tmp_path, capsys):
    """Raw text: train on parsed questions (spaCy), predict on new sentences parsed the same way."""
    from gramtile.workflows.recipes.demo import demo_corpus_path

    lines = demo_corpus_path().read_text(encoding="utf-8").splitlines()
    (tmp_path / "train.tsv").write_text("\n".join(lines[:80]) + "\n")
    (tmp_path / "new.txt").write_text("\n".join(ln.split("\t", 1)[1] for ln in lines[80:100]) + "\n")
    spec = json.dumps({"kind": "normalized", "kernel": {"kind": "sst", "lam": 0.4, "rep": "tree"}})
    assert main(["train", "--input", str(tmp_path / "train.tsv"), "--format", "tsv", "--kernel", spec,
                 "--out", str(tmp_path / "m")]) == 0
    m = SavedModel.load(tmp_path / "m")
    assert (tmp_path / "m" / "support-tree.jsonl").exists()
    assert sorted(m.classes) == sorted({ln.split("\t")[0] for ln in lines[:80]})
    capsys.readouterr()
    assert main(["predict", "--model-dir", str(tmp_path / "m"), "--input", str(tmp_path / "new.txt"),
                 "--format", "text", "--out", str(tmp_path / "p.json")]) == 0
    rows = json.loads((tmp_path / "p.json").read_text())
    gold = [ln.split("\t")[0] for ln in lines[80:100]]
    assert len(rows) == 20 and all(r["predicted"] in m.classes for r in rows)
    # far better than chance on 5 classes
    assert np.mean([r["predicted"] == g for r, g in zip(rows, gold)]) >= 0.5


def test_bad_model_dir_and_missing_representation(qc, tmp_path):
    docs, K, y = qc
    with pytest.raises(StoreError, match="no model.json"):
        SavedModel.load(tmp_path)
    m = train(docs[:N_TRAIN], SST_BOW, K=K[:N_TRAIN, :N_TRAIN])
    m.save(tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "model.json").read_text())
    meta["kernel"]["kernels"][0]["weight"] = 2.0
    (tmp_path / "m" / "model.json").write_text(json.dumps(meta))
    with pytest.raises(StoreError, match="model.json does not match its sha256"):  # the manifest catches the edit
        SavedModel.load(tmp_path / "m")
    write_manifest(tmp_path / "m")  # an edit that also rewrites the manifest: the kernel hash still catches it
    with pytest.raises(StoreError, match="kernel hash"):
        SavedModel.load(tmp_path / "m")
    bare = [type(d)(id=d.id, label=d.label, structures={"grct": d.structures["grct"]}) for d in docs[:3]]
    with pytest.raises(EvaluationError, match="'bow'"):
        m.predict(bare)
