"""Relation-example subtree kernels (Zelenko et al. 2003): paper checks, Appendix B, Numba vs
reference, the relation representation (JSON form, encoding) and errors."""
import json
import random
from fractions import Fraction

import numpy as np
import pytest
from instances_relation_subtree import rand_relation
from reference.relation_subtree import FIXES, kc_appendix_b, kc_explicit, kernel

import gramtile
from gramtile.kernels.batches import Batch
from gramtile.kernels.errors import KernelSpecError, RepresentationError
from gramtile.kernels.registry import spec_from_dict
from gramtile.kernels.relation_subtree import RelationSubtreeKernel
from gramtile.pipeline.representations.encode import decode, encode
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.relation import RelationExample as R
from gramtile.pipeline.representations.relation import node_class, relation_from_json, relation_to_json
from gramtile.pipeline.representations.vocab import Vocabularies

# The paper's relation examples, rebuilt from its text (Figures 2-4). Head texts: the verb
# groups "is" / "was" carry the head "be" (the contiguous example needs k(Verb, Verb) = 1), "led"
# carries "lead"; Sentence nodes have no text.
EX1 = R("Sentence", "none", None, (
    R("Person", "member", "John Smith"), R("Verb", "none", "be"),
    R("PNP", "none", "scientist", (R("PNP", "none", "scientist"), R("Prep", "none", "of"),
                                   R("Organization", "affiliation", "Hardcom Corporation")))))
EX4 = R("Sentence", "none", None, (
    R("Person", "member", "James Brown"), R("Verb", "none", "be"),
    R("PNP", "none", "scientist", (R("PNP", "none", "scientist"), R("Prep", "none", "at"),
                                   R("ONP", "affiliation", "University of Illinois")))))
EX5 = R("Sentence", "none", None, (
    R("Person", "member", "John White"), R("Punc", "none", ","),
    R("PNP", "none", "scientist", (R("PNP", "none", "scientist"), R("Prep", "none", "at"),
                                   R("ONP", "affiliation", "University of Illinois"))),
    R("Verb", "none", "lead"), R("BNP", "none", "discussion")))


def numba_k(pairs, mode, lam):
    v = Vocabularies()
    X = encode([a for a, _ in pairs], v)
    Y = encode([b for _, b in pairs], v)
    return np.diag(RelationSubtreeKernel(mode=mode, lam=lam).block(X, Y))


def test_paper_contiguous_example_1_vs_4():
    half = Fraction(1, 2)
    # inner PNP: 1 + 0.5 + 0.25 + 0.125, then 1.125 + 0.875 * 1.875
    assert kernel(EX1.children[2], EX4.children[2], half, "contiguous") == Fraction(15, 8)
    assert kernel(EX1, EX4, half, "contiguous") == Fraction(2765625, 1000000)
    assert numba_k([(EX1, EX4), (EX4, EX1)], "contiguous", 0.5).tolist() == [2.765625, 2.765625]


def test_paper_sparse_example_5_vs_4():
    half = Fraction(1, 2)
    assert kernel(EX5.children[2], EX4.children[2], half, "sparse") == Fraction(2078125, 1000000)
    want = Fraction(265625, 1000000) * Fraction(2078125, 1000000)
    assert want == Fraction(552001953125, 10 ** 12)
    assert kernel(EX5, EX4, half, "sparse") == want
    assert kernel(EX5, EX4, half, "sparse", kc=kc_appendix_b) == want
    assert numba_k([(EX5, EX4), (EX4, EX5)], "sparse", 0.5).tolist() == [0.552001953125] * 2


# Appendix B as printed, and with each single correction left out
PARTIAL = [()] + [tuple(f for f in FIXES if f != left_out) for left_out in FIXES]


def test_appendix_b_as_printed_misses_the_paper_value():
    half = Fraction(1, 2)
    want = kernel(EX5, EX4, half, "sparse")
    for fixes in PARTIAL:
        got = kernel(EX5, EX4, half, "sparse", kc=lambda T, K, lam, f=fixes: kc_appendix_b(T, K, lam, f))
        assert got != want, fixes


