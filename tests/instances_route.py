"""Contract-test instances of the route kernel (see tests/kernels/test_contracts.py)."""
from gramtile.pipeline.representations.structures import PTree

LABELS = "abc"


def rand_ptree(rng, depth=0):
    """Random positional tree over a tiny alphabet, positions 1..4 with gaps, depth <= 4."""
    k = rng.randint(0, 3) if depth < 4 else 0
    positions = sorted(rng.sample(range(1, 5), k))
    return PTree(rng.choice(LABELS), tuple((p, rand_ptree(rng, depth + 1)) for p in positions))


GENERATORS = {"route_ptree": rand_ptree}

INSTANCES = [
    ({"kind": "route"}, "route_ptree"),
    ({"kind": "route", "lam": 2.0, "variant": "production"}, "route_ptree"),
    ({"kind": "route", "lam": 0.75, "offset": 1, "degree": 2}, "route_ptree"),
]
