"""Saved models predict with the corpus resources their kernel was trained with.

An LSA soft-matching space or a domain space depends on the examples it was built from, so a
model must keep the space of its training K (pipeline/learn/models.py) instead of rebuilding one from
the examples at hand. On a real subsample of the senseval ``serve`` data: the saved model's
support kernels equal the training Gram entries, and its predictions equal an SVC trained on the
training K and fed a K(test, train) built here, explicitly, with the training resources.
"""
import json

import numpy as np
import pytest
from conftest import require_data, senseval_subset
from sklearn.svm import SVC

import gramtile
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.cache import Cache
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.inmemory import evaluate_block, gram_with_resources
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.learn.models import SavedModel
from gramtile.pipeline.learn.training import train, train_from_store
from gramtile.pipeline.readers.senseval import read_senseval
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocab, Vocabularies
from gramtile.pipeline.resources import build as rbuild
from gramtile.pipeline.resources import keys as rkeys
from gramtile.pipeline.stores import resource_store
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError, StoreMismatchError
from gramtile.pipeline.stores.integrity import write_manifest
from gramtile.workflows.cli import main
from gramtile.workflows.recipes.wsd import subsample_indices

N = 100  # evenly spaced serve instances (four senses); every fifth is held out
LSA = {"kind": "syntagmatic", "similarity": "lsa"}
LSA_SEQ = {"kind": "syntagmatic", "similarity": "lsa", "space_rep": "seq"}
DOMAIN = {"kind": "domain", "dims": 10}
WORDNET = {"kind": "syntagmatic", "similarity": "wordnet"}
SPECS = {"lsa": LSA, "lsa_seq": LSA_SEQ, "domain": DOMAIN, "wordnet": WORDNET}




@pytest.fixture(scope="module")
def files(tmp_path_factory):
    src = require_data("senseval_hard_line_serve") / "serve.pos"
    n_all = src.read_text().count("<instance ")
    pick = subsample_indices(np.zeros(n_all), N)
    d = tmp_path_factory.mktemp("serve")
    test_pos = np.arange(len(pick)) % 5 == 4
    return (senseval_subset(src, d / "train.pos", pick[~test_pos]),
            senseval_subset(src, d / "test.pos", pick[test_pos]))


@pytest.fixture(scope="module")
def data(files):
    train_docs, test_docs = (list(read_senseval(f)) for f in files)
    assert len({d.label for d in train_docs}) >= 3
    return train_docs, test_docs


def _reference_block(spec, test_docs, train_docs, strings, values):
    """K(test, train) with the training resources, built independently of models.py: the
    vocabulary starts with the training strings, so seen symbols keep their ids; symbols new
    in the test examples get zero LSA / domain rows (out of the space). WordNet is a function
    of the strings, so its reference is the matrix over the combined vocabulary."""
    spec = as_spec(spec)
    vocabs = Vocabularies({"sym": Vocab(strings)})
    reps = sorted({b.rep_name for b in spec.base_specs()})
    bx = {r: encode([d.structures[r] for d in test_docs], vocabs) for r in reps}
    by = {r: encode([d.structures[r] for d in train_docs], vocabs) for r in reps}
    n_new = len(vocabs.sym) - len(strings)
    for name, value in values.items():
        if name == "similarity/wordnet":
            bx[name] = rbuild.build_value(name, vocabs.sym.strings, [])
        else:
            bx[name] = np.vstack([value, np.zeros((n_new, value.shape[1]))])
    return evaluate_block(spec, bx, by)[0]


def _svc_reference(K_train, y, K_test):
    return SVC(kernel="precomputed", C=1.0).fit(K_train, y).predict(K_test)


