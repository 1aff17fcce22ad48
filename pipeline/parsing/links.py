"""Relational links between the texts of an example of several texts (a question and a candidate
answer, two sentences): each text's tree with the words that also occur in the other text marked.

Severyn & Moschitti (2012, "Structural relationships for large-scale learning of answer
re-ranking", SIGIR; 2013, "Automatic feature engineering for answer selection and extraction",
EMNLP) mark the nodes of a question's and an answer's trees over the words the two share with a
``REL`` tag, so that a tree kernel over the pair's trees counts fragments that hold a shared word
in the same syntactic position, not only fragments that are equal; Filice, Da San Martino &
Moschitti (2015) use the same links for paraphrase and entailment. Here:

- a word of one field is *linked* when its lower-cased lemma (the word where no lemma was
  parsed) is among the lower-cased lemmas of the example's other fields; tokens without a letter
  or digit (punctuation) are never linked;
- the representation ``rel_tree`` of a field is that field's dependency-derived tree
  (:func:`~gramtile.pipeline.parsing.derive.dep_to_tree`, the GRCT-like tree of ``tree``) with
  :data:`MARK` before the labels of the relation node and the pre-terminal of every linked word
  (the leaf, the lemma itself, is left as it is);
- it is stored per field like any representation (``question.rel_tree``, ``answer.rel_tree``),
  built at prepare time from the fields' dependency parses, so any tree kernel reads it:
  ``{"kind": "pt", "rep": "question.rel_tree"}``.

Example (spaCy's ``en_core_web_sm`` parse): "What is the capital of France ?" / "Paris is the
capital of France ." share ``be``, ``the``, ``capital``, ``of`` and ``france``; the question's
``rel_tree`` is::

    (REL-ROOT (attr (WP what)) (REL-VBZ be) (REL-nsubj (REL-det (REL-DT the)) (REL-NN capital)
      (REL-prep (REL-IN of) (REL-pobj (REL-NNP france)))) (punct (. ?)))

(the root's relation node is marked because its word, ``be``, is linked; ``what`` and ``?`` are
not).
"""
from __future__ import annotations

from gramtile.pipeline.parsing.derive import dep_to_tree
from gramtile.pipeline.representations.fields import field_key, split_key
from gramtile.pipeline.representations.structures import DepTree

#: what a linked word's relation node and pre-terminal labels start with
MARK = "REL-"
#: the representation name of a field's tree with its relational links
REP = "rel_tree"


def link_key(dep: DepTree, i: int) -> str | None:
    """What word ``i`` of ``dep`` is matched by (its lower-cased lemma, else word), or None for a
    token without a letter or digit."""
    w = dep.lemmas[i] if dep.lemmas is not None and dep.lemmas[i] else dep.words[i]
    w = w.lower()
    return w if any(c.isalnum() for c in w) else None


def linked(dep: DepTree, others: set) -> list:
    """For each word of ``dep``: whether its key (:func:`link_key`) is in ``others``."""
    return [(k := link_key(dep, i)) is not None and k in others for i in range(len(dep.words))]


def rel_tree(dep: DepTree, others: set):
    """The tree of ``dep`` with the words whose key is in ``others`` marked (module docstring)."""
    return dep_to_tree(dep, linked(dep, others), MARK)


def with_links(structures: dict, fields) -> dict:
    """``structures`` of an example of the fields ``fields`` (keyed ``<field>.<rep>``) with each
    field's ``rel_tree`` added, linked against the other fields' words; unchanged unless every
    field has a dependency parse (``<field>.dep``) and there are at least two."""
    fields = list(fields)
    deps = {}
    for key, s in structures.items():
        f, rep = split_key(key, fields)
        if f is not None and rep == "dep" and isinstance(s, DepTree):
            deps[f] = s
    if len(fields) < 2 or set(deps) != set(fields):
        return structures
    keys = {f: {k for i in range(len(d.words)) if (k := link_key(d, i)) is not None} for f, d in deps.items()}
    out = dict(structures)
    for f, d in deps.items():
        others = set().union(*(keys[g] for g in fields if g != f))
        out[field_key(f, REP)] = rel_tree(d, others)
    return out
