"""WordNet and LSA similarity matrices: synonymy, PSD, unit diagonal, morphology, errors."""
import numpy as np
import pytest
from conftest import require_data

from gramtile.kernels.errors import KernelSpecError
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.resources.similarity import WordNet, load_wordnet, lsa_similarity, wordnet_similarity


def trec_questions(limit):
    path = require_data("trec_qc") / "train.txt"
    out = []
    with open(path, encoding="latin-1") as f:
        for line in f:
            out.append(line.split()[1:])
            if len(out) == limit:
                break
    return out


def test_synonyms_match_and_unrelated_words_do_not():
    words = ["car", "automobile", "banana", "the", "cars", "ran", "run", "geese", "goose"]
    A = wordnet_similarity(words).toarray()
    i = {w: k for k, w in enumerate(words)}
    assert A[i["car"], i["automobile"]] > 0
    assert A[i["car"], i["banana"]] == 0.0
    # the is in no synset: it matches only itself
    assert A[i["the"]].tolist() == [1.0 if w == "the" else 0.0 for w in words]
    # morphology as nltk's morphy: suffix rules and exception lists
    assert A[i["cars"], i["car"]] == pytest.approx(1.0)
    assert A[i["ran"], i["run"]] > 0 and A[i["geese"], i["goose"]] > 0
    # car and automobile share exactly the synset car.n.01: 1 / sqrt(5 * 2)
    wn = load_wordnet()
    shared = set(wn.synsets("car")) & set(wn.synsets("automobile"))
    assert len(shared) == 1
    assert A[i["car"], i["automobile"]] == pytest.approx(1 / np.sqrt(len(wn.synsets("car")) * len(wn.synsets("automobile"))))


def test_wordnet_matrix_is_psd_with_unit_diagonal_on_a_real_vocabulary():
    vocab = sorted({w for q in trec_questions(150) for w in q})
    A = wordnet_similarity(vocab)
    assert A.shape == (len(vocab), len(vocab))
    assert np.array_equal(A.diagonal(), np.ones(len(vocab)))
    assert abs(A - A.T).max() == 0
    assert A.has_sorted_indices
    dense = A.toarray()
    assert np.linalg.eigvalsh(dense).min() > -1e-10
    # sparse: most symbol pairs do not match, some distinct pairs do
    assert A.nnz < 0.05 * len(vocab) ** 2
    assert A.nnz > len(vocab)


def test_lsa_factor_is_deterministic_unit_and_psd():
    docs = trec_questions(1500)
    vocab = sorted({w for d in docs for w in d}) + ["zzz-never-seen"]
    D = lsa_similarity(docs, vocab, dims=20)
    assert D.shape == (len(vocab), 20)
    assert np.array_equal(D, lsa_similarity(docs, vocab, dims=20))
    norms = np.linalg.norm(D, axis=1)
    assert np.allclose(norms[:-1], 1.0) and norms[-1] == 0.0
    sub = D[:300]
    A = sub @ sub.T
    np.fill_diagonal(A, 1.0)
    assert np.linalg.eigvalsh(A).min() > -1e-10
    # words that co-occur in questions are closer than words that do not
    i = {w: k for k, w in enumerate(vocab)}
    assert D[i["How"]] @ D[i["many"]] > D[i["How"]] @ D[i["Who"]]


def test_lsa_on_a_tiny_corpus_uses_the_exact_svd():
    docs = [["a", "b"], ["b", "c"], ["d"]]
    D = lsa_similarity(docs, ["a", "b", "c", "d", "e"], dims=100)
    assert D.shape[1] == 3
    # d shares no document with a, b, c: orthogonal; a and b share one
    assert abs(D[3] @ D[0]) < 1e-12 and D[0] @ D[1] > 0.5
    with pytest.raises(KernelSpecError, match="'dims'.*0"):
        lsa_similarity(docs, ["a"], dims=0)


def test_missing_or_malformed_wordnet_names_file_line_and_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="index.noun.*apt-get install wordnet-base"):
        WordNet(tmp_path)
    for f in ("noun", "verb", "adj", "adv"):
        (tmp_path / f"index.{f}").write_text("  licence header\nfine n 1 0 1 0 00001740\n")
    (tmp_path / "index.verb").write_text("  header\nbroken v two\n")
    with pytest.raises(CorpusFormatError) as e:
        WordNet(tmp_path)
    assert "index.verb, line 2" in str(e.value) and "GRAMTILE_WORDNET" in str(e.value)


def test_synsets_agree_with_nltk_wordnet_reader(tmp_path, monkeypatch):
    """Cross-check the index parser and morphy against nltk's reader on real questions."""
    import shutil
    import warnings

    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    src = load_wordnet().root
    for f in src.iterdir():
        if f.name.startswith(("index.", "data.")) or f.suffix == ".exc":
            shutil.copy(f, tmp_path / f.name)
    # Debian ships no lexnames file; nltk only needs one line per lexicographer file number
    (tmp_path / "lexnames").write_text("".join(f"{i:02d}\tlex{i}\t1\n" for i in range(45)))
    monkeypatch.setattr(nltk.data, "path", list(nltk.data.path) + [str(tmp_path)])

    class Reader(WordNetCorpusReader):
        def map_wn(self, version="wordnet"):  # no mapping to another WordNet version
            return None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = Reader(str(tmp_path), None)
    words = sorted({w for q in trec_questions(600) for w in q}) + ["geese", "ran", "better", "offer", "children"]
    mine = load_wordnet()
    for w in words:
        want = [("a" if s.pos() == "s" else s.pos(), s.offset()) for s in ref.synsets(w)]
        assert mine.synsets(w) == want, w
