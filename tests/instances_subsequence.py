"""Contract-test instances of the gap-weighted subsequence kernel (exact matching).

Soft-matched instances need a similarity resource that the shared contract test's direct
``evaluate_block`` call does not supply; tests/test_subsequence.py runs the same checks on them.
"""
from gramtile.pipeline.structures import TokenSeq

_WORDS = ["x", "y", "z"]
_LEMMAS = ["a", "b"]
_TAGS = ["N", "V", "D"]


def rand_short_seq(rng):
    """A sequence of 1-8 tokens over tiny alphabets, so long common subsequences occur."""
    n = rng.randint(1, 8)
    return TokenSeq(tuple(rng.choice(_WORDS) for _ in range(n)), tuple(rng.choice(_LEMMAS) for _ in range(n)),
                    tuple(rng.choice(_TAGS) for _ in range(n)))


GENERATORS = {"subseq": rand_short_seq}

INSTANCES = [
    ({"kind": "subsequence"}, "subseq"),
    ({"kind": "subsequence", "n": 2, "lam": 0.9, "cumulative": False, "on": "lemmas"}, "subseq"),
    ({"kind": "subsequence", "n": 4, "lam": 1.0, "on": "pos"}, "subseq"),
    ({"kind": "subsequence", "n": 1, "lam": 0.3, "cumulative": False}, "subseq"),
]
