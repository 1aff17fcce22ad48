"""The lexical similarity table of the smoothed partial tree kernel (SPTK), over corpus symbol ids.

A spec of kind ``sptk`` names one resource, ``sptk:{...}`` (its table parameters as canonical
JSON: ``source``, ``vectors``, ``threshold``, ``lexical``, ``prefix``, ``same_pos``).
:func:`lexical_table` builds it from the symbol strings and the examples of the representation
the kernel reads, once per corpus:

1. the **lexical symbols**: labels of childless nodes (``lexical="leaves"``) or labels that
   start with ``prefix`` (``lexical="prefix"``), over every example;
2. each one's **word** and **part of speech**: the label without ``prefix`` (when it carries
   it), split at a final ``::`` into word and coarse PoS (KeLP's ``lemma::p``; no PoS otherwise);
3. the **word similarity**, by source: ``vectors``, the cosine of the words' vectors from the
   vector source (a file, ``spacy:NAME`` or ``corpus:BUILDER``,
   :mod:`gramtile.pipeline.resources.vector_sources`; looked up as written, else lower-cased),
   clipped at 0
   (:mod:`gramtile.pipeline.resources.vectors` says why); ``wordnet``, the WordNet synonymy
   measure of the soft subsequence kernel (:func:`~gramtile.pipeline.resources.similarity.wordnet_similarity`);
   ``lsa``, the cosine in the corpus's LSA space (the soft subsequence kernel's builder, with the
   lexical words of each example as its document);
4. the **table**: entries between lexical symbols whose words' similarity is >= ``threshold``
   (and > 0), and, with ``same_pos``, whose PoS are equal; then a unit diagonal for every
   symbol. A word without a vector (out of the vocabulary of the vectors, no synsets in WordNet,
   absent from the LSA space) is similar only to itself.

The table is a scipy CSR matrix (V, V), stored in the corpus store like the other resources,
its content hash recorded in every Gram store that reads it.
"""
from __future__ import annotations

import json

import numpy as np
import scipy.sparse as sp

from gramtile.kernels.errors import KernelSpecError
from gramtile.pipeline.resources.similarity import lsa_similarity, wordnet_similarity
from gramtile.pipeline.resources.vector_sources import WordVectors, build_vectors, split_label
from gramtile.pipeline.resources.vectors import cosine_table

PREFIX = "sptk:"
#: LSA dimensions and seed of ``source="lsa"`` (those of the soft subsequence kernel's space).
LSA_DIMS = 100
SEED = 0


def table_params(name: str) -> dict:
    """The parameters a resource name ``sptk:{...}`` carries."""
    if not name.startswith(PREFIX):
        raise KernelSpecError(f"not a lexical table resource: {name!r}")
    try:
        p = json.loads(name[len(PREFIX):])
    except json.JSONDecodeError:
        raise KernelSpecError(f"resource {name!r}: the parameters after 'sptk:' are not JSON") from None
    need = {"source", "vectors", "threshold", "lexical", "prefix", "same_pos"}
    if not isinstance(p, dict) or set(p) != need:
        raise KernelSpecError(f"resource {name!r} must name exactly {sorted(need)}")
    return p


def lexical_symbols(vocab_strings, structs, lexical: str, prefix: str | None) -> np.ndarray:
    """Sorted ids of the lexical symbols in ``structs`` (module docstring, step 1)."""
    index = {s: k for k, s in enumerate(vocab_strings)}
    ids = set()
    for t in structs:
        for node in t.nodes():
            if (lexical == "leaves" and not node.children) or \
                    (lexical == "prefix" and prefix and node.label.startswith(prefix)):
                k = index.get(node.label)
                if k is not None:
                    ids.add(k)
    return np.array(sorted(ids), dtype=np.int64)


