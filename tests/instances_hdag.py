"""Contract-test instances of the HDAG kernel, and the random HDAG generator of tests/kernels/test_hdag.py."""
from gramtile.pipeline.representations.hdag import HDAG

ALPHABET = "xyz"


def rand_hdag(rng, max_nodes=12, max_depth=3):
    """Random HDAG: up to ``max_nodes`` nodes, chunks nested up to ``max_depth`` levels, chunks
    with their own attributes from the words' alphabet, diamonds and parallel edges, and the
    node numbering shuffled (the kernel must find its own processing order)."""
    attrs, parent, edges = [], [], []

    def graph(par, depth):
        nodes = []
        for _ in range(rng.randint(1, 5)):
            if len(attrs) >= max_nodes:
                break
            v = len(attrs)
            attrs.append(())
            parent.append(par)
            nodes.append(v)
            if depth < max_depth and len(attrs) < max_nodes - 1 and rng.random() < 0.4:
                graph(v, depth + 1)
                attrs[v] = tuple(rng.sample(ALPHABET, rng.choice((0, 0, 1))))
            else:
                attrs[v] = tuple(rng.sample(ALPHABET, rng.choice((0, 1, 1, 1, 2))))
        for i in range(len(nodes)):
            for j in range(i + 1, len(nodes)):
                if rng.random() < 0.5:
                    edges.append((nodes[i], nodes[j]))
                    if rng.random() < 0.15:
                        edges.append((nodes[i], nodes[j]))  # a parallel route

    graph(-1, 0)
    n = len(attrs)
    perm = list(range(n))
    rng.shuffle(perm)  # perm[old] = new
    new_attrs, new_parent = [None] * n, [None] * n
    for old in range(n):
        new_attrs[perm[old]] = attrs[old]
        new_parent[perm[old]] = -1 if parent[old] < 0 else perm[parent[old]]
    new_edges = [(perm[u], perm[v]) for u, v in edges]
    rng.shuffle(new_edges)
    return HDAG(new_attrs, new_parent, new_edges)


def small_hdag(rng):
    return rand_hdag(rng, max_nodes=9)


GENERATORS = {"hdag": small_hdag}

INSTANCES = [
    ({"kind": "hdag"}, "hdag"),
    ({"kind": "hdag", "lam": 1.0, "p": 2}, "hdag"),
    ({"kind": "hdag", "lam": 0.3, "p": 5}, "hdag"),
    ({"kind": "hdag", "lam": 0.6, "p": 3, "exact": True}, "hdag"),
]
