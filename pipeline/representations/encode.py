"""Encode Python structures into flat :class:`~gramtile.kernels.batches.Batch` arrays and back.

Node order is preorder for trees (node 0 = root) and word order for dependency trees and
sequences. ``decode(encode(xs, v), v) == xs`` exactly for every kind.
"""
from __future__ import annotations

import numpy as np

from gramtile.kernels.batches import FLOAT_COLUMNS, KIND_COLUMNS, Batch, register_batch_kind
from gramtile.pipeline.representations.structures import DepTree, PTree, TokenSeq, Tree, WSDInstance
from gramtile.pipeline.representations.vocab import Vocabularies

KIND_OF_TYPE = {Tree: "tree", DepTree: "dep", TokenSeq: "seq", PTree: "ptree", WSDInstance: "wsd"}


def kind_of(x) -> str:
    if isinstance(x, dict):
        return "bag"
    try:
        return KIND_OF_TYPE[type(x)]
    except KeyError:
        raise TypeError(f"no batch kind for {type(x).__name__}; expected one of "
                        f"{[t.__name__ for t in KIND_OF_TYPE]}") from None


def encode(structs, vocabs: Vocabularies, kind: str | None = None) -> Batch:
    """Flatten ``structs`` (all of one kind) into a batch, adding new strings to ``vocabs``."""
    structs = list(structs)
    if kind is None:
        if not structs:
            raise ValueError("cannot infer the kind of an empty list; pass kind=")
        kind = kind_of(structs[0])
    enc = _ENCODERS[kind]
    cols = {}
    offsets = np.zeros(len(structs) + 1, dtype=np.int64)
    parts = []
    for i, s in enumerate(structs):
        if kind_of(s) != kind:
            raise TypeError(f"item {i} is a {type(s).__name__}, not of kind {kind!r}")
        c = enc(s, vocabs)
        parts.append(c)
        offsets[i + 1] = offsets[i] + len(next(iter(c.values())))
    for name in KIND_COLUMNS[kind]:
        dtype = np.float64 if name in FLOAT_COLUMNS else np.int32
        cols[name] = np.asarray([v for p in parts for v in p[name]], dtype=dtype)
    return Batch(kind, offsets, cols)


def decode(batch: Batch, vocabs: Vocabularies) -> list:
    dec = _DECODERS[batch.kind]
    out = []
    for e in range(batch.n):
        a, b = int(batch.offsets[e]), int(batch.offsets[e + 1])
        cols = {k: v[a:b].tolist() for k, v in batch.columns.items()}
        out.append(dec(cols, vocabs))
    return out


# ---- ordered trees ---------------------------------------------------------------------

def _enc_tree(t: Tree, vocabs):
    sym, prod = vocabs["sym"], vocabs["prod"]
    label, prods, parent = [], [], []
    stack = [(t, -1)]
    while stack:
        node, par = stack.pop()
        idx = len(label)
        lid = sym.add(node.label)
        label.append(lid)
        parent.append(par)
        if node.children:
            # a production is the node's label and its children's labels (Collins & Duffy), leaf
            # or not: the SST core itself tells a leaf child from an internal one where its
            # definition (ST, SST with typed_leaves) needs it
            key = " ".join(str(x) for x in [lid] + [sym.add(c.label) for c in node.children])
            prods.append(prod.add(key))
        else:
            prods.append(-1)
        for c in reversed(node.children):
            stack.append((c, idx))
    return {"label": label, "prod": prods, "parent": parent}


def _build(labels, parent, make):
    n = len(labels)
    kids = [[] for _ in range(n)]
    for i in range(1, n):
        kids[parent[i]].append(i)
    built = [None] * n
    for i in range(n - 1, -1, -1):  # preorder: children have larger indices
        built[i] = make(i, [built[c] for c in kids[i]])
    return built[0]


def _dec_tree(cols, vocabs):
    sym = vocabs["sym"]
    return _build(cols["label"], cols["parent"], lambda i, ch: Tree(sym[cols["label"][i]], tuple(ch)))


# ---- positional trees ------------------------------------------------------------------

