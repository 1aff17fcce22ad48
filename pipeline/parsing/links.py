"""Relational links between the texts of an example of several texts (a question and a candidate
answer, two sentences): each text's tree with the words that also occur in the other text marked.

Severyn & Moschitti (2012, "Structural relationships for large-scale learning of answer
re-ranking", SIGIR; 2013, "Automatic feature engineering for answer selection and extraction",
EMNLP) mark the nodes of a question's and an answer's trees over the words the two share with a
``REL`` tag, so that a tree kernel over the pair's trees counts fragments that hold a shared word
in the same syntactic position, not only fragments that are equal; Filice, Da San Martino &
Moschitti (2015) use the same links for paraphrase and entailment. Here:

- a word of one field is *linked* when it matches a word of the example's other fields; tokens
  without a letter or digit (punctuation) are never linked. Three matches, each its own
  representation (:data:`LINKS`):

  - ``rel_tree``: by lemma: the lower-cased lemmas (the word where no lemma was parsed) are equal
    (Severyn & Moschitti's match, built for every example of several texts);
  - ``rel_tree_form``: exactly: the words as written, lower-cased, are equal (no lemmatisation:
    ``barks`` does not link ``bark``);
  - ``rel_tree_wordnet``: by similarity: the lemmas are equal, or the two words are WordNet
    synonyms, i.e. share a synset in the part of speech of their tags (``NN*`` noun, ``VB*`` verb,
    ``JJ*`` adjective, ``RB*`` adverb; other tags only match by lemma): "buy" links "purchase",
    "car" links "automobile". Needs WordNet 3.0 (README, "Installing");

- each such representation of a field is that field's dependency-derived tree
  (:func:`~gramtile.pipeline.parsing.derive.dep_to_tree`, the GRCT-like tree of ``tree``) with
  :data:`MARK` before the labels of the relation node and the pre-terminal of every linked word
  (the leaf, the lemma itself, is left as it is);
- it is stored per field like any representation (``question.rel_tree``, ``answer.rel_tree``),
  built at prepare time from the fields' dependency parses (``rel_tree`` always; the other two
  when ``--reps`` names them), so any tree kernel reads it: ``{"kind": "pt", "rep":
  "question.rel_tree"}``. A model whose kernel reads one builds it for the examples it predicts.

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
from gramtile.pipeline.resources.similarity import load_wordnet

#: what a linked word's relation node and pre-terminal labels start with
MARK = "REL-"
#: the representation name of a field's tree with its relational links by lemma
REP = "rel_tree"
#: every relational-link representation -> how its words are matched (module docstring)
LINKS = {"rel_tree": "lemma", "rel_tree_form": "form", "rel_tree_wordnet": "wordnet"}
#: the WordNet part of speech of a tag's first letters (Penn Treebank tags, as spaCy's English models give)
_WORDNET_POS = (("NN", "n"), ("VB", "v"), ("JJ", "a"), ("RB", "r"))


def link_key(dep: DepTree, i: int, match: str = "lemma") -> str | None:
    """What word ``i`` of ``dep`` is matched by (``form``: its lower-cased word; otherwise its
    lower-cased lemma, else word), or None for a token without a letter or digit."""
    w = dep.words[i] if match == "form" or dep.lemmas is None or not dep.lemmas[i] else dep.lemmas[i]
    w = w.lower()
    return w if any(c.isalnum() for c in w) else None


def linked(dep: DepTree, others: set, match: str = "lemma", synonyms=None, other_senses=frozenset()) -> list:
    """For each word of ``dep``: whether its key (:func:`link_key`) is in ``others``, or (match
    ``wordnet``) one of its senses (``synonyms(dep, i)``) is in ``other_senses``."""
    out = []
    for i in range(len(dep.words)):
        k = link_key(dep, i, match)
        out.append(k is not None and (k in others or (synonyms is not None and
                                                      not other_senses.isdisjoint(synonyms(dep, i)))))
    return out


def rel_tree(dep: DepTree, others: set, match: str = "lemma", synonyms=None, other_senses=frozenset()):
    """The tree of ``dep`` with the words linked to the other fields marked (module docstring)."""
    return dep_to_tree(dep, linked(dep, others, match, synonyms, other_senses), MARK)


def wanted(rep_names) -> list:
    """The relational-link representations among ``rep_names`` (``<field>.<rep>`` or plain), in
    :data:`LINKS` order; ``["rel_tree"]`` when there are none (what prepare always builds)."""
    names = {str(r).rpartition(".")[2] for r in rep_names}
    return [r for r in LINKS if r in names] or [REP]


class Senses:
    """WordNet senses of the words of dependency trees: ``(pos, synset offset)`` of the word's
    lemma in the part of speech of its tag (none for other tags)."""

    def __init__(self, wordnet):
        self.wordnet = wordnet

    def __call__(self, dep: DepTree, i: int) -> frozenset:
        tag = dep.pos[i] if dep.pos is not None else ""
        pos = next((p for prefix, p in _WORDNET_POS if tag and tag.startswith(prefix)), None)
        k = link_key(dep, i)
        if pos is None or k is None:
            return frozenset()
        return frozenset(key for key in self.wordnet.synsets(k) if key[0] == pos)


def with_links(structures: dict, fields, reps=(REP,), senses: Senses | None = None) -> dict:
    """``structures`` of an example of the fields ``fields`` (keyed ``<field>.<rep>``) with each
    field's relational-link representations ``reps`` (:data:`LINKS`) added, linked against the
    other fields' words; unchanged unless every field has a dependency parse (``<field>.dep``)
    and there are at least two. ``rel_tree_wordnet`` reads WordNet through ``senses`` (default:
    the WordNet of :func:`~gramtile.pipeline.resources.similarity.load_wordnet`)."""
    fields = list(fields)
    deps = {}
    for key, s in structures.items():
        f, rep = split_key(key, fields)
        if f is not None and rep == "dep" and isinstance(s, DepTree):
            deps[f] = s
    if len(fields) < 2 or set(deps) != set(fields):
        return structures
    out = dict(structures)
    for rep in reps:
        match = LINKS[rep]
        keys = {f: {k for i in range(len(d.words)) if (k := link_key(d, i, match)) is not None}
                for f, d in deps.items()}
        syn = None
        senses_of = {}
        if match == "wordnet":
            syn = senses if senses is not None else Senses(load_wordnet())
            senses_of = {f: frozenset().union(*(syn(d, i) for i in range(len(d.words)))) for f, d in deps.items()}
        for f, d in deps.items():
            others = set().union(*(keys[g] for g in fields if g != f))
            other_senses = frozenset().union(*(senses_of.get(g, frozenset()) for g in fields if g != f))
            out[field_key(f, rep)] = rel_tree(d, others, match, syn, other_senses)
    return out
