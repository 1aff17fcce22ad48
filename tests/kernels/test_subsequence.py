"""Gap-weighted subsequence kernel: paper checks, Numba core vs the Fraction reference (exact,
CSR soft and factor soft matching, both length modes), soft-matching contract checks, errors."""
import random
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from reference.subsequence import subsequence_kernel

import gramtile
from gramtile.kernels.errors import KernelSpecError, RepresentationError
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.compute.inmemory import evaluate_block
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.structures import TokenSeq
from gramtile.pipeline.representations.vocab import Vocabularies

ALPHABET = ["a", "b", "c"]


def chars(word):
    return TokenSeq(tuple(word))


def spec(**kw):
    return spec_from_dict({"kind": "subsequence", **kw})


# ---- paper checks (docs/kernels.md, "Gap-weighted subsequence kernel and soft matching") ------------------------------------------------

@pytest.mark.parametrize("lam", [Fraction(1, 2), Fraction(1, 3), Fraction(9, 10), Fraction(1)])
def test_cat_car_on_characters(lam):
    ref = subsequence_kernel("cat", "car", 2, lam, cumulative=False)
    assert ref == lam ** 4
    self_ref = subsequence_kernel("cat", "cat", 2, lam, cumulative=False)
    assert ref / self_ref == 1 / (2 + lam ** 2)  # normalised: cat and car have equal self-kernels

    K = gramtile.gram(spec(n=2, lam=float(lam), cumulative=False), [chars("cat"), chars("car")])
    np.testing.assert_allclose(K[0, 1], float(lam ** 4), rtol=1e-15)
    N = gramtile.gram({"kind": "normalized", "kernel": spec(n=2, lam=float(lam), cumulative=False).to_dict()},
                      [chars("cat"), chars("car")])
    np.testing.assert_allclose(N[0, 1], float(1 / (2 + lam ** 2)), rtol=1e-14)


def test_cumulative_is_sum_of_fixed_lengths():
    X = [chars("science"), chars("silence"), chars("cat")]
    parts = sum(gramtile.gram(spec(n=p, lam=0.7, cumulative=False), X) for p in (1, 2, 3))
    np.testing.assert_allclose(gramtile.gram(spec(n=3, lam=0.7), X), parts, rtol=1e-13)


# ---- random comparisons with the reference ----------------------------------------------

def rand_word(rng):
    kind = rng.random()
    if kind < 0.1:
        return rng.choice(ALPHABET)                    # single node
    if kind < 0.15:
        return "".join(rng.choice("xyz") for _ in range(rng.randint(1, 6)))  # nothing shared
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 7)))


def pairs_batches(rng, n_rows, n_cols):
    X = [rand_word(rng) for _ in range(n_rows)]
    Y = [rand_word(rng) for _ in range(n_cols)]
    Y[0] = X[0]  # identical inputs
    v = Vocabularies()
    for a in ALPHABET + list("xyz"):
        v.sym.add(a)
    bx = encode([chars(w) for w in X], v)
    by = encode([chars(w) for w in Y], v)
    return X, Y, bx, by, v


def check_against_reference(rng, cases, make_sim):
    """>= 500 pairs per call: cases of (n, lam, cumulative), each a 5 x 20 block."""
    checked = 0
    for n, lam, cumulative in cases:
        X, Y, bx, by, v = pairs_batches(rng, 5, 20)
        sim_ref, resources, similarity = make_sim(rng, v)
        s = spec(n=n, lam=float(lam), cumulative=cumulative, similarity=similarity)
        K = s.block(bx, by, resources=resources)
        for a, x in enumerate(X):
            for b, y in enumerate(Y):
                want, scale = sim_ref(x, y, n, lam, cumulative)
                assert abs(K[a, b] - want) <= 1e-12 * scale, (x, y, n, lam, cumulative, K[a, b], want)
                checked += 1
        dx = s.diag(bx, resources=resources)
        for a, x in enumerate(X):
            want, scale = sim_ref(x, x, n, lam, cumulative)
            assert abs(dx[a] - want) <= 1e-12 * scale
    return checked


def random_cases(rng, count):
    lams = [Fraction(1, 2), Fraction(1, 4), Fraction(3, 4), Fraction(1), Fraction(1, 10)]
    return [(rng.randint(1, 4), rng.choice(lams), rng.random() < 0.5) for _ in range(count)]


def test_exact_matches_reference_on_random_pairs():
    rng = random.Random(11)

    def make(rng, v):
        def ref(x, y, n, lam, cum):
            r = float(subsequence_kernel(x, y, n, lam, cum))
            return r, r
        return ref, None, None

    assert check_against_reference(rng, random_cases(rng, 6), make) >= 500


def rational_psd(rng, size):
    """A = S S^T with small non-negative integer S over 6: rational, PSD, exact as Fractions."""
    S = [[Fraction(rng.choice([0, 0, 1, 2, 3])) for _ in range(3)] for _ in range(size)]
    return [[sum(S[i][k] * S[j][k] for k in range(3)) / 6 for j in range(size)] for i in range(size)]


