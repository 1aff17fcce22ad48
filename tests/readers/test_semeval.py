"""SemEval-2010 Task 8 reader and official score (pipeline/readers/semeval.py)."""
from collections import Counter

import pytest
from conftest import require_data

from gramtile.pipeline.parsing.semeval import records_to_documents
from gramtile.pipeline.readers.semeval import LABELS, RELATIONS, official_f1, read_semeval, strip_tags
from gramtile.pipeline.representations.errors import CorpusFormatError


@pytest.fixture(scope="module")
def records():
    return list(read_semeval(require_data("semeval2010_task8_train") / "TRAIN_FILE.TXT"))


def test_counts_from_readme(records):
    assert len(records) == 8000
    assert [r.id for r in records[:3]] == ["1", "2", "3"] and records[-1].id == "8000"
    labels = Counter(r.label for r in records)
    assert len(labels) == 19 and set(labels) == set(LABELS)
    undirected = Counter(r.label.split("(")[0] for r in records)
    assert undirected == {"Other": 1410, "Cause-Effect": 1003, "Component-Whole": 941, "Entity-Destination": 845,
                          "Product-Producer": 717, "Entity-Origin": 716, "Member-Collection": 690,
                          "Message-Topic": 634, "Content-Container": 540, "Instrument-Agency": 504}
    assert labels["Entity-Destination(e2,e1)"] == 1


def test_first_record_spans(records):
    r = records[0]
    assert r.label == "Component-Whole(e2,e1)" and r.line == 1
    assert r.text[r.e1[0]:r.e1[1]] == "configuration" and r.text[r.e2[0]:r.e2[1]] == "elements"
    assert "<e" not in r.text and not r.text.endswith("\r")
    assert records[1].line == 5  # blocks of four CRLF lines


def test_strip_tags():
    assert strip_tags("a <e1>big dog</e1> bit <e2>me</e2>.") == ("a big dog bit me.", (2, 9), (14, 16))


BLOCK = '1\t"The <e1>cat</e1> sat on the <e2>mat</e2>."\r\nEntity-Destination(e1,e2)\r\nComment:\r\n\r\n'


@pytest.mark.parametrize("bad,line,what", [
    (BLOCK.replace("<e2>mat</e2>", "mat"), 1, "<e2> is not marked"),
    (BLOCK.replace("(e1,e2)", "(e1,e3)"), 2, "label 'Entity-Destination"),
    (BLOCK.replace('1\t"', '1 "'), 1, "is not <id> TAB"),
    (BLOCK.replace("Comment:", "Note:"), 3, "not a comment"),
    (BLOCK.replace("</e1>", "</e2>", 1), 1, "closing </e2>"),
    (BLOCK.replace("Comment:\r\n", ""), 1, "block of 2"),
])
def test_bad_records_name_file_and_line(tmp_path, bad, line, what):
    p = tmp_path / "t.txt"
    p.write_bytes((BLOCK + BLOCK.replace("1\t", "2\t")).encode())
    assert [r.id for r in read_semeval(p)] == ["1", "2"]
    p.write_bytes((BLOCK.replace("1\t", "0\t") + bad).encode())
    with pytest.raises(CorpusFormatError, match=what) as e:
        list(read_semeval(p))
    assert e.value.line == line + 4 and e.value.path == str(p)
    assert [r.id for r in read_semeval(p, on_error="skip")] == ["0"]


def test_structures_of_parsed_records(records):
    d = next(records_to_documents(records[:1], "TRAIN_FILE.TXT"))
    assert d.id == "semeval:1" and d.label == "Component-Whole(e2,e1)"
    s = d.structures
    assert set(s) == {"relation", "path", "pet", "seq"}
    assert s["path"].words[0] == "configuration" and s["path"].words[-1] == "elements"
    assert s["seq"].lemmas[0] == "configuration" and s["seq"].lemmas[-1] == "element"
    roles = {n.role: n.text for n in s["relation"].nodes() if n.role != "none"}
    assert roles == {"arg1": "configuration", "arg2": "element"}
    assert "configuration" in str(s["pet"]) and "element" in str(s["pet"])


def test_official_score_hand_cases():
    CE12, CE21, CW12, OT = "Cause-Effect(e1,e2)", "Cause-Effect(e2,e1)", "Component-Whole(e1,e2)", "Other"
    # perfect on two relations: the other seven have no gold and no prediction -> F1 0 each
    s = official_f1([CE12, CW12, OT], [CE12, CW12, OT])
    assert s["per_relation"]["Cause-Effect"] == (1.0, 1.0, 1.0) and s["macro_f1"] == pytest.approx(2 / 9)
    # a wrong direction counts against the relation in both precision and recall
    s = official_f1([CE12, CE12], [CE12, CE21])
    assert s["per_relation"]["Cause-Effect"] == (0.5, 0.5, 0.5)
    # Other is excluded, but predicting Other for a relation costs recall, and a relation for Other precision
    s = official_f1([CE12, CE12, OT, OT], [CE12, OT, CE12, OT])
    assert s["per_relation"]["Cause-Effect"] == (0.5, 0.5, 0.5) and s["macro_f1"] == pytest.approx(0.5 / 9)
    s = official_f1([CE12, CW12], [CW12, CE12])
    assert s["macro_f1"] == 0.0
    with pytest.raises(CorpusFormatError, match="not a SemEval"):
        official_f1([CE12], ["Cause-Effect"])
    with pytest.raises(CorpusFormatError, match="1 gold labels but 2"):
        official_f1([CE12], [CE12, CE12])


def test_official_score_all_nine_relations():
    gold = [f"{r}(e1,e2)" for r in RELATIONS] * 2
    pred = list(gold)
    pred[0] = "Other"  # Cause-Effect: P 1/1, R 1/2 -> F1 2/3
    s = official_f1(gold, pred)
    assert s["macro_f1"] == pytest.approx((8 + 2 / 3) / 9)
    assert s["macro_recall"] == pytest.approx((8 + 0.5) / 9) and s["macro_precision"] == 1.0


def test_formats_reader_parses_records(tmp_path):
    from gramtile.pipeline.parsing.formats import read

    p = tmp_path / "t.txt"
    p.write_bytes((BLOCK + BLOCK.replace("1\t", "2\t").replace("Entity-Destination(e1,e2)", "Other")).encode())
    docs = list(read(p, "semeval"))
    assert [(d.id, d.label) for d in docs] == [("semeval:1", "Entity-Destination(e1,e2)"), ("semeval:2", "Other")]
    assert docs[0].structures["path"].lemmas == ("cat", "sit", "on", "mat")
    assert docs[0].source == f"{p}:1"
