"""Word vectors and the SPTK lexical table: every file format on real files written here, the
cosine table, vectors trained from a corpus, the table's lexical symbols, PoS and OOV rules,
and SPTK through gramtile.gram with each similarity source."""
from __future__ import annotations

import gzip
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import as_spec
from gramtile.pipeline import optional
from gramtile.pipeline.compute.inmemory import gram, gram_with_resources
from gramtile.pipeline.parsing.parse import default_model_name
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.resources.vector_sources import split_label
from gramtile.pipeline.resources.vectors import (
    cosine_table,
    read_vectors,
    spacy_vectors,
    train_vectors,
    train_word2vec,
    write_vectors_text,
)
from gramtile.workflows.cli import main

WORDS = ["dog", "cat", "car", "truck", "run"]
M = np.array([[1.0, 0.2, 0.0], [0.9, 0.3, 0.1], [0.0, 1.0, 0.2], [0.1, 0.9, 0.3], [-1.0, 0.0, 0.5]])


def _write_all(tmp: Path):
    """The same vectors in every format: {name: path}."""
    out = {}
    p = tmp / "w2v.txt"
    write_vectors_text(p, WORDS, M)
    out["word2vec text"] = p
    p = tmp / "glove.txt"  # GloVe: no header
    p.write_text("".join(w + " " + " ".join(repr(float(x)) for x in row) + "\n" for w, row in zip(WORDS, M)))
    out["glove"] = p
    p = tmp / "ft.vec.gz"
    with gzip.open(p, "wt", encoding="utf-8") as f:
        f.write(f"{len(WORDS)} 3\n")
        for w, row in zip(WORDS, M):
            f.write(w + " " + " ".join(repr(float(x)) for x in row) + " \n")  # fastText's trailing space
    out["fasttext gz"] = p
    p = tmp / "w2v.bin"
    with open(p, "wb") as f:
        f.write(f"{len(WORDS)} 3\n".encode())
        for w, row in zip(WORDS, M):
            f.write(w.encode() + b" " + struct.pack("<3f", *row) + b"\n")
    out["word2vec binary"] = p
    p = tmp / "vec.npy"
    np.save(p, M)
    (tmp / "vec.vocab").write_text("\n".join(WORDS) + "\n")
    out["npy"] = p
    return out


def test_every_format_reads_the_same_vectors(tmp_path):
    for fmt, path in _write_all(tmp_path).items():
        words, V = read_vectors(path)
        assert words == WORDS, fmt
        tol = 1e-6 if fmt in ("word2vec binary", "word2vec text") else 0  # float32 / 8 digits
        np.testing.assert_allclose(V, M, rtol=tol, atol=tol, err_msg=fmt)
        w2, V2 = read_vectors(path, words={"car", "dog", "zebra"})
        assert w2 == ["dog", "car"]
        np.testing.assert_allclose(V2, M[[0, 2]], rtol=tol, atol=tol)


def test_bad_files_are_reported_with_their_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("dog 1 2 3\ncat 1 2\n")
    with pytest.raises(CorpusFormatError, match="line 2"):
        read_vectors(p)
    p.write_text("dog 1 x 3\n")
    with pytest.raises(CorpusFormatError, match="not a number"):
        read_vectors(p)
    b = tmp_path / "cut.bin"
    b.write_bytes(b"2 3\ndog " + struct.pack("<3f", 1, 2, 3) + b"cat " + b"\x00\x00")
    with pytest.raises(CorpusFormatError, match="truncated"):
        read_vectors(b)
    n = tmp_path / "lonely.npy"
    np.save(n, M)
    with pytest.raises(FileNotFoundError, match="vocab"):
        read_vectors(n)


def test_cosine_table_is_clipped_thresholded_and_blocked():
    U = M / np.linalg.norm(M, axis=1)[:, None]
    C = U @ U.T
    for thr in (0.0, 0.5, 0.95):
        for block in (1, 2, 2048):
            T = cosine_table(M, thr, block=block).toarray()
            want = np.where((C >= thr) & (C > 0), np.minimum(C, 1.0), 0.0)
            np.testing.assert_allclose(T, want, rtol=1e-12, atol=1e-15)
    T = cosine_table(M, 0.0).toarray()
    assert T[0, 4] == 0.0 and C[0, 4] < 0  # negative cosine clipped to 0
    assert T[0, 1] > 0.9 and T[0, 2] == pytest.approx(C[0, 2])


def test_trained_vectors_are_seeded_and_find_distributional_neighbours():
    rng = np.random.default_rng(1)
    animals, vehicles = ["dog", "cat", "horse"], ["car", "truck", "bus"]
    docs = []
    for _ in range(400):
        a, v = rng.choice(animals), rng.choice(vehicles)
        docs.append(["the", a, "eats", "meat", "and", "sleeps"])
        docs.append(["the", v, "burns", "fuel", "on", "roads"])
    w1, V1 = train_vectors(docs, dims=4, window=2, seed=3)
    w2, V2 = train_vectors(docs, dims=4, window=2, seed=3)
    assert w1 == w2 and np.array_equal(V1, V2)
    T = cosine_table(V1, 0.0).toarray()
    ix = {w: k for k, w in enumerate(w1)}
    assert T[ix["dog"], ix["cat"]] > 0.9
    assert T[ix["dog"], ix["car"]] < 0.5


