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


def _random_dep(rng, vocab):
    n = int(rng.integers(1, 7))
    heads = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    picks = [vocab[int(rng.integers(len(vocab)))] for _ in range(n)]
    return DepTree(words=tuple(w for w, _, _ in picks), heads=tuple(heads), lemmas=tuple(lm for _, lm, _ in picks),
                   pos=tuple(t for _, _, t in picks), deprels=tuple("dep" for _ in range(n)))


@pytest.mark.parametrize("seed", range(8))
def test_each_match_links_exactly_the_words_a_pairwise_comparison_links(seed):
    """``form`` and ``lemma`` against an explicit comparison of every word with every word of the
    other fields; three fields, so a word links to any of the others."""
    rng = np.random.default_rng(seed)
    vocab = [("Dogs", "dog", "NNS"), ("dog", "dog", "NN"), ("dogs", "dog", "NNS"), ("barks", "bark", "VBZ"),
             ("bark", "bark", "VBP"), ("Bark", "bark", "NN"), ("the", "the", "DT"), ("The", "the", "DT"),
             (".", ".", "."), ("?", "?", "."), ("cat", "cat", "NN")]
    deps = {f: _random_dep(rng, vocab) for f in ("x", "y", "z")}
    got = with_links({f"{f}.dep": d for f, d in deps.items()}, list(deps), ["rel_tree", "rel_tree_form"])

    def key(w, lemma, match):
        k = (w if match == "form" else lemma).lower()
        return k if any(c.isalnum() for c in k) else None

    for rep, match in (("rel_tree", "lemma"), ("rel_tree_form", "form")):
        for f, d in deps.items():
            want = [key(w, lm, match) is not None and any(
                key(w, lm, match) == key(w2, lm2, match)
                for g, e in deps.items() if g != f for w2, lm2 in zip(e.words, e.lemmas))
                for w, lm in zip(d.words, d.lemmas)]
            assert linked(d, {key(w2, lm2, match) for g, e in deps.items() if g != f
                              for w2, lm2 in zip(e.words, e.lemmas)} - {None}, match) == want
            assert got[f"{f}.{rep}"] == dep_to_tree(d, want, MARK)


def test_form_links_the_words_as_written_and_lemma_their_lemmas():
    got = with_links({"q.dep": Q, "a.dep": A}, ["q", "a"], ["rel_tree", "rel_tree_form"])
    # "Dogs bark ." / "The dog barks loudly .": by lemma dog and bark link; as written, neither does
    assert got["q.rel_tree_form"] == dep_to_tree(Q) and got["a.rel_tree_form"] == dep_to_tree(A)
    assert got["q.rel_tree"] != dep_to_tree(Q)
    same = DepTree(words=("dog", "barks"), heads=(1, -1), lemmas=("dog", "bark"), pos=("NN", "VBZ"),
                   deprels=("nsubj", "ROOT"))
    got = with_links({"q.dep": same, "a.dep": A}, ["q", "a"], ["rel_tree_form"])
    assert got["q.rel_tree_form"] == parse_tree("(REL-ROOT (REL-nsubj (REL-NN dog)) (REL-VBZ bark))")


# "I bought a car ." / "She purchased an automobile ."
BUY = DepTree(words=("I", "bought", "a", "car", "."), heads=(1, -1, 3, 1, 1),
              lemmas=("I", "buy", "a", "car", "."), pos=("PRP", "VBD", "DT", "NN", "."),
              deprels=("nsubj", "ROOT", "det", "dobj", "punct"))
PURCHASE = DepTree(words=("She", "purchased", "an", "automobile", "."), heads=(1, -1, 3, 1, 1),
                   lemmas=("she", "purchase", "an", "automobile", "."), pos=("PRP", "VBD", "DT", "NN", "."),
                   deprels=("nsubj", "ROOT", "det", "dobj", "punct"))


@pytest.mark.timeout(120)
def test_wordnet_links_synonyms_in_the_part_of_speech_of_their_tags():
    got = with_links({"q.dep": BUY, "a.dep": PURCHASE}, ["q", "a"], ["rel_tree", "rel_tree_wordnet"])
    assert got["q.rel_tree"] == dep_to_tree(BUY)  # no lemma in common
    assert got["q.rel_tree_wordnet"] == dep_to_tree(BUY, [False, True, False, True, False], MARK)
    assert got["a.rel_tree_wordnet"] == dep_to_tree(PURCHASE, [False, True, False, True, False], MARK)
    # the tag decides the part of speech: "car" tagged as a verb has no verb sense in WordNet
    as_verb = DepTree(words=BUY.words, heads=BUY.heads, lemmas=BUY.lemmas, pos=("PRP", "VBD", "DT", "VB", "."),
                      deprels=BUY.deprels)
    got = with_links({"q.dep": as_verb, "a.dep": PURCHASE}, ["q", "a"], ["rel_tree_wordnet"])
    assert got["q.rel_tree_wordnet"] == dep_to_tree(as_verb, [False, True, False, False, False], MARK)


@pytest.mark.timeout(300)
def test_prepare_parse_train_and_predict_build_the_links_the_kernel_reads(tmp_path):
    from gramtile.workflows.cli import main

    rows = ["I bought a car .\tShe purchased an automobile .\t1", "I bought a car .\tThe sky is blue .\t0",
            "He sells houses .\tHe sold a house .\t1", "He sells houses .\tDogs bark loudly .\t0"]
    f = tmp_path / "p.tsv"
    f.write_text("q\ta\tlabel\n" + "\n".join(rows) + "\n")
    opts = {"header": True, "fields": "q=q,a=a", "label_col": "label"}
    prepare(f, "tsv", tmp_path / "w.zarr", shard_size=2, cluster="sequential", reader_options=opts,
            reps="tree,rel_tree_form,rel_tree_wordnet")
    cs = CorpusStore.open(tmp_path / "w.zarr")
    assert set(cs.field_representations("q")) == {"tree", "rel_tree_form", "rel_tree_wordnet"}
    mem = gramtile.parse([tuple(r.split("\t")[:2]) for r in rows], fields=["q", "a"],
                         reps=["tree", "rel_tree_form", "rel_tree_wordnet"])
    for d, m in zip(cs.documents(), mem):
        assert set(m.structures) == set(d.structures)
        for k in d.structures:
            assert d.structures[k] == m.structures[k], k
    assert mem[0].structures["a.rel_tree_wordnet"] != mem[0].structures["a.tree"]  # purchased ~ bought
    assert mem[0].structures["a.rel_tree_form"] == mem[0].structures["a.tree"]
    spec = '{"kind": "normalized", "kernel": {"kind": "pt", "rep": "a.rel_tree_wordnet"}}'
    common = ["--format", "tsv", "--header", "--fields", "q=q,a=a", "--label-col", "label"]
    assert main(["train", "--input", str(f), *common, "--kernel", spec, "--C", "1", "--out",
                 str(tmp_path / "m")]) == 0
    assert main(["predict", "--model-dir", str(tmp_path / "m"), "--input", str(f), *common, "--out",
                 str(tmp_path / "p.json")]) == 0
    import json
    scores = [p["score"] for p in json.loads((tmp_path / "p.json").read_text())]
    model = gramtile.open(tmp_path / "m")
    assert np.allclose(scores, [np.atleast_1d(s).tolist() for s in model.predictions(mem).scores])
