"""Readers on the real corpora in ../shared/data: counts from each data set's README, exact
round trips through encode/decode and through the bracket writer, and JSON-lines write/read."""
from collections import Counter

import pytest
from conftest import require_data

from gramtile.kernels.errors import RepresentationError
from gramtile.pipeline.parsing.formats import FORMATS, read
from gramtile.pipeline.readers.base import ErrorPolicy, record_id
from gramtile.pipeline.readers.jsonl import write_jsonl
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.encode import decode, encode
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.hdag import HDAG
from gramtile.pipeline.representations.relation import relation_from_json
from gramtile.pipeline.representations.structures import (
    DepTree,
    Document,
    PTree,
    TokenSeq,
    Tree,
    WSDInstance,
    format_tree,
)
from gramtile.pipeline.representations.vocab import Vocabularies

TREES = ("grct", "lct", "loct", "cgrct", "clct")


@pytest.fixture(scope="module")
def vocabs():
    # one shared set of vocabularies for every corpus: ids must not collide across them
    return Vocabularies()


def assert_encode_round_trip(structs, vocabs):
    assert decode(encode(structs, vocabs), vocabs) == structs


def assert_bracket_round_trip(trees):
    bad = [t for t in trees if parse_tree(format_tree(t)) != t]
    assert not bad, f"{len(bad)} trees change through format_tree/parse_tree, e.g. {format_tree(bad[0])}"


# ---- Penn Treebank WSJ sample and its dependency version -------------------------------

@pytest.fixture(scope="module")
def ptb():
    return list(read(require_data("ptb_wsj_sample") / "combined", "ptb"))


@pytest.fixture(scope="module")
def dp():
    return list(read(require_data("dependency_treebank"), "dp"))


def test_ptb_all_trees_as_read(ptb, vocabs):
    assert len(ptb) == 3914
    assert len({d.id for d in ptb}) == 3914
    assert ptb[0].id == "wsj_0001:1" and ptb[-1].id.startswith("wsj_0199:")
    assert ptb[0].source.endswith("wsj_0001.mrg:2")  # the file opens with a blank line
    trees = [d.structures["tree"] for d in ptb]
    leaves = [leaf for t in trees for leaf in t.leaves()]
    assert len(leaves) == 100_676  # README: 94,084 words + 6,592 -NONE- elements
    assert sum(1 for t in trees for n in t.nodes() if n.label == "-NONE-") == 6_592
    assert any(n.label == "NP-SBJ" for n in trees[0].nodes())  # function tags kept
    assert trees[0].label == "S"  # PTB's unlabelled outer bracket is dropped
    assert_encode_round_trip(trees, vocabs)
    assert_bracket_round_trip(trees)


def test_ptb_strip_matches_dependency_version(dp):
    stripped = list(read(require_data("ptb_wsj_sample") / "combined", "ptb", strip=True))
    assert len(stripped) == 3914
    labels = {n.label for d in stripped for n in d.structures["tree"].nodes() if n.children}
    assert "-NONE-" not in labels and "NP-SBJ" not in labels and "NP" in labels
    assert "-LRB-" in labels and "PRP$" in labels  # tags starting or ending oddly survive
    # with empty elements gone, each tree's leaves are exactly the .dp sentence's words
    assert [d.id for d in stripped] == [d.id for d in dp]
    assert [d.structures["tree"].leaves() for d in stripped] == [list(d.structures["dep"].words) for d in dp]


def test_dp_all_sentences(dp, vocabs):
    assert len(dp) == 3914
    assert len({d.id.split(":")[0] for d in dp}) == 199
    deps = [d.structures["dep"] for d in dp]
    assert sum(len(t) for t in deps) == 94_084
    first = deps[0]
    assert first.words[:2] == ("Pierre", "Vinken") and first.pos[:2] == ("NNP", "NNP")
    assert first.heads[:3] == (1, 7, 1)  # file: 2, 8, 2 (1-based)
    assert first.heads[first.words.index("will")] == -1
    assert first.lemmas is None and first.deprels is None
    assert_encode_round_trip(deps, vocabs)


