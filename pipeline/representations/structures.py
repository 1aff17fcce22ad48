"""Python-level structures that readers and the parser produce and encoders flatten.

These are the user-facing values (strings, tuples); kernels never see them. Each kind has an
exact round trip through :mod:`gramtile.pipeline.representations.encode` (``decode(encode(x)) == x``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gramtile.kernels.errors import RepresentationError


class PreorderNodes:
    """``nodes()`` in preorder and ``len()`` for tree values whose nodes have ``children``."""

    def nodes(self):
        """Nodes in preorder (iterative: safe for very deep trees)."""
        stack = [self]
        while stack:
            t = stack.pop()
            yield t
            stack.extend(reversed(t.children))

    def __len__(self):
        return sum(1 for _ in self.nodes())


@dataclass(frozen=True)
class Tree(PreorderNodes):
    """Ordered labelled tree. A leaf is a childless node labelled by its word."""

    label: str
    children: tuple = ()

    def __post_init__(self):
        if not isinstance(self.children, tuple):
            object.__setattr__(self, "children", tuple(self.children))

    def is_leaf(self) -> bool:
        return not self.children

    def leaves(self):
        return [t.label for t in self.nodes() if not t.children]

    def __str__(self):

        return format_tree(self)


def _opt(x):
    return None if x is None else tuple(x)


@dataclass(frozen=True)
class DepTree:
    """Dependency tree: one node per word; ``heads[i]`` is the parent index, -1 for the root."""

    words: tuple
    heads: tuple
    lemmas: tuple | None = None
    pos: tuple | None = None
    deprels: tuple | None = None

    def __post_init__(self):
        for name in ("words", "heads", "lemmas", "pos", "deprels"):
            object.__setattr__(self, name, _opt(getattr(self, name)))
        validate_heads(self.heads, len(self.words))
        for name in ("lemmas", "pos", "deprels"):
            v = getattr(self, name)
            if v is not None and len(v) != len(self.words):
                raise RepresentationError(
                    f"dependency tree: '{name}' has {len(v)} entries but 'words' has {len(self.words)}; "
                    f"give one {name[:-1]} per word")

    def __len__(self):
        return len(self.words)


def validate_heads(heads, n):
    """Check that ``heads`` describes one tree over n nodes: a single root, no cycle."""
    if n == 0:
        raise RepresentationError("empty sentence: a dependency tree needs at least one word")
    if len(heads) != n:
        raise RepresentationError(f"'heads' has {len(heads)} entries for {n} words; give one head per word")
    roots = [i for i, h in enumerate(heads) if h == -1]
    for i, h in enumerate(heads):
        if not isinstance(h, int) or h < -1 or h >= n:
            raise RepresentationError(
                f"head of word {i} is {h!r}, outside [-1, {n - 1}]; heads are 0-based word indices, -1 for the root")
        if h == i:
            raise RepresentationError(f"word {i} is its own head; a word cannot depend on itself")
    if len(roots) != 1:
        raise RepresentationError(f"dependency tree has {len(roots)} roots (words {roots[:5]}); exactly one word must have head -1")
    state = [0] * n  # 0 unknown, 1 on current path, 2 reaches root
    for s in range(n):
        path = []
        v = s
        while v != -1 and state[v] == 0:
            state[v] = 1
            path.append(v)
            v = heads[v]
        if v != -1 and state[v] == 1:
            raise RepresentationError(f"dependency cycle through word {v}; heads must form a tree")
        for u in path:
            state[u] = 2


@dataclass(frozen=True)
class TokenSeq:
    """Token sequence with optional lemma and PoS columns."""

    tokens: tuple
    lemmas: tuple | None = None
    pos: tuple | None = None

    def __post_init__(self):
        for name in ("tokens", "lemmas", "pos"):
            object.__setattr__(self, name, _opt(getattr(self, name)))
        for name in ("lemmas", "pos"):
            v = getattr(self, name)
            if v is not None and len(v) != len(self.tokens):
                raise RepresentationError(
                    f"token sequence: '{name}' has {len(v)} entries but 'tokens' has {len(self.tokens)}")

    def __len__(self):
        return len(self.tokens)


@dataclass(frozen=True)
class PTree:
    """Positional tree: ``children`` is a tuple of ``(position, PTree)`` with positions >= 1, increasing."""

    label: str
    children: tuple = ()

    def __post_init__(self):
        ch = tuple((int(p), c) for p, c in self.children)
        pos = [p for p, _ in ch]
        if any(p < 1 for p in pos) or len(set(pos)) != len(pos):
            raise RepresentationError(f"positional tree node {self.label!r}: positions {pos} must be distinct integers >= 1")
        object.__setattr__(self, "children", tuple(sorted(ch, key=lambda pc: pc[0])))

    def nodes(self):
        stack = [self]
        while stack:
            t = stack.pop()
            yield t
            stack.extend(c for _, c in reversed(t.children))

    def __len__(self):
        return sum(1 for _ in self.nodes())

    @staticmethod
    def from_tree(tree: Tree) -> PTree:
        """Positional tree of an ordered tree: position = 1-based child index."""
        def conv(t):
            return PTree(t.label, tuple((i + 1, conv(c)) for i, c in enumerate(t.children)))
        return conv(tree)


@dataclass(frozen=True)
class WSDInstance:
    """A target word in context (docs/formats.md "WSD instance"): lemmas and PoS per token, the
    target's index, optional surface words."""

    lemmas: tuple
    pos: tuple
    target: int
    words: tuple | None = None

    def __post_init__(self):
        for name in ("lemmas", "pos", "words"):
            object.__setattr__(self, name, _opt(getattr(self, name)))
        n = len(self.lemmas)
        if n == 0:
            raise RepresentationError("empty WSD context: give at least the target word")
        if len(self.pos) != n or (self.words is not None and len(self.words) != n):
            raise RepresentationError(f"WSD instance: lemmas ({n}), pos ({len(self.pos)}) and words must have equal length")
        if not isinstance(self.target, int) or not 0 <= self.target < n:
            raise RepresentationError(f"WSD instance: target {self.target!r} outside [0, {n - 1}]")

    def __len__(self):
        return len(self.lemmas)


