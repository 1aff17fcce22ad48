"""Contract-test instances of the within-pair similarity kernel (see tests/kernels/test_contracts.py):
examples of two texts, each a Document with the fields' trees and sequences."""
from gramtile.pipeline.representations.structures import Document, TokenSeq, Tree

LABELS = ["A", "B", "C"]
WORDS = ["x", "y", "z", "w"]


def rand_tree(rng, depth=0):
    """A random tree of depth <= 3 over LABELS with WORDS at its leaves."""
    if depth >= 3 or rng.random() < 0.3:
        return Tree(rng.choice(LABELS), (Tree(rng.choice(WORDS)),)) if depth > 0 else Tree(rng.choice(LABELS))
    return Tree(rng.choice(LABELS), tuple(rand_tree(rng, depth + 1) for _ in range(rng.randint(1, 3))))


def rand_seq(rng, longest=7):
    """A random token sequence of 1..longest WORDS."""
    return TokenSeq(tuple(rng.choice(WORDS) for _ in range(rng.randint(1, longest))))


def rand_pair(rng):
    """An example of two texts, fields q and a, each with a tree and a token sequence."""
    s = {f"{f}.tree": rand_tree(rng) for f in ("q", "a")}
    s.update({f"{f}.seq": rand_seq(rng, 6) for f in ("q", "a")})
    return Document(id=str(rng.random()), structures=s)


GENERATORS = {"pair": rand_pair}

INSTANCES = [
    ({"kind": "within_pair", "kernel": {"kind": "sst", "lam": 0.4}, "fields": ["q", "a"]}, "pair"),
    ({"kind": "within_pair", "kernel": {"kind": "pt", "lam": 0.4, "mu": 0.4}, "fields": ["a", "q"],
      "normalized": False}, "pair"),
    ({"kind": "within_pair", "kernel": {"kind": "bow"}, "fields": ["q", "a"]}, "pair"),
]
