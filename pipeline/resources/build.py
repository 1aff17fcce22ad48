"""Building corpus resources, and their array form: WordNet synonymy, LSA and domain spaces, SPTK
tables and the word vectors they are built from.

:func:`build_value` is the one builder of both paths, in-memory examples
(:func:`gramtile.pipeline.compute.inmemory.add_resources`) and corpus stores
(:func:`gramtile.pipeline.stores.resource_builds.ensure`). :func:`arrays_of` / :func:`value_of`
give a value's arrays for storage and back; :func:`content_hash` hashes them; :func:`map_value`
re-indexes a value onto another vocabulary (saved models).
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import scipy.sparse as sp

from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.subsequence import VECTORS_PREFIX as SUBSEQUENCE_VECTORS
from gramtile.pipeline.resources.domain import domain_resource
from gramtile.pipeline.resources.lexical import PREFIX as LEXICAL_PREFIX
from gramtile.pipeline.resources.lexical import lexical_table
from gramtile.pipeline.resources.similarity import similarity_resource
from gramtile.pipeline.resources.vector_sources import WordVectors, build_vectors, symbol_vectors

#: Name prefix of a stored vector source (``gramtile.pipeline.resources.keys.VECTORS``).
VECTORS_PREFIX = "vectors:"

# ---- building ------------------------------------------------------------------------------

def build_value(name: str, vocab_strings, structs, vectors: WordVectors | None = None):
    """Build resource ``name`` over the symbols ``vocab_strings`` from the structures ``structs``.

    The one builder of both paths: :func:`gramtile.pipeline.compute.inmemory.add_resources` (in-memory
    examples) and :func:`ensure` (every example of a corpus store).

    Parameters
    ----------
    name : str
        ``similarity/wordnet``, ``similarity/lsa/<field>``, ``domain/lsa/<dims>``, ``sptk:{...}``
        (the smoothed partial tree kernel's lexical table, :mod:`gramtile.pipeline.resources.lexical`)
        ``vectors:SOURCE`` (the word vectors of a vector source,
        :mod:`gramtile.pipeline.resources.vector_sources`) or ``similarity/vectors:SOURCE`` (the
        subsequence kernel's soft matching by word vectors: the unit vector of every symbol).
    vocab_strings : sequence of str
        Symbol strings in id order (``Vocabularies.sym.strings``).
    structs : list of structures
        The examples of the representation the kernel reads (unused by WordNet).
    vectors : WordVectors or None
        For an SPTK table of source ``vectors`` and ``similarity/vectors:SOURCE``: the vectors,
        when already built (a corpus store's stored vectors); None builds them from the source.

    Returns
    -------
    scipy.sparse.csr_matrix (WordNet, SPTK table), ndarray of shape (V, k) (LSA / domain factors)
    or WordVectors
    """
    if name.startswith(VECTORS_PREFIX):
        return build_vectors(name[len(VECTORS_PREFIX):], vocab_strings, structs)
    if name.startswith(SUBSEQUENCE_VECTORS):
        if vectors is None:
            vectors = build_vectors(name[len(SUBSEQUENCE_VECTORS):], vocab_strings, structs)
        return symbol_vectors(vectors, vocab_strings)
    if name.startswith(LEXICAL_PREFIX):
        return lexical_table(name, vocab_strings, structs, vectors)
    if name.startswith("domain/"):

        return domain_resource(name, vocab_strings, structs)

    docs = None
    if name.startswith("similarity/lsa/"):
        field = name.rsplit("/", 1)[1]
        docs = [list(getattr(x, field) or ()) for x in structs]
    return similarity_resource(name, vocab_strings, docs)


#: The arrays that store a resource value of each kind (``vectors``: the matrix, and the words as
#: UTF-8 bytes with the end offset of each).
ARRAY_NAMES = {"csr": ("indptr", "indices", "data"), "dense": ("value",),
               "vectors": ("value", "word_bytes", "word_ends")}


def arrays_of(value) -> tuple:
    """(kind, {array name: ndarray}) of a resource value, in the stored order (inverse of
    :func:`value_of`)."""

    if isinstance(value, WordVectors):
        encoded = [w.encode("utf-8") for w in value.words]
        ends = np.cumsum([len(b) for b in encoded], dtype=np.int64) if encoded else np.zeros(0, np.int64)
        return "vectors", {"value": np.ascontiguousarray(value.matrix, dtype=np.float64),
                           "word_bytes": np.frombuffer(b"".join(encoded), dtype=np.uint8).copy(),
                           "word_ends": ends}
    if sp.issparse(value):
        A = value.tocsr()
        return "csr", {"indptr": np.asarray(A.indptr, dtype=np.int64),
                       "indices": np.asarray(A.indices, dtype=np.int32),
                       "data": np.asarray(A.data, dtype=np.float64)}
    return "dense", {"value": np.ascontiguousarray(value, dtype=np.float64)}


def value_of(kind: str, shape, arrays: dict):
    """The resource value stored as ``arrays`` (a CSR matrix of ``shape``, or the dense factor)."""
    if kind == "csr":
        return sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(shape))
    if kind == "vectors":
        raw = np.asarray(arrays["word_bytes"], dtype=np.uint8).tobytes()
        ends = np.asarray(arrays["word_ends"], dtype=np.int64)
        starts = np.concatenate([[0], ends[:-1]]) if ends.size else ends
        words = tuple(raw[a:b].decode("utf-8") for a, b in zip(starts.tolist(), ends.tolist()))
        return WordVectors(words, np.asarray(arrays["value"], dtype=np.float64).reshape(tuple(shape)))
    return arrays["value"]


def content_hash(kind: str, shape, arrays: dict) -> str:
    """sha256 over kind, shape and each array's name, dtype, shape and little-endian bytes."""
    h = hashlib.sha256(json.dumps({"kind": kind, "shape": [int(s) for s in shape]}).encode())
    for name in sorted(arrays):
        a = np.asarray(arrays[name])
        a = a.astype(a.dtype.newbyteorder("<"))
        h.update(f"|{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


# ---- re-indexing (saved models) ------------------------------------------------------------------

def map_value(value, strings, onto):
    """Re-index a resource value built over the symbols ``strings`` onto the symbols ``onto``.

    A saved model carries the resources its kernel read at training, indexed by the training
    vocabulary; prediction encodes its examples over another vocabulary. A symbol of ``onto``
    seen at training keeps its row (dense factor) or its entries with every other seen symbol
    (CSR similarity). A symbol unseen at training is *out of the space*, as a word outside the
    corpus in LSA / domain models: a zero factor row (zero domain vector; in soft matching it
    then matches only itself, since the kernel takes 1 on the diagonal of an LSA factor) or, for
    a CSR matrix, a unit diagonal entry and nothing else (exact matching).

    Parameters
    ----------
    value : scipy.sparse matrix (V, V) or ndarray (V, k)
    strings : sequence of str
        The symbols indexing ``value`` (length V), in id order.
    onto : sequence of str
        The target symbols in id order.

    Returns
    -------
    scipy.sparse.csr_matrix (n, n) with sorted indices, or ndarray (n, k); n = len(onto).
    """

    index = {s: i for i, s in enumerate(strings)}
    src = np.fromiter((index.get(s, -1) for s in onto), dtype=np.int64, count=len(onto))
    seen = src >= 0
    n = len(onto)
    if sp.issparse(value):
        A = value.tocsr()
        if A.shape != (len(index), len(index)):
            raise KernelSpecError(f"resource matrix of shape {A.shape} does not match its {len(index)} symbols")
        new = np.flatnonzero(seen)
        P = sp.csr_matrix((np.ones(new.size), (new, src[seen])), shape=(n, A.shape[0]))
        M = (P @ A @ P.T).tocsr()
        # unseen symbols: exact matching only (unit diagonal), as a word without synsets
        M = (M + sp.diags((~seen).astype(np.float64), format="csr")).tocsr()
        M.sum_duplicates()
        M.sort_indices()
        return M
    F = np.asarray(value, dtype=np.float64)
    if F.ndim != 2 or F.shape[0] != len(index):
        raise KernelSpecError(f"resource factor of shape {F.shape} does not match its {len(index)} symbols")
    out = np.zeros((n, F.shape[1]))
    out[seen] = F[src[seen]]
    return out