def test_appendix_b_corrected_equals_definition():
    rng = random.Random(3)
    wrong = {f: 0 for f in PARTIAL}
    for _ in range(150):
        m, n = rng.randint(1, 5), rng.randint(1, 5)
        T = [[int(rng.random() < 0.6) for _ in range(n)] for _ in range(m)]
        K = [[Fraction(rng.randint(0, 4), rng.randint(1, 3)) * T[a][b] for b in range(n)] for a in range(m)]
        lam = rng.choice([Fraction(1), Fraction(1, 2), Fraction(2, 3)])
        want = kc_explicit(T, K, lam, "sparse")
        assert kc_appendix_b(T, K, lam, FIXES) == want
        for f in wrong:
            wrong[f] += kc_appendix_b(T, K, lam, f) != want
    assert all(v > 20 for v in wrong.values()), wrong  # each correction is needed


def test_contiguous_recurrence_example_by_hand():
    # children A B | A B, all matching on the diagonal, K = 1 each: runs of length 1 and 2
    T = [[1, 0], [0, 1]]
    K = [[1, 0], [0, 1]]
    lam = Fraction(1, 3)
    assert kc_explicit(T, K, lam, "contiguous") == lam * 1 + lam * 1 + lam ** 2 * 2


def _random_pairs(seed, n):
    rng = random.Random(seed)
    pairs = []
    for q in range(n):
        # every other pair over a denser alphabet, so that matches reach deep
        kw = {"types": ["PNP", "Person"], "texts": ["x", "x", "y"]} if q % 2 else {}
        a = rand_relation(rng, 10, **kw)
        kind = q % 10
        if kind == 0:
            b = a                                                  # identical inputs
        elif kind == 1:
            b = R(a.type, a.role, rng.choice(["x", None]))         # single node
        elif kind == 2:
            b = R("Other", "none", "x", a.children)                # root does not match
        else:
            b = rand_relation(rng, 10, **kw)
        pairs.append((a, b) if rng.random() < 0.5 else (b, a))
    return pairs


@pytest.mark.parametrize("mode,lam", [("sparse", 0.5), ("sparse", 1.0), ("sparse", 0.3),
                                      ("contiguous", 0.5), ("contiguous", 1.0), ("contiguous", 0.7)])
def test_numba_equals_reference_on_random_examples(mode, lam):
    pairs = _random_pairs(int(lam * 10) + (mode == "sparse"), 150)
    got = numba_k(pairs, mode, lam)
    want = np.array([float(kernel(a, b, Fraction(lam), mode)) for a, b in pairs])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert 15 <= np.count_nonzero(want == 0) <= 110  # both matching and non-matching pairs
    assert np.count_nonzero(want > 2 * lam ** 2) >= 25  # and pairs that match below the children


@pytest.mark.parametrize("mode,lam,beta", [("sparse", 0.5, 0.5), ("sparse", 1.0, 0.25), ("contiguous", 0.5, 1.0)])
def test_numba_equals_reference_with_type_weight(mode, lam, beta):
    pairs = _random_pairs(40 + int(lam * 10) + (mode == "sparse"), 150)
    v = Vocabularies()
    X = encode([a for a, _ in pairs], v)
    Y = encode([b for _, b in pairs], v)
    got = np.diag(RelationSubtreeKernel(mode=mode, lam=lam, type_weight=beta).block(X, Y))
    want = np.array([float(kernel(a, b, Fraction(lam), mode, type_weight=Fraction(beta))) for a, b in pairs])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    plain = np.array([float(kernel(a, b, Fraction(lam), mode)) for a, b in pairs])
    # pairs with no common head text below matching nodes: 0 for the paper's k, > 0 with beta
    assert np.count_nonzero((plain == 0) & (want > 0)) >= 5
    assert np.all(want >= plain) and np.count_nonzero(want == 0) >= 10  # root mismatch stays 0


@pytest.mark.parametrize("mode,lam,beta", [("sparse", 0.5, 0.0), ("sparse", 0.5, 1.0), ("sparse", 0.75, 0.25),
                                           ("contiguous", 0.5, 0.5)])
