"""Relation examples from a tagged sentence and two mentions (pipeline/parsing/relation_build.py)."""
import pytest

from gramtile.kernels.errors import RepresentationError
from gramtile.pipeline.parsing.relation_build import (
    Mention,
    TaggedSentence,
    chunk,
    path_dep,
    path_enclosed_dep,
    relation_example,
    sentence_from_doc,
)
from gramtile.pipeline.representations.relation import relation_to_json
from gramtile.pipeline.representations.structures import DepTree

WORDS = "John Smith is the chief scientist of the Hardcom Corporation in Boston .".split()
POS = ("NNP", "NNP", "VBZ", "DT", "JJ", "NN", "IN", "DT", "NNP", "NNP", "IN", "NNP", ".")
#      0      1      2      3     4     5     6     7     8      9      10    11     12
HEADS = (1, 2, -1, 5, 5, 2, 5, 9, 9, 6, 9, 10, 2)


def shape(x):
    """(Type, Role, Text, [children]) nested tuples: compact and exact."""
    return (x.type, x.role, x.text, [shape(c) for c in x.children])


def test_docstring_example_person_affiliation():
    s = TaggedSentence(WORDS[:10] + ["."], POS[:10] + (".",), None, HEADS[:10] + (2,))
    ex = relation_example(s, Mention(0, 2, "Peop"), Mention(8, 10, "Org"), ("member", "affiliation"))
    assert shape(ex) == ("Sentence", "none", None, [
        ("PNP", "member", "smith", []),
        ("Verb", "none", "is", []),
        ("NP", "none", "scientist", [("Prep", "none", "of", [("ONP", "affiliation", "corporation", [])])]),
    ])


def test_nodes_below_a_mention_stay():
    s = TaggedSentence(WORDS, POS, None, HEADS)
    ex = relation_example(s, Mention(0, 2, "Peop"), Mention(8, 10, "Org"), ("member", "affiliation"))
    assert shape(ex)[3][2][3][0][3][0] == ("ONP", "affiliation", "corporation", [
        ("Prep", "none", "in", [("NP", "none", "boston", [])])])


def test_least_common_subtree_is_the_organisation_chunk():
    s = TaggedSentence(WORDS, POS, None, HEADS)
    ex = relation_example(s, Mention(8, 10, "Org"), Mention(11, 12, "Loc"))
    assert shape(ex) == ("ONP", "arg1", "corporation", [("Prep", "none", "in", [("LNP", "arg2", "boston", [])])])


def test_heads_decide_attachment_nearest_host_without_them():
    # "hired John Smith from Boston": parser attaches "from" to the verb; without heads it goes
    # to the nearest host before it, the PNP
    words = "IBM hired John Smith from Boston .".split()
    pos = ("NNP", "VBD", "NNP", "NNP", "IN", "NNP", ".")
    heads = (1, -1, 3, 1, 1, 4, 1)
    ms = Mention(0, 1, "Org"), Mention(5, 6, "Loc")
    with_heads = relation_example(TaggedSentence(words, pos, None, heads), *ms)
    no_heads = relation_example(TaggedSentence(words, pos), *ms)
    assert shape(with_heads)[3][1] == ("Verb", "none", "hired", [("Prep", "none", "from", [("LNP", "arg2", "boston", [])])])
    assert shape(no_heads)[3][2] == ("NP", "none", "smith", [("Prep", "none", "from", [("LNP", "arg2", "boston", [])])])


def test_noun_phrase_after_a_complementizer_is_not_its_object():
    # "said that the French Government was careful toward Turkey": the parser makes "that" a mark
    # of "was" and "Government" its subject, so the ONP stays a child of the sentence; without
    # heads the noun phrase after any IN is taken as its object
    words = "Cetin said that the French Government was careful toward Turkey .".split()
    pos = ("NNP", "VBD", "IN", "DT", "JJ", "NNP", "VBD", "JJ", "IN", "NNP", ".")
    heads = (1, -1, 6, 5, 5, 6, 1, 6, 7, 8, 1)
    ms = Mention(4, 6, "Org"), Mention(9, 10, "Loc")
    tail = ("NP", "none", "careful", [("Prep", "none", "toward", [("LNP", "arg2", "turkey", [])])])
    assert shape(relation_example(TaggedSentence(words, pos, None, heads), *ms)) == ("Sentence", "none", None, [
        ("ONP", "arg1", "government", []), ("Verb", "none", "was", []), tail])
    assert shape(relation_example(TaggedSentence(words, pos), *ms)) == ("Sentence", "none", None, [
        ("Verb", "none", "said", [("Prep", "none", "that", [("ONP", "arg1", "government", [])])]),
        ("Verb", "none", "was", []), tail])


