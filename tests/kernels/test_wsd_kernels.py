"""Syntagmatic and domain kernels: windows, Numba-backed blocks vs slow references (exact,
WordNet and LSA soft matching; random and real senseval instances), hand-computed values, the
domain space, and typed errors."""
import random

import numpy as np
import pytest
from conftest import require_data
from reference.subsequence import subsequence_kernel_p

import gramtile
from gramtile.kernels.errors import KernelSpecError, RepresentationError
from gramtile.kernels.registry import spec_from_dict
from gramtile.kernels.wsd_kernels import windows
from gramtile.pipeline.compute.inmemory import add_resources, evaluate_block
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.structures import TokenSeq, WSDInstance
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.resources.domain import domain_space

LEMMAS = ["car", "automobile", "auto", "run", "operate", "fast", "quick", "a", "b"]
TAGS = ["N", "V", "J"]


def rand_wsd(rng, maxlen=10):
    n = rng.randint(1, maxlen)
    lem = tuple(rng.choice(LEMMAS) for _ in range(n))
    return WSDInstance(lem, tuple(rng.choice(TAGS) for _ in range(n)), rng.randrange(n), lem)


def window(x, w):
    a, b = max(0, x.target - w), min(len(x), x.target + w + 1)
    return x.lemmas[a:b], x.pos[a:b]


def ref_synt(x, y, n, lam, w, sim=None, components="both"):
    """Slow K_Synt: index-tuple enumeration per component, normalised, summed."""
    (lx, px), (ly, py) = window(x, w), window(y, w)
    total = 0.0
    parts = []
    if components in ("both", "coll"):
        parts.append((lx, ly, sim))
    if components in ("both", "pos"):
        parts.append((px, py, None))
    for s, t, f in parts:
        kw = {} if f is None else {"sim": f}
        for p in range(1, n + 1):
            k = subsequence_kernel_p(s, t, p, lam, **kw)
            ks, kt = subsequence_kernel_p(s, s, p, lam, **kw), subsequence_kernel_p(t, t, p, lam, **kw)
            if ks > 0 and kt > 0:
                total += k / np.sqrt(ks * kt)
    return total


def resources_for(spec, xs):
    v = Vocabularies()
    data = {"wsd": encode(xs, v)}
    add_resources(spec, data, v, [{"wsd": xs}])
    return data, v


def sim_from(data, v, name):
    """A(u, v) on strings from the stored resource (CSR matrix or unit-row factor)."""
    A = data[name]
    ids = {s: i for i, s in enumerate(v.sym.strings)}
    if hasattr(A, "indptr"):
        dense = A.toarray()
        return lambda a, b: dense[ids[a], ids[b]]
    return lambda a, b: 1.0 if a == b else float(A[ids[a]] @ A[ids[b]])


def spec(**kw):
    return spec_from_dict({"kind": "syntagmatic", **kw})


# ---- windows ------------------------------------------------------------------------------

def test_windows_are_cut_at_sentence_edges_without_padding():
    xs = [WSDInstance(tuple("abcdefghi"), tuple("NNNNNNNNN"), t) for t in (0, 4, 8)]
    v = Vocabularies()
    W = windows(encode(xs, v), 3)
    got = [tuple(v.sym[i] for i in W.columns["lemma"][W.offsets[e]:W.offsets[e + 1]]) for e in range(3)]
    assert got == [tuple("abcd"), tuple("bcdefgh"), tuple("fghi")]
    W0 = windows(encode(xs, v), 0)
    assert np.array_equal(np.diff(W0.offsets), [1, 1, 1])


def test_windows_need_one_target_per_example():
    v = Vocabularies()
    b = encode([WSDInstance(("a", "b"), ("N", "N"), 1)], v)
    b.columns["target"][:] = 0
    with pytest.raises(RepresentationError, match="exactly one target"):
        windows(b, 3)


# ---- values ---------------------------------------------------------------------------------

