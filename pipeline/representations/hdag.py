"""Hierarchical directed acyclic graphs (docs/kernels.md, "HDAG kernel: Input"): structure, batch encoding, JSON form.

An :class:`HDAG` has N >= 1 nodes numbered 0..N-1. Node i has its own attributes
``attrs[i]`` (distinct strings, possibly none) and lies in the inner graph of chunk
``parent[i]`` (-1 = the top graph). ``edges`` are directed ``(u, v)`` pairs joining two nodes of
the same graph; repeated pairs are parallel edges (each one is a separate route). Every graph is
acyclic and chunk membership has no cycles. Node numbering is free: the kernel derives its own
processing order.

Batch kind ``"hdag"`` (columns of :data:`gramtile.kernels.hdag.HDAG_COLUMNS`): a batch column
must have one entry per row, so an example's rows are its nodes, then its attributes, then its
edges, told apart by ``role`` (``sizes()`` counts rows, not nodes)::

    role 0  node       a = containing chunk (-1 = top graph)   b = -1
    role 1  attribute  a = node                                b = attribute id (``sym`` vocabulary)
    role 2  edge       a = u                                   b = v

Node rows come in node order; attribute rows in node order and, within a node, in the order
given; edge rows in the order given. ``decode(encode(h)) == h`` exactly.

JSON lines (docs/formats.md): ``{"hdag": {"attrs": [[str, ...], ...], "parent": [int, ...],
"edges": [[u, v], ...]}}``; :func:`hdag_from_obj` and :func:`hdag_to_obj` convert the inner
object (``parent`` defaults to all -1, ``edges`` to none).
"""
from __future__ import annotations

from dataclasses import dataclass

from gramtile.kernels.errors import RepresentationError
from gramtile.kernels.hdag import HDAG_COLUMNS, ROLE_ATTR, ROLE_EDGE, ROLE_NODE
from gramtile.pipeline.representations.encode import register_kind


@dataclass(frozen=True)
class HDAG:
    """A hierarchical DAG (see the module docstring).

    Parameters
    ----------
    attrs : sequence of sequences of str, length N
        Own attributes of each node (distinct within a node).
    parent : sequence of int, length N
        Containing chunk of each node, -1 for the top graph.
    edges : sequence of (int, int)
        Directed edges ``(u, v)`` with ``parent[u] == parent[v]``.
    """

    attrs: tuple
    parent: tuple
    edges: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "attrs", tuple(tuple(a) for a in self.attrs))
        object.__setattr__(self, "parent", tuple(self.parent))
        object.__setattr__(self, "edges", tuple(tuple(e) for e in self.edges))
        validate_hdag(self.attrs, self.parent, self.edges)

    def __len__(self):
        return len(self.attrs)

    @staticmethod
    def chain(words, attrs=None) -> HDAG:
        """A flat chain w0 -> w1 -> ... (a word sequence); ``attrs[i]`` defaults to ``(words[i],)``."""
        n = len(words)
        attrs = [(w,) for w in words] if attrs is None else attrs
        return HDAG(attrs, [-1] * n, [(i, i + 1) for i in range(n - 1)])


