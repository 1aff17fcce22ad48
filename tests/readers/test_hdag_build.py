"""HDAGs built from spaCy parses (pipeline/parsing/hdag_build.py): structure, round trips, prepare.

Real spaCy model (with its entity recogniser), real corpus stores under tmp_path.
"""
import json

import pytest
from conftest import require_data

from gramtile.kernels.hdag import HDAGKernel
from gramtile.pipeline.parsing.hdag_build import draw, hdag_from_dep, noun_chunk_spans
from gramtile.pipeline.parsing.parse import hdag_from_doc, load_model_ner
from gramtile.pipeline.representations.encode import decode, encode
from gramtile.pipeline.representations.hdag import HDAG, hdag_from_obj, hdag_to_obj
from gramtile.pipeline.representations.structures import DepTree
from gramtile.pipeline.representations.vocab import Vocabularies


@pytest.fixture(scope="module")
def nlp():
    return load_model_ner()


def _parse(nlp, text):
    from spacy.tokens import Doc

    return nlp(Doc(nlp.vocab, words=text.split()))


def _units(h):
    """chunk node -> (labels, [inner node attrs in edge order]) and word nodes by form."""
    inner = {}
    for v, p in enumerate(h.parent):
        inner.setdefault(p, []).append(v)
    succ = {}
    for u, v in h.edges:
        succ.setdefault(u, []).append(v)

    def chain(c):
        ms = inner.get(c, [])
        starts = [m for m in ms if not any(v == m for u, v in h.edges)]
        assert len(starts) == 1, f"chunk {c} is not one chain: {ms}"
        out, v = [], starts[0]
        while True:
            out.append(v)
            nxt = succ.get(v, [])
            assert len(nxt) <= 1
            if not nxt:
                return out
            v = nxt[0]

    return {c: (h.attrs[c], chain(c)) for c in range(len(h)) if c in inner}


def _chunk_with(h, form):
    """The innermost chunk holding the word ``form``."""
    (w,) = [v for v in range(len(h)) if h.attrs[v] and h.attrs[v][0] == form and v not in h.parent]
    return h.parent[w]


def test_question_structure(nlp):
    h = hdag_from_doc(_parse(nlp, "What is the capital of New York City ?"))
    units = _units(h)
    forms = lambda c: [h.attrs[v][0] for v in units[c][1]]  # noqa: E731
    gpe = _chunk_with(h, "york")
    assert forms(gpe) == ["new", "york", "city"]
    assert set(h.attrs[gpe]) == {"NP", "GPE"}           # the noun chunk that is an entity: one chunk
    york = units[gpe][1][1]
    assert set(h.attrs[york]) == {"york", "NNP", "GPE"}  # form, PoS, NE type
    np_ = _chunk_with(h, "capital")
    assert forms(np_) == ["the", "capital"] and h.attrs[np_] == ("NP",)
    pp = _chunk_with(h, "of")
    assert h.attrs[pp] == ("PP",) and forms(pp) == ["of"]
    vp = _chunk_with(h, "is")
    assert h.attrs[vp] == ("VP",)
    top = {(u, v) for u, v in h.edges if h.parent[u] == -1}
    # dependent -> governor between chunk heads: city -> of -> capital -> is
    assert {(gpe, pp), (pp, np_), (np_, vp)} <= top
    assert all(h.parent[x] == -1 for x in (gpe, pp, np_, vp))
    # punctuation is left out
    assert not any(a and a[0] == "?" for a in h.attrs)


def test_nested_entities_and_verb_groups(nlp):
    h = hdag_from_doc(_parse(nlp, "Who was the first American president to have been sold a house by Microsoft Corporation ?"))
    units = _units(h)
    nat = _chunk_with(h, "american")
    assert "NORP" in h.attrs[nat]
    outer = h.parent[nat]
    assert outer != -1 and "NP" in h.attrs[outer]     # the entity sits inside its noun chunk
    seq = units[outer][1]
    assert seq.index(nat) < seq.index(next(v for v in seq if h.attrs[v][:1] == ("president",)))
    vp = _chunk_with(h, "sold")
    assert [h.attrs[v][0] for v in units[vp][1]] == ["to", "have", "been", "sold"]
    org = _chunk_with(h, "microsoft")
    assert "ORG" in h.attrs[org]
    assert [h.attrs[v][0] for v in units[org][1]] == ["microsoft", "corporation"]


