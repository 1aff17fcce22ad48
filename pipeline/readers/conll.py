"""CoNLL-U (Universal Dependencies) basic dependency trees, parsed line by line with ``conllu``.

Multiword-token lines (``3-4``) and empty nodes (``8.1``) are skipped, as UD specifies for
basic trees: the remaining syntactic words are numbered 1..n and their HEAD column refers to
them. Each sentence becomes ``structures["dep"]`` =
``DepTree(words=FORM, heads=HEAD-1, lemmas=LEMMA, pos=UPOS (or XPOS), deprels=DEPREL)``;
``# sent_id`` gives the id and ``# text`` the text. The ``conllu`` package parses each token
and comment line; this module keeps the line numbers, so an error names the offending line.
"""
from __future__ import annotations

import conllu
from conllu.exceptions import ParseException

from gramtile.pipeline.readers.base import (
    DEFAULT_MAX_TOKENS,
    HEAD_FIX,
    blocks,
    check_tokens,
    guarded,
    head_problem,
    make_policy,
    record_id,
    source,
)
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import DepTree, Document

FIELDS = conllu.parser.DEFAULT_FIELDS
LINE_FIX = "write 10 tab-separated columns ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC"


def read_conllu(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8",
                pos="upos"):
    """Read a CoNLL-U file (plain or gzip) into dependency-tree Documents.

    Parameters
    ----------
    path : str or Path
    policy : ErrorPolicy, optional
    max_tokens : int or None
        Largest number of syntactic words per sentence.
    encoding : str
    pos : {"upos", "xpos"}
        Which tag column fills ``DepTree.pos``.

    Yields
    ------
    Document
        ``id`` = ``# sent_id`` or ``"<stem>:<sentence number>"``; ``text`` = ``# text``.
    """
    if pos not in ("upos", "xpos"):
        raise CorpusFormatError(f"pos={pos!r} is not a CoNLL-U tag column", fix="use pos='upos' or pos='xpos'")
    policy = make_policy(on_error, policy)
    # conllu's parse_line adds alias keys to the dict it is given: give it a private copy
    parsers = dict(conllu.parser.DEFAULT_FIELD_PARSERS)
    number = 0
    for block in blocks(path, policy, encoding):
        if all(text is not None and text.startswith("#") for _, text in block):
            continue  # comments with no tokens (e.g. a trailing '# newdoc') are not a sentence
        number += 1
        if any(text is None for _, text in block):
            continue
        doc = guarded(policy, _document, block, path, number, max_tokens, pos, parsers)
        if doc is not None:
            yield doc


def _document(block, path, number, max_tokens, pos, parsers):
    meta = {}
    words, heads, lemmas, tags, deprels, where = [], [], [], [], [], []
    for line, text in block:
        if text.startswith("#"):
            for key, value in conllu.parser.parse_comment_line(text):
                meta[key] = value
            continue
        try:
            tok = conllu.parser.parse_line(text, FIELDS, parsers)
        except ParseException as e:
            raise CorpusFormatError(f"cannot parse token line: {e}", path=path, line=line, fix=LINE_FIX) from None
        tid = tok.get("id")
        if isinstance(tid, tuple):
            continue  # multiword token or empty node: not part of the basic tree
        if tid != len(words) + 1:
            raise CorpusFormatError(f"word ID {tid!r} where {len(words) + 1} was expected", path=path, line=line,
                                    fix="number the words of a sentence 1, 2, 3, ... (ranges and decimals "
                                        "only for multiword tokens and empty nodes)")
        head = tok.get("head")
        if head is None:
            raise CorpusFormatError(f"word {tid} ({tok.get('form')!r}) has no HEAD", path=path, line=line,
                                    fix=HEAD_FIX)
        words.append(tok.get("form") or "_")
        heads.append(head - 1)
        lemmas.append(tok.get("lemma") or "_")
        tags.append(tok.get(pos) or "_")
        deprels.append(tok.get("deprel") or "_")
        where.append(line)
    first = block[0][0]
    check_tokens(len(words), max_tokens, path, first)
    bad = head_problem(heads)
    if bad is not None:
        i, reason = bad
        raise CorpusFormatError(f"word {i + 1} ({words[i]!r}): {reason}", path=path, line=where[i], fix=HEAD_FIX)
    doc_id = meta.get("sent_id") or record_id(path, number)
    return Document(id=doc_id, text=meta.get("text"), source=source(path, first),
                    structures={"dep": DepTree(words, heads, lemmas, tags, deprels)})
