"""Contract-test instances of the relation-example subtree kernels (tests/kernels/test_contracts.py)."""
from gramtile.pipeline.representations.relation import RelationExample

TYPES = ["PNP", "Person", "Verb"]
ROLES = ["none", "none", "none", "none", "member"]
TEXTS = ["x", "x", "x", "y", None]


def rand_relation(rng, max_nodes=10, max_children=5, types=TYPES, texts=TEXTS):
    """Random relation example over tiny alphabets (PNP and Person match), roles mostly "none"."""
    n = rng.randint(1, max_nodes)
    kids = [[] for _ in range(n)]
    for v in range(1, n):
        # attach to an earlier node with room; favour the first few nodes for wide, shallow trees
        open_ = [u for u in range(v) if len(kids[u]) < max_children]
        u = rng.choice(open_[:3]) if rng.random() < 0.6 else rng.choice(open_)
        kids[u].append(v)
    attrs = [(rng.choice(types), rng.choice(ROLES), rng.choice(texts)) for _ in range(n)]

    def build(u):
        return RelationExample(*attrs[u], tuple(build(c) for c in kids[u]))

    # the root shares type and role across examples so that most pairs match at the top
    root = RelationExample("Sentence", "none", None, build(0).children) if rng.random() < 0.95 else build(0)
    return root


GENERATORS = {"relation_tree": rand_relation}

INSTANCES = [
    ({"kind": "relation_subtree"}, "relation_tree"),
    ({"kind": "relation_subtree", "mode": "contiguous", "lam": 0.5}, "relation_tree"),
    ({"kind": "relation_subtree", "mode": "sparse", "lam": 1}, "relation_tree"),
    ({"kind": "relation_subtree", "mode": "contiguous", "lam": 0.9}, "relation_tree"),
    ({"kind": "relation_subtree", "mode": "sparse", "lam": 0.5, "type_weight": 0.5}, "relation_tree"),
    ({"kind": "relation_subtree", "mode": "sparse", "lam": 0.5, "type_weight": 1, "name_text": False}, "relation_tree"),
]
