"""Raw-text formats, one record a line, for spaCy to parse later: ``text`` and ``trec`` (``tsv``
and ``csv`` are tables: :mod:`gramtile.pipeline.readers.table`).

* ``text``: one sentence or document per line, no label;
* ``trec``: the TREC/UIUC question-classification files, ``COARSE:fine question``, Latin-1.
  ``label="coarse"`` (default) gives ``"DESC"``; ``label="fine"`` gives ``"DESC:manner"``
  (the fine name alone is ambiguous: ``other`` exists under ENTY, LOC and NUM).

Documents carry ``text`` and ``label`` only (no structures). Every line is a record, so the
record number is the line number; a blank line is an empty sentence (an error), except blank
lines at the end of the file.
"""
from __future__ import annotations

import re

from gramtile.pipeline.readers.base import (
    DEFAULT_MAX_TOKENS,
    check_text,
    guarded,
    lines,
    make_policy,
    record_id,
    source,
)
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import Document

_TREC_LABEL = re.compile(r"[^\s:]+:\S+")


def _records(path, policy, encoding):
    """``(line, text)`` per record; blank lines are held back until a later line proves they
    are not just the end of the file."""
    blank = []
    for line, text in lines(path, policy, encoding):
        if text is not None and not text.strip():
            blank.append((line, text))
            continue
        yield from blank
        blank = []
        yield line, text


def blank_line(path, line):
    """The error of a blank line inside a one-record-per-line file: an empty sentence."""
    return CorpusFormatError("empty sentence: the line is blank", path=path, line=line,
                             fix="remove the blank line, or write the sentence on it")


def _read(path, policy, encoding, make):
    for line, text in _records(path, policy, encoding):
        if text is None:
            continue
        if not text.strip():
            policy.handle(blank_line(path, line))
            continue
        doc = guarded(policy, make, text, path, line)
        if doc is not None:
            yield doc


def read_text(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8"):
    """Read one sentence or document per line.

    Parameters
    ----------
    path : str or Path
    policy : ErrorPolicy, optional
    max_tokens : int or None
        Largest number of whitespace-separated tokens per line.
    encoding : str

    Yields
    ------
    Document
        ``id`` = ``"<stem>:<line>"``, ``text`` = the line, no label.
    """
    policy = make_policy(on_error, policy)

    def make(text, path, line):
        check_text(text, max_tokens, path, line, "line")
        return Document(id=record_id(path, line), text=text, source=source(path, line))

    yield from _read(path, policy, encoding, make)


def read_trec(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="latin-1",
              label="coarse"):
    """Read TREC/UIUC question-classification lines ``COARSE:fine question``.

    Parameters
    ----------
    path : str or Path
    policy : ErrorPolicy, optional
    max_tokens : int or None
        Largest number of tokens per question.
    encoding : str
        Latin-1 by default: the distributed ``train.txt`` holds one 0xF0 byte ('ð').
    label : {"coarse", "fine"}
        ``"coarse"`` -> ``"DESC"``; ``"fine"`` -> ``"DESC:manner"``.

    Yields
    ------
    Document
        ``id`` = ``"<stem>:<line>"``, ``label``, ``text`` = the question.
    """
    if label not in ("coarse", "fine"):
        raise CorpusFormatError(f"label={label!r} is not a TREC label granularity",
                                fix="use label='coarse' or label='fine'")
    policy = make_policy(on_error, policy)

    def make(text, path, line):
        tag, _, question = text.partition(" ")
        if not _TREC_LABEL.fullmatch(tag):
            raise CorpusFormatError(f"{tag[:40]!r} is not a 'COARSE:fine' label", path=path, line=line,
                                    fix="start the line with COARSE:fine and a space, e.g. 'DESC:manner How ...'")
        check_text(question, max_tokens, path, line, "question")
        value = tag.split(":", 1)[0] if label == "coarse" else tag
        return Document(id=record_id(path, line), label=value, text=question, source=source(path, line))

    yield from _read(path, policy, encoding, make)