def test_csr_soft_matches_reference_on_random_pairs():
    rng = random.Random(12)

    def make(rng, v):
        size = len(v.sym)
        A = rational_psd(rng, size)
        dense = np.array([[float(a) for a in row] for row in A])
        csr = sp.csr_matrix(dense)
        csr.sort_indices()
        ids = v.sym.index

        def sim(a, b):
            return A[ids[a]][ids[b]]

        def ref(x, y, n, lam, cum):
            r = float(subsequence_kernel(x, y, n, lam, cum, sim))
            return r, r  # A >= 0 entrywise: every term has the same sign
        return ref, {"similarity/wordnet": csr}, "wordnet"

    assert check_against_reference(rng, random_cases(rng, 6), make) >= 500


def test_factor_soft_matches_reference_on_random_pairs():
    rng = random.Random(13)

    def make(rng, v):
        size = len(v.sym)
        D = np.array([[rng.uniform(-1, 1) for _ in range(3)] for _ in range(size)])
        D /= np.linalg.norm(D, axis=1)[:, None]
        D[size - 1] = 0.0  # a term outside the LSA space matches only itself
        ids = v.sym.index

        def sim(a, b):
            return 1.0 if a == b else float(D[ids[a]] @ D[ids[b]])

        def sim_abs(a, b):
            return abs(sim(a, b))

        def ref(x, y, n, lam, cum):
            lam = float(lam)
            # signed terms may cancel: the tolerance scales with the sum of their magnitudes
            return subsequence_kernel(x, y, n, lam, cum, sim), subsequence_kernel(x, y, n, lam, cum, sim_abs)
        return ref, {"similarity/lsa/tokens": D}, "lsa"

    assert check_against_reference(rng, random_cases(rng, 6), make) >= 500


def test_soft_with_identity_equals_exact():
    rng = random.Random(5)
    X, Y, bx, by, v = pairs_batches(rng, 8, 9)
    eye = sp.identity(len(v.sym), format="csr")
    for n, cum in [(1, True), (3, True), (2, False)]:
        exact = spec(n=n, cumulative=cum).block(bx, by)
        soft = spec(n=n, cumulative=cum, similarity="wordnet").block(bx, by, resources={"similarity/wordnet": eye})
        np.testing.assert_array_equal(soft, exact)


# ---- soft matching (the kernel contract for soft instances runs in test_contracts.py) -----

SYN_WORDS = ["car", "automobile", "auto", "machine", "banana", "run", "operate", "function", "fast", "quick"]

SOFT = [
    {"kind": "subsequence", "similarity": "wordnet"},
    {"kind": "subsequence", "n": 2, "lam": 0.8, "cumulative": False, "similarity": "wordnet"},
    {"kind": "subsequence", "similarity": "lsa"},
]


@pytest.mark.parametrize("d", SOFT, ids=[str(d) for d in SOFT])
def test_soft_matching_changes_the_kernel_and_stays_psd(d):
    rng = random.Random(3)
    X = [TokenSeq(tuple(rng.choice(SYN_WORDS) for _ in range(rng.randint(1, 6)))) for _ in range(16)]
    K = gramtile.gram(d, X)
    assert np.linalg.eigvalsh(K).min() >= -1e-9 * np.trace(K)
    exact = gramtile.gram({**d, "similarity": None}, X)
    assert not np.allclose(K, exact)
    if d["similarity"] == "wordnet":  # non-negative similarities only add matches
        assert np.all(K >= exact - 1e-12 * np.abs(exact).max())


def test_wordnet_soft_exceeds_exact_for_synonym_substitution():
    a = TokenSeq(("the", "car", "is", "very", "fast"))
    b = TokenSeq(("the", "automobile", "is", "very", "quick"))
    for n in (1, 2, 3):
        exact = gramtile.gram(spec(n=n), [a], [b])[0, 0]
        soft = gramtile.gram(spec(n=n, similarity="wordnet"), [a], [b])[0, 0]
        assert soft > exact > 0
    # nothing related: soft matching adds nothing
    c = TokenSeq(("a", "banana"))
    assert gramtile.gram(spec(similarity="wordnet"), [a], [c])[0, 0] == 0.0


# ---- errors --------------------------------------------------------------------------

@pytest.mark.parametrize("bad,words", [
    ({"n": 0}, ["'n'", "0", "[1, inf]"]),
    ({"n": 2.5}, ["'n'", "2.5", "integer"]),
    ({"lam": 0}, ["'lam'", "(0, 1]", "0"]),
    ({"lam": 1.5}, ["'lam'", "1.5"]),
    ({"cumulative": "yes"}, ["'cumulative'", "'yes'"]),
    ({"on": "words"}, ["'on'", "'words'", "lemmas"]),
    ({"similarity": "glove"}, ["'similarity'", "'glove'", "wordnet"]),
])
def test_invalid_params_name_parameter_and_value(bad, words):
    with pytest.raises(KernelSpecError) as e:
        spec(**bad)
    for w in words:
        assert w in str(e.value)


