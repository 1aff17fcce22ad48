"""JSON lines: gramtile's own interchange format (docs/formats.md), read and written.

One object per line. Keys: ``id`` (string, unique in the file), ``label`` (string or list of
strings), ``text`` (string), and the keys of at most one of the word-level representations

=================  ======================================================  ===============
representation     keys                                                    structure name
=================  ======================================================  ===============
dependency tree    ``words``, ``heads`` + optional ``lemmas pos deprels``  ``"dep"``
token sequence     ``tokens`` + optional ``lemmas pos``                    ``"seq"``
WSD instance       ``lemmas``, ``pos``, ``target`` + optional ``words``    ``"wsd"``
=================  ======================================================  ===============

plus, freely combined with them, ``tree`` (a bracket string, structure ``"tree"``),
``ptree`` (nested ``{"label", "children": {"<position>": NODE}}``, structure ``"ptree"``),
``relation`` (:mod:`gramtile.pipeline.representations.relation`, structure ``"relation"``) and ``hdag``
(:mod:`gramtile.pipeline.representations.hdag`, structure ``"hdag"``). Unknown keys and wrong types are
errors naming the key and the line. Blank lines are not records.
"""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from gramtile.kernels.errors import RepresentationError
from gramtile.pipeline.readers.base import (
    DEFAULT_MAX_TOKENS,
    HEAD_FIX,
    check_text,
    check_tokens,
    guarded,
    head_problem,
    lines,
    make_policy,
    parse_bracketed,
    record_id,
    source,
)
from gramtile.pipeline.readers.table import field_columns, record_document
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.hdag import HDAG, hdag_from_obj, hdag_to_obj
from gramtile.pipeline.representations.relation import RelationExample, relation_from_json, relation_to_json
from gramtile.pipeline.representations.structures import (
    DepTree,
    Document,
    PTree,
    TokenSeq,
    Tree,
    WSDInstance,
    format_tree,
)

KEYS = ("id", "label", "text", "tree", "words", "heads", "lemmas", "pos", "deprels", "tokens",
        "target", "ptree", "relation", "hdag")
# structure name -> type, as the reader produces them and the writer expects them
NAMES = {"tree": Tree, "dep": DepTree, "seq": TokenSeq, "wsd": WSDInstance, "ptree": PTree,
         "relation": RelationExample, "hdag": HDAG}
_WORD_LEVEL = ("dep", "seq", "wsd")


def read_jsonl(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8",
               text_col=None, label_col=None, id_col=None, fields=None, target_col=None, group_col=None):
    """Read a JSON-lines file (plain or gzip) into Documents.

    Parameters
    ----------
    path : str or Path
    policy : ErrorPolicy, optional
        Receives malformed records; default: ``ErrorPolicy(on_error)``.
    max_tokens : int or None
        Largest number of tokens (tree leaves, words) a structure may have.
    encoding : str
    text_col, label_col, id_col : str, optional
        Read objects of your own instead of the interchange format: the text, label and id are the
        values of these fields (``text_col`` default ``"text"``; ``label`` and ``id`` when present),
        and other fields are ignored. Labels may be strings, integers or lists of strings.
    fields, target_col, group_col : optional
        Objects of your own holding an example of several texts: ``fields`` names each field and
        the key holding its text (``"question=q,answer=a"``, a dict, or a list of keys;
        :func:`~gramtile.pipeline.readers.table.field_columns`); ``target_col`` a key holding a
        real-valued target, ``group_col`` a key holding the group id.

    Yields
    ------
    Document
        ``id`` from the object or ``"<stem>:<record number>"``; ``source`` = ``"path:line"``.
    """
    policy = make_policy(on_error, policy)
    chosen = None
    if (text_col, label_col, id_col, fields, target_col, group_col) != (None,) * 6:
        for c in (text_col, label_col, id_col, target_col, group_col):
            if c is not None and (not isinstance(c, str) or c.isdigit()):
                raise CorpusFormatError(f"JSON-lines fields are chosen by name, not {c!r}", path=path,
                                        fix="give --text-col/--label-col/--id-col/--target-col/--group-col a key")
        if fields is not None and text_col is not None:
            raise CorpusFormatError("both a text key (--text-col) and fields (--fields) are chosen", path=path,
                                    fix="choose the fields of an example of several texts, or one text key")
        chosen = {"text": None if fields is not None else text_col or "text", "label": label_col, "id": id_col,
                  "fields": None if fields is None else field_columns(fields, positions=False),
                  "target": target_col, "group": group_col}
    ids = set()
    number = 0
    for line, text in lines(path, policy, encoding):
        if text is None:
            number += 1
            continue
        if not text.strip():
            continue
        number += 1
        if chosen is not None:
            doc = guarded(policy, _fields_document, text, path, line, number, max_tokens, ids, chosen)
        else:
            doc = guarded(policy, _document, text, path, line, number, max_tokens, ids)
        if doc is not None:
            yield doc


