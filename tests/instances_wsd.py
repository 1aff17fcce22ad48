"""Contract-test instances of the syntagmatic and domain kernels (WSD).

WSD instances draw lemmas from a list rich in WordNet synonyms (car/automobile/auto,
run/operate, fast/quick) so soft matching has off-diagonal entries, tags from a tiny set so
long PoS subsequences match, and put the target anywhere (windows cut at both edges).
Domain-kernel contexts draw from a small vocabulary so documents share words and the LSA space
has several dimensions.
"""
from gramtile.pipeline.representations.structures import TokenSeq, WSDInstance

_LEMMAS = ["car", "automobile", "auto", "machine", "run", "operate", "fast", "quick", "banana"]
_TAGS = ["N", "V", "J"]
_WORDS = ["stock", "market", "price", "share", "phone", "call", "wire", "cord", "rope", "text"]


def rand_wsd(rng):
    """A 1-9 token sentence with a random target position."""
    n = rng.randint(1, 9)
    lem = tuple(rng.choice(_LEMMAS) for _ in range(n))
    return WSDInstance(lem, tuple(rng.choice(_TAGS) for _ in range(n)), rng.randrange(n), lem)


def rand_context(rng):
    """A 2-8 word context over a ten-word vocabulary."""
    return TokenSeq(tuple(rng.choice(_WORDS) for _ in range(rng.randint(2, 8))))


GENERATORS = {"wsd": rand_wsd, "context": rand_context}

INSTANCES = [
    ({"kind": "syntagmatic"}, "wsd"),
    ({"kind": "syntagmatic", "n": 3, "lam": 0.9, "window": 2}, "wsd"),
    ({"kind": "syntagmatic", "n": 2, "lam": 1.0, "window": 0}, "wsd"),
    ({"kind": "syntagmatic", "components": "coll"}, "wsd"),
    ({"kind": "syntagmatic", "components": "pos", "n": 3}, "wsd"),
    ({"kind": "syntagmatic", "similarity": "wordnet"}, "wsd"),
    ({"kind": "syntagmatic", "similarity": "lsa", "lam": 0.7}, "wsd"),
    ({"kind": "domain"}, "context"),
    ({"kind": "domain", "dims": 3}, "context"),
    ({"kind": "domain", "dims": 2, "rep": "wsd"}, "wsd"),
]
