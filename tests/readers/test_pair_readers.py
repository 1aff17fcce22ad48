"""Readers of examples made of several texts (fields), with targets and group ids, on synthetic
files: the table options ``fields`` / ``target_col`` / ``group_col`` (CSV, TSV, JSON lines, tables
in memory) and the formats ``trec_qa_wang``, ``sick2014`` and ``msrp``; every bad record is a
CorpusFormatError naming the file, the line and the column, with the fix."""
import json

import pytest

from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.readers.base import ErrorPolicy
from gramtile.pipeline.readers.table import field_columns, table_documents
from gramtile.pipeline.representations.errors import CorpusFormatError

SICK_HEAD = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
MSRP_HEAD = "\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\r\n"
QA_HEAD = "qtext,label,atext\n"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8", newline="")
    return path


def error(path, fmt, **kw) -> CorpusFormatError:
    with pytest.raises(CorpusFormatError) as info:
        list(read(path, fmt, **kw))
    return info.value


def assert_names(err, path, line, *words):
    text = str(err)
    assert err.path == str(path) and err.line == line, (err.path, err.line, text)
    assert err.fix and f"Fix: {err.fix}" in text
    for w in words:
        assert w in text, (w, text)


# ---- the general table options ------------------------------------------------------------------

def test_csv_with_fields_target_and_group(tmp_path):
    p = write(tmp_path, "pairs.csv", 'q,a,score,qid,y\n"Who, then?",He did .,3.5,q1,1\nWhy ?,"Because ""so"" .",1,q1,0\n'
                                     'When ?,Now .,4.25,q2,1\n')
    docs = list(read(p, "csv", fields="question=q,answer=a", target_col="score", group_col="qid", label_col="y"))
    assert [d.fields for d in docs] == [{"question": "Who, then?", "answer": "He did ."},
                                        {"question": "Why ?", "answer": 'Because "so" .'},
                                        {"question": "When ?", "answer": "Now ."}]
    assert [d.target for d in docs] == [3.5, 1.0, 4.25]
    assert [d.group for d in docs] == ["q1", "q1", "q2"]
    assert [d.label for d in docs] == ["1", "0", "1"]
    assert all(d.text is None and not d.structures for d in docs)
    assert [d.source for d in docs] == [f"{p}:2", f"{p}:3", f"{p}:4"]
    # fields named as their columns, and columns by position (no header)
    docs = list(read(p, "csv", fields="q,a"))
    assert list(docs[0].fields) == ["q", "a"] and docs[1].fields["a"] == 'Because "so" .'
    p2 = write(tmp_path, "pos.tsv", "1\tthe cat sat\ta dog ran\t2.0\n0\tx y\tz w\t-1e-3\n")
    docs = list(read(p2, "tsv", fields="a=2,b=3", target_col=4, label_col=1))
    assert [d.fields for d in docs] == [{"a": "the cat sat", "b": "a dog ran"}, {"a": "x y", "b": "z w"}]
    assert [d.target for d in docs] == [2.0, -0.001] and [d.label for d in docs] == ["1", "0"]


def test_single_text_tables_are_read_as_before(tmp_path):
    p = write(tmp_path, "one.csv", "text,label,score\nthe cat sat,pos,2.5\n")
    (d,) = read(p, "csv", header=True)
    assert (d.text, d.label, d.fields, d.target, d.group) == ("the cat sat", "pos", None, None, None)
    (d,) = read(p, "csv", target_col="score")
    assert (d.text, d.fields, d.target) == ("the cat sat", None, 2.5)


def test_jsonl_with_fields(tmp_path):
    rows = [{"q": "Who ?", "a": "Him .", "s": 2, "g": 7, "label": "yes"}, {"q": "Why ?", "a": "So .", "s": 0.5, "g": 7}]
    p = write(tmp_path, "p.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    docs = list(read(p, "jsonl", fields={"question": "q", "answer": "a"}, target_col="s", group_col="g"))
    assert [d.fields for d in docs] == [{"question": "Who ?", "answer": "Him ."}, {"question": "Why ?", "answer": "So ."}]
    assert [d.target for d in docs] == [2.0, 0.5] and [d.group for d in docs] == ["7", "7"]
    assert [d.label for d in docs] == ["yes", None]
    e = error(p, "jsonl", fields="question=q,answer=zz")
    assert_names(e, p, 1, "'zz'")


def test_tables_in_memory_with_fields():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"q": ["Who ?", "Why ?"], "a": ["Him .", "So ."], "s": [1.5, 2.0], "g": ["x", "y"]})
    docs = table_documents(df, fields={"question": "q", "answer": "a"}, target="s", group="g")
    assert [d.fields for d in docs] == [{"question": "Who ?", "answer": "Him ."}, {"question": "Why ?", "answer": "So ."}]
    assert [d.target for d in docs] == [1.5, 2.0] and [d.group for d in docs] == ["x", "y"]
    df.loc[1, "s"] = float("nan")
    with pytest.raises(CorpusFormatError, match=r"row 1, column 's': no target"):
        table_documents(df, fields=["q", "a"], target="s")
    with pytest.raises(CorpusFormatError, match=r"no column 'nope' \(fields=\)"):
        table_documents(df, fields={"question": "nope", "answer": "a"})


