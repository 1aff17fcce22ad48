"""The Zarr corpus store: round trips, cross-shard loads, write order, resume, locking, hashing.

Real Zarr stores on disk under tmp_path; structures come from a real spaCy parse.
"""
import json
import os
import socket

import numpy as np
import pytest

from gramtile.pipeline.parsing.parse import parse_texts
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import DepTree, Document
from gramtile.pipeline.stores.corpus_store import CorpusStore, bag_arrays
from gramtile.pipeline.stores.errors import StoreError, StoreLockedError, StoreMismatchError

TEXTS = ["Who painted the Mona Lisa ?", "What is the boiling point of water ?", "Where do penguins live ?",
         "How many legs does a spider have ?", "When was the telephone invented ?", "What does NASA stand for ?",
         "Name a famous Italian composer .", "Why is the sky blue ?", "Which river flows through Cairo ?",
         "How tall is Mount Everest ?", "Who discovered penicillin ?"]


@pytest.fixture(scope="module")
def docs():
    parsed = parse_texts(TEXTS, pretokenized=True)
    out = []
    for i, (t, p) in enumerate(zip(TEXTS, parsed)):
        words = t.split()
        bag = {w.lower(): float(words.count(w)) for w in words}
        label = ["Q", "HUM"] if i % 3 == 0 else ("NUM" if i % 3 == 1 else None)
        out.append(Document(id=f"q{i}", label=label, text=t if i != 4 else None,
                            structures={**p, "bow": bag}, source=f"questions.txt:{i + 1}"))
    return out


