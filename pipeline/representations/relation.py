"""Relation examples (Zelenko, Aone & Richardella 2003): structure, JSON form and encoding.

A relation example is a shallow-parse tree restricted to the least common subtree of two entity
mentions; every node carries ``Type`` (a phrase or entity type such as ``PNP``, ``Person``,
``Verb``), ``Role`` (the node's part in the relation, e.g. ``member`` / ``affiliation`` /
``none``, or ``arg1`` / ``arg2`` / ``none``) and optionally ``Text`` (its head text).

JSON lines (docs/formats.md): ``{"relation": NODE}`` with
``NODE = {"Type": str, "Role": str, "Text": str (optional), "children": [NODE, ...]}``;
:func:`relation_from_json` and :func:`relation_to_json` convert one NODE.

Encoding (batch kind ``"relation"``): nodes in preorder (node 0 = root, children left to right)
with the columns ``type``, ``class``, ``role``, ``text`` (-1 when absent) and ``parent`` (-1 for
the root), all ids of the ``sym`` vocabulary. ``class`` is ``Class(Type)`` of the paper's section
6.2 (:data:`CLASS`): the kernel's default node matching compares classes and roles, so entity
types that name the same kind of thing (``PNP`` and ``Person``) match. Putting the mapping in the
encoder keeps the kernel core on integers; another mapping only changes this column.
"""
from __future__ import annotations

from dataclasses import dataclass

from gramtile.kernels.errors import RepresentationError
from gramtile.kernels.relation_subtree import RELATION_COLUMNS
from gramtile.pipeline.representations.encode import register_kind
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.structures import PreorderNodes

#: Class() of Zelenko et al. (2003), section 6.2: person / organization / location noun phrases
#: are compatible with the corresponding entity types. Types not listed map to themselves.
CLASS = {"PNP": "Person", "ONP": "Organization", "LNP": "Location"}

#: Keys of a JSON NODE.
NODE_KEYS = ("Type", "Role", "Text", "children")


def node_class(type_: str) -> str:
    """``Class(Type)``: the entity class a node type stands for (identity when unlisted)."""
    return CLASS.get(type_, type_)


@dataclass(frozen=True)
class RelationExample(PreorderNodes):
    """A relation example node with its ordered children (Definition 2 of the paper).

    Parameters
    ----------
    type : str
        The node's ``Type`` attribute.
    role : str
        The node's ``Role`` attribute.
    text : str or None
        The node's head text; ``None`` when the node has none (e.g. a ``Sentence`` node).
    children : tuple of RelationExample
    """

    type: str
    role: str
    text: str | None = None
    children: tuple = ()

    def __post_init__(self):
        if not isinstance(self.children, tuple):
            object.__setattr__(self, "children", tuple(self.children))
        for name in ("type", "role"):
            v = getattr(self, name)
            if not isinstance(v, str) or not v:
                raise RepresentationError(
                    f"relation example node: {name} must be a non-empty string, got {v!r}; give every node a "
                    f"Type and a Role (use 'none' for nodes outside the relation)")
        if self.text is not None and not isinstance(self.text, str):
            raise RepresentationError(f"relation example node {self.type!r}: text must be a string or None, "
                                      f"got {self.text!r}")
        for c in self.children:
            if not isinstance(c, RelationExample):
                raise RepresentationError(f"relation example node {self.type!r}: child {c!r} is a "
                                          f"{type(c).__name__}, not a RelationExample")



# ---- JSON --------------------------------------------------------------------------------

def _fail(msg, where, path, line, fix):
    raise CorpusFormatError(f"{msg} at {where}", path=path, line=line, fix=fix)


