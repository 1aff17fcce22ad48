"""Vector sources recorded in a corpus store by ``gramtile prepare --vectors``, read by SPTK: a
vector file (recorded with its sha256; a changed file is refused), the corpus builders
(``corpus:ppmi``, ``corpus:word2vec``) trained on the store, and the whole command-line path
(prepare --vectors, gram, train, predict on new text) against the same pipeline in Python. Real
TREC questions parsed by the installed spaCy pipeline, real Zarr stores."""
from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import require_data

import gramtile
from gramtile.pipeline.cache import Cache
from gramtile.pipeline.compute.inmemory import gram
from gramtile.pipeline.learn.training import train
from gramtile.pipeline.resources import keys as rkeys
from gramtile.pipeline.resources.vectors import train_vectors, write_vectors_text
from gramtile.pipeline.stores import resource_store
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.cli import main

N_TRAIN, N_NEW = 80, 20


def _questions(path, n):
    lines = path.read_text(encoding="latin-1").splitlines()[:n]
    return [(ln.split(" ", 1)[0].split(":")[0], ln.split(" ", 1)[1]) for ln in lines]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("sptkvec")
    src = require_data("trec_qc")
    train_q = _questions(src / "train.txt", N_TRAIN)
    new_q = _questions(src / "test.txt", N_NEW)
    (d / "train.tsv").write_text("".join(f"{lab}\t{q}\n" for lab, q in train_q), encoding="utf-8")
    (d / "new.txt").write_text("".join(f"{q}\n" for _, q in new_q), encoding="utf-8")
    # vectors from all the training questions (lower-cased words), seeded, written by the test
    docs = [q.lower().split() for _, q in _questions(src / "train.txt", 10**6)]
    words, V = train_vectors(docs, dims=50, window=3, seed=0)
    write_vectors_text(d / "vec.txt", words, V)
    parsed = gramtile.parse([{"text": q, "label": lab} for lab, q in train_q], reps=["tree"])
    new = gramtile.parse([q for _, q in new_q], reps=["tree"])
    return d, parsed, new, [lab for lab, _ in train_q]


def _prepare(d, out, *vectors):
    args = ["prepare", "--input", str(d / "train.tsv"), "--format", "tsv", "--text-col", "2", "--label-col", "1",
            "--no-header", "--out", str(out), "--reps", "tree", "--cluster", "sequential", "--quiet"]
    for v in vectors:
        args += ["--vectors", v]
    assert main(args) == 0


def _sptk(vectors):
    return {"kind": "sptk", "lam": 0.4, "mu": 0.4, "similarity": "vectors", "vectors": vectors, "threshold": 0.5,
            "rep": "tree"}


def test_prepare_records_a_vector_file_that_gram_uses_and_a_changed_file_is_refused(data, tmp_path):
    d, parsed, _, _ = data
    vec = tmp_path / "vec.txt"
    vec.write_bytes((d / "vec.txt").read_bytes())
    _prepare(d, tmp_path / "c.zarr", str(vec))
    vkey = rkeys.vectors_key(str(vec), None)
    meta = resource_store.info(tmp_path / "c.zarr", vkey)
    assert meta["kind"] == "vectors" and meta["provenance"]["vectors"][0]["path"] == str(vec.resolve())
    stored = resource_store.load(tmp_path / "c.zarr", vkey)
    assert 0 < len(stored.words) and stored.matrix.shape == (len(stored.words), 50)
    spec = _sptk(str(vec))
    with Cache().active() as c:
        assert main(["gram", "--corpus", str(tmp_path / "c.zarr"), "--kernel", json.dumps(spec), "--out",
                     str(tmp_path / "g.zarr"), "--cluster", "sequential", "--quiet"]) == 0
    assert c.counts("resources")["built"] == 1  # the table only: the vectors were recorded by prepare
    (tkey,) = rkeys.keys_of(spec)
    tmeta = resource_store.info(tmp_path / "c.zarr", tkey)
    assert tmeta["provenance"]["vectors_resource"] == {"group": vkey.group, "content_hash": meta["content_hash"]}
    K = GramStore.open(tmp_path / "g.zarr").view().to_numpy()
    M = gram(spec, [x.structures["tree"] for x in parsed])
    np.testing.assert_allclose(K, M, rtol=1e-12, atol=0)
    assert np.sum(K > gram({"kind": "pt", "lam": 0.4, "mu": 0.4}, [x.structures["tree"] for x in parsed])
                  * (1 + 1e-9)) > 0  # the vectors matched some words softly
    # the file changes: a new table from it (another threshold) is refused, and so is the old one
    vec.write_text(vec.read_text(encoding="utf-8").replace(" 0.", " 0.1", 1), encoding="utf-8")
    for thr, out in ((0.6, "g2.zarr"), (0.5, "g3.zarr")):
        assert main(["gram", "--corpus", str(tmp_path / "c.zarr"), "--kernel", json.dumps({**spec, "threshold": thr}),
                     "--out", str(tmp_path / out), "--cluster", "sequential", "--quiet"]) == 2
        assert not (tmp_path / out / "zarr.json").exists()


@pytest.mark.parametrize("builder", ["ppmi", "word2vec"])
def test_corpus_builders_trained_in_the_store_equal_the_in_memory_kernel(data, tmp_path, builder):
    d, parsed, _, _ = data
    _prepare(d, tmp_path / "c.zarr", f"corpus:{builder}@tree")
    vkey = rkeys.vectors_key(f"corpus:{builder}", "tree")
    assert resource_store.info(tmp_path / "c.zarr", vkey)["params"]["seed"] == 0
    spec = _sptk(f"corpus:{builder}")
    with Cache().active() as c:
        assert main(["gram", "--corpus", str(tmp_path / "c.zarr"), "--kernel", json.dumps(spec), "--out",
                     str(tmp_path / "g.zarr"), "--cluster", "sequential", "--quiet"]) == 0
    assert c.counts("resources")["built"] == 1  # the vectors trained by prepare were reused
    K = GramStore.open(tmp_path / "g.zarr").view().to_numpy()
    np.testing.assert_allclose(K, gram(spec, [x.structures["tree"] for x in parsed]), rtol=1e-12, atol=0)


def test_prepare_vectors_gram_train_predict_equals_python(data, tmp_path):
    d, parsed, new, labels = data
    _prepare(d, tmp_path / "c.zarr", str(d / "vec.txt"))
    spec = _sptk(str(d / "vec.txt"))
    norm = {"kind": "normalized", "kernel": spec}
    assert main(["gram", "--corpus", str(tmp_path / "c.zarr"), "--kernel", json.dumps(spec), "--out",
                 str(tmp_path / "g.zarr"), "--cluster", "sequential", "--quiet"]) == 0
    assert main(["train", "--corpus", str(tmp_path / "c.zarr"), "--gram", str(tmp_path / "g.zarr"), "--kernel",
                 json.dumps(norm), "--C", "3", "--out", str(tmp_path / "model"), "--quiet"]) == 0
    assert main(["predict", "--model-dir", str(tmp_path / "model"), "--input", str(d / "new.txt"), "--format",
                 "text", "--out", str(tmp_path / "pred.json"), "--quiet"]) == 0
    got = json.loads((tmp_path / "pred.json").read_text())
    m = train(parsed, norm, C=3.0)
    want = m.predict(new).tolist()
    assert [p["predicted"] for p in got] == want
    assert len(set(want)) > 1 and set(want) <= set(labels)
    scores = m.decision_function(m.kernel_to_support(new))
    np.testing.assert_allclose(np.array([p["score"] for p in got]), scores, rtol=0, atol=1e-9)