@pytest.mark.parametrize("value, words", [
    ("a=1", "one field"),
    ("a=1,a=2", "repeat"),
    ("a.b=1,c=2", "not a field name"),
    ("a=1,b=1", "same column"),
    ("a=1,,b=2", "empty item"),
    ("1a=1,b=2", "not a field name"),
])
def test_bad_fields_options(value, words):
    with pytest.raises(CorpusFormatError, match=words):
        field_columns(value)


def test_field_columns_forms():
    assert field_columns("question=qtext,answer=3") == {"question": "qtext", "answer": 3}
    assert field_columns(["x", "y"]) == {"x": "x", "y": "y"}
    assert field_columns({"a": "#1 String", "b": "#2 String"}) == {"a": "#1 String", "b": "#2 String"}
    with pytest.raises(CorpusFormatError, match="given the column 2"):
        field_columns({"a": "x", "b": 2}, positions=False)


def test_bad_pair_records_name_file_line_and_column(tmp_path):
    head = "q,a,score,qid\n"
    cases = [
        ('Who ?,,2,q1\n', 2, ["column 2 ('a')", "empty text (field 'answer')"]),
        ('Who ?,Him .,high,q1\n', 2, ["column 3 ('score')", "'high' is not a finite number"]),
        ('Who ?,Him .,inf,q1\n', 2, ["column 3 ('score')", "not a finite number"]),
        ('Who ?,Him .,,q1\n', 2, ["column 3 ('score')", "no target"]),
        ('Who ?,Him .,1,\n', 2, ["column 4 ('qid')", "no group"]),
        ('Who ?,Him .,1\n', 2, ["3 columns where the header has 4"]),
    ]
    for i, (row, line, words) in enumerate(cases):
        p = write(tmp_path, f"bad{i}.csv", head + "Why ?,So .,1,q0\n" + row)
        e = error(p, "csv", fields="question=q,answer=a", target_col="score", group_col="qid")
        assert_names(e, p, line + 1, *words)
    p = write(tmp_path, "ok.csv", head + "Why ?,So .,1,q0\n")
    assert_names(error(p, "csv", fields="question=q,answer=nope"), p, 1, "no column 'nope' (--fields)")
    assert_names(error(p, "csv", fields="question=q,answer=a", target_col="nope"), p, 1, "(--target-col)")
    with pytest.raises(CorpusFormatError, match="both a text column"):
        list(read(p, "csv", fields="question=q,answer=a", text_col="q"))
    # skip mode: the bad record is listed, the good ones read
    p = write(tmp_path, "mixed.csv", head + "Why ?,So .,1,q0\nWho ?,Him .,x,q1\nWhen ?,Now .,2,q2\n")
    policy = ErrorPolicy("skip")
    docs = list(read(p, "csv", policy=policy, fields="question=q,answer=a", target_col="score"))
    assert [d.target for d in docs] == [1.0, 2.0]
    assert len(policy.skipped) == 1 and policy.skipped[0].line == 3


# ---- the formats of pair data sets ----------------------------------------------------------------

