"""Route kernel (kernels/route.py) against the explicit feature enumeration of
tests/reference/route.py, the paper's Figure 2, and real INEX 2005 trees."""
import random
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from conftest import require_data
from instances_route import rand_ptree
from reference.route import features, route_kernel

import gramtile
from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.route import RouteKernel, route_features
from gramtile.pipeline.readers.inex import read_inex
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import PTree
from gramtile.pipeline.representations.vocab import Vocabularies


def leaf(label):
    return PTree(label)


# Figure 1/2 of Aiolli et al. 2009: b is the 2nd and g the 3rd child of a; c is the 1st and e the
# 3rd child of b (the route from a to e is [2, 3]; from g to b it is [-3, 2]).
FIG2 = PTree("a", ((2, PTree("b", ((1, leaf("c")), (3, leaf("e"))))), (3, leaf("g"))))


def test_figure2_feature_multiset():
    # Figure 2 lists the features grouped by route length s.
    expected = Counter({((), "a"): 1, ((), "b"): 1, ((), "c"): 1, ((), "e"): 1, ((), "g"): 1,
                        ((3,), "g"): 1, ((3,), "e"): 1, ((1,), "c"): 1, ((2,), "b"): 1,
                        ((2, 1), "c"): 1, ((2, 3), "e"): 1})
    assert features(FIG2) == expected
    assert sum(expected.values()) == 11  # sum over nodes of depth + 1


def test_figure2_self_kernel_exact():
    # 5 features of length 0, 4 of length 1, 2 of length 2, all distinct: 5 + 4 lam + 2 lam^2.
    lam = Fraction(1, 2)
    assert route_kernel(FIG2, FIG2, lam) == 5 + 4 * lam + 2 * lam ** 2
    K = gramtile.gram({"kind": "route", "lam": 0.5}, [FIG2])
    assert K[0, 0] == 7.5
    p, fid, count, length = route_features(encode([FIG2], Vocabularies()))
    assert p.tolist() == [0, 11] and sorted(length.tolist()) == [0] * 5 + [1] * 4 + [2] * 2
    assert count.tolist() == [1.0] * 11


def _special_trees(rng):
    """Single nodes, identical trees and trees sharing no label."""
    t = rand_ptree(rng)
    return [PTree("a"), PTree("a"), PTree("z"), t, t,
            PTree("x", ((1, PTree("y")), (2, PTree("x", ((1, PTree("y")),))))),
            PTree("a", tuple((p, PTree("a")) for p in range(1, 6)))]


def _chain(label, n, pos=1):
    t = PTree(label)
    for _ in range(n - 1):
        t = PTree(label, ((pos, t),))
    return t


@pytest.mark.parametrize("variant", ["label", "production"])
@pytest.mark.parametrize("lam,offset,degree", [(Fraction(1, 2), 0, 1), (Fraction(2), 0, 1), (Fraction(3, 10), 1, 2),
                                               (Fraction(1), Fraction(1, 2), 3), (Fraction(7, 5), 2, 2)])
def test_numba_equals_enumeration_on_random_trees(variant, lam, offset, degree):
    # 5 x 2 configurations x 64 trees = 640 random trees, each in 64 pairs.
    rng = random.Random(hash((variant, lam, offset, degree)) % 10 ** 6)
    trees = [rand_ptree(rng) for _ in range(57)] + _special_trees(rng)
    spec = RouteKernel(lam=float(lam), variant=variant, offset=float(offset), degree=degree)
    v = Vocabularies()
    K = spec.block(encode(trees, v))
    R = np.array([[float(route_kernel(a, b, lam, variant, offset, degree)) for b in trees] for a in trees])
    np.testing.assert_allclose(K, R, rtol=1e-12, atol=0)
    np.testing.assert_allclose(spec.diag(encode(trees, v)), np.diag(R), rtol=1e-12, atol=0)
    # rectangular blocks intern features over both batches
    Kr = spec.block(encode(trees[:20], v), encode(trees[20:], v))
    np.testing.assert_allclose(Kr, R[:20, 20:], rtol=1e-12, atol=0)


