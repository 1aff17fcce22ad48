"""INEX 2005/2006 XML-structure trees as distributed for tree-kernel benchmarks (``inex``).

One tree per line, ``CLASS:TREE``: TREE is prefix bracket notation with (integer) node labels,
children separated by spaces, and a childless node written ``label($)``::

    1:354(364($) 366($) 315(314($) 313($)) 362($))

Each tree becomes a positional tree (``structures["ptree"]``, position = 1-based child index,
the convention of the route-kernel experiments) and the same ordered tree
(``structures["tree"]``) for ST/SST/PT. ``$`` marks "no children" and is not a node.
"""
from __future__ import annotations

import re

from gramtile.pipeline.readers.base import (
    DEFAULT_MAX_TOKENS,
    check_tokens,
    line_records,
    make_policy,
    record_id,
    source,
)
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import Document, PTree, Tree

FIX = "write each line as 'CLASS:label(child child ...)' with leaves as 'label($)', e.g. '3:12(7($) 9($))'"
_TOKEN = re.compile(r"\s*(?:([^\s()$]+)|(\()|(\))|(\$))")


def read_inex(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8"):
    """Read an INEX tree file (plain or gzip).

    Parameters
    ----------
    path : str or Path
    policy : ErrorPolicy, optional
    max_tokens : int or None
        Largest number of nodes per tree.
    encoding : str

    Yields
    ------
    Document
        ``id`` = ``"<stem>:<record number>"``, ``label`` = the class as written,
        ``structures`` = ``{"ptree": PTree, "tree": Tree}``. Blank lines are not records.
    """
    policy = make_policy(on_error, policy)
    yield from line_records(path, policy, encoding, _document, max_tokens)


def _document(text, path, line, number, max_tokens):
    label, sep, body = text.partition(":")
    label = label.strip()
    if not sep or not label or len(label.split()) != 1:
        raise CorpusFormatError(f"expected 'CLASS:' at the start of the line, found {text[:30]!r}", path=path,
                                line=line, fix=FIX)
    labels, kids = _parse(body, path, line)
    check_tokens(len(labels), max_tokens, path, line, "tree")
    ptree, tree = [None] * len(labels), [None] * len(labels)
    for i in range(len(labels) - 1, -1, -1):  # children are numbered after their parent
        ptree[i] = PTree(labels[i], tuple((k + 1, ptree[c]) for k, c in enumerate(kids[i])))
        tree[i] = Tree(labels[i], tuple(tree[c] for c in kids[i]))
    return Document(id=record_id(path, number), label=label, structures={"ptree": ptree[0], "tree": tree[0]},
                    source=source(path, line))


def _parse(body, path, line):
    """Iterative parse (XML trees can be deep): node labels in preorder and child lists."""
    labels, kids, stack = [], [], []
    pos, end = 0, len(body.rstrip())
    expect_open = False  # a label must be followed by '('
    expect_close = False  # '$' must be followed by ')'
    while pos < end:
        m = _TOKEN.match(body, pos)
        if m is None:
            raise CorpusFormatError(f"unexpected character {body[pos:pos + 1]!r} at column {pos + 1}", path=path,
                                    line=line, fix=FIX)
        word, opening, closing, dollar = m.groups()
        col = m.start() + 1
        if expect_close and closing is None:
            raise CorpusFormatError(f"'$' is not followed by ')' at column {col}", path=path, line=line, fix=FIX)
        expect_close = False
        if expect_open and opening is None:
            raise CorpusFormatError(f"node {labels[-1]!r} is not followed by '(' at column {col}", path=path,
                                    line=line, fix=FIX)
        if word is not None:
            if labels and not stack:
                raise CorpusFormatError(f"text {word!r} after the end of the tree at column {col}", path=path,
                                        line=line, fix=FIX)
            if stack:
                kids[stack[-1]].append(len(labels))
            labels.append(word)
            kids.append([])
            expect_open = True
        elif opening is not None:
            if not expect_open:
                raise CorpusFormatError(f"'(' without a node label at column {col}", path=path, line=line, fix=FIX)
            stack.append(len(labels) - 1)
            expect_open = False
        elif dollar is not None:
            if not stack or kids[stack[-1]]:
                raise CorpusFormatError(f"'$' at column {col} must be the only content of a leaf's brackets",
                                        path=path, line=line, fix=FIX)
            expect_close = True
        else:
            if not stack:
                raise CorpusFormatError(f"unbalanced ')' at column {col}", path=path, line=line, fix=FIX)
            stack.pop()
        pos = m.end()
    if expect_open or expect_close or stack or not labels:
        what = "empty tree" if not labels else f"{len(stack) or 1} unclosed node(s) at the end of the line"
        raise CorpusFormatError(what, path=path, line=line, fix=FIX)
    return labels, kids
