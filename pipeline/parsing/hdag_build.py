"""HDAGs from a dependency parse: the chunked structure of Suzuki et al. (2003), Figure 1.

The HDAG kernel (docs/kernels.md, "HDAG kernel") reads attribute sequences over a graph whose
nodes may contain graphs. A parsed sentence becomes a three-level HDAG:

* **words** are terminated nodes with the attributes ``lower-cased form``, ``PoS tag`` and,
  inside a named entity, the entity type (``GPE``, ``PERSON``, ...); an attribute equal to an
  earlier one of the same word is listed once (a node has a *set* of attributes);
* **chunks** hold their words, joined in word order (``w1 -> w2 -> ...``); a chunk's own
  attribute is its label:

  - named entities (label = entity type) -- an entity strictly inside a noun chunk is a chunk
    nested inside that noun chunk; a noun chunk that *is* an entity is one chunk with both
    labels (``NP`` and the type); an entity that crosses a noun chunk's edge wins and the noun
    chunk is dropped;
  - noun chunks (``NP``; spaCy's ``noun_chunks``, or the same rule on a bare dependency tree);
  - verb groups (``VP``): maximal runs of adjacent verbs, modals and their ``aux``/``auxpass``/
    ``neg``/``prt`` words (``has not been sold``);
  - prepositions (``PP``): one-word chunks for ``IN``/``TO`` words outside noun chunks;

* words in no chunk (``how``, adverbs, conjunctions) stay terminated nodes of the top graph;
  punctuation (relation ``punct``) is left out, unless the text is nothing else;
* the **top graph** links units (chunks and loose words) by the dependency relations between
  their heads: a unit's head is its word nearest the root, and when that word's governor lies
  in another unit V there is an edge ``unit -> V`` (dependent to governor). Depth in the
  dependency tree falls strictly along every edge, so the graph is acyclic.

Example: "What is the capital of New York City ?" (spaCy ``en_core_web_sm``)::

    top graph (edges = dependent -> governor):

        [NP: what] --------------------------> [VP: is]
                                                  ^
        [NP: the -> capital] ---------------------+
                      ^
        [PP: of] -----+
           ^
        [NP GPE: new -> york -> city]

    words: what {what, WP}   is {is, VBZ}   the {the, DT}   capital {capital, NN}
           of {of, IN}       new {new, NNP, GPE}   york {york, NNP, GPE}   city {city, NNP, GPE}

Features run along the edges, from dependents to governors: ``(new-york)-of``, ``PP-NP``,
``(DT-NN)-is`` and ``GPE-VBZ`` (skipping the PP and NP chunks between) are some of them. :func:`draw` prints this layout for any HDAG built here.

Public functions: :func:`gramtile.pipeline.parsing.parse.hdag_from_doc` (a spaCy ``Doc``, entities included),
:func:`hdag_from_dep` (a :class:`DepTree`, entity spans optional), :func:`draw`.
"""
from __future__ import annotations

from gramtile.pipeline.representations.hdag import HDAG
from gramtile.pipeline.representations.structures import DepTree

#: Relations of noun-chunk heads (spaCy's English ``noun_chunks`` rule).
NP_DEPS = frozenset({"nsubj", "nsubjpass", "dobj", "obj", "iobj", "dative", "appos", "attr", "ROOT", "pobj",
                     "conj", "npadvmod", "nmod", "oprd", "pcomp"})
#: Relations that join a word to the verb group of its governor.
VG_DEPS = frozenset({"aux", "auxpass", "neg", "prt"})


def _noun_like(tag: str) -> bool:
    return tag.startswith("NN") or tag in ("PRP", "WP", "CD", "EX")


def _verb_like(tag: str) -> bool:
    return tag.startswith("VB") or tag == "MD"


