"""Contract-test instances of the dependency-path kernel (tests/kernels/test_contracts.py)."""
from gramtile.pipeline.representations.structures import DepTree

WORDS = ["a", "b", "c"]
LEMMAS = {"a": "x", "b": "x", "c": "y"}


def rand_dep(rng, max_nodes=9):
    """Random dependency tree over a 3-word alphabet, root anywhere, repeated sibling words."""
    n = rng.randint(1, max_nodes)
    order = list(range(n))
    rng.shuffle(order)
    heads = [-1] * n
    for k in range(1, n):
        # attach to an earlier node of the shuffled order; bias towards few parents so that
        # nodes get several children (and siblings repeat words)
        heads[order[k]] = order[rng.randrange(0, k) if rng.random() < 0.5 else rng.randrange(0, min(k, 2))]
    words = tuple(rng.choice(WORDS) for _ in range(n))
    return DepTree(words, tuple(heads), tuple(LEMMAS[w] for w in words))


GENERATORS = {"dep_path_tree": rand_dep}

INSTANCES = [
    ({"kind": "dependency_path"}, "dep_path_tree"),
    ({"kind": "dependency_path", "alpha": 1, "match": "lemma"}, "dep_path_tree"),
    ({"kind": "dependency_path", "alpha": 0.6}, "dep_path_tree"),
]
