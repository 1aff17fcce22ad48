"""CoNLL04 entities and relations (Roth & Yih 2004): the column corpus, the JSON split, candidate pairs.

Files (../shared/data/conll04/README.md): ``conll04.corp`` (all 5,516 sentences, gold PoS, one
*element* per line -- a word or a whole multi-word entity joined by ``/``), the SpERT JSON split
``json/{train,valid,test}.CoNLL04.json`` (922 / 231 / 288 relation sentences: tokens, entity and
relation spans) and ``split_ids.tsv`` (JSON item -> ``conll04.corp`` sentence number).
:func:`load_split` joins them: tokens, entities and relations from the JSON, gold PoS from the
column file (checked to give the same tokens).

Zelenko-style binary tasks (:func:`candidate_pairs`): every ordered same-sentence pair of gold
mentions with the relation's argument types is a candidate, positive when the gold relation
holds. ``Work_For`` (Peop, Org) stands for person-affiliation and ``OrgBased_In`` (Org, Loc) for
organization-location.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from gramtile.pipeline.readers.base import check_path, lines, make_policy
from gramtile.pipeline.representations.errors import CorpusFormatError

#: Argument types of the five relations (README: every relation respects them).
RELATION_ARGS = {"Work_For": ("Peop", "Org"), "OrgBased_In": ("Org", "Loc"), "Located_In": ("Loc", "Loc"),
                 "Live_In": ("Peop", "Loc"), "Kill": ("Peop", "Peop")}
ENTITY_TYPES = ("Peop", "Org", "Loc", "Other")
SPLIT_FILES = {"train": "train.CoNLL04.json", "dev": "valid.CoNLL04.json", "test": "test.CoNLL04.json"}
_TOKEN_MAP = {"COMMA": ",", "-LRB-": "(", "-RRB-": ")"}


@dataclass(frozen=True)
class CorpSentence:
    """One sentence of ``conll04.corp`` split into words (multi-word elements split on ``/``)."""

    id: int
    words: tuple
    pos: tuple
    entities: tuple   # (start, end, type), word offsets, end exclusive
    relations: tuple  # (head_start, head_end, tail_start, tail_end, type)
    line: int


@dataclass(frozen=True)
class Conll04Sentence:
    """A sentence of the JSON split with gold PoS: ``entities`` (start, end, type), ``relations``
    (head_start, head_end, tail_start, tail_end, type), word offsets with exclusive ends."""

    id: str
    words: tuple
    pos: tuple
    entities: tuple
    relations: tuple
    source: str


@dataclass(frozen=True)
class Candidate:
    """An ordered mention pair of one sentence: ``head`` and ``tail`` are (start, end, type)."""

    sentence: Conll04Sentence
    head: tuple
    tail: tuple
    label: bool


def _element_words(word, tag, path, line):
    words = [_TOKEN_MAP.get(w, w) for w in word.split("/")] if word != "/" else ["/"]
    tags = tag.split("/") if tag != "/" else ["/"]
    if len(tags) != len(words):
        # 33 elements (e.g. Energiya/Buran tagged NNP) have fewer tags than words: the last tag
        # stands for the remaining words, as it is the head's tag of a name
        tags = (tags + [tags[-1]] * len(words))[:len(words)]
    if not all(words):
        raise CorpusFormatError(f"element {word!r} has an empty word", path=path, line=line,
                                fix="write multi-word elements as words joined by single '/'")
    return words, tags


def read_corp(path) -> dict:
    """Read ``conll04.corp`` into ``{sentence id: CorpSentence}``.

    Raises
    ------
    CorpusFormatError
        A line with the wrong number of columns, a non-integer index, an unknown entity type,
        elements out of order, or a relation naming a missing element (file and line named).
    """
    policy = make_policy("raise")  # a half-read sentence cannot be resynchronised safely: always raise
    path = check_path(path)
    out = {}
    state = "elements"  # elements -> (blank) -> relations -> (blank) -> next sentence
    cur = None

    def finish():
        nonlocal cur
        if cur is not None:
            sid, words, pos, ents, rels, spans, line = cur
            out[sid] = CorpSentence(sid, tuple(words), tuple(pos), tuple(ents), tuple(rels), line)
        cur = None

    for number, text in lines(path, policy):
        if text is None:
            continue
        if not text.strip():
            if state == "elements" and cur is not None:
                state = "relations"
            elif state == "relations":
                finish()
                state = "elements"
            continue
        cols = text.split("\t")
        try:
            if state == "elements" and len(cols) == 9:
                sid, label, idx = int(cols[0]), cols[1], int(cols[2])
                if cur is None:
                    if sid in out:
                        raise CorpusFormatError(f"sentence {sid} appears twice", path=path, line=number,
                                                fix="give every sentence a unique number")
                    cur = (sid, [], [], [], [], [], number)
                if sid != cur[0]:
                    raise CorpusFormatError(f"sentence number {sid} inside sentence {cur[0]} (no blank line "
                                            "between them)", path=path, line=number,
                                            fix="end each sentence's elements with a blank line")
                if idx != len(cur[5]):
                    raise CorpusFormatError(f"element index {idx}, expected {len(cur[5])}", path=path, line=number,
                                            fix="number the elements of a sentence 0, 1, 2, ... in order")
                if label != "O" and label not in ENTITY_TYPES:
                    raise CorpusFormatError(f"entity label {label!r}", path=path, line=number,
                                            fix=f"use O or one of {list(ENTITY_TYPES)}")
                words, tags = _element_words(cols[5], cols[4], path, number)
                start = len(cur[1])
                cur[1].extend(words)
                cur[2].extend(tags)
                cur[5].append((start, len(cur[1])))
                if label != "O":
                    cur[3].append((start, len(cur[1]), label))
            elif state == "relations" and len(cols) == 3:
                a, b, rel = int(cols[0]), int(cols[1]), cols[2]
                spans = cur[5]
                if not (0 <= a < len(spans) and 0 <= b < len(spans)):
                    raise CorpusFormatError(f"relation between elements {a} and {b}, but the sentence has "
                                            f"{len(spans)} elements", path=path, line=number,
                                            fix="name existing element indices")
                if rel not in RELATION_ARGS:
                    raise CorpusFormatError(f"relation type {rel!r}", path=path, line=number,
                                            fix=f"use one of {list(RELATION_ARGS)}")
                cur[4].append((*spans[a], *spans[b], rel))
            else:
                want = "9 tab-separated columns (sent, label, index, O, PoS, word, O, O, O)" \
                    if state == "elements" else "3 columns (arg1 index, arg2 index, relation)"
                raise CorpusFormatError(f"{len(cols)} column(s): {text[:60]!r}", path=path, line=number,
                                        fix=f"an {'element' if state == 'elements' else 'relation'} line has "
                                            f"{want}")
        except CorpusFormatError:
            raise
        except ValueError:
            raise CorpusFormatError(f"not an integer index in {text[:60]!r}", path=path, line=number,
                                    fix="sentence and element indices are integers") from None
    finish()
    return out


def read_split_json(path) -> list:
    """Read a SpERT JSON split file into a list of ``{"tokens", "entities", "relations"}`` items.

    Raises
    ------
    CorpusFormatError
        Invalid JSON, or an item whose spans fall outside its tokens or whose relation names no
        entity (the file is one line: the message names the item index).
    """
    path = check_path(path)
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise CorpusFormatError(f"invalid JSON at column {e.colno}: {e.msg}", path=path, line=e.lineno,
                                fix="give the SpERT JSON array of sentences") from None
    if not isinstance(items, list):
        raise CorpusFormatError(f"top level is {type(items).__name__}, not a list", path=path, line=1,
                                fix="give the SpERT JSON array of sentences")
    for k, it in enumerate(items):
        line = 1  # the published files hold the whole array on one line

        def bad(msg, fix):
            raise CorpusFormatError(f"item {k}: {msg}", path=path, line=line, fix=fix)

        if not isinstance(it, dict) or set(it) != {"tokens", "entities", "relations"}:
            bad(f"keys {sorted(it) if isinstance(it, dict) else type(it).__name__}",
                "each item has exactly the keys tokens, entities, relations")
        n = len(it["tokens"])
        ents = set()
        for e in it["entities"]:
            if len(e) != 3 or not (0 <= e[0] < e[1] <= n) or e[2] not in ENTITY_TYPES:
                bad(f"entity {e!r} (sentence of {n} tokens)",
                    f"write [start, end, type] with 0 <= start < end <= {n} and type in {list(ENTITY_TYPES)}")
            ents.add((e[0], e[1]))
        for r in it["relations"]:
            if len(r) != 5 or (r[0], r[1]) not in ents or (r[2], r[3]) not in ents or r[4] not in RELATION_ARGS:
                bad(f"relation {r!r}", "write [head_start, head_end, tail_start, tail_end, type] over listed entities "
                    f"with type in {list(RELATION_ARGS)}")
    return items


def read_split_ids(path) -> dict:
    """``split_ids.tsv`` as ``{(spert_split, spert_index): orig_id}``."""
    path = check_path(path)
    out = {}
    policy = make_policy("raise")
    header = None
    for number, text in lines(path, policy):
        cols = text.split("\t")
        if header is None:
            header = cols
            if cols[:3] != ["orig_id", "spert_split", "spert_index"]:
                raise CorpusFormatError(f"header {cols[:3]}", path=path, line=number,
                                        fix="the first line names orig_id, spert_split, spert_index, ...")
            continue
        try:
            out[(cols[1], int(cols[2]))] = int(cols[0])
        except (ValueError, IndexError):
            raise CorpusFormatError(f"bad row {text!r}", path=path, line=number,
                                    fix="give integer orig_id and spert_index columns") from None
    return out


def load_split(data_dir, split: str, corp: dict | None = None) -> list[Conll04Sentence]:
    """The sentences of one SpERT split (``train``, ``dev`` or ``test``) with gold PoS.

    Parameters
    ----------
    data_dir : path
        The ``conll04`` folder.
    split : {"train", "dev", "test"}
    corp : dict, optional
        :func:`read_corp` of ``conll04.corp`` (read when not given; pass it to load several splits).

    Raises
    ------
    CorpusFormatError
        An unknown split, or a JSON item whose tokens differ from the column file's sentence.
    """
    data_dir = Path(data_dir)
    if split not in SPLIT_FILES:
        raise CorpusFormatError(f"unknown CoNLL04 split {split!r}", path=data_dir,
                                fix=f"use one of {list(SPLIT_FILES)}")
    corp = corp if corp is not None else read_corp(data_dir / "conll04.corp")
    ids = read_split_ids(data_dir / "split_ids.tsv")
    path = data_dir / "json" / SPLIT_FILES[split]
    out = []
    for k, it in enumerate(read_split_json(path)):
        orig = ids.get((split, k))
        if orig is None or orig not in corp:
            raise CorpusFormatError(f"item {k} of split {split!r} has no sentence in conll04.corp "
                                    f"(orig_id {orig})", path=path, line=1, fix="use the split_ids.tsv of this corpus")
        cs = corp[orig]
        if tuple(it["tokens"]) != cs.words:
            raise CorpusFormatError(f"item {k}: tokens differ from conll04.corp sentence {orig} (line {cs.line})",
                                    path=path, line=1, fix="use the JSON split and column file of one release")
        out.append(Conll04Sentence(f"conll04:{orig}", cs.words, cs.pos,
                                   tuple(tuple(e) for e in it["entities"]),
                                   tuple(tuple(r) for r in it["relations"]), f"{path}:item {k}"))
    return out


def candidate_pairs(sentences, relation: str) -> list[Candidate]:
    """Every ordered same-sentence mention pair with the argument types of ``relation``.

    Raises
    ------
    CorpusFormatError
        An unknown relation name.
    """
    if relation not in RELATION_ARGS:
        raise CorpusFormatError(f"unknown CoNLL04 relation {relation!r}", fix=f"use one of {list(RELATION_ARGS)}")
    t1, t2 = RELATION_ARGS[relation]
    out = []
    for s in sentences:
        gold = {(r[0], r[1], r[2], r[3]) for r in s.relations if r[4] == relation}
        for h in s.entities:
            if h[2] != t1:
                continue
            for t in s.entities:
                if t[2] != t2 or t[:2] == h[:2]:
                    continue
                out.append(Candidate(s, tuple(h), tuple(t), (h[0], h[1], t[0], t[1]) in gold))
    return out


