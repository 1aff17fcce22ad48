"""Dependency-path kernel (Kate 2008): paper checks, reference equivalences, Numba vs reference."""
import random
from fractions import Fraction

import numpy as np
import pytest
from conftest import require_data
from instances_dependency_path import rand_dep
from reference.dependency_path import cdp, kernel_by_paths, kernel_by_recursion, path_readings

from gramtile.kernels.batches import Batch
from gramtile.kernels.dependency_path import DependencyPathKernel
from gramtile.kernels.errors import KernelSpecError, RepresentationError
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.structures import DepTree
from gramtile.pipeline.representations.vocab import Vocabularies


def dep(spec):
    """DepTree from 'word:head ...' with 0-based heads, -1 for the root."""
    words, heads = zip(*(tok.rsplit(":", 1) for tok in spec.split()))
    return DepTree(words, tuple(int(h) for h in heads))


# Kate (2008) Figures 4 and 5, built by hand.
FAT_CAT = dep("a:2 fat:2 cat:3 was:-1 chased:3 by:4 a:7 dog:5")
COLLAR_CAT = dep("a:1 cat:6 with:1 a:5 red:5 collar:2 was:-1 chased:6 two:9 days:10 ago:7 by:7 a:14 fat:14 dog:11")


def numba_k(pairs, alpha, match="word"):
    """Numba kernel values for a list of (T1, T2) pairs, via one rectangular block."""
    v = Vocabularies()
    X = encode([a for a, _ in pairs], v)
    Y = encode([b for _, b in pairs], v)
    K = DependencyPathKernel(alpha=alpha, match=match).block(X, Y)
    return np.diag(K)


@pytest.mark.parametrize("alpha", [Fraction(1), Fraction(1, 2), Fraction(1, 3)])
def test_paper_cdp_chased(alpha):
    # chased <- by, chased <- by <- dog, chased <- by <- dog <- a
    assert cdp(FAT_CAT, 4, COLLAR_CAT, 7, alpha) == alpha + alpha ** 2 + alpha ** 3
    if alpha == 1:
        assert cdp(FAT_CAT, 4, COLLAR_CAT, 7, alpha) == 3


def test_paper_common_path_is_found():
    long = ("a", ">", "cat", ">", "was", "<", "chased", "<", "by", "<", "dog", "<", "a")
    assert path_readings(FAT_CAT)[long] == 1 and path_readings(COLLAR_CAT)[long] == 1
    # 'a fat' is not a common path: "cat" and "dog" sit between the two words
    assert ("a", ">", "cat", "<", "fat") in path_readings(FAT_CAT)
    assert ("a", ">", "cat", "<", "fat") not in path_readings(COLLAR_CAT)


def test_paper_sentences_numba_equals_reference():
    for alpha in (1.0, 0.25):
        want = kernel_by_recursion(FAT_CAT, COLLAR_CAT, Fraction(alpha))
        assert want == kernel_by_paths(FAT_CAT, COLLAR_CAT, Fraction(alpha))
        got = numba_k([(FAT_CAT, COLLAR_CAT), (COLLAR_CAT, FAT_CAT)], alpha)
        np.testing.assert_allclose(got, float(want), rtol=1e-14)


def test_paper_chip_saw_dale_shares_nothing():
    a, b = dep("Chip:1 saw:-1 Dale:1"), dep("Mary:1 heard:-1 Sally:1")
    assert kernel_by_paths(a, b, 1) == kernel_by_recursion(a, b, 1) == 0
    assert numba_k([(a, b)], 1.0)[0] == 0.0


def test_paper_a_cat_vs_a_fat_cat():
    a, b = dep("a:1 cat:-1"), dep("a:2 fat:2 cat:-1")
    # common words 'a' and 'cat' plus the common path 'a -> cat'
    assert kernel_by_paths(a, b, 1) == kernel_by_recursion(a, b, 1) == 3
    assert kernel_by_recursion(a, b, Fraction(1, 4)) == 2 + Fraction(1, 4)
    assert numba_k([(a, b)], 1.0)[0] == 3.0


def test_identical_arms_count_once_per_alignment():
    # x -> w <- x against itself: common words (w,w) 1 + (x,x) 4; one-arm paths w <- x:
    # 2 x 2 pairs; the two-arm path x -> w <- x reads the same both ways: 2 alignments
    t = dep("x:1 w:-1 x:1")
    a = Fraction(1, 3)
    want = 5 + 4 * a + 2 * a ** 2
    assert kernel_by_paths(t, t, a) == kernel_by_recursion(t, t, a) == want
    np.testing.assert_allclose(numba_k([(t, t)], float(a)), float(want), rtol=1e-14)


def test_path_enumeration_equals_recursion():
    rng = random.Random(11)
    for k in range(300):
        a, b = rand_dep(rng, 8), rand_dep(rng, 8)
        alpha = [Fraction(1), Fraction(1, 2), Fraction(2, 7)][k % 3]
        assert kernel_by_paths(a, b, alpha) == kernel_by_recursion(a, b, alpha), (a, b, alpha)
        assert kernel_by_paths(a, b, alpha, "lemma") == kernel_by_recursion(a, b, alpha, "lemma")