@pytest.mark.parametrize("name", list(SPECS))
def test_saved_model_predicts_with_its_training_resources(data, tmp_path, name):
    spec = SPECS[name]
    train_docs, test_docs = data
    y = np.array([d.label for d in train_docs])
    K, strings, values = gram_with_resources(spec, train_docs)
    m = train(train_docs, spec, C=1.0, multiclass="ovo")  # SVC's native scheme, as the reference
    m.save(tmp_path / "m")
    m2 = SavedModel.load(tmp_path / "m")
    assert sorted(m2.resources.values) == sorted(values)
    pos = {d.id: i for i, d in enumerate(train_docs)}
    sv = [pos[d.id] for d in m2.support]
    assert 0 < len(sv) < len(train_docs)

    # (a) support self-kernels and K(support, support) are the training K's entries
    for b in as_spec(spec).base_specs():
        np.testing.assert_allclose(m2.sv_self[b.spec_hash], np.diag(gramtile.gram(b, train_docs))[sv],
                                   rtol=0, atol=1e-12)
    np.testing.assert_allclose(m2.kernel_to_support(m2.support), K[np.ix_(sv, sv)], rtol=0, atol=1e-12)

    # (b) K(test, support) and the predictions: an SVC on the training K fed K(test, train)
    K_test = _reference_block(spec, test_docs, train_docs, strings, values)
    Ksv = m2.kernel_to_support(test_docs)
    np.testing.assert_allclose(Ksv, K_test[:, sv], rtol=0, atol=1e-12)
    expected = _svc_reference(K, y, K_test)
    assert m2.predict(test_docs).tolist() == expected.tolist()
    if name != "wordnet":
        # rebuilding the space from train + test (the old behaviour) is another kernel: this test sees it
        assert np.abs(gramtile.gram(spec, test_docs, train_docs) - K_test).max() > 1e-6


def test_space_rep_model_keeps_its_context_representation(data, tmp_path):
    """(c) a kernel reading ``wsd`` with its LSA space from ``seq`` saves both representations,
    loads, and predicts; inputs need only the representation the kernel reads."""
    train_docs, test_docs = data
    m = train(train_docs, LSA_SEQ)
    assert all(sorted(d.structures) == ["seq", "wsd"] for d in m.support)
    m.save(tmp_path / "m")
    assert (tmp_path / "m" / "support-seq.jsonl").exists() and (tmp_path / "m" / "support-wsd.jsonl").exists()
    m2 = SavedModel.load(tmp_path / "m")
    assert [sorted(d.structures) for d in m2.support] == [["seq", "wsd"]] * m2.n_support
    only_wsd = [type(d)(id=d.id, label=d.label, structures={"wsd": d.structures["wsd"]}) for d in test_docs]
    assert m2.predict(only_wsd).tolist() == m.predict(test_docs).tolist()


@pytest.mark.parametrize("name", ["lsa_seq", "domain"])
def test_model_from_corpus_and_gram_store_carries_the_stored_resources(files, data, tmp_path, name):
    """(d) `gramtile train --corpus --gram`: the model holds the corpus store's stored resource
    (loaded, not rebuilt) and predicts as the model trained in memory on the same examples."""
    spec = SPECS[name]
    train_docs, test_docs = data
    corpus = tmp_path / "c.zarr"
    prepare(files[0], "senseval", corpus, shard_size=1000, cluster="sequential")
    run_gram(corpus, spec, tmp_path / "g.zarr", tile=32, cluster="sequential")
    with Cache().active() as c:  # a fresh cache: what train reads, it loads
        assert main(["train", "--corpus", str(corpus), "--gram", str(tmp_path / "g.zarr"), "--kernel",
                     json.dumps(spec), "--out", str(tmp_path / "m")]) == 0
    assert c.counts("resources").get("built", 0) == 0 and c.counts("resources")["loads"] >= 1  # never rebuilt
    m = SavedModel.load(tmp_path / "m")
    (key,) = rkeys.keys_of(spec)
    np.testing.assert_array_equal(m.resources.values[key.name], resource_store.load(corpus, key))
    assert m.resources.strings == CorpusStore.open(corpus).vocabs.sym.strings

    m_py = train_from_store(corpus, [tmp_path / "g.zarr"], spec)
    m_mem = train(train_docs, spec)
    assert [d.id for d in m.support] == [d.id for d in m_mem.support] == [d.id for d in m_py.support]
    np.testing.assert_allclose(m.kernel_to_support(test_docs), m_mem.kernel_to_support(test_docs),
                               rtol=0, atol=1e-10)
    assert m.predict(test_docs).tolist() == m_mem.predict(test_docs).tolist() == m_py.predict(test_docs).tolist()
    assert main(["predict", "--model-dir", str(tmp_path / "m"), "--input", str(files[1]), "--format", "senseval",
                 "--out", str(tmp_path / "p.tsv")]) == 0
    rows = [ln.split("\t") for ln in (tmp_path / "p.tsv").read_text().splitlines()]
    assert rows == [[d.id, p] for d, p in zip(test_docs, m.predict(test_docs))]


