"""The senseval reader on the real hard / line / serve files (counts from the data README) and
on malformed records (CorpusFormatError naming file, line and fix)."""
from collections import Counter

import numpy as np
import pytest
from conftest import require_data

from gramtile.pipeline.parsing.formats import FORMATS, read
from gramtile.pipeline.readers.base import ErrorPolicy
from gramtile.pipeline.readers.senseval import read_senseval
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import TokenSeq, WSDInstance

# data README: instances, senses (count), tokens/instance mean (min-max)
README = {
    "hard": (4333, {"HARD1": 3455, "HARD2": 502, "HARD3": 376}, 26.2, 5, 126),
    "line": (4146, {"product": 2217, "phone": 429, "text": 404, "division": 374, "cord": 373, "formation": 349},
             52.5, 6, 192),
    "serve": (4378, {"SERVE10": 1814, "SERVE12": 1272, "SERVE2": 853, "SERVE6": 439}, 45.6, 7, 180),
}
# target forms seen in the files include "harder", "lined", "served", "serving"
STEM = {"hard": "hard", "line": "line", "serve": "serv"}


@pytest.fixture(scope="module")
def corpora():
    root = require_data("senseval_hard_line_serve")
    return {w: list(read(root / f"{w}.pos", "senseval")) for w in README}


@pytest.mark.parametrize("word", list(README))
def test_counts_match_the_readme(corpora, word):
    n, senses, mean, lo, hi = README[word]
    docs = corpora[word]
    assert len(docs) == n
    assert Counter(d.label for d in docs) == senses
    sizes = np.array([len(d.structures["seq"]) for d in docs])
    assert round(float(sizes.mean()), 1) == mean and sizes.min() == lo and sizes.max() == hi
    assert len({d.id for d in docs}) == n
    assert max(Counter(d.label for d in docs).values()) / n == pytest.approx(
        {"hard": 0.797, "line": 0.535, "serve": 0.414}[word], abs=5e-4)


@pytest.mark.parametrize("word", list(README))
def test_target_sentence_and_context(corpora, word):
    for d in corpora[word]:
        w, s = d.structures["wsd"], d.structures["seq"]
        assert isinstance(w, WSDInstance) and isinstance(s, TokenSeq)
        assert w.words[w.target].startswith(STEM[word]), (d.id, w.words[w.target])
        # the target sentence is a contiguous run of the context, with the same tags
        k = len(w)
        starts = [i for i in range(len(s) - k + 1) if s.tokens[i:i + k] == w.words]
        assert starts and any(s.pos[i:i + k] == w.pos for i in starts), d.id
        assert d.text == " ".join(s.tokens)
    # lemmatised with WordNet morphy for the Penn tag
    lem = Counter(d.structures["wsd"].lemmas[d.structures["wsd"].target] for d in corpora[word])
    assert lem.most_common(1)[0][0] == word


def test_multi_sentence_contexts_keep_only_the_target_sentence(corpora):
    docs = corpora["line"]
    shorter = sum(len(d.structures["wsd"]) < len(d.structures["seq"]) for d in docs)
    assert shorter > len(docs) // 2  # most line contexts hold two sentences


def test_first_instance_and_lemma_options():
    path = require_data("senseval_hard_line_serve") / "hard.pos"
    d = next(read_senseval(path))
    assert d.id == "hard-a.sjm-274_1" or d.id.startswith("hard-a.")
    w = d.structures["wsd"]
    assert w.words[w.target] == "hard" and w.pos[w.target] == "JJ"
    i = w.words.index("has")
    assert w.lemmas[i] == "have"
    d2 = next(read_senseval(path, lemmas="words"))
    assert d2.structures["wsd"].lemmas == d2.structures["wsd"].words
    assert "senseval" in FORMATS
    with pytest.raises(CorpusFormatError, match="lemmas='wordnet' or lemmas='words'"):
        next(read_senseval(path, lemmas="stem"))


