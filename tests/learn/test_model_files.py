"""One model format (pipeline/learn/model_files.py): every learner's model directory holds
model.json of format gramtile-model with a `model` field, load_model opens any of them with its
files and kernel checked, `gramtile predict` takes one path for all, and directories written
before the one format still load and predict the same. Real NUM trees, real stores."""
import json

import numpy as np
import pytest
from conftest import corpus_store_of, num_trees

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.feature_sets import write_store
from gramtile.pipeline.learn import linear
from gramtile.pipeline.learn.linear_models import LinearModel
from gramtile.pipeline.learn.model_files import is_model_dir, load_model
from gramtile.pipeline.learn.models import SavedModel
from gramtile.pipeline.learn.training import train_from_store
from gramtile.pipeline.readers.jsonl import write_jsonl
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.integrity import MANIFEST, write_manifest
from gramtile.workflows.cli import main

ST = {"kind": "normalized", "kernel": {"kind": "st", "lam": 0.4}}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    every = num_trees(5483)
    pick = np.random.default_rng(1).permutation(len(every))
    docs = [every[i] for i in pick[:160]]
    d = tmp_path_factory.mktemp("models")
    corpus = corpus_store_of(d / "c.zarr", docs, 80)
    run_gram(corpus, ST["kernel"], d / "g.zarr", tile=80, cluster="sequential")  # normalised when read
    train_from_store(corpus, [d / "g.zarr"], ST, C=1.0).save(d / "kernel")
    write_store(corpus, as_spec(ST), d / "f.zarr")
    linear.train_store(d / "f.zarr", d / "linear", C=1.0, solver="liblinear")
    new = [every[i] for i in pick[160:200]]
    write_jsonl(new, d / "new.jsonl")
    return {"dir": d, "corpus": corpus, "new": new}


def _meta(d):
    return json.loads((d / "model.json").read_text())


def _rewrite(d, meta, rename=None):
    """A model directory as another writer left it: model.json replaced (and files renamed), the
    manifest recorded again (so the checksums pass and what is checked is the content)."""
    for a, b in (rename or {}).items():
        (d / a).rename(d / b)
    (d / MANIFEST).unlink()
    (d / "model.json").unlink(missing_ok=True)
    name = "linear.json" if rename else "model.json"
    (d / name).write_text(json.dumps(meta))
    write_manifest(d)


def test_every_learner_writes_the_one_format_and_load_model_opens_it(models):
    d = models["dir"]
    k, lin = _meta(d / "kernel"), _meta(d / "linear")
    assert (k["format"], k["format_version"], k["model"]) == ("gramtile-model", 3, "kernel")
    assert (lin["format"], lin["format_version"], lin["model"], lin["learner"]) == ("gramtile-model", 3, "linear",
                                                                                    "linear")
    assert lin["kernel_hash"] == as_spec(ST).spec_hash == k["kernel_hash"]
    assert not (d / "linear" / "linear.json").exists() and (d / "linear" / "weights.npz").is_file()
    km, lm = load_model(d / "kernel"), load_model(d / "linear")
    assert isinstance(km, SavedModel) and isinstance(lm, LinearModel)
    assert is_model_dir(d / "kernel") and is_model_dir(d / "linear") and not is_model_dir(d / "g.zarr")
    for m in (km, lm):
        got = m.predictions(models["new"])
        assert len(got.labels) == len(models["new"]) and np.shape(got.scores) == (len(models["new"]),)
        assert list(got.labels) == list(m.predict(models["new"]))
    with pytest.raises(StoreError, match="holds a linear model"):
        SavedModel.load(d / "linear")
    with pytest.raises(StoreError, match="not a directory"):
        load_model(d / "new.jsonl")


def test_predict_takes_one_path_for_every_model(models, tmp_path, capsys):
    d = models["dir"]
    out = {}
    for name in ("kernel", "linear"):
        f = tmp_path / f"{name}.json"
        assert main(["predict", "--model-dir", str(d / name), "--input", str(d / "new.jsonl"), "--out", str(f)]) == 0
        rows = json.loads(f.read_text())
        out[name] = [r["predicted"] for r in rows]
        want = load_model(d / name).predictions(models["new"])
        assert out[name] == [str(p) for p in want.labels]
        np.testing.assert_allclose([r["score"][0] for r in rows], want.scores, rtol=0, atol=1e-12)
    err = capsys.readouterr().err
    assert "support examples" in err and "linear model over" in err and "accuracy" in err


def test_a_linear_model_written_before_the_one_format_loads_and_predicts_the_same(models, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(models["dir"] / "linear", old)
    meta = _meta(old)
    legacy = {"format": "gramtile-linear-model", "format_version": 2, "classes": meta["classes"],
              "params": meta["params"], "features": meta["features"], "strings": meta["strings"]}
    _rewrite(old, legacy, rename={"weights.npz": "linear.npz"})
    assert not (old / "model.json").exists()
    m, new = load_model(old), load_model(models["dir"] / "linear")
    assert isinstance(m, LinearModel)
    np.testing.assert_array_equal(m.predictions(models["new"]).scores, new.predictions(models["new"]).scores)


def test_a_kernel_model_of_format_version_2_loads_and_predicts_the_same(models, tmp_path):
    import shutil

    old = tmp_path / "old"
    shutil.copytree(models["dir"] / "kernel", old)
    meta = _meta(old)
    meta["format_version"] = 2
    del meta["model"]
    _rewrite(old, meta)
    np.testing.assert_array_equal(load_model(old).predictions(models["new"]).scores,
                                  load_model(models["dir"] / "kernel").predictions(models["new"]).scores)


@pytest.mark.parametrize("field, value", [("kernel_hash", "0" * 64), ("kernel", {"kind": "st", "lam": 0.5})])
def test_a_linear_model_whose_kernel_does_not_match_its_hash_is_refused(models, tmp_path, field, value):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(models["dir"] / "linear", bad)
    meta = _meta(bad)
    meta[field] = value
    _rewrite(bad, meta)
    with pytest.raises(StoreError, match="does not match its recorded hash"):
        load_model(bad)



def test_support_examples_that_no_longer_give_the_recorded_self_kernels_are_refused(models, tmp_path):
    """The manifest covers every file; an edit that recomputes it (or a kernel whose definition
    changed) is caught by recomputing K(sv, sv) against the self-kernels recorded at training."""
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(models["dir"] / "kernel", bad)
    f = bad / "support-tree.jsonl"
    lines = f.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if "(. ?)" in line)
    lines[k] = lines[k].replace("(. ?)", "(. ?) (. ?)", 1)  # one more subtree: K(x, x) grows
    f.write_text("\n".join(lines) + "\n")
    (bad / MANIFEST).unlink()
    write_manifest(bad)
    with pytest.raises(StoreError, match="recorded at training"):
        load_model(bad)
    load_model(models["dir"] / "kernel")  # the intact directory loads