def noun_chunk_spans(dep: DepTree) -> list:
    """Noun chunks ``(start, end)`` (end exclusive) of a bare dependency tree.

    The rule of spaCy's English ``noun_chunks`` on fine PoS tags: a noun-like word (``NN*``,
    ``PRP``, ``WP``, ``CD``, ``EX``) in a noun-phrase relation heads a chunk from its leftmost
    descendant to itself; chunks do not overlap (the first one wins, left to right).
    """
    n = len(dep.words)
    tags = dep.pos or ("_",) * n
    rels = dep.deprels or ("dep",) * n
    left = list(range(n))
    for i in range(n):  # leftmost descendant: walk each word up and lower its ancestors' bound
        v = dep.heads[i]
        while v != -1 and left[v] > i:
            left[v] = i
            v = dep.heads[v]
    spans, last = [], -1
    for i in range(n):
        if _noun_like(tags[i]) and rels[i] in NP_DEPS and left[i] > last:
            spans.append((left[i], i + 1))
            last = i
    return spans


def _depths(heads) -> list:
    depth = [-1] * len(heads)
    for i in range(len(heads)):
        path, v = [], i
        while v != -1 and depth[v] < 0:
            path.append(v)
            v = heads[v]
        d = -1 if v == -1 else depth[v]
        for u in reversed(path):
            d += 1
            depth[u] = d
    return depth


def hdag_from_dep(dep: DepTree, entities=(), noun_chunks=None) -> HDAG:
    """The chunked HDAG of a dependency parse (see the module docstring).

    Parameters
    ----------
    dep : DepTree
        Words, heads, fine PoS tags (``pos``) and relations (``deprels``).
    entities : sequence of (start, end, label)
        Named-entity spans over word positions (end exclusive).
    noun_chunks : sequence of (start, end), optional
        Noun chunks; default :func:`noun_chunk_spans` of ``dep``.

    Returns
    -------
    HDAG
    """
    n = len(dep.words)
    tags = dep.pos or ("_",) * n
    rels = dep.deprels or ("dep",) * n
    ent_type = [""] * n
    ents = sorted((int(a), int(b), str(lab)) for a, b, lab in entities if 0 <= a < b <= n)
    for a, b, lab in ents:
        for i in range(a, b):
            ent_type[i] = lab
    nps = sorted(noun_chunk_spans(dep) if noun_chunks is None else [(int(a), int(b)) for a, b in noun_chunks])
    keep = [i for i in range(n) if rels[i] != "punct"] or list(range(n))
    kept = set(keep)

    # chunks as (start, end, labels, parent chunk index or None); words belong to the innermost
    chunks = []
    np_labels = {}
    for a, b in nps:
        inside = [e for e in ents if a <= e[0] and e[1] <= b]
        crossing = [e for e in ents if e[0] < b and a < e[1] and not (a <= e[0] and e[1] <= b)]
        if crossing:
            continue
        np_labels[(a, b)] = ["NP"] + [e[2] for e in inside if (e[0], e[1]) == (a, b)]
    owner = [None] * n  # innermost chunk of each word
    for (a, b), labels in np_labels.items():
        chunks.append((a, b, labels, None))
        for i in range(a, b):
            owner[i] = len(chunks) - 1
    for a, b, lab in ents:
        if (a, b) in np_labels:
            continue
        outer = owner[a] if owner[a] is not None and all(owner[i] == owner[a] for i in range(a, b)) else None
        if any(owner[i] is not None for i in range(a, b)) and outer is None:
            continue  # an entity over two noun chunks: the noun chunks stay
        chunks.append((a, b, [lab], outer))
        for i in range(a, b):
            owner[i] = len(chunks) - 1
    i = 0
    while i < n:  # verb groups: runs of adjacent verb-group words outside other chunks
        if owner[i] is None and (_verb_like(tags[i]) or rels[i] in VG_DEPS) and i in kept:
            j = i
            while j + 1 < n and owner[j + 1] is None and j + 1 in kept and \
                    (_verb_like(tags[j + 1]) or rels[j + 1] in VG_DEPS):
                j += 1
            if any(_verb_like(tags[k]) for k in range(i, j + 1)):
                chunks.append((i, j + 1, ["VP"], None))
                for k in range(i, j + 1):
                    owner[k] = len(chunks) - 1
            i = j + 1
        else:
            i += 1
    for i in keep:
        if owner[i] is None and (tags[i] in ("IN", "TO") or rels[i] in ("prep", "agent")):
            chunks.append((i, i + 1, ["PP"], None))
            owner[i] = len(chunks) - 1

    # nodes: chunks first (in order of their first word), then words; numbering is free
    order = sorted(range(len(chunks)), key=lambda c: (chunks[c][0], -chunks[c][1]))
    node_of_chunk = {c: k for k, c in enumerate(order)}
    attrs, parent = [], []
    for c in order:
        a, b, labels, outer = chunks[c]
        attrs.append(list(dict.fromkeys(labels)))
        parent.append(-1 if outer is None else node_of_chunk[outer])
    node_of_word = {}
    for i in keep:
        node_of_word[i] = len(attrs)
        own = [dep.words[i].lower(), tags[i]] + ([ent_type[i]] if ent_type[i] else [])
        attrs.append(list(dict.fromkeys(own)))
        parent.append(-1 if owner[i] is None else node_of_chunk[owner[i]])

    # the unit of word i inside graph g: the node of g that holds i (itself, or a chunk of g)
    def unit(i, g):
        v = node_of_word[i]
        while parent[v] != g:
            v = parent[v]
        return v

    edges = []
    members = {}
    for i in keep:  # word order inside each chunk, over its direct members
        g = parent[node_of_word[i]]
        if g != -1:
            # the direct member of every enclosing chunk in turn
            v = node_of_word[i]
            while parent[v] != -1:
                members.setdefault(parent[v], [])
                if v not in members[parent[v]]:
                    members[parent[v]].append(v)
                v = parent[v]
    for g, ms in members.items():
        edges.extend((u, v) for u, v in zip(ms, ms[1:]))
    depth = _depths(dep.heads)
    tops = {}
    for i in keep:  # each top unit's head: its word nearest the root (first on ties)
        u = unit(i, -1)
        if u not in tops or depth[i] < depth[tops[u]]:
            tops[u] = i
    for u, h in tops.items():
        g = dep.heads[h]
        while g != -1 and g not in kept:  # punctuation governs nothing useful: go past it
            g = dep.heads[g]
        if g != -1:
            v = unit(g, -1)
            if v != u:
                edges.append((u, v))
    return HDAG(attrs, parent, edges)