def _write(path, docs, shard_size):
    store = CorpusStore.create(path, source="questions.txt", input_format="jsonl", shard_size=shard_size)
    run = store.begin_run({})
    for k in range(0, len(docs), shard_size):
        store.write_shard(k // shard_size, docs[k:k + shard_size], run)
    store.finish()
    store.close()
    return CorpusStore.open(path)


@pytest.fixture(scope="module")
def store4(tmp_path_factory, docs):
    """11 examples in shards of 4 (read-only use)."""
    return _write(tmp_path_factory.mktemp("s4") / "c.zarr", docs, 4)


@pytest.fixture(scope="module")
def store3(tmp_path_factory, docs):
    """11 examples in shards of 3 (read-only use)."""
    return _write(tmp_path_factory.mktemp("s3") / "c.zarr", docs, 3)


def test_round_trip_documents(store4, docs):
    store = store4
    assert store.complete and store.n == len(docs)
    assert store.shard_ranges == [(0, 4), (4, 8), (8, 11)]
    assert store.representations == {"dep": "dep", "seq": "seq", "tree": "tree", "ptree": "ptree", "bow": "bag"}
    assert store.ids == [d.id for d in docs]
    assert store.labels == [d.label for d in docs]
    assert store.documents() == docs
    assert store.documents(3, 9) == docs[3:9]
    assert store.manifest["n_examples"] == len(docs)
    assert len(store.content_hash) == 64 and store.verify()


def test_load_across_shards_equals_slicing_one_batch(store3, docs):
    store = store3
    vocabs = store.vocabs.copy()
    sizes = vocabs.sizes()
    for rep, kind in store.representations.items():
        # with every string already known, encoding assigns exactly the store's ids
        whole = encode([d.structures[rep] for d in docs], vocabs, kind=kind)
        assert vocabs.sizes() == sizes
        for a, b in [(0, 11), (2, 7), (3, 6), (5, 5), (1, 2), (8, 11), (0, 3), (2, 10)]:
            got, want = store.load(rep, a, b), whole.slice(a, b)
            assert got.kind == kind and got.n == b - a
            for name, arr in want.arrays().items():
                np.testing.assert_array_equal(got.arrays()[name], arr, err_msg=f"{rep}[{a}:{b}] {name}")
            if want.child_ptr is not None:
                np.testing.assert_array_equal(got.child_ptr, want.child_ptr)
                np.testing.assert_array_equal(got.child_idx, want.child_idx)
    for rep in store.representations:
        np.testing.assert_array_equal(store.sizes(rep), store.load(rep, 0, store.n).sizes())
    offsets, feat, weight = bag_arrays(store.load("bow", 0, 2))
    assert offsets.dtype == np.int64 and feat.dtype == np.int32 and weight.dtype == np.float64
    assert {store.vocabs.sym[f]: w for f, w in zip(feat[offsets[0]:offsets[1]], weight)} == docs[0].structures["bow"]


def test_loaded_arrays_are_read_only(store4):
    store = store4
    b = store.load("tree", 0, 4)  # a whole shard: served from the cache
    with pytest.raises(ValueError):
        b.columns["label"][0] = 7


def test_bad_load_arguments(store4):
    store = store4
    with pytest.raises(StoreError, match="'nope' is not in corpus store"):
        store.load("nope", 0, 1)
    with pytest.raises(StoreError, match=r"ends beyond the 11 stored examples"):
        store.load("tree", 5, 12)
    with pytest.raises(StoreError, match="invalid"):
        store.load("tree", 4, 3)


def test_content_hash_depends_on_content_only(tmp_path, docs, store3):
    h = store3.content_hash
    assert _write(tmp_path / "b.zarr", docs, 3).content_hash == h
    changed = [Document(d.id, d.label, d.text, dict(d.structures), d.source) for d in docs]
    changed[7].label = "OTHER"
    assert _write(tmp_path / "c.zarr", changed, 3).content_hash != h
    moved = [Document(d.id, d.label, d.text, dict(d.structures), "elsewhere.txt:1") for d in docs]
    assert _write(tmp_path / "d.zarr", moved, 3).content_hash == h


def test_failed_shard_leaves_store_resumable(tmp_path, docs, store4):
    path = tmp_path / "c.zarr"
    store = CorpusStore.create(path, source="questions.txt", input_format="jsonl", shard_size=4)
    run = store.begin_run({})
    store.write_shard(0, docs[:4], run)
    store.write_shard(1, docs[4:8], run)
    sizes = store.vocabs.sizes()
    bad = [Document(d.id, d.label, d.text, dict(d.structures), d.source) for d in docs[8:]]
    bad[1].structures["tree"] = DepTree(("x",), (-1,))  # wrong kind under "tree"
    with pytest.raises(CorpusFormatError, match=r"questions.txt, line 10: .*'tree'.*DepTree|is a dep"):
        store.write_shard(2, bad, run)
    assert store.vocabs.sizes() == sizes
    missing = [Document(d.id, d.label, d.text, {k: v for k, v in d.structures.items() if k != "bow"}, d.source)
               for d in docs[8:]]
    with pytest.raises(CorpusFormatError, match=r"has structures .* but this corpus stores"):
        store.write_shard(2, missing, run)
    store.close()
    # reopen as a resuming writer: only the two done shards count
    store = CorpusStore.open(path, "r+")
    assert not store.complete and store.n == 8 and store.vocabs.sizes() == sizes
    with pytest.raises(StoreError, match="out of order"):
        store.write_shard(3, docs[8:], run)
    store.write_shard(2, docs[8:], run)
    store.finish()
    store.close()
    reread = CorpusStore.open(path)
    assert reread.documents() == docs
    assert reread.content_hash == store4.content_hash


def test_stale_not_done_shard_is_overwritten(tmp_path, docs):
    """A killed writer leaves a shard entry with done=false and partial arrays: reopening
    ignores it and cuts the vocabularies back."""
    path = tmp_path / "c.zarr"
    store = CorpusStore.create(path, shard_size=4)
    store.write_shard(0, docs[:4])
    sizes = store.vocabs.sizes()
    store.write_shard(1, docs[4:8])
    m = store.manifest
    m["shards"][1]["done"] = False  # what a kill between array writes and the done flag leaves
    store._g.attrs["manifest"] = m
    store.close()
    store = CorpusStore.open(path, "r+")
    assert store.n == 4 and store.shard_ranges == [(0, 4)]
    assert store.vocabs.sizes() == sizes
    assert store._g["vocab"]["sym"].shape[0] > sizes["sym"]  # the killed run's strings are on disk ...
    store.write_shard(1, docs[4:8])
    store.write_shard(2, docs[8:])
    store.finish()
    store.close()
    assert CorpusStore.open(path).documents() == docs  # ... and were rewritten in place


def test_read_only_and_complete_stores_refuse_writes(store4, docs):
    with pytest.raises(StoreError, match="read-only"):
        store4.write_shard(3, docs[:1])
    w = CorpusStore.open(store4.path, "r+")
    with pytest.raises(StoreError, match="is complete"):
        w.write_shard(3, docs[:1])
    w.close()


def test_lock_refuses_a_second_writer_and_recovers_a_dead_ones(tmp_path, docs):
    path = tmp_path / "c.zarr"
    store = CorpusStore.create(path, shard_size=4)
    with pytest.raises(StoreLockedError, match=f"locked by process {os.getpid()}"):
        CorpusStore.open(path, "r+")
    CorpusStore.open(path).n  # readers need no lock
    store.close()
    lock = path / ".lock"
    info = {"pid": 2 ** 22 + 12345, "host": socket.gethostname()}  # no such process on this host
    lock.write_text(json.dumps(info))
    CorpusStore.open(path, "r+").close()
    assert not lock.exists()


def test_open_errors(tmp_path, store4):
    with pytest.raises(StoreError, match="no corpus store at"):
        CorpusStore.open(tmp_path / "missing.zarr")
    with pytest.raises(StoreMismatchError, match="already exists"):
        CorpusStore.create(store4.path)
    with pytest.raises(StoreError, match="shard_size=0"):
        CorpusStore.create(tmp_path / "d.zarr", shard_size=0)
