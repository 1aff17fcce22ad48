"""Representations: exact encode/decode round trips, batch slicing, structure validation."""
import pickle
import random

import numpy as np
import pytest

from gramtile.kernels.batches import Batch
from gramtile.kernels.errors import RepresentationError
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.encode import decode, encode
from gramtile.pipeline.representations.structures import DepTree, PTree, TokenSeq, Tree, WSDInstance, format_tree
from gramtile.pipeline.representations.vocab import Vocabularies

W = ["the", "dog", "barks", "a", "cat"]


def rtree(rng, d=0):
    if d > 3 or rng.random() < 0.25:
        return Tree(rng.choice(W))
    return Tree(rng.choice(["S", "NP", "VP"]), tuple(rtree(rng, d + 1) for _ in range(rng.randint(1, 3))))


def rdep(rng):
    n = rng.randint(1, 9)
    root = rng.randrange(n)
    order = [root] + [i for i in range(n) if i != root]
    heads = [-1] * n
    for k in range(1, n):
        heads[order[k]] = order[rng.randrange(k)]
    opt = lambda: tuple(rng.choice(W) for _ in range(n)) if rng.random() < 0.7 else None
    return DepTree(tuple(rng.choice(W) for _ in range(n)), tuple(heads), opt(), opt(), opt())


def rseq(rng):
    n = rng.randint(1, 8)
    return TokenSeq(tuple(rng.choice(W) for _ in range(n)), tuple(rng.choice(W) for _ in range(n)) if rng.random() < .5 else None)


def rptree(rng, d=0):
    k = 0 if d > 3 else rng.randint(0, 3)
    pos = sorted(rng.sample(range(1, 6), k))
    return PTree(rng.choice(["a", "b"]), tuple((p, rptree(rng, d + 1)) for p in pos))


def rwsd(rng):
    n = rng.randint(1, 7)
    return WSDInstance(tuple(rng.choice(W) for _ in range(n)), tuple(rng.choice(["NN", "VB"]) for _ in range(n)),
                       rng.randrange(n), tuple(rng.choice(W) for _ in range(n)) if rng.random() < .5 else None)


def rbag(rng):
    return {w: float(rng.randint(1, 4)) for w in rng.sample(W, rng.randint(0, 4))}


GEN = {"tree": rtree, "dep": rdep, "seq": rseq, "ptree": rptree, "wsd": rwsd, "bag": rbag}


@pytest.mark.parametrize("kind", sorted(GEN))
def test_round_trip_random(kind):
    rng = random.Random(kind)
    xs = [GEN[kind](rng) for _ in range(300)]
    v = Vocabularies()
    b = encode(xs, v)
    assert b.kind == kind and b.n == 300
    assert decode(b, v) == xs
    # vocabularies round-trip through their JSON form
    v2 = Vocabularies.from_dict(v.to_dict())
    assert decode(b, v2) == xs
    # take / slice / concat keep examples intact
    idx = np.array([5, 2, 299, 0])
    assert decode(b.take(idx), v) == [xs[i] for i in idx]
    assert decode(Batch.concat([b.slice(0, 100), b.slice(100, 300)]), v) == xs
    b2 = pickle.loads(pickle.dumps(b))
    assert decode(b2, v) == xs
    # from_arrays rebuilds an equal batch (as a store does)
    b3 = Batch.from_arrays(kind, {k: np.asarray(a) for k, a in b.arrays().items()})
    assert decode(b3, v) == xs


def test_tree_children_csr_in_order():
    t = parse_tree("(S (NP (D the) (N dog)) (VP (V barks)))")
    b = encode([t, t], Vocabularies())
    # root of the second tree: children are NP (local 1) and VP (local 6)
    r = int(b.offsets[1])
    kids = b.child_idx[b.child_ptr[r]:b.child_ptr[r + 1]]
    assert kids.tolist() == [1, 6]


def test_bracket_round_trip_and_multiword_leaf():
    s = "(ROOT (S (VP (VB ask a) (NP (NN question)))))"
    t = parse_tree(s)
    assert t.children[0].children[0].children[0].children == (Tree("ask a"),)
    assert parse_tree(format_tree(t)) == t
    assert parse_tree(format_tree(t, compact=True)) == t


@pytest.mark.parametrize("heads,words", [
    ((1, 0), ["roots"]),              # no root: 0 -> 1 -> 0 is a cycle
    ((-1, 5), ["outside"]),
    ((-1, -1), ["2 roots"]),
    ((-1, 1), ["own head"]),
    ((-1, 2, 1), ["cycle"]),
])
def test_bad_dependency_trees(heads, words):
    with pytest.raises(RepresentationError) as e:
        DepTree(tuple("abc"[: len(heads)]), heads)
    assert any(w in str(e.value) for w in words), str(e.value)


def test_empty_and_mismatched_structures():
    with pytest.raises(RepresentationError, match="empty sentence"):
        DepTree((), ())
    with pytest.raises(RepresentationError, match="'lemmas' has 1 entries"):
        TokenSeq(("a", "b"), ("a",))
    with pytest.raises(RepresentationError, match="target"):
        WSDInstance(("a",), ("NN",), 3)
    with pytest.raises(RepresentationError, match="positions"):
        PTree("a", ((0, PTree("b")),))