def test_numba_equals_reference_without_name_text(mode, lam, beta):
    pairs = _random_pairs(70 + int(lam * 10) + (mode == "sparse") + int(4 * beta), 150)
    v = Vocabularies()
    X = encode([a for a, _ in pairs], v)
    Y = encode([b for _, b in pairs], v)
    got = np.diag(RelationSubtreeKernel(mode=mode, lam=lam, type_weight=beta, name_text=False).block(X, Y))
    want = np.array([float(kernel(a, b, Fraction(lam), mode, type_weight=Fraction(beta), name_text=False))
                     for a, b in pairs])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    full = np.array([float(kernel(a, b, Fraction(lam), mode, type_weight=Fraction(beta))) for a, b in pairs])
    # the PNP nodes of the random examples are name chunks: dropping their Text lowers K of some
    # pairs (never raises it), and leaves both matching and non-matching pairs
    assert np.all(want <= full) and np.count_nonzero(want < full) >= 20
    assert np.count_nonzero(want > 0) >= 20 and np.count_nonzero(want == 0) >= 10


def test_name_text_false_ignores_the_text_of_name_chunks_only():
    # the same person name under the same verb: k of the PNP pair is 1 (name_text) or beta (not)
    a = R("Sentence", "none", None, (R("PNP", "member", "smith"), R("Verb", "none", "work")))
    b = R("Sentence", "none", None, (R("PNP", "member", "smith"), R("Verb", "none", "work")))
    c = R("Sentence", "none", None, (R("Person", "member", "smith"), R("Verb", "none", "work")))
    lam, beta = 0.5, 0.25
    spec = {"kind": "relation_subtree", "lam": lam, "type_weight": beta}
    # K = k(root) + chains (PNP), (Verb): lam^2 k each, (PNP, Verb): lam^4 (k + k)
    both = lambda kp, kv: beta + lam ** 2 * (kp + kv) + lam ** 4 * (kp + kv)  # noqa: E731
    assert gramtile.gram(spec, [a, b])[0, 1] == both(1 + beta, 1 + beta)
    assert gramtile.gram({**spec, "name_text": False}, [a, b])[0, 1] == both(beta, 1 + beta)
    # "Person" is not a name chunk (Class() maps it to itself): its Text still counts against "Person"
    assert gramtile.gram({**spec, "name_text": False}, [c, c])[0, 1] == both(1 + beta, 1 + beta)
    # with the paper's k (beta = 0) two names alone never match
    assert gramtile.gram({"kind": "relation_subtree", "name_text": False},
                         [R("PNP", "member", "smith")] * 2)[0, 1] == 0.0


def test_type_weight_sees_shape_without_common_text():
    # "U.S. Congress" vs "Beijing XINHUA": a location name right before the organisation, no word shared
    a = R("Sentence", "none", None, (R("LNP", "arg2", "u.s."), R("ONP", "arg1", "congress")))
    b = R("Sentence", "none", None, (R("LNP", "arg2", "beijing"), R("ONP", "arg1", "xinhua")))
    assert gramtile.gram({"kind": "relation_subtree", "lam": 0.5}, [a, b])[0, 1] == 0.0
    # k = beta at the root and both children; chains (LNP), (ONP): lam^2 beta each; (LNP, ONP): lam^4 2 beta
    lam, beta = 0.5, 0.5
    want = beta + 2 * lam ** 2 * beta + lam ** 4 * 2 * beta
    K = gramtile.gram({"kind": "relation_subtree", "lam": lam, "type_weight": beta}, [a, b])
    assert K[0, 1] == want == 0.8125
    assert float(kernel(a, b, Fraction(1, 2), "sparse", type_weight=Fraction(1, 2))) == want
    c = R("Sentence", "none", None, (R("ONP", "arg1", "congress"), R("LNP", "arg2", "u.s.")))
    # reversed order: the two single chains only, but text matches now add 1 per name
    assert gramtile.gram({"kind": "relation_subtree", "lam": lam, "type_weight": beta}, [a, c])[0, 1] == \
        beta + 2 * lam ** 2 * (1 + beta)


