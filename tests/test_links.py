"""Relational links between the fields of a pair (pipeline/parsing/links.py): the marked tree of
each field, against hand-built dependency trees; no shared word gives the plain tree;
punctuation is never linked; prepare --reps keeps or drops them; a tree kernel over them moves
when the pair shares words."""
import numpy as np
import pytest

import gramtile
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.parsing.derive import dep_to_tree
from gramtile.pipeline.parsing.links import MARK, link_key, linked, rel_tree, with_links
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import DepTree
from gramtile.pipeline.stores.corpus_store import CorpusStore

# "Dogs bark ." / "The dog barks loudly ."
Q = DepTree(words=("Dogs", "bark", "."), heads=(1, -1, 1), lemmas=("dog", "bark", "."), pos=("NNS", "VBP", "."),
            deprels=("nsubj", "ROOT", "punct"))
A = DepTree(words=("The", "dog", "barks", "loudly", "."), heads=(1, 2, -1, 2, 2),
            lemmas=("the", "dog", "bark", "loudly", "."), pos=("DT", "NN", "VBZ", "RB", "."),
            deprels=("det", "nsubj", "ROOT", "advmod", "punct"))


def test_the_shared_words_of_each_field_are_marked_on_their_relation_node_and_preterminal():
    got = with_links({"q.dep": Q, "a.dep": A}, ["q", "a"])
    assert got["q.rel_tree"] == parse_tree("(REL-ROOT (REL-nsubj (REL-NNS dog)) (REL-VBP bark) (punct (. .)))")
    assert got["a.rel_tree"] == parse_tree(
        "(REL-ROOT (REL-nsubj (det (DT the)) (REL-NN dog)) (REL-VBZ bark) (advmod (RB loudly)) (punct (. .)))")
    assert got["q.dep"] is Q and set(got) == {"q.dep", "a.dep", "q.rel_tree", "a.rel_tree"}


def test_no_shared_word_gives_the_plain_tree_and_punctuation_never_links():
    assert rel_tree(Q, set()) == dep_to_tree(Q)
    assert link_key(Q, 2) is None and linked(Q, {".", "dog"}) == [True, False, False]
    assert MARK not in str(rel_tree(A, {"."}))


def test_links_need_every_field_parsed_and_two_fields():
    assert with_links({"q.dep": Q}, ["q", "a"]) == {"q.dep": Q}  # a field without a parse: nothing added
    assert with_links({"q.dep": Q}, ["q"]) == {"q.dep": Q}


@pytest.mark.timeout(300)
def test_prepare_stores_the_links_and_reps_keeps_or_drops_them(tmp_path):
    rows = ["What is the capital of France ?\tParis is the capital of France .\t1",
            "Who wrote Hamlet ?\tThe play was staged in London .\t0",
            "Who wrote Hamlet ?\tShakespeare wrote Hamlet .\t1"]
    f = tmp_path / "p.tsv"
    f.write_text("q\ta\tlabel\n" + "\n".join(rows) + "\n")
    opts = {"header": True, "fields": "q=q,a=a", "label_col": "label"}
    prepare(f, "tsv", tmp_path / "all.zarr", shard_size=2, cluster="sequential", reader_options=opts)
    cs = CorpusStore.open(tmp_path / "all.zarr")
    assert cs.field_representations("q")["rel_tree"] == "tree"
    docs = cs.documents()
    mem = gramtile.parse([tuple(r.split("\t")[:2]) for r in rows], fields=["q", "a"])
    for d, m in zip(docs, mem):  # the store's links are the in-memory parse's
        assert d.structures["q.rel_tree"] == m.structures["q.rel_tree"]
        assert d.structures["a.rel_tree"] == m.structures["a.rel_tree"]
    assert docs[1].structures["a.rel_tree"] == docs[1].structures["a.tree"]  # shares no word with its question
    assert docs[2].structures["a.rel_tree"] != docs[2].structures["a.tree"]
    prepare(f, "tsv", tmp_path / "two.zarr", shard_size=2, cluster="sequential", reader_options=opts,
            reps="tree,rel_tree")
    assert set(CorpusStore.open(tmp_path / "two.zarr").field_representations("a")) == {"tree", "rel_tree"}
    prepare(f, "tsv", tmp_path / "one.zarr", shard_size=2, cluster="sequential", reader_options=opts, reps="tree")
    assert set(CorpusStore.open(tmp_path / "one.zarr").field_representations("a")) == {"tree"}
    # a PT kernel over the linked trees: pairs sharing words are closer than over the plain trees
    K_rel = gramtile.gram({"kind": "normalized", "kernel": {"kind": "pt", "rep": "a.rel_tree"}}, mem)
    K_plain = gramtile.gram({"kind": "normalized", "kernel": {"kind": "pt", "rep": "a.tree"}}, mem)
    assert np.allclose(K_rel, K_rel.T) and np.linalg.eigvalsh(K_rel).min() >= -1e-9
    assert not np.allclose(K_rel, K_plain)


def test_a_gold_pair_without_parses_asked_for_links_is_refused(tmp_path):
    from gramtile.pipeline.compute.prepare import _completed
    from gramtile.pipeline.representations.structures import Document

    doc = Document(id="x", fields={"q": None, "a": None},
                   structures={"q.tree": dep_to_tree(Q), "a.tree": dep_to_tree(A)})
    with pytest.raises(CorpusFormatError, match="needs a dependency parse"):
        _completed(doc, ["tree", "rel_tree"])
