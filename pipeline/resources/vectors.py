"""Word vectors: reading the usual file formats, training small ones from a corpus, and the
sparse thresholded cosine table the smoothed partial tree kernel reads.

Formats read by :func:`read_vectors` (chosen by the file name):

- ``*.bin``: word2vec binary (a header line ``N D``, then per word its bytes, a space and D
  little-endian float32 values, optionally followed by a newline);
- ``*.npy``: a float matrix (N, D) with its vocabulary in a text file beside it, same stem and
  suffix ``.vocab`` (one word per line, in row order);
- anything else: text, one word and its D values per line, space separated: word2vec text and
  fastText ``.vec`` (a first line ``N D``), GloVe (no header). Gzip-compressed text (``.gz``)
  is read too.

A spaCy pipeline's static vectors are read by :func:`spacy_vectors` (source ``spacy:NAME``,
NAME an installed package or the folder of a saved pipeline). :func:`load_source` reads any
source named by a string (a file, or ``spacy:NAME``).

Cosine similarity is **clipped at 0**: sigma multiplies sums of positive fragment weights, so a
negative value would subtract the fragments of one word pair from the kernel, which no reading
of "similar" supports; raising to a power would instead change every similarity above the
threshold (and the threshold's meaning). Words pointing away from each other are simply not
similar. Neither choice makes the thresholded table positive semidefinite (docs/kernels.md).

Vectors trained on a corpus, when no outside vectors exist, come from one of two seeded
builders (:data:`BUILDERS`, sources ``corpus:ppmi`` and ``corpus:word2vec``):

- ``ppmi`` (:func:`train_vectors`, the default): positive pointwise mutual information of word
  co-occurrences in a symmetric window, factored by a seeded randomized truncated SVD, rows
  scaled by the square root of the singular values (Levy & Goldberg 2014 show PPMI-SVD is close
  to word2vec's SGNS on similarity tasks). It is the default because it needs no optional
  package, gives the same vectors for a seed on any machine, and, being a closed-form count
  model, does not depend on the number of training passes, which matters on the small corpora
  this project's stores usually hold.
- ``word2vec`` (:func:`train_word2vec`): gensim's skip-gram with negative sampling, seeded and
  on one worker thread, so a seed gives the same vectors run after run (extra ``[word2vec]``).
"""
from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gramtile.kernels.errors import KernelSpecError
from gramtile.pipeline import optional
from gramtile.pipeline.representations.errors import CorpusFormatError

#: A vector source ``spacy:NAME`` reads the static vectors of spaCy pipeline NAME.
SPACY = "spacy:"
#: A vector source ``corpus:BUILDER`` trains vectors on the corpus with one of :data:`BUILDERS`.
CORPUS = "corpus:"
#: The builder of ``corpus:`` without a name.
DEFAULT_BUILDER = "ppmi"


def vector_files(path) -> list:
    """The files a vector source consists of (the ``.npy`` matrix and its ``.vocab``, or one file)."""
    p = Path(path)
    return [p, p.with_suffix(".vocab")] if p.suffix == ".npy" else [p]


def _keep(word, words):
    return words is None or word in words


def _read_text(path, words):
    opener = gzip.open if str(path).endswith(".gz") else open
    out_w, out_v = [], []
    dim = None
    with opener(path, "rt", encoding="utf-8", errors="strict") as f:
        for lineno, line in enumerate(f, 1):
            parts = line.rstrip("\n").rstrip(" ").split(" ")
            if lineno == 1 and len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                dim = int(parts[1])  # word2vec / fastText header "N D"
                continue
            if len(parts) < 2 or parts == [""]:
                if not line.strip():
                    continue
                raise CorpusFormatError("a word-vector line needs a word and its values", path=path, line=lineno,
                                        fix="write one 'word v1 v2 ... vD' per line")
            if dim is None:
                dim = len(parts) - 1
            if len(parts) - 1 != dim:
                raise CorpusFormatError(f"{len(parts) - 1} values where the file has {dim}", path=path, line=lineno,
                                        fix="every word needs the same number of values")
            if not _keep(parts[0], words):
                continue
            try:
                out_v.append(np.asarray(parts[1:], dtype=np.float64))
            except ValueError:
                raise CorpusFormatError("a value is not a number", path=path, line=lineno,
                                        fix="write 'word v1 v2 ... vD' with decimal numbers") from None
            out_w.append(parts[0])
    return out_w, out_v, dim or 0


