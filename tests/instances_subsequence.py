"""Contract-test instances of the gap-weighted subsequence kernel, exact and soft-matched.

Soft instances draw words with WordNet synonyms among them (car/automobile/auto, run/operate,
fast/quick) so the similarity matrix has off-diagonal entries; the contract test builds the
similarity resources with ``add_resources``.
"""
from gramtile.pipeline.representations.structures import TokenSeq

_WORDS = ["x", "y", "z"]
_LEMMAS = ["a", "b"]
_TAGS = ["N", "V", "D"]


def rand_short_seq(rng):
    """A sequence of 1-8 tokens over tiny alphabets, so long common subsequences occur."""
    n = rng.randint(1, 8)
    return TokenSeq(tuple(rng.choice(_WORDS) for _ in range(n)), tuple(rng.choice(_LEMMAS) for _ in range(n)),
                    tuple(rng.choice(_TAGS) for _ in range(n)))


_SYN_WORDS = ["car", "automobile", "auto", "machine", "banana", "run", "operate", "function", "fast", "quick"]


def rand_synonym_seq(rng):
    """1-6 words from a list rich in WordNet synonyms."""
    return TokenSeq(tuple(rng.choice(_SYN_WORDS) for _ in range(rng.randint(1, 6))))


GENERATORS = {"subseq": rand_short_seq, "subseq_syn": rand_synonym_seq}

INSTANCES = [
    ({"kind": "subsequence"}, "subseq"),
    ({"kind": "subsequence", "n": 2, "lam": 0.9, "cumulative": False, "on": "lemmas"}, "subseq"),
    ({"kind": "subsequence", "n": 4, "lam": 1.0, "on": "pos"}, "subseq"),
    ({"kind": "subsequence", "n": 1, "lam": 0.3, "cumulative": False}, "subseq"),
    ({"kind": "subsequence", "similarity": "wordnet"}, "subseq_syn"),
    ({"kind": "subsequence", "n": 2, "lam": 0.8, "cumulative": False, "similarity": "wordnet"}, "subseq_syn"),
    ({"kind": "subsequence", "similarity": "lsa"}, "subseq_syn"),
]
