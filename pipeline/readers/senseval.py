"""NLTK ``senseval`` WSD files (``hard.pos``, ``line.pos``, ``serve.pos``): one Document per
target occurrence.

The files are SENSEVAL-2-style XML, written one element per line::

    <instance id="hard-a.sjm-274">
    <answer instance="hard-a.sjm-274" senseid="HARD1"/>
    <context>
     <wf pos="DT">the</wf> ... <head><wf pos="JJ">hard</wf></head> ... <wf pos=".">.</wf>
     <wf pos="PRP">it</wf> ...
    </context>
    </instance>

Each line of a context is one sentence (the converter's line breaks follow the source's
sentence breaks), so the syntagmatic windows stop at these line ends. Inside a context line
the reader accepts ``<wf pos="TAG">word</wf>`` tokens (``pos`` quoted with ``"`` or ``'``),
``<head>``/``</head>`` around the target token, ``<compound>``/``</compound>`` wrappers (their
tokens are kept as ordinary tokens), ``<s snum="N"/>`` sentence-number marks and bare text
between elements: the ``FRASL`` placeholder the converter left for a fraction slash ("3-1
FRASL 2-inch"; 349 times in the three files) and a few untagged words (21 in line.pos, 1 in
serve.pos). Marks and bare text carry no tagged token and are dropped. Any other markup (an
unknown element, an unclosed ``<wf>``) is a :class:`CorpusFormatError`.

Lemmas: the files hold lower-cased word forms only. With ``lemmas="wordnet"`` (default) each
word is lemmatised by WordNet's morphy for the part of speech of its Penn tag (nouns NN*,
verbs VB* and MD, adjectives JJ*, adverbs RB*; the first base form WordNet lists, e.g.
"lines" -> "line", "served" -> "serve"); words of other tags or unknown to WordNet keep their
form. ``lemmas="words"`` uses the lower-cased words as lemmas (no WordNet needed).

Each Document has ``id`` = the instance id, ``label`` = the ``senseid``, ``text`` = the
context words joined by spaces and two structures:

- ``"wsd"``: :class:`~gramtile.pipeline.representations.structures.WSDInstance` of the target's sentence
  (lemmas, pos, words, target index inside that sentence): the syntagmatic kernel's input;
- ``"seq"``: :class:`~gramtile.pipeline.representations.structures.TokenSeq` of the whole context (all
  sentences; tokens = words, lemmas, pos): the input of bag-of-words and the domain kernel.
"""
from __future__ import annotations

import html
import re

from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS, check_tokens, lines, make_policy, source
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import Document, TokenSeq, WSDInstance
from gramtile.pipeline.resources.similarity import load_wordnet

FIX = ("write each instance as <instance id=\"...\">, one <answer instance=\"...\" senseid=\"...\"/>, "
       "<context> with <wf pos=\"TAG\">word</wf> tokens and exactly one <head>...</head>, </context>, "
       "</instance> (NLTK senseval format)")

_INSTANCE = re.compile(r'^<instance id="([^"]+)">$')
_ANSWER = re.compile(r'^<answer instance="([^"]+)" senseid="([^"]+)"/>$')
# one token or mark of a context line; the alternatives are tried left to right at each position
_ITEM = re.compile(r"""\s+|<wf pos=(?:"([^"]*)"|'([^']*)')>([^<]*)</wf>|(<head>|</head>|<compound>|</compound>)"""
                   r"""|<s snum="\d+"/>|[^<\s]+""")
_SKIP = ("<corpus", "</corpus>", "<lexelt", "</lexelt>")

#: Penn tag prefix -> WordNet part of speech for lemmatisation.
_WN_POS = (("NN", "n"), ("VB", "v"), ("MD", "v"), ("JJ", "a"), ("RB", "r"))


class _Lemmatizer:
    """WordNet morphy lemmas per (word, Penn tag), cached (a corpus repeats its words)."""

    def __init__(self):

        try:
            self.wn = load_wordnet()
        except FileNotFoundError as e:
            raise CorpusFormatError(f"lemmas='wordnet' needs WordNet: {e}",
                                    fix="install WordNet, or read with lemmas='words'") from None
        self.cache = {}

    def __call__(self, word, tag):
        key = (word, tag)
        got = self.cache.get(key)
        if got is None:
            got = word
            for prefix, p in _WN_POS:
                if tag.startswith(prefix):
                    forms = self.wn._morphy(word.lower(), p)
                    if forms:
                        got = forms[0]
                    break
            self.cache[key] = got
        return got