GOOD = """<corpus lang="en">
<lexelt item="line-n">
<instance id="i1">
<answer instance="i1" senseid="cord"/>
<context>
 <wf pos="DT">the</wf> <head><wf pos="NN">line</wf></head> <wf pos="VBD">snapped</wf> <wf pos=".">.</wf>
 <wf pos="PRP">it</wf> <wf pos="VBD">fell</wf> FRASL <s snum="2"/> <wf pos='"'>"</wf> <wf pos="NN">r&amp;d</wf>
</context>
</instance>
"""
END = "</lexelt>\n</corpus>\n"


def _write(tmp_path, body):
    p = tmp_path / "w.pos"
    p.write_text(GOOD + body + END)
    return p


def test_small_file_structure(tmp_path):
    docs = list(read_senseval(_write(tmp_path, ""), lemmas="words"))
    assert len(docs) == 1
    w, s = docs[0].structures["wsd"], docs[0].structures["seq"]
    assert w.words == ("the", "line", "snapped", ".") and w.target == 1
    assert s.tokens == ("the", "line", "snapped", ".", "it", "fell", '"', "r&d")
    assert docs[0].label == "cord" and docs[0].source.endswith(":3")


@pytest.mark.parametrize("body,line,words", [
    ('<instance id="i2">\n<context>\n <head><wf pos="NN">line</wf></head>\n</context>\n</instance>\n',
     10, ["i2", "no <answer"]),
    ('<instance id="i2">\n<answer instance="i2" senseid="a"/>\n<context>\n <wf pos="NN">x</wf>\n</context>\n'
     '</instance>\n', 10, ["i2", "no complete <head>"]),
    ('<instance id="i2">\n<answer instance="i2" senseid="a"/>\n<context>\n <head><wf pos="NN">a</wf></head> '
     '<head><wf pos="NN">b</wf></head>\n</context>\n</instance>\n', 13, ["second <head>"]),
    ('<instance id="i2">\n<answer instance="i2" senseid="a"/>\n<context>\n <head><wf pos="NN">a</wf></head> '
     '<foo>x</foo>\n</context>\n</instance>\n', 13, ["unexpected text", "<foo>"]),
    ('<instance id="i2">\n<answer instance="i3" senseid="a"/>\n', 11, ["names instance 'i3'"]),
    ('<instance id="i2">\n<answer instance="i2" senseid="a"/>\n<answer instance="i2" senseid="b"/>\n', 12,
     ["second <answer>"]),
    ('<instance id="i2">\n<answer instance="i2" senseid="a"/>\n<context>\n <head><wf pos="NN">a</wf></head>\n'
     '</context>\n<instance id="i3">\n', 10, ["no </instance>"]),
    ('<instance i="i2">\n', 10, ["malformed <instance>"]),
])
def test_bad_records_name_file_line_and_fix(tmp_path, body, line, words):
    p = _write(tmp_path, body)
    with pytest.raises(CorpusFormatError) as e:
        list(read_senseval(p, lemmas="words"))
    assert e.value.path == str(p) and e.value.line == line, (e.value.line, str(e.value))
    assert e.value.fix
    for w in words:
        assert w in str(e.value)


def test_unclosed_instance_at_end_of_file(tmp_path):
    p = tmp_path / "w.pos"
    p.write_text(GOOD + '<instance id="i2">\n<answer instance="i2" senseid="a"/>\n')
    with pytest.raises(CorpusFormatError, match="not closed") as e:
        list(read_senseval(p, lemmas="words"))
    assert e.value.line == 10


def test_skip_mode_keeps_the_good_instances(tmp_path):
    bad = '<instance id="i2">\n<context>\n <head><wf pos="NN">line</wf></head>\n</context>\n</instance>\n'
    good2 = GOOD.split("\n", 2)[2].replace('"i1"', '"i4"')
    p = tmp_path / "w.pos"
    p.write_text(GOOD + bad + good2 + END)
    pol = ErrorPolicy("skip")
    docs = list(read_senseval(p, policy=pol, lemmas="words"))
    assert [d.id for d in docs] == ["i1", "i4"]
    assert len(pol.skipped) == 1 and "i2" in str(pol.skipped[0])