def test_hand_computed_unigram_collocation():
    # windows (a b) and (a c), n = 1: K_1 = lam^2 against self-kernels 2 lam^2 -> 1/2;
    # the PoS windows (N V) are equal -> 1; K_Synt = 1.5 whatever lam
    x = WSDInstance(("a", "b"), ("N", "V"), 0)
    y = WSDInstance(("a", "c"), ("N", "V"), 0)
    for lam in (0.3, 0.5, 1.0):
        K = gramtile.gram(spec(n=1, lam=lam), [x, y])
        np.testing.assert_allclose(K, [[2.0, 1.5], [1.5, 2.0]], rtol=1e-14)
        Kc = gramtile.gram(spec(n=1, lam=lam, components="coll"), [x, y])
        np.testing.assert_allclose(Kc, [[1.0, 0.5], [0.5, 1.0]], rtol=1e-14)


def test_short_windows_have_fewer_components():
    # a one-word sentence has no length-2 subsequence: its K_Synt(x, x) is 2, not 4
    x = WSDInstance(("line",), ("NN",), 0)
    y = WSDInstance(("a", "line"), ("DT", "NN"), 1)
    K = gramtile.gram(spec(n=2), [x, y])
    np.testing.assert_allclose(np.diag(K), [2.0, 4.0], rtol=1e-14)