def _enc_ptree(t: PTree, vocabs):
    sym, pprod = vocabs["sym"], vocabs["pprod"]
    label, prods, parent, position = [], [], [], []
    stack = [(t, -1, 0)]
    while stack:
        node, par, pos = stack.pop()
        idx = len(label)
        lid = sym.add(node.label)
        label.append(lid)
        parent.append(par)
        position.append(pos)
        key = str(lid) + "|" + ",".join(f"{p}:{sym.add(c.label)}" for p, c in node.children)
        prods.append(pprod.add(key))
        for p, c in reversed(node.children):
            stack.append((c, idx, p))
    return {"label": label, "prod": prods, "parent": parent, "position": position}


def _dec_ptree(cols, vocabs):
    sym = vocabs["sym"]
    labels, parent, position = cols["label"], cols["parent"], cols["position"]
    n = len(labels)
    kids = [[] for _ in range(n)]
    for i in range(1, n):
        kids[parent[i]].append(i)
    built = [None] * n
    for i in range(n - 1, -1, -1):
        built[i] = PTree(sym[labels[i]], tuple((position[c], built[c]) for c in kids[i]))
    return built[0]


# ---- dependency trees and sequences ----------------------------------------------------

def _ids(sym, xs, n):
    return [-1] * n if xs is None else [sym.add(x) for x in xs]


def _enc_dep(d: DepTree, vocabs):
    sym = vocabs["sym"]
    n = len(d.words)
    return {"word": _ids(sym, d.words, n), "lemma": _ids(sym, d.lemmas, n), "pos": _ids(sym, d.pos, n),
            "deprel": _ids(sym, d.deprels, n), "head": list(d.heads)}


def _strs(sym, ids):
    if ids and ids[0] == -1:
        return None
    return tuple(sym[i] for i in ids)


def _dec_dep(cols, vocabs):
    sym = vocabs["sym"]
    return DepTree(tuple(sym[i] for i in cols["word"]), tuple(cols["head"]), _strs(sym, cols["lemma"]),
                   _strs(sym, cols["pos"]), _strs(sym, cols["deprel"]))


def _enc_seq(s: TokenSeq, vocabs):
    sym = vocabs["sym"]
    n = len(s.tokens)
    return {"token": _ids(sym, s.tokens, n), "lemma": _ids(sym, s.lemmas, n), "pos": _ids(sym, s.pos, n)}


def _dec_seq(cols, vocabs):
    sym = vocabs["sym"]
    return TokenSeq(tuple(sym[i] for i in cols["token"]), _strs(sym, cols["lemma"]), _strs(sym, cols["pos"]))


def _enc_wsd(w: WSDInstance, vocabs):
    sym = vocabs["sym"]
    n = len(w.lemmas)
    return {"word": _ids(sym, w.words, n), "lemma": _ids(sym, w.lemmas, n), "pos": _ids(sym, w.pos, n),
            "target": [1 if i == w.target else 0 for i in range(n)]}


def _dec_wsd(cols, vocabs):
    sym = vocabs["sym"]
    return WSDInstance(tuple(sym[i] for i in cols["lemma"]), tuple(sym[i] for i in cols["pos"]),
                       cols["target"].index(1), _strs(sym, cols["word"]))


def _enc_bag(bag: dict, vocabs):
    """A bag is a dict feature -> weight; stored sorted by feature id (ids unique per bag)."""
    sym = vocabs["sym"]
    pairs = sorted((sym.add(str(f)), float(w)) for f, w in bag.items())
    return {"feat": [f for f, _ in pairs], "weight": [w for _, w in pairs]}


def _dec_bag(cols, vocabs):
    sym = vocabs["sym"]
    return {sym[f]: w for f, w in zip(cols["feat"], cols["weight"])}


_ENCODERS = {"tree": _enc_tree, "dep": _enc_dep, "seq": _enc_seq, "ptree": _enc_ptree, "wsd": _enc_wsd, "bag": _enc_bag}
_DECODERS = {"tree": _dec_tree, "dep": _dec_dep, "seq": _dec_seq, "ptree": _dec_ptree, "wsd": _dec_wsd, "bag": _dec_bag}


def register_kind(kind: str, typ: type, columns: tuple, enc, dec, float_columns=()):
    """Register a representation kind defined outside this module (e.g. relation examples).

    ``enc(structure, vocabs) -> {column: list}`` gives one value per node for every column;
    ``dec({column: list}, vocabs) -> structure`` inverts it exactly. Columns named ``parent`` or
    ``head`` get child CSR arrays built automatically.
    """

    register_batch_kind(kind, columns, float_columns)
    KIND_OF_TYPE[typ] = kind
    _ENCODERS[kind] = enc
    _DECODERS[kind] = dec
