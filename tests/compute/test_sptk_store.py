"""SPTK through the real engine into real Zarr stores: the lexical table is a stored corpus
resource whose content hash the Gram store records; tiles, resume, verify, composition, the CLI
and a saved model's prediction, on a subset of KeLP's TREC trees (GRCT and LCT) with word
vectors trained from the questions and written to a file by the test."""
from __future__ import annotations

import gzip
import itertools
import json

import numpy as np
import pytest
from conftest import require_data, stop_after

from gramtile.pipeline.cache import Cache
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.inmemory import gram
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.learn.models import SavedModel
from gramtile.pipeline.learn.training import train, train_from_store
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.resources import keys as rkeys
from gramtile.pipeline.resources.vectors import train_vectors, write_vectors_text
from gramtile.pipeline.stores import resource_store
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_verify import verify
from gramtile.workflows.cli import main

N = 60


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("sptk")
    src = require_data("trec_qc_kelp_trees") / "train_5500.coarse.klp.gz"
    with gzip.open(src, "rt", encoding="utf-8") as f:
        lines = list(itertools.islice(f, 0, 3 * N, 3))
    (d / "train.klp").write_text("".join(lines[:N - 12]), encoding="utf-8")
    (d / "test.klp").write_text("".join(lines[N - 12:]), encoding="utf-8")
    # vectors from the whole training questions (lower-cased), seeded
    with gzip.open(src, "rt", encoding="utf-8") as f:
        docs = [ln.split("|BS:quest|")[1].split("|ES|")[0].lower().split() for ln in f]
    words, V = train_vectors(docs, dims=50, window=3, seed=0)
    write_vectors_text(d / "vec.txt", words, V)
    prepare(d / "train.klp", "kelp", d / "c.zarr", shard_size=20, cluster="sequential")
    return d


def _spec(d, rep="grct"):
    lexical = "leaves" if rep == "grct" else "prefix"
    return {"kind": "sptk", "lam": 0.4, "mu": 0.4, "terminal_factor": 5, "similarity": "vectors",
            "vectors": str(d / "vec.txt"), "threshold": 0.5, "lexical": lexical, "rep": rep}


@pytest.mark.parametrize("rep", ["grct", "lct"])
def test_store_equals_in_memory_and_records_the_table(corpus, rep):
    d = corpus
    spec = _spec(d, rep)
    docs = list(read(d / "train.klp", "kelp"))
    store = run_gram(d / "c.zarr", spec, d / f"g-{rep}.zarr", tile=16, cluster="threads")
    K = store.view().to_numpy()
    M = gram(spec, {rep: [x.structures[rep] for x in docs]})
    np.testing.assert_allclose(K, M, rtol=1e-12, atol=0)
    pt = gram({"kind": "pt", "lam": 0.4, "mu": 0.4, "terminal_factor": 5, "rep": rep},
              {rep: [x.structures[rep] for x in docs]})
    assert np.sum(K > pt * (1 + 1e-9)) >= 20  # soft matches add fragments (85 pairs of 2,304 here)
    assert np.all(K >= pt * (1 - 1e-12))
    (key,) = rkeys.keys_of(spec)
    meta = resource_store.info(d / "c.zarr", key)
    assert meta["kind"] == "csr" and meta["provenance"]["vectors"][0]["sha256"]
    assert GramStore.open(d / f"g-{rep}.zarr").meta["resources"] == {key.group: meta["content_hash"]}
    assert verify(d / f"g-{rep}.zarr").ok


def test_resume_and_threads_give_the_same_store(corpus, tmp_path):
    d = corpus
    spec = _spec(d)
    on_tile, seen = stop_after(2)
    with pytest.raises(RuntimeError):
        run_gram(d / "c.zarr", spec, tmp_path / "g.zarr", tile=12, cluster="sequential",
                 on_tile=on_tile)
    assert len(seen) == 2
    K = run_gram(d / "c.zarr", spec, tmp_path / "g.zarr", tile=12, cluster="sequential").view().to_numpy()
    full = run_gram(d / "c.zarr", spec, tmp_path / "h.zarr", tile=48, cluster="threads").view().to_numpy()
    np.testing.assert_array_equal(K, full)


