"""Bad input: every reader error is a CorpusFormatError naming the file, the line and the fix;
with on_error="skip" the bad records are reported and the good ones still read."""
import gzip
import json

import pytest
from conftest import require_data

from gramtile.pipeline.parsing.formats import FORMATS, read
from gramtile.pipeline.readers.base import ErrorPolicy
from gramtile.pipeline.representations.errors import CorpusFormatError

GOOD_TREE = "(S (NP (DT the) (NN dog)) (VP (VBZ barks)))"


def write(tmp_path, name, content):
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def read_error(path, fmt, **kw) -> CorpusFormatError:
    with pytest.raises(CorpusFormatError) as info:
        list(read(path, fmt, **kw))
    return info.value


def assert_names(err, path, line, *words):
    """The error names the file, the line and carries a fix; ``words`` appear in the message."""
    text = str(err)
    assert err.path == str(path) and err.line == line, (err.path, err.line, text)
    assert text.startswith(f"{path}, line {line}: "), text
    assert err.fix and f"Fix: {err.fix}" in text
    for w in words:
        assert w in text, (w, text)


def conllu_row(i, form, head, rel="dep"):
    return f"{i}\t{form}\t{form.lower()}\tX\tXX\t_\t{head}\t{rel}\t_\t_"


def conllu_sentence(sid, heads):
    rows = [f"# sent_id = {sid}", f"# text = {' '.join('w' + str(i) for i in range(1, len(heads) + 1))}"]
    rows += [conllu_row(i, f"w{i}", h) for i, h in enumerate(heads, 1)]
    return "\n".join(rows) + "\n\n"


# ---- malformed brackets ----------------------------------------------------------------

def test_svmlighttk_unbalanced_bracket(tmp_path):
    p = write(tmp_path, "t.dat", f"1 |BT| {GOOD_TREE} |ET|\n-1 |BT| (ROOT (S (NN a)) |ET|\n1 |BT| {GOOD_TREE} |ET|\n")
    assert_names(read_error(p, "svmlighttk"), p, 2, "unbalanced '('")
    policy = ErrorPolicy("skip")
    docs = list(read(p, "svmlighttk", policy=policy))
    assert [d.id for d in docs] == ["t:1", "t:3"]
    assert len(policy.skipped) == 1 and f"{p}, line 2" in policy.report()


def test_svmlighttk_missing_markers(tmp_path):
    p = write(tmp_path, "t.dat", f"1 {GOOD_TREE}\n")
    assert_names(read_error(p, "svmlighttk"), p, 1, "|BT|")
    p = write(tmp_path, "u.dat", f"1 |BT| {GOOD_TREE}\n")
    assert_names(read_error(p, "svmlighttk"), p, 1, "|ET|")


def test_ptb_unclosed_tree_reported_and_next_tree_read(tmp_path):
    text = ("( (S (NP (NN a))\n    (VP (VB b))))\n"       # lines 1-2: closes one bracket too early
            "( (S (NP (NN c))\n    (VP (VB d)))\n"        # lines 3-4: one ')' missing
            "( (S (NP (NN e))\n    (VP (VB f))))\n")      # lines 5-6: fine
    p = write(tmp_path, "w.mrg", text)
    assert_names(read_error(p, "ptb"), p, 3, "unbalanced '('", "line 5")
    policy = ErrorPolicy("skip")
    docs = list(read(p, "ptb", on_error="skip", policy=policy))
    assert [d.id for d in docs] == ["w:1", "w:3"]
    assert [d.structures["tree"].leaves() for d in docs] == [["a", "b"], ["e", "f"]]
    assert [e.line for e in policy.skipped] == [3]


def test_ptb_extra_closing_bracket(tmp_path):
    p = write(tmp_path, "w.mrg", "( (S (NN a)))\n( (S\n  (NN b))))\n( (S (NN c)))\n")
    assert_names(read_error(p, "ptb"), p, 3, "unbalanced ')'")
    docs = list(read(p, "ptb", on_error="skip"))
    assert [d.structures["tree"].leaves() for d in docs] == [["a"], ["c"]]