def _random_pairs(seed, n):
    rng = random.Random(seed)
    pairs = []
    for k in range(n):
        a = rand_dep(rng, 12)
        kind = k % 10
        if kind == 0:
            b = a                                   # identical inputs
        elif kind == 1:
            b = DepTree((rng.choice("abc"),), (-1,), ("x",))  # single node
        elif kind == 2:
            b = DepTree(tuple("d" * len(a)), a.heads, tuple("z" * len(a)))  # nothing shared
        else:
            b = rand_dep(rng, 12)
        pairs.append((a, b) if rng.random() < 0.5 else (b, a))
    return pairs


@pytest.mark.parametrize("alpha,match", [(0.25, "word"), (1.0, "word"), (0.6, "lemma"), (0.9, "lemma")])
def test_numba_equals_reference_on_random_trees(alpha, match):
    pairs = _random_pairs(int(alpha * 100), 150)
    got = numba_k(pairs, alpha, match)
    want = np.array([float(kernel_by_recursion(a, b, Fraction(alpha), match)) for a, b in pairs])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert (want == 0).any() and (want > 20).any()  # the inputs cover both extremes


def test_block_symmetric_and_diag_match_pairs():
    rng = random.Random(5)
    trees = [rand_dep(rng, 10) for _ in range(25)]
    v = Vocabularies()
    X = encode(trees, v)
    s = DependencyPathKernel(alpha=0.5)
    K = s.block(X)
    want = np.array([[float(kernel_by_recursion(a, b, Fraction(1, 2))) for b in trees] for a in trees])
    np.testing.assert_allclose(K, want, rtol=1e-12, atol=0)
    np.testing.assert_allclose(s.diag(X), np.diag(want), rtol=1e-12, atol=0)


def test_real_trec_questions_numba_equals_reference():
    from gramtile.pipeline.parsing.parse import parse_deps

    path = require_data("trec_qc") / "train.txt"
    lines = path.read_text(encoding="latin-1").splitlines()[:40]
    trees = parse_deps([ln.split(" ", 1)[1] for ln in lines], pretokenized=True)
    v = Vocabularies()
    for match in ("word", "lemma"):
        s = DependencyPathKernel(alpha=0.25, match=match)
        K = s.block(encode(trees, v))
        want = np.array([[float(kernel_by_recursion(a, b, Fraction(1, 4), match)) for b in trees] for a in trees])
        np.testing.assert_allclose(K, want, rtol=1e-12, atol=0)
        # alpha = 1/4 makes every shared path show up as a fractional part: many pairs share paths
        assert np.count_nonzero((K % 1 > 0) & ~np.eye(len(trees), dtype=bool)) >= 40


@pytest.mark.parametrize("bad,words", [
    ({"alpha": 0}, ["'alpha'", "(0, 1]", "0"]),
    ({"alpha": 1.5}, ["'alpha'", "1.5"]),
    ({"alpha": "big"}, ["'alpha'", "'big'"]),
    ({"match": "pos"}, ["'match'", "'pos'", "word", "lemma"]),
    ({"rep": ""}, ["'rep'"]),
])
def test_invalid_spec(bad, words):
    with pytest.raises(KernelSpecError) as e:
        spec_from_dict({"kind": "dependency_path", **bad})
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_lemma_match_without_lemmas_is_a_typed_error():
    X = encode([dep("a:1 cat:-1")], Vocabularies())
    with pytest.raises(KernelSpecError) as e:
        DependencyPathKernel(match="lemma").block(X)
    assert "'match'" in str(e.value) and "lemma" in str(e.value) and "match to 'word'" in str(e.value)


@pytest.mark.parametrize("where,heads,words", [
    (slice(2, 5), [-1, 0, -1], ["example 1 of X", "not a tree", "one root"]),  # two roots
    # refused when the batch is built (kernels/batches.validate), before the kernel's own check
    (slice(2, 5), [1, 2, 0], ["example 1", "'head'", "cycle"]),               # a cycle, no root
    (slice(0, 2), [2, -1], ["example 0", "'head'", "points to 2, outside its 2 nodes"]),
])
def test_batch_that_is_not_a_tree_is_a_typed_error(where, heads, words):
    v = Vocabularies()
    good = encode([dep("a:1 cat:-1"), dep("a:1 b:-1 c:1")], v)
    arrays = {k: np.array(a) for k, a in good.arrays().items()}
    arrays["head"][where] = heads
    with pytest.raises(RepresentationError) as e:
        DependencyPathKernel().block(Batch.from_arrays("dep", arrays))
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_random_trees_repeat_words_among_siblings():
    rng = random.Random(0)
    trees = [rand_dep(rng, 12) for _ in range(200)]

    def repeats(t):
        kids = {}
        for v, h in enumerate(t.heads):
            kids.setdefault(h, []).append(t.words[v])
        return any(len(ws) != len(set(ws)) for h, ws in kids.items() if h >= 0)

    assert sum(map(repeats, trees)) > 60
