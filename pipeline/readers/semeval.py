"""SemEval-2010 Task 8 (Hendrickx et al. 2010): sentences with two marked nominals and a directed label.

``TRAIN_FILE.TXT`` (../shared/data/semeval2010_task8_train/README.md): CRLF lines in blocks of
four -- ``<id> TAB "<sentence with <e1>..</e1> and <e2>..</e2>>"``, the label
(``Relation(e1,e2)``, ``Relation(e2,e1)`` or ``Other``; 19 labels), ``Comment: ...``, and a
blank line. :func:`read_semeval` yields :class:`SemEvalRecord` values: the sentence without the
tags and the character spans of both nominals; :func:`records_to_documents` parses them with
spaCy and builds the structures the relation kernels read.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from gramtile.pipeline.readers.base import check_path, lines, make_policy
from gramtile.pipeline.representations.errors import CorpusFormatError

#: The nine relations; each has two directions, plus ``Other``: 19 labels.
RELATIONS = ("Cause-Effect", "Component-Whole", "Content-Container", "Entity-Destination", "Entity-Origin",
             "Instrument-Agency", "Member-Collection", "Message-Topic", "Product-Producer")
LABELS = tuple(f"{r}({a})" for r in RELATIONS for a in ("e1,e2", "e2,e1")) + ("Other",)
_LINE1 = re.compile(r'^(\d+)\t"(.*)"\s*$')
_TAG = re.compile(r"</?e[12]>")


@dataclass(frozen=True)
class SemEvalRecord:
    """One sentence: ``text`` without tags, ``e1`` / ``e2`` character spans (end exclusive)."""

    id: str
    text: str
    e1: tuple
    e2: tuple
    label: str
    line: int


def strip_tags(marked: str, path=None, line=None) -> tuple[str, tuple, tuple]:
    """Remove ``<e1>``/``<e2>`` tags: ``(text, e1 span, e2 span)``; each tag pair must occur once, e1 first."""
    out, spans, opened, pos = [], {}, {}, 0
    for m in _TAG.finditer(marked):
        out.append(marked[pos:m.start()])
        at = sum(len(x) for x in out)
        tag = m.group()
        name = tag.strip("</>")
        if tag.startswith("</"):
            if name not in opened or name in spans:
                raise CorpusFormatError(f"closing {tag} without its opening tag", path=path, line=line,
                                        fix=f"mark each nominal once as <{name}>...</{name}>")
            spans[name] = (opened[name], at)
        else:
            if name in opened:
                raise CorpusFormatError(f"second {tag}", path=path, line=line,
                                        fix=f"mark each nominal once as <{name}>...</{name}>")
            opened[name] = at
        pos = m.end()
    out.append(marked[pos:])
    for name in ("e1", "e2"):
        if name not in spans:
            raise CorpusFormatError(f"nominal <{name}> is not marked (or not closed) in {marked[:80]!r}", path=path,
                                    line=line, fix=f"mark it as <{name}>...</{name}>")
        s, e = spans[name]
        if e <= s:
            raise CorpusFormatError(f"<{name}> marks an empty nominal", path=path, line=line,
                                    fix="put the nominal's words between the tags")
    if not spans["e1"][1] <= spans["e2"][0]:
        raise CorpusFormatError("<e2> does not follow <e1>", path=path, line=line,
                                fix="in this format e1 is the first nominal of the sentence")
    return "".join(out), spans["e1"], spans["e2"]


def read_semeval(path, policy=None, on_error="raise", encoding="utf-8"):
    """Yield the :class:`SemEvalRecord` of every 4-line block of a SemEval-2010 Task 8 file.

    Raises
    ------
    CorpusFormatError
        A block whose first line is not ``id TAB "sentence"``, whose tags are malformed, whose
        label is not one of :data:`LABELS`, or whose third line is not a comment (file and line
        named).
    """
    policy = make_policy(on_error, policy)
    path = check_path(path)
    block = []
    for number, text in lines(path, policy, encoding):
        if text is None:
            block.append((number, None))
            continue
        if not text.strip():
            if block:
                rec = _record(block, path, policy)
                if rec is not None:
                    yield rec
                block = []
            continue
        block.append((number, text))
    if block:
        rec = _record(block, path, policy)
        if rec is not None:
            yield rec


def _record(block, path, policy):
    try:
        first = block[0][0]
        if any(t is None for _, t in block):
            return None  # undecodable line, already reported to policy
        if len(block) != 3:
            raise CorpusFormatError(f"block of {len(block)} line(s) starting here", path=path, line=first,
                                    fix="each record has 3 lines (id + sentence, label, Comment:) and a blank line")
        (l1, t1), (l2, t2), (l3, t3) = block
        m = _LINE1.match(t1)
        if m is None:
            raise CorpusFormatError(f"first line {t1[:60]!r} is not <id> TAB \"sentence\"", path=path, line=l1,
                                    fix='write the numeric id, a TAB, and the sentence in double quotes')
        text, e1, e2 = strip_tags(m.group(2), path, l1)
        label = t2.strip()
        if label not in LABELS:
            raise CorpusFormatError(f"label {label!r}", path=path, line=l2,
                                    fix="use Relation(e1,e2), Relation(e2,e1) of the nine relations, or Other")
        if not t3.startswith("Comment"):
            raise CorpusFormatError(f"third line {t3[:60]!r} is not a comment", path=path, line=l3,
                                    fix="the third line of a record starts with 'Comment:'")
        return SemEvalRecord(m.group(1), text, e1, e2, label, l1)
    except CorpusFormatError as e:
        policy.handle(e)
        return None


def _relation(label: str) -> str:
    return label.split("(", 1)[0]


def official_f1(y_true, y_pred) -> dict:
    """The task's official score: macro-F1 over the nine relations, direction counted, Other excluded.

    As the task scorer (semeval2010_task8_scorer, "(9+1)-way evaluation with directionality taken
    into account"): for each relation R, a prediction is correct only when its label equals the
    gold label including direction; precision divides the correct ones by every prediction of R
    (either direction), recall by every gold example of R (either direction); the score is the
    mean of the nine per-relation F1 values (0 for a relation with P + R = 0). ``Other`` counts
    only through the errors it causes.

    Parameters
    ----------
    y_true, y_pred : sequences of labels from :data:`LABELS`

    Returns
    -------
    dict
        ``macro_f1``, ``macro_precision``, ``macro_recall`` and ``per_relation`` {R: (P, R, F1)}.

    Raises
    ------
    CorpusFormatError
        Sequences of different lengths, or a label outside :data:`LABELS`.
    """
    y_true, y_pred = list(y_true), list(y_pred)
    if len(y_true) != len(y_pred):
        raise CorpusFormatError(f"{len(y_true)} gold labels but {len(y_pred)} predictions",
                                fix="score one prediction per gold example")
    for y in (*y_true, *y_pred):
        if y not in LABELS:
            raise CorpusFormatError(f"label {y!r} is not a SemEval-2010 Task 8 label",
                                    fix="use Relation(e1,e2), Relation(e2,e1) of the nine relations, or Other")
    per = {}
    for R in RELATIONS:
        correct = sum(1 for t, p in zip(y_true, y_pred) if t == p and _relation(t) == R)
        predicted = sum(1 for p in y_pred if _relation(p) == R)
        gold = sum(1 for t in y_true if _relation(t) == R)
        P = correct / predicted if predicted else 0.0
        Rc = correct / gold if gold else 0.0
        per[R] = (P, Rc, 2 * P * Rc / (P + Rc) if P + Rc > 0 else 0.0)
    return {"macro_f1": float(np.mean([v[2] for v in per.values()])),
            "macro_precision": float(np.mean([v[0] for v in per.values()])),
            "macro_recall": float(np.mean([v[1] for v in per.values()])), "per_relation": per}
