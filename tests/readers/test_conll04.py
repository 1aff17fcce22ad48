"""CoNLL04 reader (pipeline/readers/conll04.py) on the real files, and its errors."""
import json

import pytest
from conftest import require_data

from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.readers.conll04 import candidate_pairs, load_split, read_corp, read_split_json
from gramtile.pipeline.representations.errors import CorpusFormatError


@pytest.fixture(scope="module")
def corp():
    return read_corp(require_data("conll04") / "conll04.corp")


@pytest.fixture(scope="module")
def splits(corp):
    return {k: load_split(require_data("conll04"), k, corp) for k in ("train", "dev", "test")}


def test_corp_counts(corp):
    # README: 5,516 sentences, 14,177 entity elements
    assert len(corp) == 5516
    assert sum(len(s.entities) for s in corp.values()) == 14177
    s = corp[3]
    assert s.words[:4] == ("The", "long", "Palestinian", "uprising") and s.pos[:4] == ("DT", "JJ", "JJ", "NN")
    assert s.words[10] == "," and s.pos[10] == ","  # COMMA mapped
    assert corp[2].words[:2] == ("Associated", "Press") and corp[2].entities[0] == (0, 2, "Org")


def test_split_counts_from_readme(splits):
    want = {"train": (922, 26525, 3377, 1283), "dev": (231, 6993, 893, 343), "test": (288, 8336, 1079, 422)}
    for k, (ns, nt, ne, nr) in want.items():
        ss = splits[k]
        assert (len(ss), sum(len(s.words) for s in ss), sum(len(s.entities) for s in ss),
                sum(len(s.relations) for s in ss)) == (ns, nt, ne, nr)
        assert all(len(s.pos) == len(s.words) for s in ss)


def test_candidate_pair_counts_from_readme(splits):
    want = {"Work_For": {"train": (620, 256), "dev": (178, 69), "test": (182, 76)},
            "OrgBased_In": {"train": (657, 271), "dev": (188, 76), "test": (266, 105)}}
    for rel, per in want.items():
        for k, (n, pos) in per.items():
            c = candidate_pairs(splits[k], rel)
            assert (len(c), sum(x.label for x in c)) == (n, pos), (rel, k)
    c = candidate_pairs(splits["test"], "Work_For")
    assert all(x.head[2] == "Peop" and x.tail[2] == "Org" for x in c)


def test_formats_reader_builds_relation_examples():
    docs = list(read(require_data("conll04") / "json" / "test.CoNLL04.json", "conll04", relation="Work_For"))
    assert len(docs) == 182 and sum(d.label == "1" for d in docs) == 76
    roles = [n.role for n in docs[0].structures["relation"].nodes()]
    assert roles.count("member") == 1 and roles.count("affiliation") == 1
    with pytest.raises(CorpusFormatError, match="unknown CoNLL04 relation"):
        list(read(require_data("conll04") / "json" / "test.CoNLL04.json", "conll04", relation="Works_For"))


GOOD = "0\tPeop\t0\tO\tNNP/NNP\tJohn/Smith\tO\tO\tO\n0\tO\t1\tO\tVBD\tjoined\tO\tO\tO\n0\tOrg\t2\tO\tNNP\tIBM\tO\tO\tO\n\n0\t2\tWork_For\n\n"


@pytest.mark.parametrize("bad,line,what", [
    (GOOD.replace("\tVBD\tjoined\tO\tO\tO", "\tVBD\tjoined\tO\tO"), 2, "8 column"),
    (GOOD.replace("Org\t2", "Company\t2"), 3, "entity label 'Company'"),
    (GOOD.replace("0\t2\tWork_For", "0\t7\tWork_For"), 5, "elements 0 and 7"),
    (GOOD.replace("0\t2\tWork_For", "0\t2\tWorks_For"), 5, "relation type 'Works_For'"),
    (GOOD.replace("0\tO\t1", "0\tO\t5"), 2, "element index 5"),
    (GOOD.replace("0\tOrg\t2", "x\tOrg\t2"), 3, "not an integer"),
])
def test_corp_errors_name_file_and_line(tmp_path, bad, line, what):
    p = tmp_path / "c.corp"
    p.write_text(GOOD)
    s = read_corp(p)[0]
    assert s.words == ("John", "Smith", "joined", "IBM") and s.relations == ((0, 2, 3, 4, "Work_For"),)
    p.write_text(bad)
    with pytest.raises(CorpusFormatError, match=what) as e:
        read_corp(p)
    assert e.value.line == line and e.value.path == str(p)


def test_split_json_errors(tmp_path):
    p = tmp_path / "x.json"
    item = {"tokens": ["a", "b"], "entities": [[0, 1, "Peop"], [1, 2, "Org"]], "relations": [[0, 1, 1, 2, "Work_For"]]}
    p.write_text(json.dumps([item]))
    assert read_split_json(p)[0]["tokens"] == ["a", "b"]
    p.write_text(json.dumps([item, {**item, "entities": [[0, 3, "Peop"]]}]))
    with pytest.raises(CorpusFormatError, match="item 1: entity") as e:
        read_split_json(p)
    assert e.value.line == 1
    p.write_text(json.dumps([{**item, "relations": [[0, 1, 0, 2, "Work_For"]]}]))
    with pytest.raises(CorpusFormatError, match="item 0: relation"):
        read_split_json(p)
    p.write_text("[{")
    with pytest.raises(CorpusFormatError, match="invalid JSON"):
        read_split_json(p)
