"""Soft matching by word vectors in the gap-weighted subsequence kernel (similarity: vectors):
against the slow enumeration with A = cosine off the diagonal, 1 on it, on random sequences and
random vectors (negative cosines included); PSD; a word without a vector matches only itself;
the spec's checks; and the corpus-store path (prepare --vectors, gram) equal to the in-memory
kernel. Real spaCy parses, real Zarr stores."""
from __future__ import annotations

import json

import numpy as np
import pytest
from reference.subsequence import subsequence_kernel

import gramtile
from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.representations.structures import TokenSeq
from gramtile.pipeline.resources.vectors import read_vectors, write_vectors_text
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.cli import main

WORDS = [f"w{i}" for i in range(12)]


def _vectors(tmp_path, seed, words=WORDS, dims=4):
    rng = np.random.default_rng(seed)
    M = rng.normal(size=(len(words), dims))  # signed: cosines below 0 occur
    path = tmp_path / f"v{seed}.txt"
    write_vectors_text(path, words, M)
    got, V = read_vectors(path)  # the vectors as the file holds them (8 significant digits)
    U = V / np.linalg.norm(V, axis=1, keepdims=True)
    return path, {w: U[k] for k, w in enumerate(got)}


@pytest.mark.parametrize("seed", range(6))
def test_vector_soft_matching_equals_the_slow_enumeration(tmp_path, seed):
    rng = np.random.default_rng(100 + seed)
    path, unit = _vectors(tmp_path, seed)
    vocab = WORDS + ["oov1", "oov2"]  # two words without a vector: each matches only itself
    seqs = [tuple(rng.choice(vocab, size=rng.integers(1, 7))) for _ in range(7)]
    n, lam = int(rng.integers(1, 4)), float(rng.uniform(0.3, 0.9))

    def sim(a, b):
        if a == b:
            return 1.0
        if a in unit and b in unit:
            return float(unit[a] @ unit[b])
        return 0.0

    spec = {"kind": "subsequence", "n": n, "lam": lam, "similarity": "vectors", "vectors": str(path)}
    K = gramtile.gram(spec, [TokenSeq(s) for s in seqs])
    want = np.array([[subsequence_kernel(s, t, n, lam, sim=sim) for t in seqs] for s in seqs])
    np.testing.assert_allclose(K, want, rtol=1e-12, atol=1e-12)
    assert np.allclose(K, K.T) and np.linalg.eigvalsh(K).min() >= -1e-9 * np.abs(K).max()
    exact = gramtile.gram({"kind": "subsequence", "n": n, "lam": lam}, [TokenSeq(s) for s in seqs])
    assert not np.allclose(K, exact)  # the vectors change the kernel


def test_the_spec_asks_for_a_vector_source_and_keeps_older_hashes():
    with pytest.raises(KernelSpecError, match="needs parameter 'vectors'"):
        as_spec({"kind": "subsequence", "similarity": "vectors"})
    with pytest.raises(KernelSpecError, match="read only with similarity='vectors'"):
        as_spec({"kind": "subsequence", "similarity": "lsa", "vectors": "v.txt"})
    # a spec without vectors hashes as before the parameter existed
    old = as_spec({"kind": "subsequence", "n": 2, "lam": 0.5, "similarity": "wordnet"})
    assert "vectors" not in json.loads(old.to_json())


@pytest.mark.timeout(300)
def test_prepare_vectors_then_gram_equals_the_in_memory_kernel(tmp_path):
    texts = ["The dog barks at night .", "A puppy yelps loudly .", "Cats sleep all day .",
             "The old dog sleeps .", "Dogs and cats play ."]
    (tmp_path / "t.txt").write_text("\n".join(texts) + "\n")
    words = ["the", "dog", "barks", "at", "night", "a", "puppy", "yelps", "cats", "sleep", "old", "sleeps", "play"]
    path, _ = _vectors(tmp_path, 7, words, dims=8)
    out = tmp_path / "c.zarr"
    assert main(["prepare", "--input", str(tmp_path / "t.txt"), "--format", "text", "--out", str(out),
                 "--reps", "seq", "--vectors", str(path), "--cluster", "sequential", "--quiet"]) == 0
    spec = {"kind": "subsequence", "n": 2, "lam": 0.5, "on": "lemmas", "similarity": "vectors",
            "vectors": str(path), "rep": "seq"}
    assert main(["gram", "--corpus", str(out), "--kernel", json.dumps(spec), "--out", str(tmp_path / "g.zarr"),
                 "--cluster", "sequential", "--quiet"]) == 0
    K = GramStore.open(tmp_path / "g.zarr").view().to_numpy()
    parsed = gramtile.parse(texts, reps=["seq"])
    np.testing.assert_allclose(K, gramtile.gram(spec, [d.structures["seq"] for d in parsed]), rtol=1e-12, atol=0)