def test_top_graph_edges_follow_the_dependency_tree(nlp):
    """Every top unit but the one holding the root has exactly one outgoing edge (to its head's unit)."""
    for text in ["How did serfdom develop in and then leave Russia ?",
                 "What is the oldest university in the United States ?",
                 "Name a film that has won the Golden Bear in the Berlin Film Festival ."]:
        doc = _parse(nlp, text)
        h = hdag_from_doc(doc)
        tops = [v for v in range(len(h)) if h.parent[v] == -1]
        out = {v: [w for u, w in h.edges if u == v] for v in tops}
        assert sum(1 for v in tops if not out[v]) == 1, draw(h)
        assert all(len(o) <= 1 for o in out.values())
        words = [v for v in range(len(h)) if v not in h.parent]
        assert len(words) == sum(1 for t in doc if t.dep_ != "punct")


def test_bare_dependency_tree():
    """Without a Doc: noun chunks by the spaCy rule on PoS tags, no entities; exact result."""
    dep = DepTree(words=("The", "old", "dog", "has", "bitten", "a", "man", "."), heads=(2, 2, 4, 4, -1, 6, 4, 4),
                  pos=("DT", "JJ", "NN", "VBZ", "VBN", "DT", "NN", "."),
                  deprels=("det", "amod", "nsubj", "aux", "ROOT", "det", "dobj", "punct"))
    assert noun_chunk_spans(dep) == [(0, 3), (5, 7)]
    h = hdag_from_dep(dep)
    assert h == HDAG(attrs=[["NP"], ["VP"], ["NP"], ["the", "DT"], ["old", "JJ"], ["dog", "NN"], ["has", "VBZ"],
                            ["bitten", "VBN"], ["a", "DT"], ["man", "NN"]],
                     parent=[-1, -1, -1, 0, 0, 0, 1, 1, 2, 2],
                     edges=[(3, 4), (4, 5), (6, 7), (8, 9), (0, 1), (2, 1)])
    # an entity strictly inside a noun chunk nests; one crossing its edge replaces it
    nested = hdag_from_dep(dep, entities=[(1, 3, "ANIMAL")])
    assert nested.attrs[1] == ("ANIMAL",) and nested.parent[1] == 0
    crossing = hdag_from_dep(dep, entities=[(2, 4, "X")])
    assert ("NP",) not in [crossing.attrs[c] for c in range(len(crossing)) if crossing.parent[c] == -1][:1]
    assert any(a == ("X",) for a in crossing.attrs)


def test_json_and_batch_round_trips(nlp):
    hs = [hdag_from_doc(_parse(nlp, t)) for t in ["Who wrote Hamlet ?", "What is the capital of New York City ?",
                                                   "When did the Berlin Wall fall ?"]]
    for h in hs:
        obj = json.loads(json.dumps({"hdag": hdag_to_obj(h)}))
        assert hdag_from_obj(obj["hdag"]) == h
    v = Vocabularies()
    assert decode(encode(hs, v), v) == hs


def test_kernel_on_built_hdags(nlp):
    """Two questions of the same shape share more features than a question of another shape."""
    a, b, c = (hdag_from_doc(_parse(nlp, t)) for t in ["What is the capital of France ?",
                                                       "What is the capital of Germany ?",
                                                       "How did serfdom develop ?"])
    v = Vocabularies()
    K = HDAGKernel(lam=0.5, p=3).block(encode([a, b, c], v))
    assert K[0, 1] > K[0, 2] > 0
    assert K[0, 1] < K[0, 0] and K[0, 1] < K[1, 1]


def test_prepare_builds_hdags(tmp_path):
    """prepare(hdag=True) stores the chunked HDAG of each parsed question (with entities)."""
    from gramtile.pipeline.compute.prepare import prepare
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    src = require_data("trec_qc") / "test.txt"
    lines = src.read_text(encoding="latin-1").splitlines()[:12]
    inp = tmp_path / "q.txt"
    inp.write_text("\n".join(lines) + "\n", encoding="latin-1")
    prepare(inp, "trec", tmp_path / "c.zarr", shard_size=5, cluster="sequential", hdag=True)
    cs = CorpusStore.open(tmp_path / "c.zarr")
    assert "hdag" in cs.representations and cs.n == 12
    nlp = load_model_ner()
    for doc in cs.documents(0, 12):
        assert doc.structures["hdag"] == hdag_from_doc(_parse(nlp, doc.text))
    # without the option no HDAG is built
    prepare(inp, "trec", tmp_path / "plain.zarr", shard_size=5, cluster="sequential")
    assert "hdag" not in CorpusStore.open(tmp_path / "plain.zarr").representations