def test_ptb_unclosed_at_end_of_file_and_bad_label(tmp_path):
    p = write(tmp_path, "w.mrg", "( (S (NN a)))\n( (S\n  (NN b)\n")
    assert_names(read_error(p, "ptb"), p, 2, "end of file")
    # balanced but malformed: the error points at the line holding the offending bracket
    p = write(tmp_path, "x.mrg", "( (S\n  (NN a)\n  () ))\n")
    assert_names(read_error(p, "ptb"), p, 3, "malformed tree")


def test_kelp_unterminated_tree(tmp_path):
    good = "NUM |BS:quest| How far ? |ES| |BV:bow| _far__r:1.0 |EV| |BT:grct| (SYNT##root(POS##RB(LEX##far::r))) |ET|"
    p = write(tmp_path, "q.klp", good + "\n" + good.replace(" |ET|", "") + "\n")
    assert_names(read_error(p, "kelp"), p, 2, "unterminated")
    p = write(tmp_path, "r.klp", good.replace("(POS##RB", "POS##RB") + "\n")
    assert_names(read_error(p, "kelp"), p, 1, "malformed tree 'grct'")


# ---- dependency trees ------------------------------------------------------------------

def test_conllu_head_out_of_range(tmp_path):
    p = write(tmp_path, "d.conllu", conllu_sentence("ok", [2, 0]) + conllu_sentence("bad", [2, 0, 9]))
    # sentence 2 starts at line 6 (2 comments + 2 words + blank); its word 3 is on line 10
    err = read_error(p, "conllu")
    assert_names(err, p, 10, "word 3", "head 9", "outside")
    docs = list(read(p, "conllu", on_error="skip"))
    assert [d.id for d in docs] == ["ok"]


def test_conllu_cycle(tmp_path):
    # word 2 leads into the cycle 3 -> 4 -> 5 -> 3; the error points at the cycle, not at word 2
    p = write(tmp_path, "d.conllu", conllu_sentence("cyc", [0, 3, 4, 5, 3]) + conllu_sentence("ok", [0]))
    err = read_error(p, "conllu")
    assert_names(err, p, 5, "word 3", "cycle", "[3, 4, 5]")
    policy = ErrorPolicy("skip")
    assert [d.id for d in read(p, "conllu", policy=policy)] == ["ok"]
    assert "cycle" in policy.report()


def test_conllu_two_roots_and_bad_id(tmp_path):
    p = write(tmp_path, "d.conllu", conllu_sentence("two", [0, 0]))
    assert_names(read_error(p, "conllu"), p, 4, "second root")
    p = write(tmp_path, "e.conllu", conllu_sentence("gap", [0, 1]).replace("2\tw2", "3\tw2"))
    assert_names(read_error(p, "conllu"), p, 4, "word ID 3")
    p = write(tmp_path, "f.conllu", "# sent_id = x\n1\tonly-one-column-then-nothing\n")
    assert_names(read_error(p, "conllu"), p, 2, "no HEAD")


def test_dp_errors(tmp_path):
    p = write(tmp_path, "a.dp", "The\tDT\t2\ndog\tNN\t0\n\nA\tDT\t5\ncat\tNN\t0\n")
    assert_names(read_error(p, "dp"), p, 4, "word 1 ('A')", "outside")
    p = write(tmp_path, "b.dp", "The\tDT\t2\ndog\tNN\n")
    assert_names(read_error(p, "dp"), p, 2, "2 tab-separated")
    p = write(tmp_path, "c.dp", "The\tDT\tx\n")
    assert_names(read_error(p, "dp"), p, 1, "'x' is not an integer")


# ---- JSON lines ------------------------------------------------------------------------

