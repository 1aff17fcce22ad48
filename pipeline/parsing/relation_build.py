"""Relation examples built from a tagged (and optionally parsed) sentence and two entity mentions.

Zelenko, Aone & Richardella (2003), sections 3 and 6.1: a relation example is the shallow parse
of a sentence restricted to the least common subtree of the two mentions, with each node's
``Type``, ``Role`` and ``Text``. gramtile builds it in four steps from Penn Treebank PoS tags,
optional dependency heads (for prepositional attachment) and the two mention spans.

1. **Chunks** (left to right, one per token group):

   * the tokens of an entity mention form a *name chunk* typed by the entity class: ``PNP``
     (person), ``ONP`` (organisation), ``LNP`` (location) -- see :data:`ENTITY_CHUNK` -- or
     ``NP`` for untyped or other mentions (SemEval nominals). The open noun-phrase run right
     before the mention (``the``, ``chief``, ``antenna``) is absorbed into it;
   * other maximal runs of noun-phrase tags (:data:`NP_TAGS`) are ``NP`` chunks; a determiner
     after a noun, a possessive ``'s`` (it closes its chunk) or a mention starts a new one;
   * runs of verbs, modals and the adverbs / particles inside them are ``Verb`` chunks;
   * ``IN`` / ``TO`` are ``Prep``; punctuation is ``Punct``; ``CC`` is ``Conj``; adverbs
     outside verb groups are ``Adv``; any other tag is ``Other``.

   A chunk's head is its last noun (``NP``), the mention's last token (name chunks) or its last
   verb (``Verb``); ``Text`` is the lower-cased lemma of the head (the word when no lemma is
   given).
2. **Prepositional attachment as nesting.** A ``Prep`` chunk becomes a child of the chunk it
   attaches to and the noun-phrase chunk right after it becomes the ``Prep``'s child -- with
   heads, only when one of its tokens depends on the preposition (its object; after a
   complementizer, as in "said that the government was ...", the noun phrase stays where it
   is). The host is
   the chunk holding the preposition's dependency head when that chunk is a noun-phrase or verb
   chunk before the preposition; a head after the preposition (a fronted PP) puts the PP under
   the sentence; without heads, the nearest noun-phrase or verb chunk before it is the host.
   Every other chunk is a child of the root node ``Sentence`` (no Text). Children keep word order.
3. **Least common subtree.** The example is the subtree rooted at the lowest common ancestor of
   the two name chunks; of that node's children only those whose word span meets the span from
   the first mention's start to the last mention's end are kept (everything below a kept child
   stays), so a long sentence does not bring its unrelated tail.
4. **Roles.** The two mention chunks get the roles given (``arg1`` / ``arg2`` by default;
   ``member`` / ``affiliation`` for person-affiliation); every other node has ``none``.

Example: "John Smith is the chief scientist of the Hardcom Corporation ." with the person
mention "John Smith" and the organisation mention "Hardcom Corporation" (heads from a parser:
"of" attaches to "scientist")::

    Sentence                                              (root: Sentence, none)
    |-- PNP  member       smith        John Smith
    |-- Verb none         be           is
    `-- NP   none         scientist    the chief scientist
        `-- Prep none     of           of
            `-- ONP affiliation corporation   the Hardcom Corporation

(the final ``.`` lies outside the mentions' span and is dropped by step 3). The same sentence
with the organisation and a location mention "... Hardcom Corporation in Boston" gives for
(Hardcom Corporation, Boston) the subtree rooted at the ONP chunk: ``ONP(arg1) -> Prep(in) ->
LNP(arg2)``.
"""
from __future__ import annotations

from dataclasses import dataclass

from gramtile.kernels.errors import RepresentationError
from gramtile.pipeline.parsing.parse import doc_to_dep
from gramtile.pipeline.representations.relation import RelationExample
from gramtile.pipeline.representations.structures import DepTree

#: Entity classes (CoNLL04, spaCy / ACE / CoNLL-2003 names) -> name-chunk Type.
ENTITY_CHUNK = {
    "Peop": "PNP", "Person": "PNP", "PERSON": "PNP", "PER": "PNP",
    "Org": "ONP", "Organization": "ONP", "ORG": "ONP",
    "Loc": "LNP", "Location": "LNP", "LOC": "LNP", "GPE": "LNP",
}
#: Penn tags that make up noun-phrase chunks.
NP_TAGS = frozenset({"DT", "PDT", "PRP$", "WP$", "JJ", "JJR", "JJS", "CD", "NN", "NNS", "NNP", "NNPS", "PRP",
                     "WP", "EX", "POS", "FW", "$", "SYM"})
NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS", "PRP", "WP", "EX", "FW", "CD", "$", "SYM"})
_DET_TAGS = frozenset({"DT", "PDT", "PRP$", "WP$"})
VERB_TAGS = frozenset({"MD", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ"})
_VERB_INNER = frozenset({"RB", "RBR", "RBS", "RP"})
PREP_TAGS = frozenset({"IN", "TO"})
PUNCT_TAGS = frozenset({",", ".", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP", "#", "(", ")", '"', "''"})
_NOMINAL = frozenset({"NP", "PNP", "ONP", "LNP"})


@dataclass(frozen=True)
class Mention:
    """An entity mention: tokens ``start`` .. ``end - 1`` and its entity class (or None)."""

    start: int
    end: int
    type: str | None = None


@dataclass(frozen=True)
class TaggedSentence:
    """Tokens with Penn PoS tags, and optionally lemmas and dependency heads (-1 = root)."""

    words: tuple
    pos: tuple
    lemmas: tuple | None = None
    heads: tuple | None = None

    def __post_init__(self):
        n = len(self.words)
        for name in ("pos", "lemmas", "heads"):
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, tuple(v))
                if len(v) != n:
                    raise RepresentationError(f"tagged sentence: {name} has {len(v)} entries for {n} words; "
                                              f"give one per word")
        object.__setattr__(self, "words", tuple(self.words))
        if n == 0:
            raise RepresentationError("tagged sentence has no words; give at least one")


@dataclass
class Chunk:
    """One shallow-parse chunk: Type, tokens ``start:end``, head token, mention index or None."""

    type: str
    start: int
    end: int
    head: int
    mention: int | None = None
    parent: int = -1  # chunk index; -1 = the Sentence root
    lo: int = 0       # word span of the chunk's subtree (filled by nest())
    hi: int = 0


def sentence_from_dep(dep) -> TaggedSentence:
    """A :class:`TaggedSentence` from a :class:`~gramtile.pipeline.representations.structures.DepTree` (spaCy tags)."""
    if dep.pos is None:
        raise RepresentationError("dependency tree has no PoS tags; the shallow parse needs Penn tags")
    return TaggedSentence(dep.words, dep.pos, dep.lemmas, dep.heads)


def sentence_from_doc(doc) -> TaggedSentence:
    """A :class:`TaggedSentence` from a parsed spaCy ``Doc`` (fine-grained tags, lemmas, heads)."""

    return sentence_from_dep(doc_to_dep(doc))


def _check_mentions(sent: TaggedSentence, mentions):
    n = len(sent.words)
    spans = sorted((m.start, m.end, i) for i, m in enumerate(mentions))
    for s, e, i in spans:
        if not (0 <= s < e <= n):
            raise RepresentationError(f"mention {i} spans tokens {s}:{e}, outside the sentence of {n} tokens; "
                                      "give 0 <= start < end <= number of tokens")
    for (s1, e1, i1), (s2, e2, i2) in zip(spans, spans[1:]):
        if s2 < e1:
            raise RepresentationError(f"mentions {i1} ({s1}:{e1}) and {i2} ({s2}:{e2}) overlap; a relation "
                                      "example needs two disjoint mentions")


def chunk(sent: TaggedSentence, mentions=()) -> list[Chunk]:
    """Step 1 of the module docstring: the chunks of ``sent`` in word order.

    Parameters
    ----------
    sent : TaggedSentence
    mentions : sequence of Mention
        Disjoint mention spans; each becomes one name chunk (``Chunk.mention`` = its index).
    """
    mentions = list(mentions)
    _check_mentions(sent, mentions)
    at = {m.start: i for i, m in enumerate(mentions)}
    pos = sent.pos
    chunks: list[Chunk] = []
    open_np = None  # index into chunks of an NP still accepting tokens
    has_noun = False
    i, n = 0, len(sent.words)
    while i < n:
        if i in at:
            k = at[i]
            m = mentions[k]
            start = i
            if open_np is not None and open_np == len(chunks) - 1:
                start = chunks.pop().start  # the mention absorbs the NP run before it
            chunks.append(Chunk(ENTITY_CHUNK.get(m.type, "NP"), start, m.end, m.end - 1, k))
            open_np, has_noun = None, False
            i = m.end
            continue
        t = pos[i]
        if t in NP_TAGS:
            new = open_np is None or (t in _DET_TAGS and has_noun)
            if new:
                chunks.append(Chunk("NP", i, i + 1, i))
                open_np, has_noun = len(chunks) - 1, False
            c = chunks[open_np]
            c.end = i + 1
            if t in NOUN_TAGS:
                c.head, has_noun = i, True
            elif not has_noun:
                c.head = i
            if t == "POS":
                open_np, has_noun = None, False
            i += 1
            continue
        open_np, has_noun = None, False
        if t in VERB_TAGS:
            j = i
            last_verb = i
            while j < n and j not in at and (pos[j] in VERB_TAGS or (pos[j] in _VERB_INNER and j + 1 < n and
                                                                      (pos[j + 1] in VERB_TAGS or pos[j] == "RP"))):
                if pos[j] in VERB_TAGS:
                    last_verb = j
                j += 1
            chunks.append(Chunk("Verb", i, j, last_verb))
            i = j
            continue
        if t in PREP_TAGS:
            typ = "Prep"
        elif t in PUNCT_TAGS or not any(ch.isalnum() for ch in sent.words[i]):
            typ = "Punct"
        elif t == "CC":
            typ = "Conj"
        elif t.startswith("RB") or t == "WRB":
            typ = "Adv"
        else:
            typ = "Other"
        chunks.append(Chunk(typ, i, i + 1, i))
        i += 1
    return chunks


def nest(sent: TaggedSentence, chunks: list[Chunk]) -> list[Chunk]:
    """Step 2: set ``Chunk.parent`` (prepositional attachment) and subtree spans; returns ``chunks``."""
    owner = [0] * len(sent.words)
    for ci, c in enumerate(chunks):
        for t in range(c.start, c.end):
            owner[t] = ci
    hostable = _NOMINAL | {"Verb"}
    for ci, c in enumerate(chunks):
        if c.type != "Prep":
            continue
        host = -1
        h = None if sent.heads is None else sent.heads[c.head]
        if h is not None and h >= 0 and owner[h] < ci and chunks[owner[h]].type in hostable:
            host = owner[h]
        elif h is None or h < 0 or owner[h] < ci:
            # no head, a root preposition, or a head in a chunk that cannot host: nearest host before
            for b in range(ci - 1, -1, -1):
                if chunks[b].type in hostable:
                    host = b
                    break
        c.parent = host
        if ci + 1 < len(chunks) and chunks[ci + 1].type in _NOMINAL:
            nxt = chunks[ci + 1]
            # with heads, only the preposition's object nests under it: after a complementizer
            # ("said that the French Government was ...") the noun phrase is the verb's subject
            if sent.heads is None or any(sent.heads[t] == c.head for t in range(nxt.start, nxt.end)):
                nxt.parent = ci
    # spans of subtrees, children after parents in word order except hosts: iterate to a fixpoint
    for c in chunks:
        c.lo, c.hi = c.start, c.end
    for ci in sorted(range(len(chunks)), key=lambda k: -_depth(chunks, k)):
        p = chunks[ci].parent
        if p >= 0:
            chunks[p].lo = min(chunks[p].lo, chunks[ci].lo)
            chunks[p].hi = max(chunks[p].hi, chunks[ci].hi)
    return chunks


def _depth(chunks, k):
    d = 0
    while chunks[k].parent >= 0:
        k = chunks[k].parent
        d += 1
    return d


def _text(sent, i):
    w = sent.lemmas[i] if sent.lemmas is not None else sent.words[i]
    return w.lower()


def relation_example(sent: TaggedSentence, m1: Mention, m2: Mention, roles=("arg1", "arg2"),
                     others=(), scope: str = "lcs") -> RelationExample:
    """The relation example of mentions ``m1`` and ``m2`` in ``sent`` (module docstring).

    Parameters
    ----------
    sent : TaggedSentence
    m1, m2 : Mention
        The two arguments, in either word order; ``m1`` gets ``roles[0]``, ``m2`` ``roles[1]``.
    roles : (str, str)
    others : sequence of Mention
        Further entity mentions of the sentence: chunked as name chunks (typed by class) with
        role ``none``, as Zelenko's parser tags every name.
    scope : {"lcs", "sentence"}
        ``"lcs"``: root the example at the least common subtree (step 3); ``"sentence"``: always
        at the ``Sentence`` node (its children still trimmed to the mentions' span), so every
        two examples have matching roots.

    Returns
    -------
    RelationExample

    Raises
    ------
    RepresentationError
        Mentions outside the sentence or overlapping.
    """
    if scope not in ("lcs", "sentence"):
        raise RepresentationError(f"scope={scope!r}; use 'lcs' or 'sentence'")
    if len(roles) != 2 or not all(isinstance(r, str) and r for r in roles):
        raise RepresentationError(f"roles={roles!r}; give two non-empty role names such as ('arg1', 'arg2')")
    keep_others = [o for o in others if (o.start, o.end) not in ((m1.start, m1.end), (m2.start, m2.end))]
    chunks = nest(sent, chunk(sent, [m1, m2] + keep_others))
    mc = [next(ci for ci, c in enumerate(chunks) if c.mention == k) for k in (0, 1)]
    up = []
    for ci in mc:
        path = [ci]
        while chunks[path[-1]].parent >= 0:
            path.append(chunks[path[-1]].parent)
        path.append(-1)
        up.append(path)
    on1 = set(up[0])
    lca = next(c for c in up[1] if c in on1) if scope == "lcs" else -1
    lo, hi = min(m1.start, m2.start), max(m1.end, m2.end)
    kids = [[] for _ in chunks]
    top = []
    for ci, c in enumerate(chunks):
        (kids[c.parent] if c.parent >= 0 else top).append(ci)
    role_of = {mc[0]: roles[0], mc[1]: roles[1]}

    def build(ci, only_span):
        # iterative post-order would be overkill: shallow trees nest only through PPs
        c = chunks[ci]
        ch = [k for k in kids[ci] if not only_span or (chunks[k].lo < hi and chunks[k].hi > lo)]
        return RelationExample(c.type, role_of.get(ci, "none"), _text(sent, c.head),
                               tuple(build(k, False) for k in ch))

    if lca == -1:
        ch = [k for k in top if chunks[k].lo < hi and chunks[k].hi > lo]
        return RelationExample("Sentence", "none", None, tuple(build(k, False) for k in ch))
    return build(lca, True)


def shortest_path(heads, a: int, b: int) -> list[int]:
    """Token indices on the dependency path from ``a`` up to the lowest common ancestor and down to ``b``."""
    up_a = [a]
    while heads[up_a[-1]] >= 0:
        up_a.append(heads[up_a[-1]])
    pos_a = {t: k for k, t in enumerate(up_a)}
    up_b = [b]
    while up_b[-1] not in pos_a:
        up_b.append(heads[up_b[-1]])
    return up_a[:pos_a[up_b[-1]] + 1] + list(reversed(up_b[:-1]))


def mention_head(heads, m: Mention) -> int:
    """The token of ``m`` whose head lies outside it (the last such token; the last token if none)."""
    best = m.end - 1
    for t in range(m.start, m.end):
        if heads[t] < m.start or heads[t] >= m.end:
            best = t
    return best


def sub_dep(dep, keep):
    """The DepTree over tokens ``keep`` (a connected set), rooted at the one whose head is outside."""

    keep = sorted(set(keep))
    idx = {t: k for k, t in enumerate(keep)}
    heads = [idx.get(dep.heads[t], -1) for t in keep]
    if sum(h == -1 for h in heads) != 1:
        raise RepresentationError(f"tokens {keep} are not one connected subtree of the dependency tree")

    def col(c):
        return None if c is None else [c[t] for t in keep]

    return DepTree([dep.words[t] for t in keep], heads, col(dep.lemmas), col(dep.pos), col(dep.deprels))


def path_dep(dep, m1: Mention, m2: Mention):
    """The shortest dependency path between the heads of ``m1`` and ``m2`` as a DepTree (peak = root)."""
    return sub_dep(dep, shortest_path(dep.heads, mention_head(dep.heads, m1), mention_head(dep.heads, m2)))


def path_enclosed_dep(dep, m1: Mention, m2: Mention):
    """The path-enclosed dependency subtree: the shortest path between the mention heads plus every
    token between the first mention's start and the last mention's end that lies below the path's
    peak, with the ancestors that connect it (Zhang et al. 2006's path-enclosed tree on a dependency
    parse)."""
    path = shortest_path(dep.heads, mention_head(dep.heads, m1), mention_head(dep.heads, m2))
    peak = max(path, key=lambda t: -_dep_depth(dep.heads, t))
    lo, hi = min(m1.start, m2.start), max(m1.end, m2.end)
    keep = set(path)
    for t in range(lo, hi):
        chain = [t]
        while chain[-1] != peak and chain[-1] not in keep and dep.heads[chain[-1]] >= 0:
            chain.append(dep.heads[chain[-1]])
        if chain[-1] in keep:
            keep.update(chain)
    return sub_dep(dep, keep)


def _dep_depth(heads, t):
    d = 0
    while heads[t] >= 0:
        t = heads[t]
        d += 1
    return d
