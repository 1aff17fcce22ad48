"""The domain space of the domain kernel: an IDF-weighted LSA term-by-domain matrix of a corpus.

Following Gliozzo et al. (2005) and Giuliano et al. (2006, section 4.2), LSA of the
term-by-document matrix T (terms x documents, raw counts) gives T ~ U_k S_k V_k^T; the domain
model is D = I^N U_k sqrt(S_k), with I^N scaling each term row to unit length (a term in no
document keeps a zero row). The domain kernel maps a context's term-frequency vector t by
t I^IDF D, so the corpus resource is the single factor

    F = I^IDF D,   F[w] = idf(w) D[w],   idf(w) = log(N / df(w))

(N documents, df(w) documents containing w; 0 for a term in no document). A word that occurs in
every document gets idf 0 and no weight, as in the vector space model.

The space is unsupervised: built from the corpus's own contexts (no labels), or from a named
background corpus by passing its documents. Randomised SVD is seeded, so F is reproducible.
"""
from __future__ import annotations

import numpy as np

from gramtile.kernels.errors import KernelSpecError
from gramtile.pipeline import optional
from gramtile.pipeline.resources.similarity import term_document


def domain_space(docs, vocab, dims: int = 100, random_state: int = 0) -> np.ndarray:
    """The factor F = I^IDF D of the domain kernel over a vocabulary.

    Parameters
    ----------
    docs : iterable of sequences of str
        Documents (contexts) as word lists.
    vocab : sequence of str
        The corpus symbols in id order (``Vocabularies.sym.strings``); F has one row per symbol.
    dims : int >= 1
        Domain dimensions k (fewer when T has lower rank).
    random_state : int
        Seed of sklearn's randomized ``TruncatedSVD``.

    Returns
    -------
    ndarray, float64, shape (len(vocab), k)
    """
    if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
        raise KernelSpecError(f"parameter 'dims' of kernel 'domain' must be an integer >= 1, got {dims!r}")
    T, n_docs = term_document(docs, vocab)
    if min(T.shape) == 0 or T.nnz == 0:
        return np.zeros((len(vocab), 1))
    rank_cap = min(T.shape)
    if dims < rank_cap - 1:
        TruncatedSVD = optional.sklearn("decomposition").TruncatedSVD

        svd = TruncatedSVD(n_components=dims, random_state=random_state)
        US = svd.fit_transform(T)  # U_k S_k
        s = svd.singular_values_
    else:
        # small corpora: exact SVD (TruncatedSVD needs k < number of documents)
        U, s, _ = np.linalg.svd(T.toarray(), full_matrices=False)
        k = min(dims, rank_cap)
        US, s = U[:, :k] * s[:k], s[:k]
    keep = s > 1e-12 * max(float(s.max(initial=0.0)), 1e-300)
    D = US[:, keep] / np.sqrt(s[keep])  # U_k sqrt(S_k)
    norms = np.linalg.norm(D, axis=1)
    nz = norms > 1e-12 * max(float(norms.max(initial=0.0)), 1e-300)
    D[nz] /= norms[nz, None]
    D[~nz] = 0.0
    df = np.diff((T > 0).astype(np.int64).tocsr().indptr)
    idf = np.where(df > 0, np.log(n_docs / np.maximum(df, 1)), 0.0)
    F = idf[:, None] * D
    if F.shape[1] == 0:
        F = np.zeros((len(vocab), 1))
    return np.ascontiguousarray(F, dtype=np.float64)


def context_words(x) -> tuple:
    """The words of a token sequence (tokens) or WSD instance (words, else lemmas)."""
    if hasattr(x, "tokens"):
        return tuple(x.tokens)
    return tuple(x.words if x.words is not None else x.lemmas)


def domain_resource(name: str, vocab_strings, structs) -> np.ndarray:
    """Build a resource ``domain/lsa/<dims>`` from the examples' contexts (``structs``)."""
    parts = name.split("/")
    if len(parts) != 3 or parts[:2] != ["domain", "lsa"] or not parts[2].isdigit():
        raise KernelSpecError(f"unknown resource {name!r}; the domain kernel's resource is 'domain/lsa/<dims>'")
    return domain_space([context_words(x) for x in structs], vocab_strings, dims=int(parts[2]))