def validate_hdag(attrs, parent, edges):
    """Raise :class:`RepresentationError` unless the arrays describe an HDAG (docs/kernels.md, "HDAG kernel: Input")."""
    n = len(attrs)
    if n == 0:
        raise RepresentationError("empty HDAG: give at least one node")
    if len(parent) != n:
        raise RepresentationError(f"HDAG: 'parent' has {len(parent)} entries for {n} nodes; give one per node "
                                  "(-1 for nodes of the top graph)")
    for i, a in enumerate(attrs):
        for x in a:
            if not isinstance(x, str):
                raise RepresentationError(f"HDAG node {i}: attribute {x!r} is not a string; write attributes as strings")
        if len(set(a)) != len(a):
            dup = sorted({x for x in a if a.count(x) > 1})
            raise RepresentationError(f"HDAG node {i}: attribute(s) {dup} repeated; a node has a set of attributes, "
                                      "list each once")
    for i, c in enumerate(parent):
        if not isinstance(c, int) or isinstance(c, bool) or not -1 <= c < n or c == i:
            raise RepresentationError(f"HDAG node {i}: parent {c!r} is not -1 or another node index in [0, {n - 1}]; "
                                      "give the index of the chunk containing the node, -1 for the top graph")
    state = [0] * n  # 0 unknown, 1 on the current chain, 2 reaches the top graph
    for s in range(n):
        chain, v = [], s
        while v != -1 and state[v] == 0:
            state[v] = 1
            chain.append(v)
            v = parent[v]
        if v != -1 and state[v] == 1:
            raise RepresentationError(f"HDAG: chunk membership cycle through node {v}; a chunk cannot contain itself")
        for u in chain:
            state[u] = 2
    indeg = [0] * n
    out = [[] for _ in range(n)]
    for k, e in enumerate(edges):
        if len(e) != 2 or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < n for x in e):
            raise RepresentationError(f"HDAG edge {k}: {list(e)!r} is not a pair of node indices in [0, {n - 1}]")
        u, v = e
        if u == v:
            raise RepresentationError(f"HDAG edge {k}: ({u}, {v}) is a self-loop; a graph of an HDAG is acyclic")
        if parent[u] != parent[v]:
            raise RepresentationError(f"HDAG edge {k}: ({u}, {v}) joins nodes of different graphs (parents {parent[u]} "
                                      f"and {parent[v]}); edges only join nodes inside the same chunk or the top graph")
        out[u].append(v)
        indeg[v] += 1
    queue = [v for v in range(n) if indeg[v] == 0]
    seen = 0
    while queue:
        u = queue.pop()
        seen += 1
        for v in out[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                queue.append(v)
    if seen != n:
        stuck = [v for v in range(n) if indeg[v] > 0]
        raise RepresentationError(f"HDAG: the edges form a cycle (through nodes {stuck[:5]}); every graph must be acyclic")


# ---- batch encoding ---------------------------------------------------------------------

def _enc_hdag(h: HDAG, vocabs):
    sym = vocabs["sym"]
    role, a, b = [], [], []
    for c in h.parent:
        role.append(ROLE_NODE), a.append(c), b.append(-1)
    for i, xs in enumerate(h.attrs):
        for x in xs:
            role.append(ROLE_ATTR), a.append(i), b.append(sym.add(x))
    for u, v in h.edges:
        role.append(ROLE_EDGE), a.append(u), b.append(v)
    return {"role": role, "a": a, "b": b}


def _dec_hdag(cols, vocabs):
    sym = vocabs["sym"]
    parent, attrs, edges = [], [], []
    for r, a, b in zip(cols["role"], cols["a"], cols["b"]):
        if r == ROLE_NODE:
            parent.append(a)
            attrs.append([])
        elif r == ROLE_ATTR:
            attrs[a].append(sym[b])
        else:
            edges.append((a, b))
    return HDAG(attrs, parent, edges)


register_kind("hdag", HDAG, HDAG_COLUMNS, _enc_hdag, _dec_hdag)


# ---- JSON form --------------------------------------------------------------------------

def hdag_from_obj(obj) -> HDAG:
    """Build an HDAG from the JSON object of docs/formats.md (the value of the ``"hdag"`` key).

    Raises
    ------
    RepresentationError
        Naming the key or node at fault, the value and the fix (readers add file and line).
    """
    if not isinstance(obj, dict):
        raise RepresentationError(f"'hdag' must be an object {{\"attrs\": [[...]], \"parent\": [...], \"edges\": "
                                  f"[[u, v], ...]}}, got {type(obj).__name__}")
    for key in obj:
        if key not in ("attrs", "parent", "edges"):
            raise RepresentationError(f"unknown key {key!r} in 'hdag'; allowed keys: ['attrs', 'edges', 'parent']")
    attrs = obj.get("attrs")
    if not isinstance(attrs, list) or not all(isinstance(a, list) for a in attrs):
        raise RepresentationError(f"'hdag.attrs' must be a list with one list of attribute strings per node, got {attrs!r}")
    parent = obj.get("parent", [-1] * len(attrs))
    if not isinstance(parent, list):
        raise RepresentationError(f"'hdag.parent' must be a list of integers (-1 = top graph), got {parent!r}")
    edges = obj.get("edges", [])
    if not isinstance(edges, list) or not all(isinstance(e, list) for e in edges):
        raise RepresentationError(f"'hdag.edges' must be a list of [u, v] pairs, got {edges!r}")
    return HDAG(attrs, parent, [tuple(e) for e in edges])


def hdag_to_obj(h: HDAG) -> dict:
    """The JSON object of docs/formats.md for ``h`` (inverse of :func:`hdag_from_obj`)."""
    return {"attrs": [list(a) for a in h.attrs], "parent": list(h.parent), "edges": [list(e) for e in h.edges]}