def relation_from_json(node, path=None, line=None, where="relation") -> RelationExample:
    """Build a :class:`RelationExample` from a JSON NODE (the value of a line's ``"relation"``).

    Parameters
    ----------
    node : dict
        ``{"Type": str, "Role": str, "Text": str (optional), "children": [NODE, ...] (optional)}``.
    path, line : optional
        File and 1-based line reported in errors.
    where : str
        Name of ``node`` in error messages (children are ``where.children[i]``).

    Raises
    ------
    CorpusFormatError
        Naming the key, its place in the tree, the value, and the fix.
    """
    flat = []  # preorder: (type, role, text, parent index)
    stack = [(node, where, -1)]
    while stack:
        obj, at, parent = stack.pop()
        if not isinstance(obj, dict):
            _fail(f"relation node is {type(obj).__name__} {obj!r}, not an object", at, path, line,
                  'write each node as {"Type": ..., "Role": ..., "Text": ..., "children": [...]}')
        for key in obj:
            if key not in NODE_KEYS:
                _fail(f"unknown key {key!r} in relation node", at, path, line,
                      f"a node has only the keys {list(NODE_KEYS)} (docs/formats.md)")
        for key in ("Type", "Role"):
            v = obj.get(key)
            if not isinstance(v, str) or not v:
                _fail(f"relation node key {key!r} is {v!r}", at, path, line,
                      f"give every node a non-empty string {key!r} (Role 'none' for nodes outside the relation)")
        text = obj.get("Text")
        if "Text" in obj and not isinstance(text, str):
            _fail(f"relation node key 'Text' is {text!r}", at, path, line,
                  "give the head text as a string, or leave 'Text' out when the node has none")
        kids = obj.get("children", [])
        if not isinstance(kids, list):
            _fail(f"relation node key 'children' is {type(kids).__name__} {kids!r}", at, path, line,
                  "give the children as a list of nodes ([] for none)")
        me = len(flat)
        flat.append((obj["Type"], obj["Role"], text, parent))
        for k in range(len(kids) - 1, -1, -1):
            stack.append((kids[k], f"{at}.children[{k}]", me))
    kids_of = [[] for _ in flat]
    for i, (_, _, _, p) in enumerate(flat):
        if p >= 0:
            kids_of[p].append(i)
    built = [None] * len(flat)
    for i in range(len(flat) - 1, -1, -1):  # preorder: children come after their parent
        t, r, x, _ = flat[i]
        built[i] = RelationExample(t, r, x, tuple(built[c] for c in kids_of[i]))
    return built[0]


def relation_to_json(example: RelationExample) -> dict:
    """The JSON NODE of ``example`` (``Text`` only when present; ``children`` always)."""
    out = {}
    stack = [(example, out)]
    while stack:
        node, obj = stack.pop()
        obj["Type"] = node.type
        obj["Role"] = node.role
        if node.text is not None:
            obj["Text"] = node.text
        obj["children"] = [{} for _ in node.children]
        stack.extend(zip(node.children, obj["children"]))
    return out


# ---- encoding ----------------------------------------------------------------------------

def _enc_relation(x: RelationExample, vocabs):
    sym = vocabs["sym"]
    cols = {c: [] for c in RELATION_COLUMNS}
    stack = [(x, -1)]
    while stack:
        node, parent = stack.pop()
        me = len(cols["parent"])
        cols["type"].append(sym.add(node.type))
        cols["class"].append(sym.add(node_class(node.type)))
        cols["role"].append(sym.add(node.role))
        cols["text"].append(-1 if node.text is None else sym.add(node.text))
        cols["parent"].append(parent)
        for c in reversed(node.children):
            stack.append((c, me))
    return cols


def _dec_relation(cols, vocabs):
    sym = vocabs["sym"]
    n = len(cols["parent"])
    kids = [[] for _ in range(n)]
    for i in range(1, n):
        kids[cols["parent"][i]].append(i)
    built = [None] * n
    for i in range(n - 1, -1, -1):
        text = cols["text"][i]
        built[i] = RelationExample(sym[cols["type"][i]], sym[cols["role"][i]], None if text < 0 else sym[text],
                                   tuple(built[c] for c in kids[i]))
    return built[0]


register_kind("relation", RelationExample, RELATION_COLUMNS, _enc_relation, _dec_relation)
