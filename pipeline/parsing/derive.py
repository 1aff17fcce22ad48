"""Structures derived from a dependency parse: token sequence, ordered tree, positional tree.

The dependency-derived ordered tree follows KeLP's Grammatical Relation Centered Tree (GRCT,
Croce, Moschitti & Basili 2011) without KeLP's ``SYNT##``/``POS##``/``LEX##`` prefixes and
without the coarse-PoS suffix on lemmas. Its exact shape:

* every word ``i`` becomes one node labelled by its dependency relation ``deprel[i]``
  (spaCy's ``ROOT`` for the root word);
* that node's children are, in word order, the nodes of ``i``'s dependents and, at ``i``'s own
  position among them, a PoS pre-terminal ``pos[i]`` whose single child is the leaf
  ``lower(lemma[i])``.

So a relation node always has at least one child (its pre-terminal) and a pre-terminal has
exactly one leaf, which keeps the tree bracket-safe. Example, for "The dog barks ." with
``det``/``nsubj``/``ROOT``/``punct`` relations::

    (ROOT (nsubj (det (DT the)) (NN dog)) (VBZ bark) (punct (. .)))

Missing columns use fixed fallbacks: relation ``"dep"``, PoS ``"_"``, lemma = the word.
Labels are made bracket-safe: ``(``/``)`` become ``-LRB-``/``-RRB-`` (the Penn Treebank
escapes spaCy's tagger also uses) and whitespace inside a label becomes ``_``, so the
bracket string of every derived tree parses back to the same tree.

The positional tree equals :meth:`PTree.from_tree` of the ordered tree (position = 1-based
child index); :func:`tree_to_ptree` builds it without recursion, so very deep parses work.
"""
from __future__ import annotations

import re

from gramtile.pipeline.representations.structures import DepTree, PTree, TokenSeq, Tree

_WS = re.compile(r"\s+")
_BRACKETS = {"(": "-LRB-", ")": "-RRB-"}


def safe_label(s: str) -> str:
    """A tree label that survives a bracket round trip (see module docstring)."""
    s = _WS.sub("_", s.strip())
    if "(" in s or ")" in s:
        s = s.replace("(", "-LRB-").replace(")", "-RRB-")
    return s or "_"


def dep_to_tree(dep: DepTree, marked=None, mark: str = "") -> Tree:
    """The GRCT-like ordered tree of a dependency tree (shape in the module docstring).

    Parameters
    ----------
    dep : DepTree
        A validated dependency tree with ``n`` words.
    marked : sequence of bool, optional
        Words whose relation node and pre-terminal get ``mark`` before their label (the relational
        links of a pair, :mod:`~gramtile.pipeline.parsing.links`).
    mark : str

    Returns
    -------
    Tree
        ``3 * n`` nodes: one relation node, one pre-terminal and one leaf per word.
    """
    n = len(dep.words)
    lemmas = dep.lemmas if dep.lemmas is not None else dep.words
    pos = dep.pos if dep.pos is not None else ("_",) * n
    rels = dep.deprels if dep.deprels is not None else ("dep",) * n
    dependents = [[] for _ in range(n)]
    root = -1
    for i, h in enumerate(dep.heads):
        if h == -1:
            root = i
        else:
            dependents[h].append(i)
    # Build bottom-up in reverse BFS order so deep chains never hit Python's recursion limit.
    order = [root]
    for v in order:
        order.extend(dependents[v])
    built = [None] * n
    for i in reversed(order):
        tag = mark if marked is not None and marked[i] else ""
        pre = Tree(tag + safe_label(pos[i]), (Tree(safe_label((lemmas[i] or dep.words[i]).lower())),))
        kids = []
        placed = False
        for j in dependents[i]:  # dependents are already in word order
            if not placed and j > i:
                kids.append(pre)
                placed = True
            kids.append(built[j])
        if not placed:
            kids.append(pre)
        built[i] = Tree(tag + safe_label(rels[i]), tuple(kids))
    return built[root]


def tree_to_ptree(tree: Tree) -> PTree:
    """``PTree.from_tree(tree)``, built iteratively (no recursion limit on depth)."""
    order = [(tree, -1)]  # (node, parent index in order), parents before children
    i = 0
    while i < len(order):
        node = order[i][0]
        order.extend((c, i) for c in node.children)
        i += 1
    kids = [[] for _ in order]
    for j in range(len(order) - 1, 0, -1):
        kids[order[j][1]].append(j)
    built = [None] * len(order)
    for j in range(len(order) - 1, -1, -1):
        # kids[j] holds children in reverse order: restore left-to-right positions
        built[j] = PTree(order[j][0].label, tuple((p + 1, built[c]) for p, c in enumerate(reversed(kids[j]))))
    return built[0]


def dep_to_seq(dep: DepTree) -> TokenSeq:
    """The token sequence (words, lemmas, PoS) of a dependency tree."""
    return TokenSeq(dep.words, dep.lemmas, dep.pos)


def derive_all(dep: DepTree) -> dict:
    """All representations derived from one parse.

    Returns
    -------
    dict
        ``{"dep": DepTree, "seq": TokenSeq, "tree": Tree, "ptree": PTree}``.
    """
    tree = dep_to_tree(dep)
    return {"dep": dep, "seq": dep_to_seq(dep), "tree": tree, "ptree": tree_to_ptree(tree)}