def test_missing_column_and_missing_resource_are_typed_errors():
    v = Vocabularies()
    b = encode([TokenSeq(("a", "b"))], v)  # no lemmas
    with pytest.raises(RepresentationError, match="'lemma' column.*set 'on' to 'tokens'"):
        spec(on="lemmas").block(b)
    with pytest.raises(KernelSpecError, match="similarity/wordnet"):
        spec(similarity="wordnet").block(b)
    with pytest.raises(KernelSpecError, match="needs the resources"):
        evaluate_block(spec(similarity="wordnet"), {"seq": b})
    with pytest.raises(KernelSpecError, match="covers 1 symbols.*symbol id 1"):
        spec(similarity="wordnet").block(b, resources={"similarity/wordnet": sp.identity(1, format="csr")})


def test_per_pair_matching_fallback_equals_scattered_rows(monkeypatch):
    import gramtile.kernels.subsequence as mod

    rng = random.Random(21)
    X, Y, bx, by, v = pairs_batches(rng, 12, 15)
    A = sp.csr_matrix(np.array([[float(a) for a in row] for row in rational_psd(rng, len(v.sym))]))
    A.sort_indices()
    cases = [(spec(n=3), None), (spec(n=2, cumulative=False, similarity="wordnet"), {"similarity/wordnet": A})]
    fast = [(s.block(bx, by, resources=r), s.block(bx, resources=r)) for s, r in cases]
    D = np.array([[rng.uniform(-1, 1) for _ in range(4)] for _ in range(len(v.sym))])
    D /= np.linalg.norm(D, axis=1)[:, None]
    lsa = (spec(n=3, similarity="lsa"), {"similarity/lsa/tokens": D})
    table = (lsa[0].block(bx, by, resources=lsa[1]), lsa[0].block(bx, resources=lsa[1]))
    # column groups with small tables, and per-pair products where even one example is too big
    monkeypatch.setattr(mod, "_MAX_SCATTER", 30)
    scale = np.abs(table[0]).max()
    np.testing.assert_allclose(lsa[0].block(bx, by, resources=lsa[1]), table[0], rtol=0, atol=1e-12 * scale)
    grouped = lsa[0].block(bx, resources=lsa[1])
    np.testing.assert_allclose(grouped, table[1], rtol=0, atol=1e-12 * scale)
    assert np.array_equal(grouped, grouped.T)
    monkeypatch.setattr(mod, "_MAX_SCATTER", 0)
    for (s, r), (rect, square) in zip(cases, fast):
        assert np.any(rect > 0)
        np.testing.assert_array_equal(s.block(bx, by, resources=r), rect)
        np.testing.assert_array_equal(s.block(bx, resources=r), square)
    # the BLAS similarity table and per-pair dot products differ only by rounding
    np.testing.assert_allclose(lsa[0].block(bx, by, resources=lsa[1]), table[0], rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(lsa[0].block(bx, resources=lsa[1]), table[1], rtol=0, atol=1e-12 * scale)


def senseval_windows(path, limit, width=3):
    """+-width (word, PoS) windows around the <head> target of the first ``limit`` instances."""
    import xml.etree.ElementTree as ET

    out = []
    for inst in ET.parse(path).getroot().iter("instance"):
        toks, target = [], None
        for el in inst.find("context"):
            if el.tag == "head":
                target, el = len(toks), el.find("wf")
            if el is not None and el.tag == "wf":
                toks.append((el.text.strip(), el.get("pos")))
        w = toks[max(0, target - width):target + width + 1]
        out.append(TokenSeq(tuple(t for t, _ in w), None, tuple(p for _, p in w)))
        if len(out) == limit:
            break
    return out


def test_real_wsd_windows_match_reference_exact_and_wordnet():
    from conftest import require_data

    from gramtile.pipeline.resources.similarity import wordnet_similarity

    X = senseval_windows(require_data("senseval_hard_line_serve") / "serve.pos", 24)
    v = Vocabularies()
    batch = encode(X, v)
    A = wordnet_similarity(v.sym.strings)
    ids = v.sym.index

    def sim(a, b):
        return float(A[ids[a], ids[b]])

    for d, on, simf, res in [({"n": 2, "on": "tokens"}, "tokens", None, None),
                             ({"n": 3, "on": "pos", "cumulative": False, "lam": 0.8}, "pos", None, None),
                             ({"n": 2, "on": "tokens", "similarity": "wordnet"}, "tokens", sim,
                              {"similarity/wordnet": A})]:
        s = spec(**d)
        K = s.block(batch, resources=res)
        assert np.count_nonzero(K) > len(X)  # real windows share more than themselves
        for a in range(0, len(X), 3):
            for b in range(len(X)):
                x, y = getattr(X[a], on), getattr(X[b], on)
                kw = {"sim": simf} if simf else {}
                want = subsequence_kernel(x, y, s.n, Fraction(s.lam), s.cumulative, **kw)
                assert K[a, b] == pytest.approx(float(want), rel=1e-12, abs=0), (x, y, d)
