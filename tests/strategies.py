"""Hypothesis strategies for random structures, shared by kernel tests.

Alphabets are tiny so that deep matches happen. Trees include single-node trees (a lone
childless root), words equal to an internal label (a leaf and an internal node that share a
label), repeated trees and trees over a disjoint alphabet (no shared labels at all).
"""
from __future__ import annotations

from hypothesis import strategies as st

from gramtile.pipeline.representations.structures import Tree

LABELS = ("A", "B", "C")
WORDS = ("a", "b", "A")
#: leaf words that are mostly internal labels too, so that a label is a leaf in one place and
#: an internal node in another (where label-only and leaf-typed productions differ)
MIXED_WORDS = ("A", "B", "a")
OTHER_LABELS = ("X", "Y")
OTHER_WORDS = ("x", "y")


@st.composite
def trees(draw, labels=LABELS, words=WORDS, max_depth=3, max_children=3, stop=4):
    """Random ordered labelled trees (leaves are childless nodes labelled by words).

    Parameters
    ----------
    labels, words : sequences of str
        Alphabets of internal labels and of leaf words (they may overlap). A childless node
        may also carry an internal label (a single-node tree, or a leaf that matches one).
    max_depth : int
        Largest depth (edges from the root).
    max_children : int
        Largest number of children of a node.
    stop : int
        A node below the root is childless with probability about 1/stop; the root with
        about 1/(2 stop), so most trees have structure.
    """
    def node(depth):
        if depth == max_depth or draw(st.integers(0, stop - 1 if depth else 2 * stop - 1)) == 0:
            return Tree(draw(st.sampled_from(tuple(words) + tuple(labels))))
        k = draw(st.integers(1, max_children))
        return Tree(draw(st.sampled_from(labels)), tuple(node(depth + 1) for _ in range(k)))

    return node(0)


@st.composite
def tree_lists(draw, size, **kw):
    """Exactly ``size`` trees: fresh ones, copies of earlier ones, and disjoint-alphabet ones."""
    out = []
    for _ in range(size):
        mode = draw(st.sampled_from(("fresh", "fresh", "fresh", "copy", "disjoint")))
        if mode == "copy" and out:
            out.append(draw(st.sampled_from(out)))
        elif mode == "disjoint":
            out.append(draw(trees(**{**kw, "labels": OTHER_LABELS, "words": OTHER_WORDS})))
        else:
            out.append(draw(trees(**kw)))
    return out


@st.composite
def tree_pairs(draw, **kw):
    """A pair of trees: independent, identical, or over disjoint alphabets."""
    mode = draw(st.sampled_from(("independent", "independent", "identical", "disjoint")))
    t1 = draw(trees(**kw))
    if mode == "identical":
        return t1, t1
    if mode == "disjoint":
        return t1, draw(trees(**{**kw, "labels": OTHER_LABELS, "words": OTHER_WORDS}))
    return t1, draw(trees(**kw))