# ---- UD English EWT dev ----------------------------------------------------------------

@pytest.fixture(scope="module")
def ud_path():
    return require_data("ud_english_ewt_dev") / "en_ewt-ud-dev.conllu"


@pytest.fixture(scope="module")
def ud(ud_path):
    return list(read(ud_path, "conllu"))


def test_conllu_all_sentences(ud, vocabs):
    assert len(ud) == 2001
    assert len({d.id for d in ud}) == 2001
    # README: 25,147 syntactic words = surface tokens + multiword-token parts, empty nodes excluded
    deps = [d.structures["dep"] for d in ud]
    assert sum(len(t) for t in deps) == 25_147
    genres = Counter(d.id.split("-")[0] for d in ud)
    assert genres == {"email": 523, "reviews": 554, "answers": 419, "newsgroup": 274, "weblog": 231}
    assert all(d.text for d in ud)
    assert len({rel.split(":")[0] for t in deps for rel in t.deprels}) == 36  # README: 36 basic types
    assert_encode_round_trip(deps, vocabs)


def _sentence_at(docs, line):
    """The document whose record holds file line ``line``."""
    return max((d for d in docs if int(d.source.rsplit(":", 1)[1]) <= line),
               key=lambda d: int(d.source.rsplit(":", 1)[1]))


def test_conllu_multiword_tokens_and_empty_nodes_skipped(ud, ud_path):
    lines = ud_path.read_text(encoding="utf-8").splitlines()
    first_id = [line.split("\t")[0] for line in lines if line[:1].isdigit()]
    assert sum("-" in x for x in first_id) == 359 and sum("." in x for x in first_id) == 4
    # line 158 is the multiword token '29-30 didn't'; words 29 and 30 are 'did' and "n't"
    assert lines[157].startswith("29-30\tdidn't")
    dep = _sentence_at(ud, 158).structures["dep"]
    assert dep.words[28:30] == ("did", "n't") and "didn't" not in dep.words
    assert dep.heads[29] == 28 and dep.lemmas[28:30] == ("do", "not")
    # line 1602 is the empty node '8.1 write': word 9 follows word 8 directly
    assert lines[1601].startswith("8.1\twrite")
    dep = _sentence_at(ud, 1602).structures["dep"]
    assert dep.words[7:9] == ("like", "about") and dep.words.count("write") == 1
    assert dep.heads[4] == 31  # 'write' heads to word 32, i.e. index 31


def test_conllu_xpos_option(ud_path):
    upos = next(iter(read(ud_path, "conllu"))).structures["dep"].pos
    xpos = next(iter(read(ud_path, "conllu", pos="xpos"))).structures["dep"].pos
    assert upos != xpos and "PROPN" in upos and "NNP" in xpos


# ---- TREC QC: NUM constituency trees (SVM-Light-TK) ------------------------------------

@pytest.mark.parametrize("name, n, positive", [("NUM_train.dat", 5483, 896), ("NUM_test.dat", 500, 113)])
def test_svmlighttk_num_trees(name, n, positive, vocabs):
    docs = list(read(require_data("trec_qc_num_constituency") / name, "svmlighttk"))
    assert len(docs) == n
    assert Counter(d.label for d in docs) == {"1": positive, "-1": n - positive}  # kept as written
    trees = [d.structures["tree"] for d in docs]
    assert all(t.label == "ROOT" for t in trees)
    assert all(set(d.structures) == {"tree"} for d in docs)
    assert_encode_round_trip(trees, vocabs)
    assert_bracket_round_trip(trees)
    if name == "NUM_train.dat":
        # docs/kernels.md, "Tree kernels: ST, SST, PT": two training trees hold '(VB ask a)', one leaf 'ask a'
        merged = [d.id for d in docs for leaf in d.structures["tree"].leaves() if " " in leaf]
        assert merged == ["NUM_train:102", "NUM_train:226"]
        assert max(len(t) - len(t.leaves()) for t in trees) == 78  # README: max 78 internal nodes