def test_trec_qa_wang_good_and_bad(tmp_path):
    q1, q2 = "Who wrote `` Emma '' ?", "When did it end ?"
    p = write(tmp_path, "train.csv", QA_HEAD + f'"{q1}",1,"Jane Austen wrote it ."\n"{q1}",0,"It rained , then ."\n'
                                               f'"{q2}",0,"-LRB- no -RRB-"\n')
    docs = list(read(p, "trec_qa_wang"))
    assert [d.fields["question"] for d in docs] == [q1, q1, q2]
    assert [d.fields["answer"] for d in docs] == ["Jane Austen wrote it .", "It rained , then .", "-LRB- no -RRB-"]
    assert [d.label for d in docs] == ["1", "0", "0"] and [d.group for d in docs] == [q1, q1, q2]
    assert [d.id for d in docs] == ["train:2", "train:3", "train:4"] and all(d.target is None for d in docs)
    bad = write(tmp_path, "bad.csv", QA_HEAD + '"Who ?",1,"Her ."\n"Who ?",yes,"Him ."\n')
    assert_names(error(bad, "trec_qa_wang"), bad, 3, "column 'label'", "'yes' is not one of ['0', '1']")
    wrong = write(tmp_path, "wrong.csv", "question,label,answer\nWho ?,1,Her .\n")
    assert_names(error(wrong, "trec_qa_wang"), wrong, 1, "no column 'qtext'", "qtext,label,atext")
    empty = write(tmp_path, "empty.csv", QA_HEAD + '"Who ?",1,""\n')
    assert_names(error(empty, "trec_qa_wang"), empty, 2, "column 3 ('atext')", "empty text")


def test_sick2014_good_and_bad(tmp_path):
    p = write(tmp_path, "SICK.txt", SICK_HEAD + "1\tA dog runs\tA dog is running\t4.7\tENTAILMENT\n"
                                                "7\tA man sings\tNobody sings\t2.1\tCONTRADICTION\n")
    docs = list(read(p, "sick2014"))
    assert [d.fields for d in docs] == [{"a": "A dog runs", "b": "A dog is running"},
                                        {"a": "A man sings", "b": "Nobody sings"}]
    assert [d.target for d in docs] == [4.7, 2.1] and [d.label for d in docs] == ["ENTAILMENT", "CONTRADICTION"]
    assert [d.id for d in docs] == ["1", "7"] and all(d.group is None for d in docs)
    cases = [("1\tA\tB\t4.7\tMAYBE\n", ["column 'entailment_judgment'", "'MAYBE'"]),
             ("1\tA\tB\t7.5\tNEUTRAL\n", ["column 'relatedness_score'", "7.5 is outside [1, 5]"]),
             ("1\tA\tB\tfour\tNEUTRAL\n", ["column 4 ('relatedness_score')", "not a finite number"]),
             ("1\tA\tB\t4\n", ["4 columns where the header has 5"]),
             ("1\tA\tB\t4\tNEUTRAL\textra\n", ["6 columns where the header has 5", "a tab inside a text"])]
    for i, (row, words) in enumerate(cases):
        bad = write(tmp_path, f"bad{i}.txt", SICK_HEAD + "2\tX y\tY z\t3\tNEUTRAL\n" + row)
        assert_names(error(bad, "sick2014"), bad, 3, *words)
    dup = write(tmp_path, "dup.txt", SICK_HEAD + "2\tX y\tY z\t3\tNEUTRAL\n2\tX\tY\t3\tNEUTRAL\n")
    assert_names(error(dup, "sick2014"), dup, 3, "duplicate id '2'")


def test_msrp_good_and_bad(tmp_path):
    p = write(tmp_path, "msr-para-train.tsv", MSRP_HEAD + '1\t11\t12\tHe said "no".\tHe refused.\r\n'
                                                          "0\t13\t14\tIt rained.\tIt was sunny.\r\n")
    docs = list(read(p, "msrp"))
    assert [d.fields for d in docs] == [{"a": 'He said "no".', "b": "He refused."},
                                        {"a": "It rained.", "b": "It was sunny."}]
    assert [d.label for d in docs] == ["1", "0"] and [d.id for d in docs] == ["msr-para-train:2", "msr-para-train:3"]
    bad = write(tmp_path, "bad.tsv", MSRP_HEAD + "1\t11\t12\tA b.\tC d.\r\n2\t13\t14\tE f.\tG h.\r\n")
    assert_names(error(bad, "msrp"), bad, 3, "column 'Quality'", "'2' is not one of ['0', '1']")
    wrong = write(tmp_path, "wrong.tsv", "label\ts1\ts2\n1\ta\tb\n")
    assert_names(error(wrong, "msrp"), wrong, 1, "no column", "Quality<TAB>#1 ID")


@pytest.mark.parametrize("fmt", ["trec_qa_wang", "sick2014", "msrp"])
def test_pair_formats_take_no_column_options(tmp_path, fmt):
    p = write(tmp_path, "x.txt", "a\n")
    with pytest.raises(CorpusFormatError, match="has no option 'fields'"):
        read(p, fmt, fields="a=1,b=2")
