"""Symbol-similarity matrices for soft matching: WordNet synonymy and LSA domain proximity.

Both are positive semidefinite with a unit diagonal, indexed by the corpus symbol ids (the
``sym`` vocabulary), as the soft subsequence kernel expects (docs/kernels.md, "Gap-weighted subsequence kernel and soft matching"):

- WordNet: A = S S^T, S the term-by-synset incidence matrix with rows scaled to unit length,
  so A[u, v] = |syn(u) & syn(v)| / sqrt(|syn(u)| |syn(v)|); a term without synsets keeps a
  unit diagonal entry only (exact match). Returned as a scipy CSR matrix (very sparse).
- LSA: D from a truncated SVD of the corpus term-by-document matrix, rows scaled to unit
  length; A = D D^T off the diagonal and 1 on it. A is dense, so the factor D itself is
  returned (shape (n_terms, k)); the kernel forms D[u] . D[v] only for symbol pairs that occur.

WordNet 3.0 is read from Debian's plain database files (``/usr/share/wordnet``, packages
wordnet-base and wordnet-sense-index; ``make setup`` installs them). nltk's
``WordNetCorpusReader`` refuses that directory (nltk's path sandbox) and needs a ``lexnames``
file Debian does not ship, so the index files are parsed here directly; lookups follow nltk's
``wordnet.synsets(lemma)``: lower-cased, any part of speech, nltk's ``morphy`` (exception
lists, then one round of suffix rules).
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gramtile.kernels.errors import KernelSpecError
from gramtile.pipeline import optional
from gramtile.pipeline.representations.errors import CorpusFormatError

#: Where Debian's wordnet-base puts the WordNet 3.0 database (override: GRAMTILE_WORDNET).
WORDNET_DIR = Path(os.environ.get("GRAMTILE_WORDNET", "/usr/share/wordnet"))

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}

# nltk's WordNetCorpusReader.MORPHOLOGICAL_SUBSTITUTIONS (the rules of WordNet's morphy).
_SUFFIX_RULES = {
    "n": [("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"), ("ches", "ch"),
          ("shes", "sh"), ("men", "man"), ("ies", "y")],
    "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
          ("ing", "")],
    "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    "r": [],
}


class WordNet:
    """The lemma -> synset index of a WordNet database directory (index.* and *.exc files)."""

    def __init__(self, root=WORDNET_DIR):
        root = Path(root)
        missing = [f"index.{f}" for f in POS_FILES.values() if not (root / f"index.{f}").is_file()]
        if missing:
            raise FileNotFoundError(
                f"WordNet 3.0 not found in {root} (missing {', '.join(missing)}); install it with "
                f"'apt-get install wordnet-base wordnet-sense-index' (or 'make setup' as root), or "
                f"set GRAMTILE_WORDNET to a directory holding the WordNet database files")
        self.root = root
        #: pos -> {lemma: tuple of synset offsets}
        self.index = {p: self._read_index(root / f"index.{f}") for p, f in POS_FILES.items()}
        #: pos -> {inflected form: list of base forms}
        self.exceptions = {p: self._read_exceptions(root / f"{f}.exc") for p, f in POS_FILES.items()}

    @staticmethod
    def _read_index(path):
        out = {}
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if line.startswith("  "):  # licence header
                    continue
                parts = line.split()
                try:
                    n_synsets, n_ptrs = int(parts[2]), int(parts[3])
                    offsets = parts[4 + n_ptrs + 2:]
                    if len(offsets) != n_synsets:
                        raise ValueError
                except (IndexError, ValueError):
                    raise CorpusFormatError("not a WordNet index line (lemma pos synset_cnt p_cnt ...)",
                                            path=path, line=lineno,
                                            fix="reinstall wordnet-base, or point GRAMTILE_WORDNET at "
                                                "a WordNet 3.0 database") from None
                out[parts[0]] = tuple(int(o) for o in offsets)
        return out

    @staticmethod
    def _read_exceptions(path):
        out = {}
        if path.is_file():
            with open(path, encoding="utf-8") as f:
                for line in f:
                    parts = line.split()
                    if len(parts) >= 2:
                        # a later line for the same form replaces the earlier one, as in nltk
                        out[parts[0]] = parts[1:]
        return out

    def _morphy(self, form, pos):
        index = self.index[pos]
        if form in self.exceptions[pos]:
            forms = self.exceptions[pos][form]
        else:
            forms = [form[: -len(old)] + new for old, new in _SUFFIX_RULES[pos] if form.endswith(old)]
        seen, out = set(), []
        for f in [form] + forms:
            if f in index and f not in seen:
                seen.add(f)
                out.append(f)
        return out

    def synsets(self, word: str) -> list:
        """Synset keys ``(pos, offset)`` of ``word`` in every part of speech (nltk order)."""
        form = word.lower().replace(" ", "_")
        keys = []
        for pos in POS_FILES:
            for base in self._morphy(form, pos):
                keys.extend((pos, off) for off in self.index[pos][base])
        return keys


@lru_cache(maxsize=2)
def load_wordnet(root=WORDNET_DIR) -> WordNet:
    """The WordNet index of ``root``, parsed once per process (about a second)."""
    return WordNet(root)


def wordnet_similarity(vocab_strings, root=WORDNET_DIR) -> sp.csr_matrix:
    """WordNet synonymy matrix over a vocabulary.

    Parameters
    ----------
    vocab_strings : sequence of str
        The corpus symbols, in id order (``Vocabularies.sym.strings``).
    root : path
        WordNet database directory.

    Returns
    -------
    scipy.sparse.csr_matrix, float64, shape (V, V)
        A = S S^T with S the term-by-synset incidence, rows of S scaled to unit length; unit
        diagonal; column indices sorted in every row. PSD by construction.
    """
    wn = load_wordnet(root)
    synset_id = {}
    rows, cols, vals = [], [], []
    for u, word in enumerate(vocab_strings):
        keys = sorted(set(wn.synsets(word))) if word else []
        if not keys:
            # a private pseudo-synset: the term matches only itself
            keys = [("", u)]
        w = 1.0 / np.sqrt(len(keys))
        for k in keys:
            rows.append(u)
            cols.append(synset_id.setdefault(k, len(synset_id)))
            vals.append(w)
    S = sp.csr_matrix((vals, (rows, cols)), shape=(len(vocab_strings), len(synset_id)))
    A = (S @ S.T).tocsr()
    A.sum_duplicates()
    A.sort_indices()
    # the diagonal is 1 up to rounding of sum_k (1/sqrt(m))^2; make it exact
    A.setdiag(1.0)
    A.sort_indices()
    return A


def term_document(docs, vocab):
    """Term-by-document count matrix over ``vocab`` (strings in id order), and N.

    Returns
    -------
    (scipy.sparse.csr_matrix of shape (len(vocab), N), int N)
        Strings not in ``vocab`` are ignored.
    """
    index = {s: i for i, s in enumerate(vocab)}
    rows, cols = [], []
    n_docs = 0
    for d, doc in enumerate(docs):
        n_docs += 1
        for tok in doc:
            i = index.get(tok)
            if i is not None:
                rows.append(i)
                cols.append(d)
    T = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(index), n_docs))
    T.sum_duplicates()
    return T, n_docs


def lsa_similarity(docs, vocab, dims: int = 100, random_state: int = 0) -> np.ndarray:
    """LSA domain factor D over a vocabulary (A = D D^T off the diagonal, 1 on it).

    Parameters
    ----------
    docs : iterable of sequences of str
        The corpus documents as token (or lemma) lists.
    vocab : sequence of str
        The corpus symbols, in id order; the term-by-document matrix has one row per symbol.
    dims : int >= 1
        Number of LSA dimensions k (fewer when the matrix has lower rank).
    random_state : int
        Seed of sklearn's randomized ``TruncatedSVD``, so D is reproducible.

    Returns
    -------
    ndarray, float64, shape (V, k)
        Term vectors U_k Sigma_k scaled to unit length; a term absent from ``docs`` (or with a
        zero projection) has a zero row and then matches only itself.
    """
    if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
        raise KernelSpecError(f"LSA 'dims' must be an integer >= 1, got {dims!r}")
    T, _ = term_document(docs, vocab)
    rank_cap = min(T.shape)
    if rank_cap == 0:
        return np.zeros((T.shape[0], 1))
    if dims < rank_cap - 1:
        TruncatedSVD = optional.sklearn("decomposition").TruncatedSVD

        D = TruncatedSVD(n_components=dims, random_state=random_state).fit_transform(T)
    else:
        # small corpora: the exact SVD (TruncatedSVD needs k < n_features)
        U, sig, _ = np.linalg.svd(T.toarray(), full_matrices=False)
        k = min(dims, rank_cap)
        D = U[:, :k] * sig[:k]
    norms = np.linalg.norm(D, axis=1)
    # below this a row is numerically zero (a term in no document): leave it zero
    nz = norms > 1e-12 * max(float(norms.max(initial=0.0)), 1e-300)
    D[nz] /= norms[nz, None]
    D[~nz] = 0.0
    return np.ascontiguousarray(D, dtype=np.float64)


def similarity_resource(name: str, vocab_strings, docs=None):
    """Build the resource a kernel names in ``resources()`` (``similarity/...``).

    ``similarity/wordnet`` needs only the vocabulary; ``similarity/lsa/<on>`` also needs the
    documents (lists of strings of the ``on`` column).
    """
    if name == "similarity/wordnet":
        return wordnet_similarity(vocab_strings)
    if name.startswith("similarity/lsa/"):
        if docs is None:
            raise KernelSpecError(f"resource {name!r} needs the corpus documents to build the LSA space")
        return lsa_similarity(docs, vocab_strings)
    raise KernelSpecError(f"unknown resource {name!r}; known: 'similarity/wordnet', 'similarity/lsa/<on>'")