def _animal_vehicle_docs():
    rng = np.random.default_rng(1)
    docs = []
    for _ in range(400):
        a, v = rng.choice(["dog", "cat", "horse"]), rng.choice(["car", "truck", "bus"])
        docs.append(["the", str(a), "eats", "meat", "and", "sleeps"])
        docs.append(["the", str(v), "burns", "fuel", "on", "roads"])
    return docs


def test_word2vec_vectors_are_seeded_and_identical_across_processes(tmp_path):
    docs = _animal_vehicle_docs()
    w1, V1 = train_word2vec(docs, dims=10, window=2, seed=3)
    w2, V2 = train_word2vec(docs, dims=10, window=2, seed=3)
    assert w1 == w2 and np.array_equal(V1, V2) and V1.shape == (len(w1), 10) and V1.dtype == np.float64
    assert set(w1) == {w for d in docs for w in d}
    w3, V3 = train_word2vec(docs, dims=10, window=2, seed=4)
    assert not np.array_equal(V1, V3[[w3.index(w) for w in w1]])  # the seed is used
    # another interpreter, another hash seed: the same vectors
    script = tmp_path / "w2v.py"
    here = str(Path(__file__).parent)
    script.write_text(
        "import sys, numpy as np\n"
        f"sys.path.insert(0, {here!r})\n"
        "from test_vectors import _animal_vehicle_docs\n"
        "from gramtile.pipeline.resources.vectors import train_word2vec\n"
        "w, V = train_word2vec(_animal_vehicle_docs(), dims=10, window=2, seed=3)\n"
        "np.save(sys.argv[1], V)\n")
    out = tmp_path / "v.npy"
    subprocess.run([sys.executable, str(script), str(out)], check=True,
                   env={**os.environ, "PYTHONHASHSEED": "12345"})
    assert np.array_equal(np.load(out), V1)
    w0, V0 = train_word2vec([["a", "b"]], dims=5)  # no word seen twice
    assert w0 == [] and V0.shape == (0, 5)


def test_split_label_reads_prefix_and_pos():
    assert split_label("LEX##book::n", "LEX##") == ("book", "n")
    assert split_label("book", "LEX##") == ("book", None)
    assert split_label("::", None) == ("::", None)
    assert split_label("a::b::v", None) == ("a::b", "v")


def _table_for(spec, trees):
    spec = as_spec(spec)
    K, strings, res = gram_with_resources(spec, trees)
    (A,) = res.values()
    return K, {w: k for k, w in enumerate(strings)}, A


def test_table_holds_lexical_pairs_only_with_pos_and_oov_rules(tmp_path):
    path = _write_all(tmp_path)["word2vec text"]
    trees = [parse_tree("(S (N LEX##dog::n) (N LEX##cat::n) (V LEX##run::v) (V LEX##cat::v))"),
             parse_tree("(S (N LEX##car::n) (N LEX##truck::n) (N LEX##zebra::n) (N POS##dog))")]
    base = {"kind": "sptk", "similarity": "vectors", "vectors": str(path), "threshold": 0.5, "lexical": "prefix",
            "rep": "tree"}
    _, i, A = _table_for(base, trees)
    A = A.toarray()
    U = M / np.linalg.norm(M, axis=1)[:, None]
    cos = U @ U.T
    assert np.array_equal(np.diag(A), np.ones(len(i)))
    assert A[i["LEX##dog::n"], i["LEX##cat::n"]] == pytest.approx(cos[0, 1], rel=1e-12)
    assert A[i["LEX##car::n"], i["LEX##truck::n"]] == pytest.approx(cos[2, 3], rel=1e-12)
    assert A[i["LEX##dog::n"], i["LEX##cat::v"]] == 0  # PoS differ
    assert A[i["LEX##dog::n"], i["POS##dog"]] == 0  # not lexical
    assert A[i["LEX##dog::n"], i["LEX##car::n"]] == 0  # below the threshold
    z = i["LEX##zebra::n"]  # out of the vectors' vocabulary: itself only
    assert A[z].sum() == 1.0 and A[z, z] == 1.0
    assert np.array_equal(A, A.T)
    _, j, B = _table_for({**base, "same_pos": False}, trees)
    B = B.toarray()
    assert B[j["LEX##cat::n"], j["LEX##cat::v"]] == 1.0  # one word, two PoS
    # leaves: childless nodes are lexical, whatever their label
    leaf_trees = [parse_tree("(S (NN dog) (NN cat))"), parse_tree("(S (NN car) truck)")]
    _, k, C = _table_for({**base, "lexical": "leaves"}, leaf_trees)
    C = C.toarray()
    assert C[k["dog"], k["cat"]] == pytest.approx(cos[0, 1], rel=1e-12)
    assert C[k["car"], k["truck"]] == pytest.approx(cos[2, 3], rel=1e-12)