# ---- TREC QC: KeLP dependency-based trees ----------------------------------------------

KELP_COUNTS = {
    "train_5500.coarse.klp.gz": {"ABBR": 86, "DESC": 1162, "ENTY": 1250, "HUM": 1223, "LOC": 835, "NUM": 896},
    "TREC_10.coarse.klp.gz": {"ABBR": 9, "DESC": 138, "ENTY": 94, "HUM": 65, "LOC": 81, "NUM": 113},
}
TREC_COUNTS = {"train.txt": KELP_COUNTS["train_5500.coarse.klp.gz"],
               "test.txt": KELP_COUNTS["TREC_10.coarse.klp.gz"]}


@pytest.fixture(scope="module")
def kelp():
    d = require_data("trec_qc_kelp_trees")
    return {name: list(read(d / name, "kelp")) for name in KELP_COUNTS}


@pytest.mark.parametrize("name", list(KELP_COUNTS))
def test_kelp_examples(kelp, name, vocabs):
    docs = kelp[name]
    assert len(docs) == sum(KELP_COUNTS[name].values())
    assert Counter(d.label for d in docs) == KELP_COUNTS[name]
    assert docs[0].id == name.replace(".klp.gz", "") + ":1"
    assert all(list(d.structures) == ["bow", *TREES] for d in docs)
    for tree_name in TREES:
        trees = [d.structures[tree_name] for d in docs]
        if tree_name in ("grct", "lct"):  # the other three add time, not coverage of encode
            assert_encode_round_trip(trees, vocabs)
        assert_bracket_round_trip(trees)
    # LCT and LOCT are centred on the same lemma nodes
    for d in docs:
        lct, loct = d.structures["lct"], d.structures["loct"]
        assert lct.label == loct.label
        assert sorted(n.label for n in lct.nodes() if n.label.startswith("LEX##")) == sorted(
            n.label for n in loct.nodes())
    # GRCT leaves are lemmas; LCT has PoS and relation leaves side by side (the case that needs
    # "(label)" when writing brackets)
    assert all(leaf.startswith("LEX##") for d in docs for leaf in d.structures["grct"].leaves())
    lct = docs[0].structures["lct"]
    assert {leaf.split("##")[0] for leaf in lct.leaves()} == {"POS", "SYNT"}
    bows = [d.structures["bow"] for d in docs]
    assert all(b and all(v == 1.0 for v in b.values()) for b in bows)
    # every lemma leaf of the LOCT tree is a bag-of-words feature: '_lemma__p'
    for d in docs[:200]:
        lemmas = {n.label[5:].replace("::", "__") for n in d.structures["loct"].nodes()}
        assert {f"_{x}" for x in lemmas} <= set(d.structures["bow"])


def test_kelp_readme_example(kelp):
    first = kelp["TREC_10.coarse.klp.gz"][0]
    assert first.label == "NUM" and first.text == "How far is it from Denver to Aspen ?"
    assert first.structures["loct"] == parse_tree(
        "(LEX##be::v(LEX##far::r(LEX##how::w))(LEX##it::p)(LEX##denver::n(LEX##aspen::n)))")
    assert first.structures["bow"]["_aspen__n"] == 1.0 and len(first.structures["bow"]) == 9


def test_kelp_text_equals_trec_questions(kelp):
    d = require_data("trec_qc")
    for kelp_name, trec_name, differ in (("train_5500.coarse.klp.gz", "train.txt", 1),
                                         ("TREC_10.coarse.klp.gz", "test.txt", 0)):
        trec = list(read(d / trec_name, "trec"))
        pairs = list(zip(kelp[kelp_name], trec, strict=True))
        assert [a.label for a, b in pairs] == [b.label for a, b in pairs]
        diffs = [(a.text, b.text) for a, b in pairs if a.text != b.text]
        assert len(diffs) == differ  # README: the one Latin-1 byte
        if differ:
            assert "sister\u00f0city" in diffs[0][1]


