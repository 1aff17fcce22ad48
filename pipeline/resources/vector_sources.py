"""Vector sources: what a string naming word vectors means, and the vectors it gives a corpus.

A **vector source** (the ``vectors`` parameter of an ``sptk`` spec, ``gramtile prepare
--vectors``) is one of:

- a file path: word2vec / GloVe / fastText text, word2vec binary, ``.npy`` + ``.vocab``
  (:func:`gramtile.pipeline.resources.vectors.read_vectors`); its canonical form is the absolute
  path, so ``vec.txt`` and ``./vec.txt`` name one source;
- ``spacy:NAME``: the static vectors of a spaCy pipeline (an installed package or the folder of
  a saved pipeline);
- ``corpus:BUILDER`` (``corpus:ppmi``, ``corpus:word2vec``; ``corpus:`` alone is
  ``corpus:ppmi``, :data:`~gramtile.pipeline.resources.vectors.DEFAULT_BUILDER`): vectors trained
  on the examples of one representation of the corpus, with :data:`DIMS` dimensions, window
  :data:`WINDOW`, words seen at least :data:`MIN_COUNT` times, seed :data:`SEED`.

:func:`build_vectors` gives the vectors a corpus can use, a :class:`WordVectors`. From a file or
a pipeline it keeps the vectors of every word the corpus's symbols can be read as
(:func:`possible_words`): a lexical table looks a label's word up after removing a prefix and a
final ``::p``, so these are every suffix of a symbol, with and without its ``::p``, as written
and lower-cased. A corpus builder's documents are the words of each example
(:func:`example_words`).
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gramtile.kernels.errors import KernelSpecError
from gramtile.pipeline.resources.vectors import (
    BUILDERS,
    CORPUS,
    DEFAULT_BUILDER,
    SPACY,
    load_source,
    spacy_vectors,
    unit_rows,
    vector_files,
)

#: Dimensions, window, minimum count and seed of vectors trained on a corpus.
DIMS = 100
WINDOW = 5
MIN_COUNT = 2
SEED = 0
#: The lexical label prefix of KeLP trees, read off when a corpus builder reads tree labels.
KELP_PREFIX = "LEX##"


@dataclass(frozen=True, eq=False)
class WordVectors:
    """Word vectors: ``words`` (tuple of str, distinct) and ``matrix`` (float64, one row each)."""

    words: tuple
    matrix: np.ndarray

    @property
    def shape(self) -> tuple:
        return tuple(int(s) for s in self.matrix.shape)


def split_label(label: str, prefix: str | None):
    """(word, PoS or None) of a lexical label: ``prefix`` removed, a final ``::p`` split off."""
    if prefix and label.startswith(prefix):
        label = label[len(prefix):]
    word, sep, pos = label.rpartition("::")
    if sep and word:
        return word, pos
    return label, None


def source_kind(source: str) -> str:
    """``"spacy"``, ``"corpus"`` or ``"file"``."""
    if source.startswith(SPACY):
        return "spacy"
    if source.startswith(CORPUS):
        return "corpus"
    return "file"


def canonical_source(source) -> str:
    """The one spelling of a vector source (module docstring); a bad one is a KernelSpecError."""
    if not isinstance(source, str) or not source.strip():
        raise KernelSpecError(f"a vector source must be a file path, 'spacy:NAME' or 'corpus:BUILDER', got {source!r}")
    kind = source_kind(source)
    if kind == "spacy":
        if not source[len(SPACY):]:
            raise KernelSpecError("vector source 'spacy:' needs a pipeline name or folder, e.g. spacy:en_core_web_md")
        return source
    if kind == "corpus":
        return CORPUS + builder_of(source)
    return str(Path(source).expanduser().resolve())


def builder_of(source: str) -> str:
    """The builder a ``corpus:`` source names (the default when it names none)."""
    name = source[len(CORPUS):] or DEFAULT_BUILDER
    if name not in BUILDERS:
        raise KernelSpecError(f"vector source {source!r}: unknown builder {name!r}; known: "
                              f"{', '.join('corpus:' + b for b in BUILDERS)}")
    return name


def check_available(source: str):
    """Fail early, naming the fix, when a source cannot be read here (no file, no pipeline, no
    gensim), before a corpus is parsed."""
    kind = source_kind(source)
    if kind == "file":
        for f in vector_files(canonical_source(source)):
            if not f.is_file():
                raise FileNotFoundError(f"word vectors {source}: no such file {f}")
    elif kind == "spacy":
        name = source[len(SPACY):]
        if not Path(name).is_dir() and importlib.util.find_spec(name) is None:
            raise KernelSpecError(f"vectors {source!r}: no spaCy pipeline {name!r} is installed and no such folder "
                                  f"exists. Fix: python -m spacy download {name}, or name a saved pipeline's folder")
        spacy_vectors(name, words=set())  # loads it: a pipeline without word vectors is refused now
    elif builder_of(source) == "word2vec" and importlib.util.find_spec("gensim") is None:
        raise KernelSpecError(f"vectors {source!r} need gensim. Fix: pip install 'gramtile[word2vec]' (or pip install "
                              f"gensim), or use corpus:ppmi")


def source_files(source: str) -> list:
    """The files whose content fixes the vectors of a source: a vector file (and its ``.vocab``),
    or a spaCy pipeline's ``vocab/vectors`` and ``vocab/strings.json``; none for a corpus builder."""
    kind = source_kind(source)
    if kind == "file":
        return vector_files(canonical_source(source))
    if kind == "spacy":
        name = source[len(SPACY):]
        if Path(name).is_dir():
            roots = [Path(name)]
        else:
            spec = importlib.util.find_spec(name)
            roots = [Path(p) for p in (spec.submodule_search_locations or [])] if spec is not None else []
        out = []
        for root in roots:
            for f in sorted(root.glob("**/vocab/vectors")) + sorted(root.glob("**/vocab/strings.json")):
                out.append(f)
        return out
    return []