def _json_object(text, path, line):
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise CorpusFormatError(f"invalid JSON at column {e.colno}: {e.msg}", path=path, line=line,
                                fix="write one complete JSON object per line") from None
    except RecursionError:
        raise CorpusFormatError("JSON nested too deeply to read", path=path, line=line,
                                fix="nest structures less deeply (trees in bracket notation are strings)") from None
    if not isinstance(obj, dict):
        raise CorpusFormatError(f"expected a JSON object, got {type(obj).__name__}", path=path,
                                line=line, fix='write one object per line, e.g. {"id": "s1", "tokens": ["hi"]}')
    if "\\u" in text:  # only a \uXXXX escape can give text that UTF-8 cannot hold (the line itself decoded)
        bad = _unencodable(obj)
        if bad is not None:
            where, ch = bad
            raise CorpusFormatError(f"{where} holds {ch!r}, half of a UTF-16 surrogate pair (a \\u escape without "
                                    "its other half), which no text encoding can store; the record is refused, "
                                    "not altered", path=path, line=line,
                                    fix="escape the whole character (both halves, e.g. \\ud83d\\ude00) or write "
                                        "it unescaped, or remove it")
    return obj


_SURROGATE = re.compile("[\ud800-\udfff]")


def _unencodable(obj, where: str = "the object"):
    """(where, character) of the first lone surrogate in the keys and strings of ``obj``, or None."""
    if isinstance(obj, str):
        m = _SURROGATE.search(obj)
        return None if m is None else (where, m.group())
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, list):
        items = ((str(i), v) for i, v in enumerate(obj))
    else:
        return None
    for k, v in items:
        inner = f"key {k!r}" if where == "the object" else f"{where}[{k!r}]" if isinstance(obj, dict) else f"{where}[{k}]"
        if isinstance(obj, dict):
            found = _unencodable(k, f"a key of {where}")
            if found is not None:
                return found
        found = _unencodable(v, inner)
        if found is not None:
            return found
    return None


def _fields_document(text, path, line, number, max_tokens, ids, fields):
    obj = _json_object(text, path, line)
    chosen = dict(fields)
    for role in ("label", "id"):  # the fields named label and id by default, where an object has them
        if chosen[role] is None and role in obj:
            chosen[role] = role

    def get(name):
        if name not in obj:
            raise CorpusFormatError(f"no field {name!r} (the object has {sorted(obj)[:8]})", path=path, line=line,
                                    fix=f"give every object the field {name!r}, or choose another with "
                                        "--text-col/--label-col/--id-col")
        return obj[name]

    return record_document(get, chosen, number, ids, lambda name: f"field {name!r}", record_id(path, number),
                           path=path, line=line, max_tokens=max_tokens)


def _document(text, path, line, number, max_tokens, ids):
    obj = _json_object(text, path, line)
    for key in obj:
        if key not in KEYS:
            raise CorpusFormatError(f"unknown key {key!r}", path=path, line=line,
                                    fix=f"use only the keys {list(KEYS)} (docs/formats.md, JSON lines)")
    get = _Getter(obj, path, line)
    doc_id = get.str("id")
    if doc_id is not None:
        if doc_id in ids:
            raise CorpusFormatError(f"duplicate id {doc_id!r}", path=path, line=line,
                                    fix="give every object a unique id, or leave 'id' out")
        ids.add(doc_id)
    label = obj.get("label")
    if label is not None and not (isinstance(label, str) or
                                  (isinstance(label, list) and all(isinstance(x, str) for x in label))):
        raise CorpusFormatError(f"key 'label' has type {_tname(label)}; expected a string or a list of strings",
                                path=path, line=line, fix='quote labels, e.g. "label": "1"')
    structures = {}
    if "tree" in obj:
        tree = parse_bracketed(get.str("tree"), path, line)
        check_tokens(len(tree.leaves()), max_tokens, path, line, "tree")
        structures["tree"] = tree
    if "ptree" in obj:
        ptree = _ptree(obj["ptree"], get, "ptree")
        check_tokens(sum(1 for t in ptree.nodes() if not t.children), max_tokens, path, line, "positional tree")
        structures["ptree"] = ptree
    if "relation" in obj:
        rel = relation_from_json(obj["relation"], path, line)
        check_tokens(len(rel), max_tokens, path, line, "relation example")
        structures["relation"] = rel
    if "hdag" in obj:
        try:
            hdag = hdag_from_obj(obj["hdag"])
        except RepresentationError as e:
            raise CorpusFormatError(str(e), path=path, line=line,
                                    fix="see docs/formats.md (HDAG) and docs/kernels.md (HDAG kernel) for the structure") from None
        check_tokens(len(hdag), max_tokens, path, line, "HDAG")
        structures["hdag"] = hdag
    structures.update(_word_level(obj, get, path, line, max_tokens))
    text = get.str("text")
    if not structures and text is None:
        raise CorpusFormatError("object has no representation and no text", path=path, line=line,
                                fix="add 'text' or a representation ('tree', 'words'+'heads', 'tokens', ...)")
    if not structures:  # a text to parse: within what the parser takes in one text
        check_text(text, None, path, line, "text")
    return Document(id=doc_id if doc_id is not None else record_id(path, number),
                    label=label, text=text, structures=structures, source=source(path, line))