@dataclass
class Document:
    """One example as read: id, label(s), raw text and named structures.

    ``structures`` maps a representation name (``"tree"``, ``"dep"``, ``"seq"``, ``"grct"``, ...)
    to a structure value (:class:`Tree`, :class:`DepTree`, :class:`TokenSeq`, :class:`PTree`, or a
    bag ``dict`` of feature -> weight).
    """

    id: str
    label: object = None
    text: str | None = None
    structures: dict = field(default_factory=dict)
    source: str | None = None  # "path:line" where the record came from
    #: an example of several texts: field name -> raw text, in field order (``text`` is then None
    #: and ``structures`` are keyed ``<field>.<representation>``, :mod:`~gramtile.pipeline.representations.fields`)
    fields: dict | None = None
    #: a real-valued target (e.g. a relatedness score), or None
    target: float | None = None
    #: the group the example belongs to (e.g. the question of answer selection), or None
    group: str | None = None


def format_tree(tree: Tree, compact: bool = False) -> str:
    """Bracket string of a tree; ``parse_tree(format_tree(t)) == t``.

    A leaf directly under its parent is written bare; a leaf right after a leaf sibling would
    merge with it on reading, so it is written as ``(label)`` (which reads back as a childless
    node, i.e. the same leaf). Leaves containing whitespace are only safe when written bare.
    """
    out = []
    sep = "" if compact else " "
    # iterative preorder with explicit close markers
    # state 0 = open, 1 = close, 2 = leaf right after a leaf sibling: written "(label)"
    # because two bare tokens in a row would merge into one leaf on reading
    stack = [(tree, 0, True)]
    while stack:
        node, state, top = stack.pop()
        if state == 1:
            out.append(")")
            continue
        if state == 2:
            out.append(sep + "(" + node.label + ")")
            continue
        if not node.children and not top:
            out.append(" " + node.label)
            continue
        out.append(("" if top and not out else sep) + "(" + node.label)
        stack.append((node, 1, False))
        kids = node.children
        for k in range(len(kids) - 1, -1, -1):
            c = kids[k]
            after_leaf = not c.children and k > 0 and not kids[k - 1].children
            stack.append((c, 2 if after_leaf else 0, False))
    s = "".join(out)
    return s