def test_composition_and_cli(corpus, tmp_path):
    d = corpus
    spec = _spec(d)
    comp = {"kind": "sum", "kernels": [{"kernel": {"kind": "normalized", "kernel": spec}},
                                       {"kernel": {"kind": "normalized", "kernel": {"kind": "bow", "rep": "bow"}}}]}
    C = run_gram(d / "c.zarr", comp, tmp_path / "c.zarr", tile=16, cluster="sequential").view().to_numpy()
    S = run_gram(d / "c.zarr", spec, tmp_path / "s.zarr", tile=16, cluster="sequential").view().to_numpy()
    assert np.allclose(np.diag(C), 2.0)
    n = np.sqrt(np.diag(S))
    B = C - S / np.outer(n, n)
    assert np.all(B >= -1e-12) and np.allclose(np.diag(B), 1.0)
    assert main(["gram", "--corpus", str(d / "c.zarr"), "--kernel", json.dumps(spec), "--out",
                 str(tmp_path / "cli.zarr"), "--cluster", "sequential", "--quiet"]) == 0
    np.testing.assert_array_equal(GramStore.open(tmp_path / "cli.zarr").view().to_numpy(), S)


def test_saved_model_predicts_with_the_training_table(corpus, tmp_path):
    d = corpus
    spec = {"kind": "normalized", "kernel": _spec(d)}
    run_gram(d / "c.zarr", _spec(d), tmp_path / "g.zarr", tile=16, cluster="sequential")
    with Cache().active() as c:
        m = train_from_store(d / "c.zarr", [tmp_path / "g.zarr"], spec, C=3.0)
    assert c.counts("resources").get("built", 0) == 0 and c.counts("resources")["loads"] >= 1  # stored, not rebuilt
    m.save(tmp_path / "m")
    test_docs = list(read(d / "test.klp", "kelp"))
    train_docs = list(read(d / "train.klp", "kelp"))
    m2 = SavedModel.load(tmp_path / "m")
    m_mem = train(train_docs, spec, C=3.0)
    np.testing.assert_allclose(m2.kernel_to_support(test_docs), m_mem.kernel_to_support(test_docs),
                               rtol=0, atol=1e-10)
    assert m2.predict(test_docs).tolist() == m_mem.predict(test_docs).tolist()


def test_a_changed_vector_file_is_refused_not_reused(corpus, tmp_path):
    """The stored table names its vector file by sha256: vectors changed at the same path would
    leave the table (and the Gram stores made from it) describing other vectors."""
    from gramtile.pipeline.stores.errors import StoreMismatchError

    d = corpus
    vec = tmp_path / "v.txt"
    vec.write_text((d / "vec.txt").read_text(encoding="utf-8"), encoding="utf-8")
    prepare(d / "train.klp", "kelp", tmp_path / "c.zarr", shard_size=20, cluster="sequential")
    spec = {**_spec(d), "vectors": str(vec)}
    run_gram(tmp_path / "c.zarr", spec, tmp_path / "a.zarr", tile=48, cluster="sequential")
    run_gram(tmp_path / "c.zarr", spec, tmp_path / "b.zarr", tile=48, cluster="sequential")  # same file: reused
    lines = vec.read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].split(" ")[0] + " " + " ".join("0.5" for _ in lines[1].split(" ")[1:])
    vec.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(StoreMismatchError, match=r"v\.txt, which changed \(sha256 .*Fix: give the new vectors"):
        run_gram(tmp_path / "c.zarr", spec, tmp_path / "c2.zarr", tile=48, cluster="sequential")
    vec.unlink()
    with pytest.raises(StoreMismatchError, match=r"v\.txt, which is gone"):
        run_gram(tmp_path / "c.zarr", spec, tmp_path / "c3.zarr", tile=48, cluster="sequential")