def test_deep_chains_and_disjoint_alphabets():
    trees = [_chain("a", 30), _chain("a", 17), _chain("a", 17, pos=2), _chain("b", 5)]
    lam = Fraction(9, 10)
    K = gramtile.gram({"kind": "route", "lam": 0.9}, trees)
    R = np.array([[float(route_kernel(a, b, lam)) for b in trees] for a in trees])
    np.testing.assert_allclose(K, R, rtol=1e-12, atol=0)
    assert K[0, 3] == 0.0 and K[1, 2] == 17.0 * 17  # positions differ: only the length-0 routes match


def test_production_variant_separates_productions():
    t1 = PTree("a", ((1, leaf("b")),))
    t2 = PTree("a", ((2, leaf("b")),))
    t3 = PTree("a", ((1, leaf("c")),))
    # labels: t1 vs t2 share a and b (lengths 0); t1 vs t3 share a only. Productions: a(1:b) vs
    # a(2:b) differ, leaves b match.
    assert gramtile.gram({"kind": "route", "lam": 0.5}, [t1], [t2, t3]).tolist() == [[2.0, 1.0]]
    assert gramtile.gram({"kind": "route", "lam": 0.5, "variant": "production"}, [t1], [t2, t3]).tolist() == [[1.0, 0.0]]


@pytest.mark.parametrize("bad,words", [
    ({"lam": 0}, ["'lam'", "0", "(0, inf]"]),
    ({"lam": -1.5}, ["'lam'", "-1.5"]),
    ({"variant": "path"}, ["'variant'", "'path'", "production"]),
    ({"degree": 0}, ["'degree'", "[1, inf]", "0"]),
    ({"degree": 1.5}, ["'degree'", "integer", "1.5"]),
    ({"offset": -1}, ["'offset'", "-1", "[0, inf]"]),
    ({"rep": ""}, ["'rep'", "non-empty"]),
])
def test_invalid_parameters_raise_typed_errors(bad, words):
    with pytest.raises(KernelSpecError) as e:
        gramtile.gram({"kind": "route", **bad}, [FIG2])
    for w in words:
        assert w in str(e.value), (w, str(e.value))


# ---- INEX 2005 reader and real trees ----------------------------------------------------

def test_inex_reader_on_real_data():
    docs = list(read_inex(require_data("inex2005") / "inex05.train.elastic.tree"))
    assert len(docs) == 4820  # README counts
    assert len({d.label for d in docs}) == 11
    sizes = [len(d.structures["ptree"]) for d in docs]
    assert max(sizes) == 80 and round(sum(sizes) / len(sizes), 1) == 25.8
    first = docs[0].structures["ptree"]
    assert first.label == "354" and [p for p, _ in first.children][:3] == [1, 2, 3]
    assert [c.label for _, c in first.children][:3] == ["364", "366", "315"]
    assert len(docs[0].structures["tree"]) == len(first)


def test_route_kernel_on_real_inex_trees_equals_enumeration():
    path = require_data("inex2005") / "inex05.test.elastic.tree"
    trees = [d.structures["ptree"] for _, d in zip(range(40), read_inex(path))]
    for variant in ("label", "production"):
        K = gramtile.gram({"kind": "route", "lam": 0.75, "variant": variant}, trees)
        R = np.array([[float(route_kernel(a, b, Fraction(3, 4), variant)) for b in trees] for a in trees])
        np.testing.assert_allclose(K, R, rtol=1e-12, atol=0)


@pytest.mark.parametrize("line,words", [
    ("354(364($) 366($))", ["CLASS:"]),
    ("1:354(364($) 366($)", ["unclosed"]),
    ("1:354(364($) 366($)))", ["unbalanced ')'"]),
    ("1:354 364($)", ["not followed by '('"]),
    ("1:354(364($ 1($)))", ["'$'"]),
    ("1:", ["empty tree"]),
])
def test_inex_reader_rejects_malformed_lines(tmp_path, line, words):
    f = tmp_path / "bad.tree"
    f.write_text("2:1(2($))\n" + line + "\n")
    with pytest.raises(CorpusFormatError) as e:
        list(read_inex(f))
    assert e.value.line == 2 and str(f) in str(e.value) and "Fix:" in str(e.value)
    for w in words:
        assert w in str(e.value), (w, str(e.value))