def read_senseval(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8",
                  lemmas="wordnet"):
    """Read one NLTK senseval ``.pos`` file.

    Parameters
    ----------
    path : str or Path
    policy : ErrorPolicy, optional
    max_tokens : int or None
        Largest number of context tokens per instance.
    encoding : str
    lemmas : {"wordnet", "words"}
        How lemmas are made (module docstring).

    Yields
    ------
    Document
        One per ``<instance>``, with structures ``"wsd"`` (target sentence) and ``"seq"``
        (whole context).

    Raises
    ------
    CorpusFormatError
        Malformed instances (naming file, line and fix), in raise mode.
    """
    policy = make_policy(on_error, policy)
    if lemmas not in ("wordnet", "words"):
        raise CorpusFormatError(f"option lemmas={lemmas!r} is not known", path=path,
                                fix="use lemmas='wordnet' or lemmas='words'")
    lemmatize = _Lemmatizer() if lemmas == "wordnet" else None
    rec = None  # the instance being read: dict, or "bad" while skipping a malformed one

    def fail(message, line):
        nonlocal rec
        rec = "bad"
        policy.handle(CorpusFormatError(message, path=path, line=line, fix=FIX))

    for line, text in lines(path, policy, encoding):
        if text is None:
            if isinstance(rec, dict):
                rec = "bad"
            continue
        t = text.strip()
        if not t or (rec is None and t.startswith(_SKIP)):
            continue
        if t.startswith("<instance"):
            m = _INSTANCE.match(t)
            if isinstance(rec, dict):
                fail(f"instance {rec['id']!r} (line {rec['line']}) has no </instance> before the next "
                     f"<instance>", rec["line"])
            if m is None:
                fail(f"malformed <instance> line {t[:80]!r}", line)
                continue
            rec = {"id": m.group(1), "line": line, "label": None, "sentences": None, "head": None,
                   "in_context": False, "closed": False}
            continue
        if rec == "bad":
            if t == "</instance>":
                rec = None
            continue
        if rec is None:
            fail(f"unexpected {t[:80]!r} outside an <instance>", line)
            rec = None
            continue
        if rec["in_context"]:
            _context_line(rec, t, line, fail)
            continue
        if t.startswith("<answer"):
            m = _ANSWER.match(t)
            if m is None:
                fail(f"malformed <answer> line {t[:80]!r}", line)
            elif m.group(1) != rec["id"]:
                fail(f"<answer> names instance {m.group(1)!r} inside instance {rec['id']!r}", line)
            elif rec["label"] is not None:
                fail(f"instance {rec['id']!r} has a second <answer> (senseid {m.group(2)!r}); "
                     f"one sense label per instance is expected", line)
            else:
                rec["label"] = m.group(2)
        elif t.startswith("<context>"):
            if rec["sentences"] is not None:
                fail(f"instance {rec['id']!r} has a second <context>", line)
                continue
            rec["sentences"] = []
            rec["in_context"] = True
            rest = t[len("<context>"):].strip()
            if rest:
                _context_line(rec, rest, line, fail)
        elif t == "</instance>":
            doc = _document(rec, path, line, max_tokens, lemmatize, fail)
            rec = None
            if doc is not None:
                yield doc
        else:
            fail(f"unexpected {t[:80]!r} in instance {rec['id']!r}", line)
    if isinstance(rec, dict):
        policy.handle(CorpusFormatError(f"instance {rec['id']!r} (line {rec['line']}) is not closed: the file ends "
                                        f"before </instance>", path=path, line=rec["line"],
                                        fix="check that the file was written completely"))


def _context_line(rec, t, line, fail):
    """Add the tokens of one context line (one sentence) to ``rec``; close the context at
    ``</context>``."""
    closing = t.endswith("</context>")
    if closing:
        t = t[: -len("</context>")]
    words, tags = [], []
    pos = 0
    in_head = rec.get("in_head", False)
    while pos < len(t):
        m = _ITEM.match(t, pos)
        if m is None:
            fail(f"unexpected text {t[pos:pos + 40]!r} in the context of instance {rec['id']!r}", line)
            return
        pos = m.end()
        if m.group(3) is not None:
            tag = m.group(1) if m.group(1) is not None else m.group(2)
            word = html.unescape(m.group(3))
            if not word or not tag:
                fail(f"empty word or pos in {m.group(0)!r}", line)
                return
            if in_head:
                if rec["head"] is not None and rec["head"][2]:
                    fail(f"instance {rec['id']!r}: <head> holds more than one token", line)
                    return
                rec["head"] = (len(rec["sentences"]), len(words), True)
            words.append(word)
            tags.append(tag)
        elif m.group(4) == "<head>":
            if rec["head"] is not None or in_head:
                fail(f"instance {rec['id']!r} has a second <head>; one target per instance is expected", line)
                return
            in_head = True
        elif m.group(4) == "</head>":
            if not in_head or rec["head"] is None:
                fail(f"instance {rec['id']!r}: </head> without a token inside <head>", line)
                return
            in_head = False
    rec["in_head"] = in_head
    if words:
        rec["sentences"].append((words, tags, line))
    if closing:
        rec["in_context"] = False


def _document(rec, path, line, max_tokens, lemmatize, fail):
    if rec["in_context"] or rec["sentences"] is None:
        fail(f"instance {rec['id']!r} has no complete <context> ... </context>", rec["line"])
        return None
    if rec["label"] is None:
        fail(f"instance {rec['id']!r} has no <answer ... senseid=\"...\"/>", rec["line"])
        return None
    if rec["head"] is None or rec.get("in_head"):
        fail(f"instance {rec['id']!r} has no complete <head><wf ...>target</wf></head>", rec["line"])
        return None
    n = sum(len(w) for w, _, _ in rec["sentences"])
    try:
        check_tokens(n, max_tokens, path, rec["line"], "context")
    except CorpusFormatError as e:
        fail(e.reason, rec["line"])
        return None
    lem = (lambda w, p: w) if lemmatize is None else lemmatize
    s_idx, target, _ = rec["head"]
    words, tags, _ = rec["sentences"][s_idx]
    wsd = WSDInstance(tuple(lem(w, p) for w, p in zip(words, tags)), tuple(tags), target, tuple(words))
    all_w = tuple(w for ws, _, _ in rec["sentences"] for w in ws)
    all_p = tuple(p for _, ps, _ in rec["sentences"] for p in ps)
    seq = TokenSeq(all_w, tuple(lem(w, p) for w, p in zip(all_w, all_p)), all_p)
    return Document(id=rec["id"], label=rec["label"], text=" ".join(all_w), structures={"wsd": wsd, "seq": seq},
                    source=source(path, rec["line"]))