def jsonl(tmp_path, *objs, name="c.jsonl"):
    return write(tmp_path, name, "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs))


def test_jsonl_unknown_key(tmp_path):
    p = jsonl(tmp_path, {"tokens": ["a"]}, {"tokens": ["b"], "tokenz": ["c"]})
    assert_names(read_error(p, "jsonl"), p, 2, "unknown key 'tokenz'")


@pytest.mark.parametrize("obj, words", [
    ({"words": ["a", "b"], "heads": ["1", -1]}, ["'heads'", "string", "list of integers"]),
    ({"words": ["a", "b"], "heads": [1.0, -1]}, ["'heads'", "number"]),
    ({"words": ["a", "b"], "heads": [True, -1]}, ["'heads'", "boolean"]),
    ({"tree": 5}, ["'tree'", "integer", "a string"]),
    ({"tokens": "a b"}, ["'tokens'", "list of strings"]),
    ({"tokens": ["a"], "id": 3}, ["'id'", "integer", "a string"]),
    ({"tokens": ["a"], "label": 1}, ["'label'", "integer"]),
    ({"lemmas": ["a"], "pos": ["N"], "target": "0"}, ["'target'", "string", "integer"]),
    ({"ptree": {"label": "S", "children": {"0": {"label": "a"}}}}, ["position '0'"]),
    ({"ptree": {"label": "S", "children": [{"label": "a"}]}}, ["'ptree.children'", "list"]),
    ({"words": ["a", "b"], "heads": [1, 0]}, ["word 0", "cycle"]),
    ({"words": ["a", "b"], "heads": [1]}, ["'heads' has 1 entries for 2 words"]),
    ({"tokens": ["a"], "lemmas": ["a", "b"]}, ["'lemmas' has 2 entries"]),
    ({"lemmas": ["a"], "pos": ["N"]}, ["'lemmas' without"]),
    ({"tokens": ["a"], "heads": [-1], "words": ["a"]}, ["ambiguous"]),
    ({"relation": {"Type": "E", "Role": "r", "children": [{"Type": "P"}]}}, ["'Role'", "relation.children[0]"]),
    ({"relation": {"Type": "E", "Role": "r", "kids": []}}, ["unknown key 'kids'"]),
    ({"hdag": {"attrs": [["a"], ["b"]], "edges": [[0, 1], [1, 0]]}}, ["cycle"]),
    ({"hdag": {"attrs": [["a"]], "parent": [0]}}, ["parent 0"]),
    ({"hdag": {"attrs": [], "parent": []}}, ["empty HDAG"]),
    ({"id": "only-id"}, ["no representation"]),
    ("[1, 2]", ["expected a JSON object"]),
    ('{"tokens": ["a"]', ["invalid JSON"]),
])
def test_jsonl_wrong_types(tmp_path, obj, words):
    p = jsonl(tmp_path, {"text": "fine"}, obj)
    assert_names(read_error(p, "jsonl"), p, 2, *words)


def test_jsonl_duplicate_id_and_skip(tmp_path):
    p = jsonl(tmp_path, {"id": "a", "tokens": ["x"]}, {"id": "a", "tokens": ["y"]}, {"id": "b", "tokenz": []},
              {"id": "c", "tokens": ["z"]})
    assert_names(read_error(p, "jsonl"), p, 2, "duplicate id 'a'")
    policy = ErrorPolicy("skip")
    docs = list(read(p, "jsonl", policy=policy))
    assert [d.id for d in docs] == ["a", "c"]
    assert [e.line for e in policy.skipped] == [2, 3]
    report = policy.report()
    assert report.startswith("2 record(s) skipped") and "duplicate id" in report and "tokenz" in report


# ---- encoding, empty input, limits -----------------------------------------------------

def test_invalid_utf8(tmp_path):
    p = write(tmp_path, "u.txt", b"fine line\nbad \xff byte\nalso fine\n")
    err = read_error(p, "text")
    assert_names(err, p, 2, "0xFF", "byte offset 14", "encoding='latin-1'")
    policy = ErrorPolicy("skip")
    assert [d.text for d in read(p, "text", policy=policy)] == ["fine line", "also fine"]
    assert [e.line for e in policy.skipped] == [2]
    # the same bytes are fine once the encoding is named
    assert [d.text for d in read(p, "text", encoding="latin-1")][1] == "bad \u00ff byte"


def test_invalid_utf8_in_multiline_records(tmp_path):
    p = write(tmp_path, "m.conllu", (conllu_sentence("a", [0]) + conllu_sentence("b", [2, 0]) +
                                     conllu_sentence("c", [0])).encode().replace(b"w2\tw2", b"w\xe92\tw2"))
    assert_names(read_error(p, "conllu"), p, 8, "0xE9")
    assert [d.id for d in read(p, "conllu", on_error="skip")] == ["a", "c"]
    p = write(tmp_path, "m.mrg", b"( (S (NN a)))\n( (S\n (NN \xe9)))\n( (S (NN c)))\n")
    assert_names(read_error(p, "ptb"), p, 3, "0xE9")
    assert [d.id for d in read(p, "ptb", on_error="skip")] == ["m:1", "m:3"]


def test_trec_train_is_not_utf8():
    path = require_data("trec_qc") / "train.txt"
    err = read_error(path, "trec", encoding="utf-8")
    assert_names(err, path, 66, "0xF0", "byte offset 3695")
    policy = ErrorPolicy("skip")
    assert sum(1 for _ in read(path, "trec", encoding="utf-8", policy=policy)) == 5451
    assert len(policy.skipped) == 1


@pytest.mark.parametrize("fmt", sorted(set(FORMATS) - {"files"}))  # files reads a folder (test_data_in.py)
@pytest.mark.parametrize("content", [b"", b"\n  \n\n"])
def test_empty_file(tmp_path, fmt, content):
    p = write(tmp_path, "empty.txt", content)
    err = read_error(p, fmt)
    assert err.path == str(p) and "empty file" in str(err) and err.fix
    policy = ErrorPolicy("skip")
    assert list(read(p, fmt, policy=policy)) == [] and "empty file" in policy.report()


def test_empty_gzip_file(tmp_path):
    p = tmp_path / "e.klp.gz"
    with gzip.open(p, "wb"):
        pass
    assert "empty file" in str(read_error(p, "kelp"))


@pytest.mark.parametrize("fmt, content, line", [
    ("text", "a b\n\nc\n", 2),
    ("tsv", "pos\ta b\nneg\t \n", 2),
    ("trec", "DESC:manner How ?\nNUM:count \n", 2),
    ("jsonl", '{"tokens": ["a"]}\n{"tokens": []}\n', 2),
    ("jsonl", '{"words": [], "heads": []}\n', 1),
    ("jsonl", '{"tree": ""}\n', 1),
    ("svmlighttk", f"1 |BT| {GOOD_TREE} |ET|\n1 |BT|  |ET|\n", 2),
    ("kelp", "NUM |BT:grct|  |ET|\n", 1),
    ("conllu", "# sent_id = a\n1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n", 1),
])
def test_empty_sentence(tmp_path, fmt, content, line):
    p = write(tmp_path, f"e.{fmt}", content)
    assert_names(read_error(p, fmt), p, line, "empty")


def test_blank_lines_at_end_are_not_records(tmp_path):
    p = write(tmp_path, "t.txt", "a\nb\n\n\n")
    assert [d.text for d in read(p, "text")] == ["a", "b"]


LONG = 5000


@pytest.mark.parametrize("fmt, content", [
    ("text", " ".join(["w"] * LONG) + "\n"),
    ("tsv", "pos\t" + " ".join(["w"] * LONG) + "\n"),
    ("trec", "DESC:def " + " ".join(["w"] * LONG) + "\n"),
    ("jsonl", json.dumps({"tokens": ["w"] * LONG}) + "\n"),
    ("jsonl", json.dumps({"words": ["w"] * LONG, "heads": [-1] + [0] * (LONG - 1)}) + "\n"),
    ("jsonl", json.dumps({"tree": "(S " + " ".join(["(N w)"] * LONG) + ")"}) + "\n"),
    ("svmlighttk", "1 |BT| (S " + " ".join(["(N w)"] * LONG) + ") |ET|\n"),
    ("kelp", "A |BT:t| (S" + "(N w)" * LONG + ") |ET|\n"),
    ("ptb", "( (S\n" + "\n".join(["  (N w)"] * LONG) + "))\n"),
    ("conllu", "# sent_id = long\n" + "\n".join(conllu_row(i, "w", 0 if i == 1 else 1) for i in range(1, LONG + 1)) + "\n"),
    ("dp", "\n".join(f"w\tN\t{0 if i == 1 else 1}" for i in range(1, LONG + 1)) + "\n"),
])
def test_too_many_tokens(tmp_path, fmt, content):
    p = write(tmp_path, f"long.{fmt}", content)
    err = read_error(p, fmt)
    assert_names(err, p, 1, f"{LONG} tokens", "max_tokens=1000", "split it")
    assert len(list(read(p, fmt, max_tokens=LONG))) == 1
    policy = ErrorPolicy("skip")
    assert list(read(p, fmt, policy=policy)) == [] and len(policy.skipped) == 1


def test_missing_path_and_empty_directory(tmp_path):
    err = read_error(tmp_path / "nope.conllu", "conllu")
    assert "no such file" in str(err) and err.fix
    err = read_error(tmp_path, "dp")
    assert "no .dp" in str(err) and err.fix
    err = read_error(tmp_path, "conllu")
    assert "is a directory" in str(err) and err.path == str(tmp_path) and err.fix


@pytest.mark.parametrize("fmt, content, bad_lines, good", [
    ("text", "ok one\n\nok two\n", [2], 2),
    ("tsv", "pos\tgood\nno tab here\nneg\tfine\n", [2], 2),
    ("trec", "DESC:manner How ?\nbad label line\nNUM:count How many ?\n", [2], 2),
    ("svmlighttk", f"1 |BT| {GOOD_TREE} |ET|\n1 |BT| (S (NN a) |ET|\n-1 |BT| {GOOD_TREE} |ET|\n", [2], 2),
    ("dp", "a\tN\t0\n\nb\tN\t2\nc\tN\t1\n\nd\tN\t0\n", [3], 2),
])
def test_skip_mode_reads_the_good_records(tmp_path, fmt, content, bad_lines, good):
    p = write(tmp_path, f"mix.{fmt}", content)
    policy = ErrorPolicy("skip")
    docs = list(read(p, fmt, policy=policy))
    assert len(docs) == good
    assert [e.line for e in policy.skipped] == bad_lines
    assert all(e.path == str(p) and e.fix for e in policy.skipped)
    assert policy.report().count(str(p)) == len(bad_lines)
    with pytest.raises(CorpusFormatError):
        list(read(p, fmt))


@pytest.mark.parametrize("fmt, content", [("tsv", "pos\ta b\n\nneg\tc d\n"), ("text", "a b\n  \nc\n"),
                                          ("trec", "DESC:manner How ?\n\nNUM:count How many ?\n")])
def test_a_blank_line_inside_a_line_file_is_an_empty_sentence(tmp_path, fmt, content):
    p = write(tmp_path, f"b.{fmt}", content)
    err = read_error(p, fmt)
    assert_names(err, p, 2, "empty sentence")
    assert "tab" not in err.reason


def test_messages_end_their_sentences_before_the_fix(tmp_path):
    err = read_error(write(tmp_path, "e.txt", "\n\n"), "text")
    assert "empty file: it holds no records. Fix: " in str(err) and str(err).endswith(".")
    # a message that already ends a sentence is not given a second full stop
    assert str(CorpusFormatError("done.", fix="nothing.")) == "done. Fix: nothing."