@pytest.mark.parametrize("kw", [
    {},
    {"n": 3, "lam": 0.7, "window": 2},
    {"n": 2, "lam": 1.0, "window": 1, "components": "coll"},
    {"n": 3, "lam": 0.4, "window": 4, "components": "pos"},
])
def test_exact_matches_reference_on_random_pairs(kw):
    rng = random.Random(11)
    s = spec(**kw)
    for _ in range(4):
        xs = [rand_wsd(rng) for _ in range(14)]
        K = gramtile.gram(s, xs)
        R = np.array([[ref_synt(a, b, s.n, s.lam, s.window, components=s.components) for b in xs] for a in xs])
        np.testing.assert_allclose(K, R, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("similarity", ["wordnet", "lsa"])
def test_soft_matches_reference_on_random_pairs(similarity):
    rng = random.Random(5)
    s = spec(n=2, lam=0.6, window=2, similarity=similarity)
    for _ in range(3):
        xs = [rand_wsd(rng, 8) for _ in range(12)]
        data, v = resources_for(s, xs)
        name = s.resources()[0]
        f = sim_from(data, v, name)
        K, d, _ = evaluate_block(s, data)
        R = np.array([[ref_synt(a, b, 2, 0.6, 2, sim=f) for b in xs] for a in xs])
        np.testing.assert_allclose(K, R, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(d, np.diag(R), rtol=1e-12)


def test_wordnet_synonyms_raise_the_collocation_kernel():
    x = WSDInstance(("the", "fast", "car"), ("D", "J", "N"), 1)
    y = WSDInstance(("the", "quick", "automobile"), ("D", "J", "N"), 1)
    exact = gramtile.gram(spec(components="coll"), [x, y])[0, 1]
    soft = gramtile.gram(spec(components="coll", similarity="wordnet"), [x, y])[0, 1]
    assert soft > exact > 0


def test_real_serve_instances_match_reference():
    from gramtile.pipeline.readers.senseval import read_senseval

    path = require_data("senseval_hard_line_serve") / "serve.pos"
    docs = []
    for d in read_senseval(path):
        docs.append(d)
        if len(docs) == 400:
            break
    xs = [d.structures["wsd"] for d in docs[::20]]
    for kw in ({}, {"similarity": "wordnet"}):
        s = spec(**kw)
        data, v = resources_for(s, xs)
        f = sim_from(data, v, s.resources()[0]) if s.similarity else None
        K, _, _ = evaluate_block(s, data)
        R = np.array([[ref_synt(a, b, 2, 0.5, 3, sim=f) for b in xs] for a in xs])
        np.testing.assert_allclose(K, R, rtol=1e-12, atol=1e-14)
        assert np.all(np.diag(K) == 4.0)  # every serve window has >= 2 tokens


# ---- domain kernel --------------------------------------------------------------------------

def test_domain_space_idf_and_unit_rows():
    docs = [["stock", "market", "the"], ["stock", "price", "the"], ["phone", "cord", "the"], ["phone", "call", "the"]]
    vocab = ["stock", "market", "price", "phone", "cord", "call", "the", "unused"]
    F = domain_space(docs, vocab, dims=2)
    assert F.shape == (8, 2)
    idf = np.log(4 / np.array([2, 1, 1, 2, 1, 1, 4]))
    np.testing.assert_allclose(np.linalg.norm(F[:7], axis=1), idf, rtol=1e-12)  # rows idf x unit
    assert np.all(F[6:] == 0)  # "the" is in every document (idf 0); "unused" in none
    # two domains: a finance word is closer to a finance word than to a phone word
    cos = F[:6] @ F[:6].T / np.outer(idf[:6], idf[:6])
    assert cos[0, 1] > 0.99 and cos[0, 1] > cos[0, 3] + 0.5 and cos[3, 4] > cos[3, 0] + 0.5
    np.testing.assert_array_equal(F, domain_space(docs, vocab, dims=2))  # reproducible


def test_domain_kernel_matches_explicit_cosine():
    rng = random.Random(3)
    words = ["stock", "market", "price", "share", "phone", "call", "wire", "cord"]
    xs = [TokenSeq(tuple(rng.choice(words) for _ in range(rng.randint(1, 7)))) for _ in range(30)]
    v = Vocabularies()
    data = {"seq": encode(xs, v)}
    s = spec_from_dict({"kind": "domain", "dims": 4})
    add_resources(s, data, v, [{"seq": xs}])
    F = data["domain/lsa/4"]
    ids = {w: i for i, w in enumerate(v.sym.strings)}
    T = np.zeros((len(xs), F.shape[0]))
    for e, x in enumerate(xs):
        for w in x.tokens:
            T[e, ids[w]] += 1
    P = T @ F
    norms = np.linalg.norm(P, axis=1)
    R = np.where(np.outer(norms, norms) > 0, P @ P.T / np.maximum(np.outer(norms, norms), 1e-300), 0.0)
    np.fill_diagonal(R, (norms > 0).astype(float))
    K, d, _ = evaluate_block(s, data)
    np.testing.assert_allclose(K, R, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(d, norms > 0)
    assert d.sum() >= 25  # most contexts have a non-zero domain vector


# ---- errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("bad,words", [
    ({"window": -1}, ["'window'", "-1"]),
    ({"n": 0}, ["'n'", "0"]),
    ({"components": "all"}, ["'components'", "'all'", "coll"]),
    ({"similarity": "wordnet", "components": "pos"}, ["similarity", "'pos'", "set similarity to null"]),
    ({"similarity": "glove"}, ["'similarity'", "'glove'"]),
])
def test_bad_syntagmatic_specs(bad, words):
    with pytest.raises(KernelSpecError) as e:
        spec(**bad)
    for w in words:
        assert w in str(e.value)


def test_missing_resources_are_typed_errors():
    v = Vocabularies()
    xs = [WSDInstance(("a", "b"), ("N", "V"), 0)]
    with pytest.raises(KernelSpecError, match="similarity/wordnet"):
        evaluate_block(spec(similarity="wordnet"), {"wsd": encode(xs, v)})
    with pytest.raises(KernelSpecError, match="domain/lsa/100"):
        spec_from_dict({"kind": "domain"}).block(encode([TokenSeq(("a",))], v))
    with pytest.raises(KernelSpecError, match="'dims'"):
        spec_from_dict({"kind": "domain", "dims": 0})