# ---- TREC QC raw questions -------------------------------------------------------------

@pytest.mark.parametrize("name, fine", [("train.txt", 50), ("test.txt", 42)])
def test_trec_questions(name, fine):
    path = require_data("trec_qc") / name
    docs = list(read(path, "trec"))
    assert Counter(d.label for d in docs) == TREC_COUNTS[name]
    assert docs[0].id == name.split(".")[0] + ":1" and docs[0].structures == {}
    fine_docs = list(read(path, "trec", label="fine"))
    assert len({d.label for d in fine_docs}) == fine
    assert all(f.label.split(":")[0] == c.label and f.text == c.text for f, c in zip(fine_docs, docs))
    if name == "train.txt":
        assert docs[0].label == "DESC" and fine_docs[0].label == "DESC:manner"
        assert docs[0].text == "How did serfdom develop in and then leave Russia ?"
        assert sum("\u00f0" in d.text for d in docs) == 1  # 0xF0 decoded as Latin-1 'ð'


# ---- text and tsv ----------------------------------------------------------------------

def test_text_and_tsv(tmp_path):
    p = tmp_path / "s.txt"
    p.write_text("The dog barks .\nA cat\tsleeps\n\n", encoding="utf-8")
    docs = list(read(p, "text"))
    assert [(d.id, d.text, d.label, d.source) for d in docs] == [
        ("s:1", "The dog barks .", None, f"{p}:1"), ("s:2", "A cat\tsleeps", None, f"{p}:2")]
    t = tmp_path / "s.tsv"
    t.write_text("pos\tGood film , really .\nneg\tBad\tfilm\n", encoding="utf-8")
    with pytest.raises(CorpusFormatError, match="line 2: 3 tab-separated columns"):  # a tab is never kept in a text
        list(read(t, "tsv"))
    docs = list(read(t, "tsv", on_error="skip"))
    assert [(d.id, d.label, d.text) for d in docs] == [("s:1", "pos", "Good film , really .")]


def test_read_dispatch(tmp_path):
    assert set(FORMATS) >= {"jsonl", "ptb", "svmlighttk", "kelp", "conllu", "dp", "trec", "text", "tsv"}
    p = tmp_path / "x.txt"
    p.write_text("hello\n")
    with pytest.raises(CorpusFormatError, match="unknown format 'conll'.*conllu"):
        read(p, "conll")
    with pytest.raises(CorpusFormatError, match="no option 'strip'"):
        read(p, "text", strip=True)
    assert record_id("a/train_5500.coarse.klp.gz", 3) == "train_5500.coarse:3"


def test_max_tokens_none_disables_limit(tmp_path):
    p = tmp_path / "long.txt"
    p.write_text(" ".join(["w"] * 1500) + "\n")
    assert len(next(iter(read(p, "text", max_tokens=None))).text.split()) == 1500
    assert len(next(iter(read(p, "text", max_tokens=2000))).text.split()) == 1500


# ---- JSON lines ------------------------------------------------------------------------