def test_block_symmetric_rectangular_and_diag():
    rng = random.Random(9)
    xs = [rand_relation(rng, 9) for _ in range(20)]
    v = Vocabularies()
    X = encode(xs, v)
    for mode in ("sparse", "contiguous"):
        s = RelationSubtreeKernel(mode=mode, lam=0.5)
        want = np.array([[float(kernel(a, b, Fraction(1, 2), mode)) for b in xs] for a in xs])
        np.testing.assert_allclose(s.block(X), want, rtol=1e-12, atol=0)
        np.testing.assert_allclose(s.block(X.slice(0, 7), X.slice(7, 20)), want[:7, 7:], rtol=1e-12, atol=0)
        np.testing.assert_allclose(s.diag(X), np.diag(want), rtol=1e-12, atol=0)


def test_class_mapping_makes_pnp_match_person_with_equal_role():
    assert [node_class(x) for x in ("PNP", "ONP", "LNP", "Verb", "Person")] == \
        ["Person", "Organization", "Location", "Verb", "Person"]
    a = R("S", "none", None, (R("PNP", "member", "Smith"),))
    b = R("S", "none", None, (R("Person", "member", "Smith"),))
    c = R("S", "none", None, (R("Person", "affiliation", "Smith"),))
    K = gramtile.gram({"kind": "relation_subtree", "lam": 0.5}, [a, b, c])
    assert K[0, 1] == 0.25 and K[0, 2] == 0.0 and K[1, 2] == 0.0


def test_text_must_be_present_to_match():
    a, b = R("Verb", "none"), R("Verb", "none")
    assert gramtile.gram({"kind": "relation_subtree"}, [a, b]).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert gramtile.gram({"kind": "relation_subtree"}, [R("Verb", "none", "go")] * 2).tolist() == [[1.0, 1.0]] * 2


# ---- representation -------------------------------------------------------------------------

def test_json_and_encoding_round_trip():
    rng = random.Random(1)
    xs = [rand_relation(rng, 12) for _ in range(60)] + [EX1, EX5]
    for x in xs:
        node = relation_to_json(x)
        assert relation_from_json(json.loads(json.dumps(node))) == x
    v = Vocabularies()
    batch = encode(xs, v)
    assert batch.kind == "relation" and batch.n == len(xs)
    assert decode(batch, v) == xs
    back = Batch.from_arrays("relation", batch.arrays())
    assert decode(back, v) == xs


def test_encoding_columns():
    v = Vocabularies()
    b = encode([EX1], v)
    sym = v["sym"]
    assert [sym[i] for i in b.columns["type"][:4]] == ["Sentence", "Person", "Verb", "PNP"]
    assert b.columns["parent"].tolist() == [-1, 0, 0, 0, 3, 3, 3]
    assert b.columns["text"][0] == -1 and sym[b.columns["text"][6]] == "Hardcom Corporation"
    assert sym[b.columns["class"][6]] == "Organization" and sym[b.columns["class"][4]] == "Person"


def test_json_form_example():
    node = {"Type": "Sentence", "Role": "none", "children": [
        {"Type": "Person", "Role": "member", "Text": "John Smith", "children": []},
        {"Type": "Verb", "Role": "none", "Text": "be"}]}
    x = relation_from_json(node)
    assert x == R("Sentence", "none", None, (R("Person", "member", "John Smith"), R("Verb", "none", "be")))
    assert relation_to_json(x)["children"][1] == {"Type": "Verb", "Role": "none", "Text": "be", "children": []}


