"""Contract-test instances of the smoothed partial tree kernel.

SPTK is positive semidefinite when sigma is a valid kernel on nodes (Croce et al. 2011): here
WordNet synonymy (A = S S^T) at threshold 0, on trees whose leaves are words rich in WordNet
synonyms and never internal labels, so sigma is label equality on internal nodes and A on
leaves. A threshold above 0, and clipped cosines, need not keep a table PSD (docs/kernels.md).
"""
from gramtile.pipeline.representations.structures import Tree

_LABELS = ["S", "NP", "VP"]
_WORDS = ["car", "automobile", "auto", "machine", "run", "operate", "fast", "quick"]


def _tree(rng, depth, word):
    if depth >= 2 or rng.random() < 0.3:
        return Tree(rng.choice(_LABELS), (Tree(word(rng)),))
    return Tree(rng.choice(_LABELS), tuple(_tree(rng, depth + 1, word) for _ in range(rng.randint(1, 3))))


def rand_synonym_tree(rng):
    """Leaves are words; internal nodes are phrase labels."""
    return _tree(rng, 0, lambda r: r.choice(_WORDS))


def rand_kelp_tree(rng):
    """Leaves carry KeLP's lexical prefix and coarse PoS (``LEX##car::n``)."""
    return _tree(rng, 0, lambda r: "LEX##" + r.choice(_WORDS) + "::" + r.choice("nv"))


GENERATORS = {"synonym_tree": rand_synonym_tree, "kelp_tree": rand_kelp_tree}

INSTANCES = [
    ({"kind": "sptk", "similarity": "wordnet", "threshold": 0.0}, "synonym_tree"),
    ({"kind": "sptk", "similarity": "wordnet", "threshold": 0.0, "lam": 0.6, "mu": 0.9, "gap": "span",
      "terminal_factor": 3}, "synonym_tree"),
    ({"kind": "sptk", "similarity": "wordnet", "threshold": 0.0, "lexical": "prefix", "same_pos": False,
      "max_length": 2}, "kelp_tree"),
]
