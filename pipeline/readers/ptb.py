"""Penn-Treebank bracket files (``.mrg``): several trees per file, each over several lines.

Trees are kept as read: function tags and indices (``NP-SBJ-1``) and empty elements
(``(-NONE- *T*-1)``) stay, so the structures are exactly the treebank's. ``strip=True`` gives
the trees most tree-kernel papers use instead: function tags and indices removed
(``NP-SBJ-1`` -> ``NP``), ``-NONE-`` pre-terminals removed, and nodes left without children
by that removal removed too. PTB's unlabelled outer bracket ``( (S ...) )`` is dropped.

A tree starts where a line opens a bracket at depth 0 and ends when its brackets balance.
A line starting with ``(`` in column 0 while a tree is still open means that tree lacks a
``)``: it is reported and the new line starts the next tree, so one bad tree does not swallow
the rest of the file in skip mode.
"""
from __future__ import annotations

import re

from gramtile.pipeline.readers.base import (
    DEFAULT_MAX_TOKENS,
    check_tokens,
    files_in,
    guarded,
    lines,
    make_policy,
    parse_bracketed,
    record_id,
    source,
)
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import Document, Tree

SUFFIXES = (".mrg", ".mrg.gz")
_FUNCTION_TAG = re.compile(r"(?<=[^-=])[-=].*$")
UNBALANCED_FIX = "balance the brackets: every '(' needs its ')'; each tree starts with '(' in column 0"


def read_ptb(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8",
             strip=False):
    """Read PTB bracket trees from a file or a directory of ``.mrg`` files (sorted by name).

    Parameters
    ----------
    path : str or Path
    policy : ErrorPolicy, optional
    max_tokens : int or None
        Largest number of leaves (``-NONE-`` elements included unless ``strip``).
    encoding : str
    strip : bool
        Remove function tags/indices and ``-NONE-`` elements (see the module docstring).

    Yields
    ------
    Document
        ``id`` = ``"<file stem>:<tree number>"``, ``structures["tree"]``, no label.
    """
    policy = make_policy(on_error, policy)
    for file in files_in(path, SUFFIXES):
        number = 0
        for start, text in _tree_texts(file, policy, encoding):
            number += 1
            if text is None:
                continue
            doc = guarded(policy, _document, text, file, start, number, max_tokens, strip)
            if doc is not None:
                yield doc


def _tree_texts(path, policy, encoding):
    """``(first line, tree text)`` per tree; text None for a tree holding an undecodable line."""
    buf, start, depth, broken = [], None, 0, False
    for number, text in lines(path, policy, encoding):
        if text is None:
            broken = True
            if depth == 0:
                # an undecodable line between trees: treat it as one bad record on its own
                yield number, None
                broken = False
            continue
        if depth > 0 and text.startswith("("):
            policy.handle(CorpusFormatError(
                f"unbalanced '(': tree not closed ({depth} bracket(s) open) before the next tree starts "
                f"at line {number}", path=path, line=start, fix=UNBALANCED_FIX))
            yield start, None
            buf, depth, broken = [], 0, False
        if depth == 0:
            if not text.strip():
                continue
            if not text.lstrip().startswith("("):
                policy.handle(CorpusFormatError(f"text outside any tree: {text.strip()[:40]!r}", path=path,
                                                line=number, fix=UNBALANCED_FIX))
                continue
            start = number
        depth += text.count("(") - text.count(")")
        buf.append(text)
        if depth < 0:
            policy.handle(CorpusFormatError(f"unbalanced ')': {-depth} more ')' than '('", path=path,
                                            line=number, fix=UNBALANCED_FIX))
            yield start, None
            buf, depth, broken = [], 0, False
        elif depth == 0:
            yield start, None if broken else "\n".join(buf)
            buf, broken = [], False
    if depth > 0:
        policy.handle(CorpusFormatError(f"unbalanced '(': {depth} bracket(s) not closed at end of file",
                                        path=path, line=start, fix=UNBALANCED_FIX))
        yield start, None


def _document(text, path, line, number, max_tokens, strip):
    tree = parse_bracketed(text, path, line)
    if strip:
        tree = strip_tree(tree)
        if tree is None:
            raise CorpusFormatError("tree holds only empty (-NONE-) elements", path=path, line=line,
                                    fix="remove the tree, or read without strip")
    check_tokens(len(tree.leaves()), max_tokens, path, line, "tree")
    return Document(id=record_id(path, number), structures={"tree": tree}, source=source(path, line))


def strip_label(label: str) -> str:
    """``NP-SBJ-1`` -> ``NP``, ``NP=2`` -> ``NP``; ``-NONE-``, ``-LRB-`` and ``-RRB-`` unchanged."""
    if label.startswith("-"):
        return label
    return _FUNCTION_TAG.sub("", label)


def strip_tree(tree: Tree) -> Tree | None:
    """The tree without function tags, indices and empty elements (None if nothing is left)."""
    # iterative post-order: PTB trees are shallow, but readers must not depend on that
    out = {}
    stack = [(tree, False)]
    while stack:
        node, done = stack.pop()
        if not node.children:
            out[id(node)] = node
            continue
        if not done:
            stack.append((node, True))
            stack.extend((c, False) for c in node.children)
            continue
        if node.label == "-NONE-":
            out[id(node)] = None
            continue
        kids = tuple(k for k in (out[id(c)] for c in node.children) if k is not None)
        out[id(node)] = Tree(strip_label(node.label), kids) if kids else None
    return out[id(tree)]