def test_sptk_in_memory_with_each_source_moves_from_pt_where_words_are_similar(tmp_path):
    path = _write_all(tmp_path)["npy"]
    trees = [parse_tree("(S (NP (NN dog)) (VP (VB run)))"), parse_tree("(S (NP (NN cat)) (VP (VB run)))"),
             parse_tree("(S (NP (NN truck)) (VP (VB run)))")]
    pt = gram({"kind": "pt"}, trees)
    soft = gram({"kind": "sptk", "similarity": "vectors", "vectors": str(path), "threshold": 0.5}, trees)
    assert soft[0, 1] > pt[0, 1]  # dog ~ cat
    assert soft[0, 2] == pt[0, 2]  # dog, truck: cosine below 0.5
    np.testing.assert_array_equal(np.diag(soft), np.diag(pt))  # a tree's own words match themselves
    wn_trees = [parse_tree("(S (NN car) (VB run))"), parse_tree("(S (NN automobile) (VB run))")]
    pt_wn = gram({"kind": "pt"}, wn_trees)
    wn = gram({"kind": "sptk", "similarity": "wordnet", "threshold": 0.3}, wn_trees)
    assert wn[0, 1] > pt_wn[0, 1]  # car / automobile share a synset
    lsa = gram({"kind": "sptk", "similarity": "lsa", "threshold": 0.0}, trees)
    assert lsa.shape == (3, 3) and np.all(lsa >= pt - 1e-15)


def test_table_is_sparse_with_no_entry_between_unrelated_symbols():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(300, 300))
    T = cosine_table(V, 0.5, block=64)
    assert isinstance(T, sp.csr_matrix) and T.has_sorted_indices
    # random 300-d vectors are nearly orthogonal: only the diagonal reaches 0.5
    assert T.nnz == 300 and np.allclose(T.diagonal(), 1.0)


def _spacy_pipeline_with_vectors(folder: Path) -> Path:
    """A real spaCy pipeline (blank English) whose vectors table holds WORDS -> M, saved to disk."""
    nlp = optional.spacy().blank("en")
    for w, row in zip(WORDS, M):
        nlp.vocab.set_vector(w, row)
    nlp.to_disk(folder)
    return folder


def test_spacy_pipeline_without_vectors_is_refused_in_one_line():
    name = default_model_name()  # the installed small pipeline, which ships no static vectors
    with pytest.raises(KernelSpecError, match="has no word vectors") as e:
        spacy_vectors(name)
    assert "\n" not in str(e.value) and "Fix:" in str(e.value) and name in str(e.value)
    tree = [parse_tree("(S (NN dog) (NN cat))")]
    with pytest.raises(KernelSpecError, match="has no word vectors"):
        gram({"kind": "sptk", "similarity": "vectors", "vectors": f"spacy:{name}"}, tree)


def test_spacy_pipeline_vectors_are_read_and_give_the_file_s_kernel(tmp_path):
    pipe = _spacy_pipeline_with_vectors(tmp_path / "pipe")
    words, V = spacy_vectors(str(pipe))
    M32 = M.astype(np.float32).astype(np.float64)  # spaCy stores float32
    assert words == WORDS
    np.testing.assert_array_equal(V, M32)
    w2, V2 = spacy_vectors(str(pipe), words={"truck", "dog", "zebra"})
    assert w2 == ["dog", "truck"] and np.array_equal(V2, M32[[0, 3]])
    np.save(tmp_path / "same.npy", M32)
    (tmp_path / "same.vocab").write_text("\n".join(WORDS) + "\n")
    trees = [parse_tree("(S (NP (NN dog)) (VP (VB run)))"), parse_tree("(S (NP (NN cat)) (VP (VB run)))"),
             parse_tree("(S (NP (NN Truck)) (VP (VB car)))")]
    spec = {"kind": "sptk", "similarity": "vectors", "threshold": 0.5}
    K = gram({**spec, "vectors": f"spacy:{pipe}"}, trees)
    F = gram({**spec, "vectors": str(tmp_path / "same.npy")}, trees)
    np.testing.assert_array_equal(K, F)
    assert K[0, 1] > gram({"kind": "pt"}, trees)[0, 1]  # dog ~ cat through the pipeline's vectors
    with pytest.raises(KernelSpecError, match="cannot load the spaCy pipeline"):
        spacy_vectors(str(tmp_path / "no-such-pipeline"))


def test_prepare_refuses_a_spacy_pipeline_without_vectors_before_parsing(tmp_path, capsys):
    name = default_model_name()
    (tmp_path / "t.txt").write_text("The dog barks .\nA cat sleeps .\n")
    out = tmp_path / "c.zarr"
    rc = main(["prepare", "--input", str(tmp_path / "t.txt"), "--format", "text", "--out", str(out),
               "--vectors", f"spacy:{name}", "--cluster", "sequential", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "has no word vectors" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()  # refused before anything was parsed or written