def _word_level(obj, get, path, line, max_tokens):
    kinds = [k for k, key in (("dep", "heads"), ("seq", "tokens"), ("wsd", "target")) if key in obj]
    if len(kinds) > 1:
        raise CorpusFormatError(f"keys {[{'dep': 'heads', 'seq': 'tokens', 'wsd': 'target'}[k] for k in kinds]} "
                                "in one object: their 'lemmas'/'pos' would be ambiguous", path=path, line=line,
                                fix="give one of dependency tree / token sequence / WSD instance per line")
    kind = kinds[0] if kinds else None
    allowed = {"dep": ("words", "heads", "lemmas", "pos", "deprels"), "seq": ("tokens", "lemmas", "pos"),
               "wsd": ("lemmas", "pos", "target", "words"), None: ()}[kind]
    for key in ("words", "lemmas", "pos", "deprels"):
        if key in obj and key not in allowed:
            raise CorpusFormatError(
                f"key {key!r} without the keys of a representation that uses it", path=path, line=line,
                fix="a dependency tree needs 'words' and 'heads', a token sequence 'tokens', a WSD instance "
                    "'lemmas', 'pos' and 'target' (docs/formats.md)")
    try:
        if kind == "dep":
            words, heads = get.strs("words", required="a dependency tree"), get.ints("heads")
            if len(heads) != len(words):
                raise CorpusFormatError(f"'heads' has {len(heads)} entries for {len(words)} words", path=path,
                                        line=line, fix="give one head per word (-1 for the root)")
            check_tokens(len(words), max_tokens, path, line)
            bad = head_problem(heads)
            if bad is not None:
                raise CorpusFormatError(f"word {bad[0]} ({words[bad[0]]!r}): {bad[1]}", path=path, line=line,
                                        fix=HEAD_FIX.replace("1-based, 0", "0-based, -1"))
            return {"dep": DepTree(words, heads, get.strs("lemmas"), get.strs("pos"), get.strs("deprels"))}
        if kind == "seq":
            tokens = get.strs("tokens")
            check_tokens(len(tokens), max_tokens, path, line)
            return {"seq": TokenSeq(tokens, get.strs("lemmas"), get.strs("pos"))}
        if kind == "wsd":
            lemmas = get.strs("lemmas", required="a WSD instance")
            pos = get.strs("pos", required="a WSD instance")
            target = obj["target"]
            if not isinstance(target, int) or isinstance(target, bool):
                raise CorpusFormatError(f"key 'target' has type {_tname(target)}; expected an integer",
                                        path=path, line=line, fix="give the 0-based index of the target word")
            check_tokens(len(lemmas), max_tokens, path, line)
            return {"wsd": WSDInstance(lemmas, pos, target, get.strs("words"))}
    except RepresentationError as e:
        raise CorpusFormatError(str(e), path=path, line=line,
                                fix="make the lists the same length and indices point inside them") from None
    return {}


def _ptree(node, get, where):
    if not isinstance(node, dict):
        get.fail(where, node, "an object {\"label\": ..., \"children\": {...}}")
    for key in node:
        if key not in ("label", "children"):
            raise CorpusFormatError(f"unknown key {key!r} in positional tree node at {where}", path=get.path,
                                    line=get.line, fix="a node has only 'label' and 'children'")
    label = node.get("label")
    if not isinstance(label, str):
        get.fail(f"{where}.label", label, "a string")
    children = node.get("children", {})
    if not isinstance(children, dict):
        get.fail(f"{where}.children", children, 'an object {"<position>": NODE}')
    kids = []
    for p, c in children.items():
        if not p.isdigit() or int(p) < 1:
            raise CorpusFormatError(f"positional tree position {p!r} at {where}", path=get.path, line=get.line,
                                    fix="positions are integers >= 1 written as strings, e.g. \"1\"")
        kids.append((int(p), _ptree(c, get, f"{where}.children.{p}")))
    return PTree(label, tuple(kids))


def _tname(x):
    return {str: "string", int: "integer", float: "number", bool: "boolean", list: "list",
            dict: "object", type(None): "null"}.get(type(x), type(x).__name__)


