"""The scale benchmark's corpus tools (bench/scale_corpus.py, issue 15 item 5): the seeded tree
generator is deterministic, makes valid dependency trees that keep their example's label, and
grafts subtrees as documented; the collector counts the shared corpora's sentences."""
import sys
from pathlib import Path

import pytest
from conftest import corpus_store_of, require_data

from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.representations.structures import DepTree

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import scale_corpus  # noqa: E402


def test_graft_replaces_a_subtree_in_surface_order():
    target = DepTree(words=("The", "dog", "barks"), heads=(1, 2, -1), pos=("DT", "NN", "VBZ"),
                     deprels=("det", "nsubj", "ROOT"), lemmas=("the", "dog", "bark"))
    donor = DepTree(words=("A", "big", "cat", "sleeps"), heads=(2, 2, 3, -1), pos=("DT", "JJ", "NN", "VBZ"),
                    deprels=("det", "amod", "dobj", "ROOT"), lemmas=("a", "big", "cat", "sleep"))
    new = scale_corpus.graft(target, 1, donor, 2)
    assert new.words == ("A", "big", "cat", "barks")
    assert new.heads == (2, 2, 3, -1)
    assert new.deprels == ("det", "amod", "nsubj", "ROOT")  # the graft takes the replaced token's relation
    # a subtree in the middle of the sentence keeps the words around it in place
    t2 = DepTree(words=("dogs", "bark", "at", "cats", "loudly"), heads=(1, -1, 1, 2, 1),
                 pos=("NNS", "VBP", "IN", "NNS", "RB"), deprels=("nsubj", "ROOT", "prep", "pobj", "advmod"),
                 lemmas=("dog", "bark", "at", "cat", "loudly"))
    new = scale_corpus.graft(t2, 2, donor, 2)
    assert new.words == ("dogs", "bark", "A", "big", "cat", "loudly")
    assert new.heads == (1, -1, 4, 4, 1, 1)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    docs = []
    for k, d in enumerate(read(require_data("dependency_treebank"), "dp")):
        if k == 120:
            break
        d.label = "early" if k < 60 else "late"
        docs.append(d)
    root = tmp_path_factory.mktemp("gen")
    return corpus_store_of(root / "c.zarr", docs, 50), docs, root


def test_generator_is_seeded_valid_and_keeps_labels(corpus):
    path, docs, root = corpus
    a, b, c = root / "a.jsonl", root / "b.jsonl", root / "c.jsonl"
    assert scale_corpus.generate(path, 400, 3, a) == {"real": 120, "synthetic": 280, "seed": 3}
    scale_corpus.generate(path, 400, 3, b)
    scale_corpus.generate(path, 400, 4, c)
    assert a.read_bytes() == b.read_bytes() and a.read_bytes() != c.read_bytes()
    out = list(read(a, "jsonl"))
    assert len(out) == 400 and [d.id for d in out[:120]] == [d.id for d in docs]
    vocab = {lab: {w for d in docs if d.label == lab for w in d.structures["dep"].words} for lab in ("early", "late")}
    changed = 0
    for d in out[120:]:
        tree = d.structures["dep"]  # the DepTree constructor checked one root and no cycle
        assert d.id.startswith("synth-") and d.label in vocab and len(tree.words) <= 80
        assert set(tree.words) <= vocab[d.label]  # words from its own label's examples only
        changed += all(tree.words != r.structures["dep"].words for r in docs)
    assert changed > 0.5 * 280  # most are new sentences, not copies


def test_collect_counts_every_shared_corpus(tmp_path, shared_data):
    counts = scale_corpus.collect(shared_data, tmp_path / "s.tsv")
    assert counts == {"trec": 5952, "semeval": 8000, "senseval": 12857, "conll2000": 10948, "conll04": 5516,
                      "ud_ewt": 2001, "wsj_dep": 3914, "geoquery": 880}
    lines = (tmp_path / "s.tsv").read_text(encoding="utf-8").splitlines()
    assert len(lines) == sum(counts.values()) and all(len(x.split("\t")) == 2 for x in lines)
    assert "<e1>" not in "".join(lines[5952:5952 + 8000])
    assert all(x.split("\t")[1].strip() for x in lines)