def possible_words(vocab_strings) -> set:
    """Every word a symbol can be read as (module docstring)."""
    out = set()
    for s in vocab_strings:
        for i in range(len(s)):
            t = s[i:]
            out.add(t)
            w, sep, _ = t.rpartition("::")
            if sep and w:
                out.add(w)
    out |= {w.lower() for w in out}
    return out


def example_words(x) -> list:
    """The words of one example, in order, as a corpus builder reads them: a token sequence's
    tokens, a WSD instance's words (else lemmas), a dependency tree's words; a tree's nodes whose
    label starts with ``LEX##`` (KeLP's lexical nodes) if it has any, else its leaves, in
    preorder, each label read as its word (``LEX##`` and a final ``::p`` removed)."""
    for field in ("tokens", "words"):
        got = getattr(x, field, None)
        if got is not None and not hasattr(x, "nodes"):
            return [str(w) for w in got]
    if getattr(x, "lemmas", None) is not None and not hasattr(x, "nodes"):
        return [str(w) for w in x.lemmas]
    if hasattr(x, "nodes"):
        nodes = list(x.nodes())
        lex = [n for n in nodes if n.label.startswith(KELP_PREFIX)]
        if not lex:
            lex = [n for n in nodes if not n.children]
        return [split_label(n.label, KELP_PREFIX)[0] for n in lex]
    raise KernelSpecError(f"vectors cannot be trained on examples of type {type(x).__name__}; train them on a "
                          f"representation of trees, token sequences, dependency trees or WSD instances")


def symbol_vectors(vectors: WordVectors, vocab_strings) -> np.ndarray:
    """The unit vector of every corpus symbol, float64 (V, k): the vector of the symbol's string,
    else of its lower-cased string, scaled to unit length; a zero row for a symbol without one
    (the subsequence kernel's factor form then matches it only with itself)."""
    index = {w: k for k, w in enumerate(vectors.words)}
    M = unit_rows(vectors.matrix)
    out = np.zeros((len(vocab_strings), M.shape[1] if M.ndim == 2 else 0), dtype=np.float64)
    for s, w in enumerate(vocab_strings):
        k = index.get(w)
        if k is None:
            k = index.get(w.lower())
        if k is not None:
            out[s] = M[k]
    return out


def build_vectors(source: str, vocab_strings, structs) -> WordVectors:
    """The vectors of ``source`` for a corpus with symbols ``vocab_strings`` whose examples (of
    the representation a ``corpus:`` builder trains on) are ``structs`` (module docstring)."""
    source = canonical_source(source)
    if source_kind(source) == "corpus":
        train = BUILDERS[builder_of(source)]
        words, M = train([example_words(x) for x in structs], dims=DIMS, window=WINDOW, min_count=MIN_COUNT,
                         seed=SEED)
    else:
        words, M = load_source(source, possible_words(vocab_strings))
    return WordVectors(tuple(words), np.ascontiguousarray(M, dtype=np.float64))