def _make_v1(directory):
    """Rewrite a model directory as format version 1 wrote it (no resources)."""
    meta = json.loads((directory / "model.json").read_text())
    meta["format_version"] = 1
    entry = meta.pop("resources")
    (directory / entry["file"]).unlink()
    (directory / entry["strings_file"]).unlink()
    (directory / "model.json").write_text(json.dumps(meta))
    (directory / "manifest.json").unlink()  # format 1 had no checksums of its files


def test_format_1_models_load_or_say_why_not(data, tmp_path):
    """(e) a WordNet model of format 1 loads and predicts (its matrix is a function of the strings);
    an LSA model of format 1 never saved its space and is refused with the fix."""
    train_docs, test_docs = data
    wn = train(train_docs, WORDNET)
    wn.save(tmp_path / "wn")
    _make_v1(tmp_path / "wn")
    with pytest.raises(StoreCorruptError, match=r"no manifest.json.*gramtile verify --repair"):
        SavedModel.load(tmp_path / "wn")
    write_manifest(tmp_path / "wn")  # what `gramtile verify --repair` records
    old = SavedModel.load(tmp_path / "wn")
    assert old.resources is None
    np.testing.assert_allclose(old.kernel_to_support(test_docs), wn.kernel_to_support(test_docs), rtol=0,
                               atol=1e-12)
    lsa = train(train_docs, LSA)
    lsa.save(tmp_path / "lsa")
    _make_v1(tmp_path / "lsa")
    write_manifest(tmp_path / "lsa")
    with pytest.raises(StoreError, match=r"format version 1.*does not carry the resource 'similarity/lsa/lemmas'"
                                         r".*train the model again"):
        SavedModel.load(tmp_path / "lsa")


def test_damaged_or_foreign_resources_are_reported(data, tmp_path):
    train_docs, test_docs = data
    m = train(train_docs, DOMAIN)
    m.save(tmp_path / "m")
    with np.load(tmp_path / "m" / "resources.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["r0.value"] = arrays["r0.value"] * 1.5
    np.savez(tmp_path / "m" / "resources.npz", **arrays)
    with pytest.raises(StoreCorruptError, match=r"resources.npz does not match its sha256 in manifest.json"):
        SavedModel.load(tmp_path / "m")
    write_manifest(tmp_path / "m")  # the manifest rewritten too: the resource's own content hash still refuses it
    with pytest.raises(StoreCorruptError, match=r"resource 'domain/lsa/10' does not match its content hash"):
        SavedModel.load(tmp_path / "m")
    # a WordNet model whose saved synonymy disagrees with this WordNet (another database)
    wn = train(train_docs, WORDNET)
    A = wn.resources.values["similarity/wordnet"].tolil()
    strings = wn.resources.strings
    u, v = strings.index("serve"), strings.index("food") if "food" in strings else strings.index("the")
    A[u, v] = A[v, u] = 0.5
    wn.resources.values["similarity/wordnet"] = A.tocsr()
    with pytest.raises(StoreMismatchError, match="WordNet here gives other synonymy values"):
        wn.kernel_to_support(test_docs)


def test_map_value_keeps_seen_entries_and_puts_unseen_symbols_out_of_the_space(data):
    """rbuild.map_value on real spaces: rows / entries of symbols seen at training move with
    their strings; an unseen symbol gets a zero factor row or a unit diagonal entry only."""
    train_docs, test_docs = data
    _, strings, values = gram_with_resources(WORDNET, train_docs)
    _, _, lsa = gram_with_resources(LSA, train_docs)
    unseen = ["zzz-not-a-word", "serving-dish-xyz"]
    onto = unseen[:1] + strings[::-1][:200] + unseen[1:]
    A = rbuild.map_value(values["similarity/wordnet"], strings, onto)
    W = values["similarity/wordnet"].toarray()
    src = [strings.index(s) for s in onto[1:-1]]
    np.testing.assert_array_equal(A.toarray()[1:-1, 1:-1], W[np.ix_(src, src)])
    for i in (0, len(onto) - 1):
        assert A[i].toarray().ravel().tolist() == [1.0 if j == i else 0.0 for j in range(len(onto))]
    assert A.has_sorted_indices
    F = rbuild.map_value(lsa["similarity/lsa/lemmas"], strings, onto)
    np.testing.assert_array_equal(F[1:-1], lsa["similarity/lsa/lemmas"][src])
    assert not F[0].any() and not F[-1].any()