def word_similarity(source: str, words, docs, vectors: WordVectors | None = None,
                    threshold: float = 0.0) -> sp.csr_matrix:
    """Thresholded similarity between ``words`` (CSR, n x n, entries >= threshold and > 0);
    ``vectors`` are the word vectors of source ``vectors``."""
    n = len(words)
    if n == 0:
        return sp.csr_matrix((0, 0))
    if source == "vectors":
        if vectors is None:
            raise KernelSpecError("the lexical similarity of source 'vectors' needs the word vectors")
        vw, M = vectors.words, vectors.matrix
        row = {w: k for k, w in enumerate(vw)}
        have = np.array([row.get(w, row.get(w.lower(), -1)) for w in words], dtype=np.int64)
        F = np.zeros((n, M.shape[1] if M.ndim == 2 else 1))
        F[have >= 0] = M[have[have >= 0]]
        return cosine_table(F, threshold)
    if source == "wordnet":
        A = wordnet_similarity(list(words)).tocsr()
        A.data[A.data < threshold] = 0.0
        A.eliminate_zeros()
        return A
    if source == "lsa":
        D = lsa_similarity(docs, list(words), dims=LSA_DIMS, random_state=SEED)
        return cosine_table(D, threshold)
    raise KernelSpecError(f"unknown lexical similarity source {source!r}; known: 'vectors', 'wordnet', 'lsa'")


def lexical_table(name: str, vocab_strings, structs, vectors: WordVectors | None = None) -> sp.csr_matrix:
    """The SPTK similarity table named ``name`` over ``vocab_strings`` (module docstring).

    Parameters
    ----------
    name : str
        ``sptk:{...}`` (:meth:`gramtile.kernels.sptk.SmoothedPartialTreeKernel.resources`).
    vocab_strings : sequence of str
        The corpus symbols in id order.
    structs : list of Tree
        Every example of the representation the kernel reads.
    vectors : WordVectors or None
        With source ``vectors``: the vectors of the table's vector source (a corpus store's
        stored vectors resource); None builds them here
        (:func:`~gramtile.pipeline.resources.vector_sources.build_vectors`).

    Returns
    -------
    scipy.sparse.csr_matrix, float64, (V, V): unit diagonal, symmetric, values in [0, 1].
    """
    p = table_params(name)
    lex = lexical_symbols(vocab_strings, structs, p["lexical"], p["prefix"])
    parts = [split_label(vocab_strings[k], p["prefix"]) for k in lex]
    words = sorted({w for w, _ in parts})
    windex = {w: k for k, w in enumerate(words)}
    docs = None
    if p["source"] == "lsa":
        lexset = set(vocab_strings[k] for k in lex)
        docs = [[split_label(n.label, p["prefix"])[0] for n in t.nodes() if n.label in lexset] for t in structs]
    if p["source"] == "vectors" and vectors is None:
        vectors = build_vectors(p["vectors"], vocab_strings, structs)
    W = word_similarity(p["source"], words, docs, vectors, float(p["threshold"]))
    W = W.maximum(W.T).tocsr()  # exactly symmetric (blocked products may differ in the last bit)
    V = len(vocab_strings)
    if lex.size and W.nnz:
        wid = np.array([windex[w] for w, _ in parts], dtype=np.int64)
        P = sp.csr_matrix((np.ones(lex.size), (np.arange(lex.size), wid)), shape=(lex.size, len(words)))
        T = (P @ W @ P.T).tocoo()
        keep = T.row != T.col
        if p["same_pos"]:
            pos = np.array([q or "" for _, q in parts], dtype=object)
            keep &= pos[T.row] == pos[T.col]
        keep &= (T.data >= float(p["threshold"])) & (T.data > 0)
        r, c, v = lex[T.row[keep]], lex[T.col[keep]], np.minimum(T.data[keep], 1.0)
    else:
        r = c = np.zeros(0, np.int64)
        v = np.zeros(0)
    A = sp.csr_matrix((np.concatenate([v, np.ones(V)]), (np.concatenate([r, np.arange(V)]),
                                                          np.concatenate([c, np.arange(V)]))), shape=(V, V))
    A.sum_duplicates()
    A.sort_indices()
    return A