class _Getter:
    """Typed access to the keys of one object; errors name the key, the line and the type."""

    def __init__(self, obj, path, line):
        self.obj, self.path, self.line = obj, path, line

    def fail(self, key, value, expected):
        raise CorpusFormatError(f"key {key!r} has type {_tname(value)}; expected {expected}",
                                path=self.path, line=self.line, fix=f"write {key!r} as {expected}")

    def str(self, key):
        v = self.obj.get(key)
        if v is not None and not isinstance(v, str):
            self.fail(key, v, "a string")
        return v

    def strs(self, key, required=None):
        v = self.obj.get(key)
        if v is None:
            if required:
                raise CorpusFormatError(f"key {key!r} missing", path=self.path, line=self.line,
                                        fix=f"{required} needs {key!r}")
            return None
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            self.fail(key, v if not isinstance(v, list) else next(x for x in v if not isinstance(x, str)),
                      "a list of strings")
        return v

    def ints(self, key):
        v = self.obj.get(key)
        if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            bad = v if not isinstance(v, list) else next(x for x in v if not isinstance(x, int) or isinstance(x, bool))
            self.fail(key, bad, "a list of integers")
        return v


# ---- writer -----------------------------------------------------------------------------

def write_jsonl(docs, path) -> int:
    """Write Documents as JSON lines that :func:`read_jsonl` reads back equal.

    Parameters
    ----------
    docs : iterable of Document
        Structures must be stored under the names the reader uses (the keys of
        :data:`NAMES`), with at most one of dep/seq/wsd per document.
    path : str or Path
        ``.gz`` paths are gzip-compressed.

    Returns
    -------
    int
        Number of documents written.

    Raises
    ------
    RepresentationError
        A document that the format cannot hold (the message names the document and the fix).
    """
    path = Path(path)
    opener = gzip.open if path.name.endswith(".gz") else open
    n = 0
    with opener(path, "wt", encoding="utf-8", newline="\n") as f:
        for doc in docs:
            f.write(json.dumps(_object(doc), ensure_ascii=False) + "\n")
            n += 1
    return n


def _object(doc: Document) -> dict:
    where = f"document {doc.id!r}"
    if not isinstance(doc.id, str):
        raise RepresentationError(f"{where}: id must be a string")
    obj = {"id": doc.id}
    label = doc.label
    if isinstance(label, tuple):
        label = list(label)
    if label is not None:
        if not (isinstance(label, str) or (isinstance(label, list) and all(isinstance(x, str) for x in label))):
            raise RepresentationError(f"{where}: label {label!r} is not a string or a list of strings; "
                                      "convert labels to strings before writing")
        obj["label"] = label
    if doc.text is not None:
        obj["text"] = doc.text
    word_level = [name for name in doc.structures if name in _WORD_LEVEL]
    if len(word_level) > 1:
        raise RepresentationError(f"{where}: structures {word_level} would share the keys 'lemmas'/'pos'; "
                                  "write them to separate files")
    for name, s in doc.structures.items():
        want = NAMES.get(name)
        if want is None or type(s) is not want:
            expected = next((n for n, t in NAMES.items() if t is type(s)), None)
            fix = (f"store it under {expected!r}" if expected else
                   f"JSON lines holds only {[t.__name__ for t in NAMES.values()]}")
            raise RepresentationError(f"{where}: structure {name!r} ({type(s).__name__}) has no JSON-lines key; {fix}")
        if name == "tree":
            text = format_tree(s)
            if parse_tree(text) != s:
                raise RepresentationError(f"{where}: tree cannot be written as brackets and read back equal "
                                          "(a label holds a bracket or whitespace); replace those characters")
            obj["tree"] = text
        elif name == "ptree":
            obj["ptree"] = _ptree_obj(s)
        elif name == "relation":
            obj["relation"] = relation_to_json(s)
        elif name == "hdag":
            obj["hdag"] = hdag_to_obj(s)
        elif name == "dep":
            obj["words"], obj["heads"] = list(s.words), list(s.heads)
            for key in ("lemmas", "pos", "deprels"):
                if getattr(s, key) is not None:
                    obj[key] = list(getattr(s, key))
        elif name == "seq":
            obj["tokens"] = list(s.tokens)
            for key in ("lemmas", "pos"):
                if getattr(s, key) is not None:
                    obj[key] = list(getattr(s, key))
        elif name == "wsd":
            obj["lemmas"], obj["pos"], obj["target"] = list(s.lemmas), list(s.pos), s.target
            if s.words is not None:
                obj["words"] = list(s.words)
    return obj


def _ptree_obj(t: PTree) -> dict:
    node = {"label": t.label}
    if t.children:
        node["children"] = {str(p): _ptree_obj(c) for p, c in t.children}
    return node
