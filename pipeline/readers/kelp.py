"""KeLP examples (``.klp``, ``.klp.gz``): labels, then named representations, one example a line.

    LABEL [LABEL ...] |BS:quest| text |ES| |BV:bow| f:1.0 ... |EV| |BT:grct| (tree) |ET| ...

* ``|BS:name| ... |ES|`` -> ``Document.text`` (one string representation per example);
* ``|BV:name| f:v ... |EV|`` -> ``structures[name]``, a dict feature -> float (sparse vector);
* ``|BDV:name| v v ... |EDV|`` -> ``structures[name]``, a dict ``"0"``, ``"1"``... -> float;
* ``|BT:name| (tree) |ET|`` -> ``structures[name]``, a Tree, for every named tree (``grct``,
  ``lct``, ``loct``, ``cgrct``, ``clct`` in the TREC distribution).

KeLP writes trees without spaces between siblings (``(A(B c)(D))``); a childless bracketed
node such as ``(POS##WRB)`` is a leaf. One label gives ``label`` a string, several a list.
"""
from __future__ import annotations

import re

from gramtile.pipeline.readers.base import (
    DEFAULT_MAX_TOKENS,
    check_tokens,
    feature_value,
    line_records,
    make_policy,
    parse_bracketed,
    record_id,
    source,
)
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import Document

# the kind letters must match at both ends (|BT:x| ... |ET|), so a '|' inside a tree is harmless
_PART = re.compile(r"\|B(T|V|S|DV):([^|]*)\|(.*?)\|E\1\|")
FIX = "write each line as 'LABEL |BS:name| text |ES| |BV:name| f:v |EV| |BT:name| (tree) |ET|'"


def read_kelp(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8"):
    """Read a KeLP example file (plain or gzip).

    Parameters
    ----------
    path : str or Path
    policy : ErrorPolicy, optional
    max_tokens : int or None
        Largest number of leaves per tree.
    encoding : str

    Yields
    ------
    Document
        ``id`` = ``"<stem>:<record number>"`` (the stem drops ``.klp.gz``).
    """
    policy = make_policy(on_error, policy)
    yield from line_records(path, policy, encoding, _document, max_tokens)


def _document(text, path, line, number, max_tokens):
    first = text.find("|B")
    if first < 0:
        raise CorpusFormatError("no representation (no '|B...|' marker)", path=path, line=line, fix=FIX)
    labels = text[:first].split()
    structures = {}
    doc_text = None
    end = first
    for m in _PART.finditer(text, first):
        gap = text[end:m.start()].strip()
        if gap:
            raise CorpusFormatError(f"text outside any representation: {gap[:40]!r}", path=path, line=line, fix=FIX)
        end = m.end()
        kind, name, body = m.group(1), m.group(2), m.group(3)
        if not name:
            raise CorpusFormatError(f"'|B{kind}:|' without a name", path=path, line=line,
                                    fix=f"name every representation, e.g. |B{kind}:bow|")
        if kind == "S":
            if doc_text is not None:
                raise CorpusFormatError(f"second string representation {name!r}", path=path, line=line,
                                        fix="keep one |BS:...| per example")
            doc_text = body.strip()
            continue
        if name in structures:
            raise CorpusFormatError(f"representation {name!r} given twice", path=path, line=line,
                                    fix="give each representation a distinct name")
        if kind == "T":
            tree = parse_bracketed(body, path, line, what=f"tree {name!r}")
            check_tokens(len(tree.leaves()), max_tokens, path, line, f"tree {name!r}")
            structures[name] = tree
        elif kind == "V":
            structures[name] = _sparse(body, name, path, line)
        else:
            structures[name] = _dense(body, name, path, line)
    rest = text[end:].strip()
    if rest:
        raise CorpusFormatError(f"unterminated or unknown representation: {rest[:40]!r}", path=path, line=line,
                                fix=FIX + " (each |BX:name| needs its |EX|)")
    label = labels[0] if len(labels) == 1 else (labels or None)
    return Document(id=record_id(path, number), label=label, text=doc_text, structures=structures,
                    source=source(path, line))


def _sparse(body, name, path, line):
    bow = {}
    for item in body.split():
        feat, sep, value = item.rpartition(":")
        try:
            if not sep or not feat:
                raise ValueError
        except ValueError:
            raise CorpusFormatError(f"vector {name!r}: entry {item!r} is not 'feature:value'", path=path,
                                    line=line, fix="write sparse entries as feature:value, e.g. _dog__n:1.0") from None
        bow[feat] = bow.get(feat, 0.0) + feature_value(value, item, path, line,
                                                        "write sparse entries as feature:value, e.g. _dog__n:1.0")
    return bow


def _dense(body, name, path, line):
    return {str(i): feature_value(v, f"{name}[{i}]", path, line, "write dense vectors as space-separated numbers")
            for i, v in enumerate(body.split())}
