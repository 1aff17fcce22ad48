"""Malt-TAB dependency files (NLTK ``dependency_treebank`` ``.dp``): ``word<TAB>tag<TAB>head``.

One token per line, a blank line between sentences; ``head`` is the 1-based index of the
head word, ``0`` for the root. An optional fourth column is the dependency relation.
Each sentence becomes ``structures["dep"] = DepTree(words, heads=head-1, pos=tag)``.
"""
from __future__ import annotations

from gramtile.pipeline.readers.base import (
    DEFAULT_MAX_TOKENS,
    HEAD_FIX,
    blocks,
    check_tokens,
    files_in,
    guarded,
    head_problem,
    make_policy,
    record_id,
    source,
)
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import DepTree, Document

SUFFIXES = (".dp", ".dp.gz")
LINE_FIX = "write word<TAB>tag<TAB>head (1-based, 0 for the root) [<TAB>relation] per line"


def read_dp(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8"):
    """Read a Malt-TAB file or a directory of ``.dp`` files (sorted by name).

    Parameters
    ----------
    path : str or Path
    policy : ErrorPolicy, optional
    max_tokens : int or None
        Largest number of words per sentence.
    encoding : str

    Yields
    ------
    Document
        ``id`` = ``"<file stem>:<sentence number>"``, ``structures["dep"]``.
    """
    policy = make_policy(on_error, policy)
    for file in files_in(path, SUFFIXES):
        for number, block in enumerate(blocks(file, policy, encoding), 1):
            if any(text is None for _, text in block):
                continue
            doc = guarded(policy, _document, block, file, number, max_tokens)
            if doc is not None:
                yield doc


def _document(block, path, number, max_tokens):
    first = block[0][0]
    check_tokens(len(block), max_tokens, path, first)
    words, tags, heads, rels = [], [], [], []
    for line, text in block:
        cols = text.split("\t")
        if len(cols) not in (3, 4):
            raise CorpusFormatError(f"{len(cols)} tab-separated column(s), expected 3 or 4", path=path,
                                    line=line, fix=LINE_FIX)
        try:
            head = int(cols[2])
        except ValueError:
            raise CorpusFormatError(f"head {cols[2]!r} is not an integer", path=path, line=line,
                                    fix=LINE_FIX) from None
        words.append(cols[0])
        tags.append(cols[1])
        heads.append(head - 1)
        if len(cols) == 4:
            rels.append(cols[3])
    if rels and len(rels) != len(words):
        raise CorpusFormatError("some lines have a relation column and some do not", path=path, line=first,
                                fix="give every line of a sentence the same number of columns")
    bad = head_problem(heads)
    if bad is not None:
        i, reason = bad
        raise CorpusFormatError(f"word {i + 1} ({words[i]!r}): {reason}", path=path, line=block[i][0], fix=HEAD_FIX)
    return Document(id=record_id(path, number), source=source(path, first),
                    structures={"dep": DepTree(words, heads, None, tags, rels or None)})
