"""Penn-Treebank bracket trees: parsing and formatting.

Conventions (docs/kernels.md, "Tree kernels: ST, SST, PT"): a leaf is a bare token; consecutive bare tokens inside one
node form a single leaf (``(VB ask a)`` has the one leaf ``ask a``), as SVM-Light-TK reads them.
Whitespace between brackets is optional (KeLP writes ``(A(B c)(D e))``). Parsing is iterative,
so very deep or long trees cannot exhaust Python's recursion limit.
"""
from __future__ import annotations

import re

from gramtile.pipeline.representations.structures import Tree

_TOKEN = re.compile(r"\(|\)|[^\s()]+")


class BracketError(ValueError):
    """Malformed bracket string; ``pos`` is the character offset."""

    def __init__(self, message, pos):
        super().__init__(message)
        self.pos = pos


def parse_tree(text: str, root_label: str | None = None) -> Tree:
    """Parse one bracketed tree.

    An outer bracket without a label (PTB's ``( (S ...) )``) is removed when it has a single
    child, or labelled ``root_label`` when given.
    """
    stack = []  # each entry: [label, children, pending_words]
    result = None
    for m in _TOKEN.finditer(text):
        tok = m.group()
        if result is not None:
            raise BracketError(f"text after the end of the tree at character {m.start()}: {tok!r}", m.start())
        if tok == "(":
            if stack:
                _flush(stack[-1])
            stack.append([None, [], []])
        elif tok == ")":
            if not stack:
                raise BracketError(f"unbalanced ')' at character {m.start()}", m.start())
            label, children, words = stack.pop()
            if label is None:
                # unlabelled bracket
                if words:
                    raise BracketError(f"bracket without a label at character {m.start()}", m.start())
                if root_label is None and len(children) == 1:
                    node = children[0]
                elif root_label is not None:
                    node = Tree(root_label, tuple(children))
                else:
                    raise BracketError(f"unlabelled bracket with {len(children)} children at character {m.start()}", m.start())
            else:
                entry = [label, children, words]
                _flush(entry)
                node = Tree(label, tuple(children))
            if stack:
                stack[-1][1].append(node)
            else:
                result = node
        else:
            if not stack:
                raise BracketError(f"token {tok!r} outside any bracket at character {m.start()}", m.start())
            top = stack[-1]
            if top[0] is None and not top[1] and not top[2]:
                top[0] = tok
            else:
                top[2].append(tok)
    if stack:
        raise BracketError(f"unbalanced '(': {len(stack)} bracket(s) not closed at end of input", len(text))
    if result is None:
        raise BracketError("no tree found (empty input)", 0)
    return result


def _flush(entry):
    if entry[2]:
        entry[1].append(Tree(" ".join(entry[2])))
        entry[2].clear()


def tree_is_bracket_safe(tree: Tree) -> bool:
    """True when formatting then parsing returns the same tree: no label is empty or holds a
    bracket; internal nodes, the root and leaves written as ``(label)`` (a leaf right after a
    leaf sibling) hold no whitespace; a bare leaf holds only single spaces between tokens."""
    def plain(s):
        return bool(s) and "(" not in s and ")" not in s and s.split() == [s]

    if not plain(tree.label):
        return False
    for t in tree.nodes():
        prev_leaf = False
        for c in t.children:
            if c.children or prev_leaf:
                if not plain(c.label):
                    return False
            elif not c.label or "(" in c.label or ")" in c.label or " ".join(c.label.split()) != c.label:
                return False
            prev_leaf = not c.children
    return True