def draw(h: HDAG) -> str:
    """A text drawing of an HDAG: top-graph units with their nested contents, then the edges.

    Each chunk is ``[LABELS: inner -> nodes]`` (inner nodes in the order of the chunk's edges),
    each word ``{attributes}``.
    """
    n = len(h)
    kids = {v: [] for v in range(-1, n)}
    indeg = [0] * n
    for u, v in h.edges:
        indeg[v] += 1
    succ = {v: [] for v in range(n)}
    for u, v in h.edges:
        succ[u].append(v)
    ready = [v for v in range(n) if indeg[v] == 0]
    while ready:  # topological order, so a chunk's inner nodes read in word order
        ready.sort()
        v = ready.pop(0)
        kids[h.parent[v]].append(v)
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0:
                ready.append(w)

    def show(v):
        if not kids[v]:
            return "{" + ", ".join(h.attrs[v]) + "}"
        inner = " -> ".join(show(c) for c in kids[v])
        return "[" + " ".join(h.attrs[v]) + ": " + inner + "]"

    lines = [f"{v}: {show(v)}" for v in kids[-1]]
    top = [(u, v) for u, v in h.edges if h.parent[u] == -1]
    lines.append("edges: " + ", ".join(f"{u} -> {v}" for u, v in top))
    return "\n".join(lines)
