"""spaCy parsing and the structures derived from a parse (real spaCy model, no mocks)."""
import pytest

from gramtile.pipeline.parsing.derive import dep_to_tree, derive_all, safe_label
from gramtile.pipeline.parsing.parse import load_model, parse_deps, parse_texts, provenance
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.structures import DepTree, PTree, TokenSeq, Tree, format_tree


@pytest.fixture(scope="module")
def nlp():
    return load_model()


def test_load_model_is_cached_per_process(nlp):
    assert load_model() is nlp
    prov = provenance(nlp)
    assert prov["model"].startswith("en_core_web_sm")
    assert prov["model_version"] and prov["spacy_version"]


def test_parse_shapes(nlp):
    texts = ["Who wrote the novel Moby Dick ?", "How many moons does Mars have ?", "Define photosynthesis ."]
    out = parse_texts(texts, nlp, pretokenized=True)
    assert len(out) == 3
    for text, rec in zip(texts, out):
        dep, seq, tree, ptree = rec["dep"], rec["seq"], rec["tree"], rec["ptree"]
        words = text.split()
        assert isinstance(dep, DepTree) and isinstance(seq, TokenSeq)
        assert isinstance(tree, Tree) and isinstance(ptree, PTree)
        assert list(dep.words) == words
        assert dep.heads.count(-1) == 1
        assert len(dep.lemmas) == len(dep.pos) == len(dep.deprels) == len(words)
        assert all(p and not p.isspace() for p in dep.pos)
        assert seq.tokens == dep.words and seq.lemmas == dep.lemmas and seq.pos == dep.pos
        # one relation node, one PoS pre-terminal and one lemma leaf per word
        assert len(tree) == 3 * len(words)
        assert tree.label == dep.deprels[dep.heads.index(-1)]
        assert tree.leaves() == [lem.lower() for lem in dep.lemmas]
        assert len(ptree) == len(tree)
        assert parse_tree(format_tree(tree)) == tree


def test_sentences_are_joined_at_the_first_root(nlp):
    (dep,) = parse_deps(["The dog barks. It was very loud! Then it slept."], nlp)
    roots = [i for i, r in enumerate(dep.deprels) if r == "ROOT"]
    assert len(roots) == 3, dep
    first = roots[0]
    assert dep.heads[first] == -1
    assert [dep.heads[r] for r in roots[1:]] == [first, first]
    assert dep.heads.count(-1) == 1


def test_pretokenized_keeps_the_given_tokens(nlp):
    text = "What 's the capital of the U.S.A. ?"
    (tok,) = parse_deps([text], nlp, pretokenized=True)
    assert list(tok.words) == text.split()
    (raw,) = parse_deps(["Don't stop"], nlp)
    assert list(raw.words) != ["Don't", "stop"]  # spaCy splits it; pretokenized would not
    (pre,) = parse_deps(["Don't stop"], nlp, pretokenized=True)
    assert list(pre.words) == ["Don't", "stop"]


def test_whitespace_is_normalised(nlp):
    (dep,) = parse_deps(["Where  is\tthe\n Eiffel   Tower ?"], nlp)
    assert list(dep.words) == ["Where", "is", "the", "Eiffel", "Tower", "?"]


def test_empty_text_is_refused(nlp):
    from gramtile.kernels.errors import RepresentationError

    with pytest.raises(RepresentationError, match="text 1 is empty"):
        parse_deps(["fine", "   "], nlp)


def test_derived_tree_shape_is_the_documented_one():
    dep = DepTree(("The", "dog", "barks", "."), (1, 2, -1, 2), ("the", "dog", "bark", "."),
                  ("DT", "NN", "VBZ", "."), ("det", "nsubj", "ROOT", "punct"))
    expected = parse_tree("(ROOT (nsubj (det (DT the)) (NN dog)) (VBZ bark) (punct (. .)))")
    assert dep_to_tree(dep) == expected
    # the head's pre-terminal sits among its dependents in word order
    dep2 = DepTree(("big", "Dogs", "bark", "loudly"), (1, 2, -1, 2), ("big", "Dog", "bark", "loudly"),
                   ("JJ", "NNS", "VBP", "RB"), ("amod", "nsubj", "ROOT", "advmod"))
    assert dep_to_tree(dep2) == parse_tree("(ROOT (nsubj (amod (JJ big)) (NNS dog)) (VBP bark) (advmod (RB loudly)))")


def test_derived_tree_fallbacks_and_bracket_safety():
    dep = DepTree(("(", "x", ")"), (1, -1, 1))
    tree = dep_to_tree(dep)
    assert tree == Tree("dep", (Tree("dep", (Tree("_", (Tree("-LRB-"),)),)), Tree("_", (Tree("x"),)),
                                Tree("dep", (Tree("_", (Tree("-RRB-"),)),))))
    assert parse_tree(format_tree(tree)) == tree
    assert safe_label("a b\tc") == "a_b_c"
    assert safe_label("") == "_"


def test_deep_dependency_chain_does_not_recurse():
    n = 5000  # far beyond Python's recursion limit
    dep = DepTree(tuple(f"w{i}" for i in range(n)), tuple([-1] + list(range(n - 1))))
    tree = dep_to_tree(dep)
    assert len(tree) == 3 * n


def test_derive_all_keys():
    dep = DepTree(("Hi",), (-1,), ("hi",), ("UH",), ("ROOT",))
    out = derive_all(dep)
    assert set(out) == {"dep", "seq", "tree", "ptree"}
    assert out["ptree"] == PTree.from_tree(out["tree"])


def test_tree_to_ptree_equals_from_tree_and_handles_depth(nlp):
    from gramtile.pipeline.parsing.derive import tree_to_ptree

    for rec in parse_texts(["Which river flows through the old town of Prague ?", "Hi ."], nlp):
        assert tree_to_ptree(rec["tree"]) == PTree.from_tree(rec["tree"])
    n = 3000
    deep = dep_to_tree(DepTree(tuple(f"w{i}" for i in range(n)), tuple([-1] + list(range(n - 1)))))
    assert len(tree_to_ptree(deep)) == len(deep)


def test_dep_depth():
    from gramtile.pipeline.parsing.parse import dep_depth

    assert dep_depth(DepTree(("a",), (-1,))) == 1
    assert dep_depth(DepTree(("a", "b", "c", "d"), (1, -1, 1, 2))) == 3
    assert dep_depth(DepTree(tuple("abcde"), (-1, 0, 1, 2, 3))) == 5


def test_worker_entry_derives_shallow_parses_and_returns_deep_ones_bare(nlp, monkeypatch):
    import gramtile.pipeline.parsing.parse as parse

    texts = ["Who wrote Hamlet ?", "What is the capital of the small country north of France ?"]
    items, prov = parse.parse_derive_shard(texts, True)
    assert items == parse_texts(texts, nlp, pretokenized=True) and prov == provenance(nlp)
    monkeypatch.setattr(parse, "SHIP_DEPTH", 3)  # only the short question is shallow enough
    items, _ = parse.parse_derive_shard(texts, True)
    assert isinstance(items[0], dict) and isinstance(items[1], DepTree)
    assert derive_all(items[1]) == parse_texts(texts[1:], nlp, pretokenized=True)[0]