def test_fronted_pp_goes_under_the_sentence_and_span_trims_the_tail():
    words = "In Boston , the Hardcom Corporation hired John Smith yesterday .".split()
    pos = ("IN", "NNP", ",", "DT", "NNP", "NNP", "VBD", "NNP", "NNP", "NN", ".")
    heads = (6, 0, 6, 5, 5, 6, -1, 8, 6, 6, 6)
    ex = relation_example(TaggedSentence(words, pos, None, heads), Mention(1, 2, "Loc"), Mention(3, 6, "Org"))
    # "the" is absorbed into the organisation chunk; hired / John Smith / . lie after the span
    assert shape(ex) == ("Sentence", "none", None, [
        ("Prep", "none", "in", [("LNP", "arg1", "boston", [])]), ("Punct", "none", ",", []),
        ("ONP", "arg2", "corporation", [])])


def test_chunks_verb_groups_possessives_and_other_mentions():
    words = "The comedian 's wife has not been seen by Reuters .".split()
    pos = ("DT", "NN", "POS", "NN", "VBZ", "RB", "VBN", "VBN", "IN", "NNP", ".")
    cs = chunk(TaggedSentence(words, pos), [Mention(9, 10, "Org")])
    assert [(c.type, c.start, c.end, c.head) for c in cs] == [
        ("NP", 0, 3, 1), ("NP", 3, 4, 3), ("Verb", 4, 8, 7), ("Prep", 8, 9, 8), ("ONP", 9, 10, 9), ("Punct", 10, 11, 10)]


def test_lemmas_give_text_and_other_mentions_are_name_chunks():
    words = ["Smith", "met", "Jones", "at", "IBM"]
    pos = ["NNP", "VBD", "NNP", "IN", "NNP"]
    lem = ["Smith", "meet", "Jones", "at", "IBM"]
    ex = relation_example(TaggedSentence(words, pos, lem), Mention(0, 1, "Peop"), Mention(4, 5, "Org"),
                          others=[Mention(2, 3, "Peop")])
    assert [(c.type, c.role, c.text) for c in ex.children] == [
        ("PNP", "arg1", "smith"), ("Verb", "none", "meet"), ("PNP", "none", "jones")]
    assert ex.children[2].children[0].children[0].role == "arg2"


@pytest.mark.parametrize("m1,m2,what", [(Mention(0, 2), Mention(1, 3), "overlap"),
                                         (Mention(0, 2), Mention(12, 14), "outside")])
def test_bad_mentions_raise(m1, m2, what):
    with pytest.raises(RepresentationError, match=what):
        relation_example(TaggedSentence(WORDS, POS), m1, m2)


def test_bad_sentence_and_roles_raise():
    with pytest.raises(RepresentationError, match="pos has 2 entries for 3 words"):
        TaggedSentence(["a", "b", "c"], ["DT", "NN"])
    with pytest.raises(RepresentationError, match="roles"):
        relation_example(TaggedSentence(WORDS, POS), Mention(0, 2), Mention(8, 10), roles=("arg1",))


def test_dependency_paths():
    dep = DepTree(WORDS, HEADS, None, POS, None)
    p = path_dep(dep, Mention(0, 2), Mention(8, 10))
    assert p.words == ("Smith", "is", "scientist", "of", "Corporation")
    assert p.heads == (1, -1, 1, 2, 3)
    pet = path_enclosed_dep(dep, Mention(0, 2), Mention(8, 10))
    assert pet.words == tuple(WORDS[:10]) and pet.heads == HEADS[:10]
    inner = path_enclosed_dep(dep, Mention(8, 10), Mention(11, 12))
    assert inner.words == ("Hardcom", "Corporation", "in", "Boston") and inner.heads == (1, -1, 1, 2)


def test_from_spacy_doc_round_trips_through_json():
    from gramtile.pipeline.parsing.parse import load_model
    from gramtile.pipeline.representations.relation import relation_from_json

    doc = load_model()(" ".join(WORDS))
    s = sentence_from_doc(doc)
    ex = relation_example(s, Mention(0, 2, "Peop"), Mention(8, 10, "Org"), ("member", "affiliation"))
    assert [n.role for n in ex.nodes()].count("member") == 1
    assert [n.role for n in ex.nodes()].count("affiliation") == 1
    assert relation_from_json(relation_to_json(ex)) == ex


def test_sentence_scope_roots_every_example_at_the_sentence():
    s = TaggedSentence(WORDS, POS, None, HEADS)
    ex = relation_example(s, Mention(8, 10, "Org"), Mention(11, 12, "Loc"), scope="sentence")
    # the nested PP chain hangs under the chunk that holds it, below the kept "scientist" chunk
    assert shape(ex) == ("Sentence", "none", None, [
        ("NP", "none", "scientist", [("Prep", "none", "of", [
            ("ONP", "arg1", "corporation", [("Prep", "none", "in", [("LNP", "arg2", "boston", [])])])])])])
    with pytest.raises(RepresentationError, match="scope"):
        relation_example(s, Mention(8, 10), Mention(11, 12), scope="clause")