def hand_made_docs():
    tree = parse_tree("(S (NP (D the) (N dog)) (VP (V barks)))")
    return [
        Document("t1", label="pos", text="the dog barks", structures={"tree": tree}),
        Document("t2", label=["a", "b"], structures={"tree": parse_tree("(VP (VB ask a) (NP it))")}),
        Document("d1", label="x", structures={"dep": DepTree(("the", "dog", "barks"), (1, 2, -1),
                                                             ("the", "dog", "bark"), ("DT", "NN", "VBZ"),
                                                             ("det", "nsubj", "root"))}),
        Document("d2", structures={"dep": DepTree(("hi",), (-1,))}),
        Document("s1", label="y", structures={"seq": TokenSeq(("a", "b"), ("a", "b"), ("X", "Y")),
                                              "tree": tree}),
        Document("s2", structures={"seq": TokenSeq(("ünïcode", "\"quoted\""))}),
        Document("w1", label="hard%1", structures={"wsd": WSDInstance(("it", "be", "hard"), ("PRP", "VBZ", "JJ"), 2,
                                                                      ("it", "is", "hard"))}),
        Document("w2", structures={"wsd": WSDInstance(("line",), ("NN",), 0)}),
        Document("p1", structures={"ptree": PTree("S", ((1, PTree("A")), (3, PTree("B", ((2, PTree("c")),)))))}),
        Document("r1", label="member", structures={"relation": relation_from_json(
            {"Type": "Sentence", "Role": "none", "children": [
                {"Type": "PNP", "Role": "member", "Text": "John Smith"},
                {"Type": "Verb", "Role": "none", "Text": "is"},
                {"Type": "ONP", "Role": "affiliation", "Text": "Hardcom", "children": []}]})}),
        Document("h1", structures={"hdag": HDAG([["NP"], ["John", "NNP"], ["VP"], ["runs", "VBZ", "run"]],
                                                [-1, 0, -1, 2], [(0, 2)])}),
        Document("x1", text="only text, to be parsed later"),
    ]


def strip_source(docs):
    return [Document(d.id, d.label, d.text, d.structures) for d in docs]


def test_jsonl_round_trip_hand_made(tmp_path):
    docs = hand_made_docs()
    for name in ("h.jsonl", "h.jsonl.gz"):
        path = tmp_path / name
        assert write_jsonl(docs, path) == len(docs)
        back = list(read(path, "jsonl"))
        assert strip_source(back) == docs
        assert back[3].source == f"{path}:4"


def test_jsonl_round_trip_real(tmp_path, ptb, ud, kelp):
    docs = []
    for d in ptb[:20]:
        docs.append(Document(d.id, structures={"tree": d.structures["tree"],
                                               "ptree": PTree.from_tree(d.structures["tree"])}))
    for d in ud[:20]:
        docs.append(Document(d.id, text=d.text, structures=dict(d.structures)))
    for d in kelp["TREC_10.coarse.klp.gz"][:20]:
        docs.append(Document(d.id, label=d.label, text=d.text,
                             structures={"tree": d.structures["lct"], "seq": TokenSeq(d.text.split())}))
    path = tmp_path / "real.jsonl"
    write_jsonl(docs, path)
    assert strip_source(read(path, "jsonl")) == docs


def test_jsonl_ids_default_and_text_only(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"tokens": ["a"]}\n\n{"id": "z", "text": "b"}\n{"tree": "(S x)"}\n')
    docs = list(read(p, "jsonl"))
    assert [d.id for d in docs] == ["c:1", "z", "c:3"]  # blank lines are not records
    assert [d.source for d in docs] == [f"{p}:1", f"{p}:3", f"{p}:4"]


def test_write_jsonl_refuses_what_the_format_cannot_hold(tmp_path):
    out = tmp_path / "o.jsonl"
    tree = Tree("S", (Tree("x"),))
    with pytest.raises(RepresentationError, match="'grct'.*store it under 'tree'"):
        write_jsonl([Document("a", structures={"grct": tree})], out)
    with pytest.raises(RepresentationError, match="share the keys"):
        write_jsonl([Document("a", structures={"dep": DepTree(("x",), (-1,)), "seq": TokenSeq(("x",))})], out)
    with pytest.raises(RepresentationError, match="bracket or whitespace"):
        write_jsonl([Document("a", structures={"tree": Tree("S", (Tree("a b"), Tree("c d")))})], out)
    with pytest.raises(RepresentationError, match="label"):
        write_jsonl([Document("a", label=1, text="x")], out)


def test_error_policy_report_empty_when_clean(tmp_path):
    p = tmp_path / "ok.txt"
    p.write_text("fine\n")
    policy = ErrorPolicy("skip")
    assert len(list(read(p, "text", policy=policy))) == 1
    assert policy.skipped == [] and policy.report() == ""
    with pytest.raises(CorpusFormatError, match="on_error"):
        ErrorPolicy("ignore")