def _read_bin(path, words):
    out_w, out_v = [], []
    with open(path, "rb") as f:
        header = f.readline().split()
        if len(header) != 2 or not all(h.isdigit() for h in header):
            raise CorpusFormatError("a word2vec binary file starts with a line 'N D'", path=path, line=1,
                                    fix="name text files other than *.bin")
        n, dim = int(header[0]), int(header[1])
        for k in range(n):
            chars = bytearray()
            while True:
                c = f.read(1)
                if not c:
                    raise CorpusFormatError(f"the file ends inside word {k + 1} of {n}", path=path,
                                            fix="the file is truncated: copy it again")
                if c == b" ":
                    break
                if c != b"\n" or chars:
                    chars += c
            vec = f.read(4 * dim)
            if len(vec) != 4 * dim:
                raise CorpusFormatError(f"the file ends inside the values of word {k + 1} of {n}", path=path,
                                        fix="the file is truncated: copy it again")
            word = chars.decode("utf-8", errors="replace")
            if _keep(word, words):
                out_w.append(word)
                out_v.append(np.frombuffer(vec, dtype="<f4").astype(np.float64))
    return out_w, out_v, dim


def _read_npy(path, words):
    vocab_path = Path(path).with_suffix(".vocab")
    if not vocab_path.is_file():
        raise FileNotFoundError(f"word vectors {path}: the vocabulary {vocab_path} (one word per line, in row "
                                f"order) is missing")
    M = np.load(path, allow_pickle=False)
    vocab = vocab_path.read_text(encoding="utf-8").splitlines()
    if M.ndim != 2 or M.shape[0] != len(vocab):
        raise CorpusFormatError(f"the matrix has shape {M.shape} but {vocab_path.name} lists {len(vocab)} words",
                                path=path, fix="save one row per vocabulary line")
    rows = [k for k, w in enumerate(vocab) if _keep(w, words)]
    return [vocab[k] for k in rows], [M[k].astype(np.float64) for k in rows], int(M.shape[1])