@pytest.mark.parametrize("node,words", [
    ({"Type": "S", "Role": "none", "Colour": 1}, ["unknown key 'Colour'", "relation", "Type"]),
    ({"Type": "S"}, ["'Role'", "None", "relation"]),
    ({"Type": "", "Role": "none"}, ["'Type'", "''"]),
    ({"Type": "S", "Role": "none", "Text": 3}, ["'Text'", "3", "string"]),
    ({"Type": "S", "Role": "none", "children": {"a": 1}}, ["'children'", "list"]),
    ({"Type": "S", "Role": "none", "children": [{"Type": "A", "Role": "none"}, {"Type": "B"}]},
     ["relation.children[1]", "'Role'"]),
    ({"Type": "S", "Role": "none", "children": ["x"]}, ["relation.children[0]", "not an object"]),
])
def test_json_errors_name_key_place_and_line(node, words):
    with pytest.raises(CorpusFormatError) as e:
        relation_from_json(node, path="rel.jsonl", line=7)
    msg = str(e.value)
    assert "rel.jsonl, line 7" in msg and "Fix:" in msg
    for w in words:
        assert w in msg, (w, msg)


def test_structure_errors():
    with pytest.raises(RepresentationError, match="Role"):
        R("S", "")
    with pytest.raises(RepresentationError, match="not a RelationExample"):
        R("S", "none", None, ("child",))


# ---- spec and batch errors ------------------------------------------------------------------

@pytest.mark.parametrize("bad,words", [
    ({"mode": "dense"}, ["'mode'", "'dense'", "contiguous", "sparse"]),
    ({"lam": 0}, ["'lam'", "(0, 1]"]),
    ({"lam": 1.5}, ["'lam'", "1.5"]),
    ({"lam": None}, ["'lam'", "None"]),
    ({"rep": 3}, ["'rep'", "3"]),
    ({"type_weight": -0.5}, ["'type_weight'", "-0.5", "[0, inf]"]),
    ({"type_weight": "high"}, ["'type_weight'", "'high'"]),
    ({"name_text": "no"}, ["'name_text'", "'no'", "true or false"]),
])
def test_invalid_spec(bad, words):
    with pytest.raises(KernelSpecError) as e:
        spec_from_dict({"kind": "relation_subtree", **bad})
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_batch_not_in_preorder_is_a_typed_error():
    v = Vocabularies()
    b = encode([EX1], v)
    arrays = {k: np.array(a) for k, a in b.arrays().items()}
    arrays["parent"][2] = 4  # node 2 (Verb) hangs below node 4, a later node; no cycle (4 -> 3 -> 0),
    # so the batch is valid as a forest and only the kernel can tell it is not in preorder
    with pytest.raises(RepresentationError) as e:
        RelationSubtreeKernel().block(Batch.from_arrays("relation", arrays))
    assert "node 2 has parent 4" in str(e.value) and "preorder" in str(e.value)


def test_wrong_batch_kind_is_a_typed_error():
    from gramtile.pipeline.representations.structures import TokenSeq

    X = encode([TokenSeq(("a",))], Vocabularies())
    with pytest.raises(RepresentationError, match="reads relation examples"):
        RelationSubtreeKernel().block(X)


def test_type_weight_default_keeps_the_spec_hash_of_stored_matrices():
    """Relation-subtree stores computed before ``type_weight`` existed stay valid: the default (the
    paper's k) is left out of the spec; type_weight > 0 is a new kernel."""
    import hashlib
    import json

    from gramtile.kernels.registry import as_spec

    old = json.dumps({"kind": "relation_subtree", "lam": 0.5, "mode": "sparse", "rep": "relation"},
                     sort_keys=True, separators=(",", ":"))
    assert as_spec({"kind": "relation_subtree"}).spec_hash == hashlib.sha256(old.encode()).hexdigest()
    assert as_spec({"kind": "relation_subtree", "type_weight": 0}) == as_spec({"kind": "relation_subtree"})
    assert as_spec({"kind": "relation_subtree", "type_weight": 0.25}).spec_hash != \
        as_spec({"kind": "relation_subtree"}).spec_hash


def test_name_text_default_keeps_the_spec_hash():
    from gramtile.kernels.registry import as_spec

    base = as_spec({"kind": "relation_subtree", "type_weight": 0.25})
    assert as_spec({"kind": "relation_subtree", "type_weight": 0.25, "name_text": True}) == base
    assert "name_text" not in base.to_dict()
    off = as_spec({"kind": "relation_subtree", "type_weight": 0.25, "name_text": False})
    assert off.spec_hash != base.spec_hash and off.to_dict()["name_text"] is False