def read_vectors(path, words=None):
    """Word vectors of a file (format by name: module docstring).

    Parameters
    ----------
    path : path-like
    words : set of str or None
        Keep only these words (None: all). A word listed twice keeps its first vector.

    Returns
    -------
    (list of str, ndarray float64 (n, D))
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"word vectors {path}: no such file")
    suffix = path.suffix.lower()
    reader = _read_bin if suffix == ".bin" else _read_npy if suffix == ".npy" else _read_text
    ws, vs, dim = reader(path, words)
    seen, keep = set(), []
    for k, w in enumerate(ws):
        if w not in seen:
            seen.add(w)
            keep.append(k)
    M = np.vstack([vs[k] for k in keep]) if keep else np.zeros((0, dim))
    if not np.all(np.isfinite(M)):
        raise CorpusFormatError("a vector holds a value that is not finite", path=path,
                                fix="remove or repair the words with inf / nan values")
    return [ws[k] for k in keep], M


def spacy_vectors(name: str, words=None):
    """The static word vectors of the spaCy pipeline ``name`` (an installed package or a saved
    pipeline's folder), as (list of str, ndarray float64 (n, D)).

    Every key of the pipeline's vectors table is a word with that row's vector (several words
    may share a row), in row order, then by word. ``words`` keeps only these words (None: all).

    Raises
    ------
    KernelSpecError
        The pipeline cannot be loaded, has no vectors (the ``*_sm`` pipelines ship none), or has
        floret (subword-hashed) vectors, which have no word table to read.
    """
    spacy = optional.spacy()
    try:
        nlp = spacy.load(name)
    except OSError as e:
        fix = "give the folder of a saved pipeline (nlp.to_disk)" if "/" in name or "\\" in name else \
            f"install it (python -m spacy download {name}) or give the folder of a saved pipeline"
        raise KernelSpecError(f"vectors 'spacy:{name}': cannot load the spaCy pipeline {name!r} "
                              f"({str(e).splitlines()[0]}). Fix: {fix}") from None
    table = nlp.vocab.vectors
    if table.mode == "floret":
        raise KernelSpecError(f"vectors 'spacy:{name}': the pipeline has floret (subword) vectors, which have no word "
                              f"table. Fix: export the vectors of your words to a word2vec text file and name that")
    if table.shape[0] == 0 or table.shape[1] == 0 or not len(table.key2row):
        raise KernelSpecError(f"vectors 'spacy:{name}': the spaCy pipeline {name!r} has no word vectors. Fix: name a "
                              f"pipeline with vectors, e.g. spacy:en_core_web_md (python -m spacy download "
                              f"en_core_web_md), or a vector file")
    strings = nlp.vocab.strings
    pairs = []
    for key, row in table.key2row.items():
        if key in strings:
            w = strings[key]
            if _keep(w, words):
                pairs.append((int(row), w))
    pairs.sort()
    data = np.asarray(table.data)
    M = data[[r for r, _ in pairs]].astype(np.float64) if pairs else np.zeros((0, table.shape[1]))
    if not np.all(np.isfinite(M)):
        raise KernelSpecError(f"vectors 'spacy:{name}': a vector holds a value that is not finite. Fix: repair the "
                              f"pipeline's vectors")
    return [w for _, w in pairs], M


def load_source(source: str, words=None):
    """Word vectors named by ``source``: ``spacy:NAME`` (:func:`spacy_vectors`) or a file path
    (:func:`read_vectors`). ``words`` keeps only these words (None: all)."""
    if source.startswith(SPACY):
        return spacy_vectors(source[len(SPACY):], words)
    return read_vectors(source, words)


def write_vectors_text(path, words, M):
    """Write word2vec text format (header ``N D``; values with 8 significant digits)."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{len(words)} {M.shape[1]}\n")
        for w, row in zip(words, M):
            f.write(w + " " + " ".join(f"{x:.8g}" for x in row) + "\n")


def unit_rows(M):
    """Rows scaled to unit length; zero rows stay zero (such a word is similar to nothing)."""
    M = np.asarray(M, dtype=np.float64)
    norms = np.linalg.norm(M, axis=1)
    out = np.zeros_like(M)
    nz = norms > 0
    out[nz] = M[nz] / norms[nz, None]
    return out


def cosine_table(M, threshold: float, block: int = 2048) -> sp.csr_matrix:
    """Sparse cosine table of the rows of ``M``: entries with cosine >= ``threshold`` and > 0
    (clipped at 0), the diagonal of non-zero rows included; float64 CSR, sorted indices.

    Built a block of rows at a time (one BLAS product of ``block`` x n), so memory stays at
    ``block * n`` floats plus the kept entries.
    """
    U = unit_rows(M)
    n = U.shape[0]
    indptr = [np.zeros(1, np.int64)]
    idx, val = [], []
    total = 0
    for a in range(0, n, block):
        G = U[a:a + block] @ U.T
        np.minimum(G, 1.0, out=G)
        keep = (G >= threshold) & (G > 0)
        r, c = np.nonzero(keep)
        idx.append(c.astype(np.int32))
        val.append(G[r, c])
        counts = np.bincount(r, minlength=G.shape[0])
        indptr.append(total + np.cumsum(counts))
        total += int(counts.sum())
    return sp.csr_matrix((np.concatenate(val) if val else np.zeros(0),
                          np.concatenate(idx) if idx else np.zeros(0, np.int32),
                          np.concatenate(indptr)), shape=(n, n))


def train_vectors(docs, dims: int = 100, window: int = 5, min_count: int = 2, seed: int = 0):
    """Word vectors from a corpus: PPMI of co-occurrences within ``window`` words, factored by a
    seeded randomized SVD (module docstring).

    Parameters
    ----------
    docs : iterable of sequences of str
    dims : int >= 1
    window : int >= 1
        Words at distance 1..window on either side co-occur (weight 1).
    min_count : int >= 1
        Words seen fewer times are left out.
    seed : int
        Seed of the randomized SVD.

    Returns
    -------
    (list of str, ndarray float64 (n, k)), k <= dims
    """
    if not isinstance(dims, int) or dims < 1:
        raise KernelSpecError(f"vector dimensions must be an integer >= 1, got {dims!r}")
    docs = [list(d) for d in docs]
    counts = Counter(w for d in docs for w in d)
    words = sorted(w for w, c in counts.items() if c >= min_count)
    index = {w: k for k, w in enumerate(words)}
    rows, cols = [], []
    for d in docs:
        ids = np.array([index.get(w, -1) for w in d], dtype=np.int64)
        for off in range(1, window + 1):
            a, b = ids[:-off], ids[off:]
            ok = (a >= 0) & (b >= 0)
            rows.append(a[ok])
            cols.append(b[ok])
    r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    n = len(words)
    C = sp.csr_matrix((np.ones(2 * r.size), (np.concatenate([r, c]), np.concatenate([c, r]))), shape=(n, n))
    C.sum_duplicates()
    total = C.sum()
    if n == 0 or total == 0:
        return words, np.zeros((n, 1))
    rs = np.asarray(C.sum(axis=1)).ravel()
    C = C.tocoo()
    pmi = np.log(C.data * total / (rs[C.row] * rs[C.col]))
    ok = pmi > 0
    P = sp.csr_matrix((pmi[ok], (C.row[ok], C.col[ok])), shape=(n, n))
    k = min(dims, n - 1)
    if k < 1:
        return words, np.zeros((n, 1))
    TruncatedSVD = optional.sklearn("decomposition").TruncatedSVD
    svd = TruncatedSVD(n_components=k, algorithm="randomized", n_iter=7, random_state=seed)
    US = svd.fit_transform(P)
    s = svd.singular_values_
    V = US / np.sqrt(np.where(s > 0, s, 1.0))
    return words, np.ascontiguousarray(V, dtype=np.float64)


def train_word2vec(docs, dims: int = 100, window: int = 5, min_count: int = 2, seed: int = 0,
                   epochs: int = 5):
    """Word vectors from a corpus with gensim's word2vec: skip-gram with negative sampling (5
    noise words), seeded, one worker thread (deterministic: the same vectors for a seed).

    Parameters
    ----------
    docs : iterable of sequences of str
    dims : int >= 1
    window : int >= 1
        The largest distance between a word and its context words.
    min_count : int >= 1
        Words seen fewer times are left out.
    seed : int
        Seed of the initial vectors and of the sampling.
    epochs : int >= 1
        Passes over the corpus.

    Returns
    -------
    (list of str, ndarray float64 (n, dims)), words by decreasing frequency (gensim's order)
    """
    if not isinstance(dims, int) or dims < 1:
        raise KernelSpecError(f"vector dimensions must be an integer >= 1, got {dims!r}")
    docs = [[str(w) for w in d] for d in docs]
    counts = Counter(w for d in docs for w in d)
    if not any(c >= min_count for c in counts.values()):
        return [], np.zeros((0, dims))
    Word2Vec = optional.word2vec()
    model = Word2Vec(docs, vector_size=dims, window=window, min_count=min_count, seed=seed, workers=1, sg=1,
                     negative=5, epochs=epochs)
    return list(model.wv.index_to_key), np.asarray(model.wv.vectors, dtype=np.float64)


#: The corpus builders: name -> function(docs, dims, window, min_count, seed).
BUILDERS = {"ppmi": train_vectors, "word2vec": train_word2vec}
