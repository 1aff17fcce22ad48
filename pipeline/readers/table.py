"""Tables: CSV and TSV files with chosen columns, and tables held in memory (a pandas DataFrame or
Series, a pyarrow Table, a Hugging Face ``datasets.Dataset``, a list of dicts).

Every row becomes a :class:`~gramtile.pipeline.representations.structures.Document` with the
text, the label and the id of the chosen columns; texts are parsed by spaCy later. Columns are
chosen by name (the file's first line is then its header) or by 1-based position:

* ``header``: True when the first line names the columns; None (not said) reads a header only
  when a column is chosen by name. With a header, the columns default to those named ``text``,
  ``label`` (if present) and ``id`` (if present);
* ``text_col``, ``label_col``, ``id_col``: a column name or a 1-based position.

Examples of several texts (pairs: a question and an answer, two sentences) name their text
columns as fields instead of one text column:

* ``fields``: the field names and their columns, ``"question=qtext,answer=atext"`` (a column by
  name or position; ``"qtext,atext"`` names each field as its column), in Python also a dict
  ``{"question": "qtext"}`` or a list of column names. Every field's text is parsed as a single
  text is (:mod:`gramtile.pipeline.representations.fields`);
* ``target_col``: a column holding a real-valued target (e.g. a relatedness score);
* ``group_col``: a column holding the group id (e.g. the question whose candidates are ranked).

``tsv`` without any of these options is the two-column ``label<TAB>text`` format. A first line
whose chosen label (or text, or id) column holds a column name such as ``label`` or ``text`` is
refused rather than read as a record, unless ``header=False`` says it is data: a header line never
becomes a class called ``label``. Rows must all have the header's (or the first row's) number of
columns, so a tab inside the text of a TSV file (which TSV cannot quote) is an error naming the
line, never part of a text. CSV fields may be quoted (``"a, b"``, quotes doubled inside) and span
lines; a record's line is the line it starts on. A blank line inside the file is an empty
sentence (an error); blank lines at the end are ignored.
"""
from __future__ import annotations

import csv
import math
import numbers

from gramtile.pipeline.readers.base import (
    DEFAULT_MAX_TOKENS,
    check_encodable,
    check_text,
    lines,
    make_policy,
    record_id,
    source,
)
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.representations.fields import check_field_names
from gramtile.pipeline.representations.structures import Document

#: Column names a first line holding them is taken for a header (and refused as a record).
HEADER_NAMES = frozenset({"label", "labels", "class", "category", "target", "y", "tag", "gold", "sentiment",
                          "topic", "intent", "text", "texts", "sentence", "sentences", "document", "review",
                          "question", "content", "body", "id", "idx"})
#: The columns a table's named columns default to.
DEFAULT_COLUMNS = {"text": "text", "label": "label", "id": "id"}
COLUMN_OPTIONS = ("header", "text_col", "label_col", "id_col", "fields", "target_col", "group_col")
_CLI = {"text": "--text-col", "label": "--label-col", "id": "--id-col", "target": "--target-col",
        "group": "--group-col"}
#: The role of field NAME's column is ``FIELD + NAME``.
FIELD = "field:"
_FIELDS_FIX = "write --fields NAME=COLUMN,NAME=COLUMN (fields=), e.g. question=qtext,answer=atext"


def _flag(role) -> str:
    return "--fields" if role.startswith(FIELD) else _CLI[role]


def field_columns(value, positions: bool = True) -> dict:
    """The ``fields`` option as ``{field name: column}`` (module docstring): a string
    ``"a=COL,b=COL"`` or ``"COL,COL"``, a dict name -> column, or a list of column names. Columns
    are names, or (``positions``) 1-based positions."""
    if isinstance(value, str):
        items = [x.strip() for x in value.split(",")]
        if not all(items):
            raise CorpusFormatError(f"fields {value!r}: an empty item", fix=_FIELDS_FIX)
        pairs = [(x.partition("=")[0].strip(), x.partition("=")[2].strip()) if "=" in x else (x, x) for x in items]
    elif isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple)):
        pairs = [(c, c) for c in value]
    else:
        raise CorpusFormatError(f"fields={value!r}: give a string, a dict or a list of columns", fix=_FIELDS_FIX)
    check_field_names([n for n, _ in pairs], f"fields {value!r}", _FIELDS_FIX)
    out = {}
    for name, c in pairs:
        if isinstance(c, str):
            c = column(c) if positions else c.strip()
        elif not positions or isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise CorpusFormatError(f"fields: field {name!r} is given the column {c!r}; give a column name"
                                    + (" or a 1-based position" if positions else ""), fix=_FIELDS_FIX)
        out[name] = c
    if len(set(out.values())) != len(out):
        raise CorpusFormatError(f"fields {value!r}: two fields read the same column",
                                fix="give every field its own column")
    return out


def cell_target(v, where, path=None, line=None) -> float:
    """The real-valued target of one cell: a finite number, or a string holding one."""
    fix = "write a real-valued target (e.g. 3.6) in every row"
    if _missing(v) or (isinstance(v, str) and not v.strip()):
        raise CorpusFormatError(f"{where}: no target", path=path, line=line, fix=fix)
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        raise CorpusFormatError(f"{where}: {v!r} is a truth value, not a real-valued target", path=path, line=line,
                                fix=fix)
    try:
        x = float(v.strip()) if isinstance(v, str) else float(v) if isinstance(v, numbers.Real) else None
    except ValueError:
        x = None
    if x is None or not math.isfinite(x):
        raise CorpusFormatError(f"{where}: {v!r} is not a finite number", path=path, line=line, fix=fix)
    return x


def cell_group(v, where, path=None, line=None) -> str:
    """The group id of one cell: a non-empty string, or an integer (as its decimal string)."""
    fix = "write a group id (e.g. the question) in every row"
    if _missing(v) or (isinstance(v, str) and not v.strip()):
        raise CorpusFormatError(f"{where}: no group", path=path, line=line, fix=fix)
    if isinstance(v, bool) or not isinstance(v, (str, numbers.Integral)):
        raise CorpusFormatError(f"{where}: {v!r} ({type(v).__name__}) is not a group id", path=path, line=line,
                                fix="group ids are strings or integers")
    return check_encodable(v.strip(), where, path, line) if isinstance(v, str) else str(int(v))


def column(value):
    """A column as given on the command line: ``"3"`` is the 1-based position 3, anything else a name."""
    text = str(value).strip()
    if text.isdigit():
        if int(text) < 1:
            raise CorpusFormatError(f"column {text}: positions start at 1", fix="give a column name or a position >= 1")
        return int(text)
    if not text:
        raise CorpusFormatError("empty column name", fix="give a column name or a 1-based position")
    return text


def _blank_line(path, line):
    return CorpusFormatError("empty sentence: the line is blank", path=path, line=line,
                             fix="remove the blank line, or write the record on it")


def _rows(path, policy, encoding, delimiter, quoting):
    """``(first line, last line, fields, damaged)`` per CSV record; a damaged record holds a line that
    could not be decoded (already handed to ``policy``)."""
    state = {"line": 0}
    bad = set()

    def feed():
        for number, text in lines(path, policy, encoding):
            state["line"] = number
            if text is None:
                bad.add(number)
                yield "\n"
            else:
                yield text + "\n"

    reader = csv.reader(feed(), delimiter=delimiter, quoting=quoting, strict=True)
    while True:
        start = state["line"] + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            policy.handle(CorpusFormatError(
                f"malformed CSV record starting at line {start}: {e}", path=path, line=state["line"],
                fix='quote a field that holds a comma, a quote or a line break, doubling the quotes inside it: '
                    '"he said ""hi"", then left"'))
            continue
        yield start, state["line"], row, any(start <= b <= state["line"] for b in bad)


class _Layout:
    """Where text, label and id are in the rows of one file."""

    def __init__(self, path, header, cols, legacy, fix=None):
        self.path, self.header, self.cols, self.legacy = path, header, cols, legacy
        self.fix = fix  # the fix of a missing column in a format of fixed columns
        self.names = None  # the header's column names
        self.index = {}  # role -> 0-based position
        self.width = None  # the number of columns every row has
        self.width_line = None

    def name(self, i):
        if self.names is not None:
            return f"column {i + 1} ({self.names[i]!r})"
        return f"column {i + 1}"

    def read_header(self, row, line):
        names = [c.strip() for c in row]
        for i, n in enumerate(names):
            if not n:
                raise CorpusFormatError(f"column {i + 1} of the header has no name", path=self.path, line=line,
                                        fix="name every column in the header line")
            if n in names[:i]:
                raise CorpusFormatError(f"column {i + 1} of the header repeats the name {n!r}", path=self.path,
                                        line=line, fix="give every column its own name")
        self.names = names
        self.width, self.width_line = len(names), line
        fielded = any(role.startswith(FIELD) for role in self.cols)
        for role, c in self.cols.items():
            if c is None:
                if role in DEFAULT_COLUMNS and DEFAULT_COLUMNS[role] in names and not (role == "text" and fielded):
                    self.index[role] = names.index(DEFAULT_COLUMNS[role])
                elif role == "text" and not fielded:
                    raise CorpusFormatError(f"no column named 'text' in the header {names}", path=self.path, line=line,
                                            fix="name the text column: --text-col NAME (text_col=)")
            elif isinstance(c, int):
                self._position(role, c, line)
            elif c not in names:
                raise CorpusFormatError(f"no column {c!r} ({_flag(role)}) in the header {names}", path=self.path,
                                        line=line, fix=self.fix or f"give {_flag(role)} one of the header's names, "
                                                                   "or a 1-based position")
            else:
                self.index[role] = names.index(c)

    def _position(self, role, c, line):
        if c > self.width:
            raise CorpusFormatError(f"{_flag(role)} {c}: line {line} has {self.width} column(s)", path=self.path,
                                    line=line, fix=f"give {_flag(role)} a position from 1 to {self.width}")
        self.index[role] = c - 1

    def first_row(self, row, line):
        """Positions from the first data row of a file without a header."""
        self.width, self.width_line = (2, None) if self.legacy else (len(row), line)
        if self.legacy:
            self.index = {"label": 0, "text": 1}
        else:
            for role, c in self.cols.items():
                if c is not None:
                    self._position(role, c, line)

    def looks_like_header(self, row, line):
        """Refuse a first row whose chosen columns hold column names (header not declared)."""
        for role in ("label", "text", "id", *(r for r in self.index if r.startswith(FIELD))):
            i = self.index.get(role)
            if i is not None and i < len(row) and row[i].strip().lower() in HEADER_NAMES:
                value = row[i].strip()
                what = (f"a class called {value!r}" if role == "label" else
                        f"a {role[len(FIELD):]} text {value!r}" if role.startswith(FIELD) else f"a {role} {value!r}")
                raise CorpusFormatError(
                    f"looks like a header ({self.name(i)} holds {value!r}): read as a record it would "
                    f"give {what}", path=self.path, line=line,
                    fix="pass --header (header=True) if the line names the columns; --no-header (header=False) "
                        "if it is a record")


def _cell_error(path, line, where, message, fix):
    return CorpusFormatError(f"{where}: {message}", path=path, line=line, fix=fix)


def _document(lay, row, path, line, max_tokens, ids, tsv):
    if len(row) != lay.width:
        if lay.legacy and len(row) == 1:
            raise CorpusFormatError("no tab between label and text", path=path, line=line,
                                    fix="write label<TAB>text (use format 'text' for unlabelled lines)")
        if lay.legacy:
            raise CorpusFormatError(
                f"{len(row)} tab-separated columns where 2 (label<TAB>text) are expected: the text holds a tab",
                path=path, line=line, fix="remove the tab from the text, or name the columns of a wider file: "
                                          "--header with --text-col/--label-col (header=, text_col=, label_col=)")
        against = "the header has" if lay.names is not None else f"line {lay.width_line} has"
        why = " (a tab inside a text makes one more column)" if tsv else ""
        fix = ("remove the tab from the text (TSV cannot quote it), or write the file as CSV with quoted fields" if tsv
               else 'quote a field that holds a comma: "a, b"')
        raise CorpusFormatError(f"{len(row)} columns where {against} {lay.width}{why}", path=path, line=line, fix=fix)
    fields = {role[len(FIELD):]: i for role, i in lay.index.items() if role.startswith(FIELD)}
    text = None
    for name, i in (fields or {None: lay.index["text"]}).items():
        value = row[i]
        if not value.strip():
            raise _cell_error(path, line, lay.name(i), f"empty text{'' if name is None else f' (field {name!r})'}",
                              "write a text in every row, or remove the row")
        check_text(value, max_tokens, path, line, "text" if name is None else f"text of field {name!r}")
        if name is None:
            text = value
        else:
            fields[name] = value.strip()
    target = group = None
    if "target" in lay.index:
        i = lay.index["target"]
        target = cell_target(row[i], lay.name(i), path, line)
    if "group" in lay.index:
        i = lay.index["group"]
        group = cell_group(row[i], lay.name(i), path, line)
    label = None
    if "label" in lay.index:
        i = lay.index["label"]
        label = row[i].strip()
        if not label:
            raise _cell_error(path, line, lay.name(i), "empty label", "write a label in every row")
    doc_id = record_id(path, line)
    if "id" in lay.index:
        i = lay.index["id"]
        doc_id = row[i].strip()
        if not doc_id:
            raise _cell_error(path, line, lay.name(i), "empty id", "write an id in every row, or leave --id-col out")
        if doc_id in ids:
            raise _cell_error(path, line, lay.name(i), f"duplicate id {doc_id!r}", "give every row a unique id")
        ids.add(doc_id)
    if fields:
        return Document(id=doc_id, label=label, fields=fields, target=target, group=group, source=source(path, line))
    return Document(id=doc_id, label=label, text=text if lay.legacy else text.strip(), target=target, group=group,
                    source=source(path, line))


def read_table(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8",
               delimiter=",", header=None, text_col=None, label_col=None, id_col=None, fields=None,
               target_col=None, group_col=None, missing_fix=None):
    """Read a CSV (``delimiter=","``, quoted fields) or TSV (``"\\t"``, no quoting) file with chosen
    columns (module docstring).

    ``missing_fix``: the fix an error names when a column chosen by name is not in the header
    (formats of fixed columns say which header they expect).

    Yields
    ------
    Document
        ``id`` from ``id_col`` or ``"<stem>:<line>"``, ``label`` from ``label_col`` (else none),
        ``text`` from ``text_col``, or ``fields`` from the field columns; ``target`` from
        ``target_col``, ``group`` from ``group_col``; ``source`` = ``"path:line"``.
    """
    policy = make_policy(on_error, policy)
    tsv = delimiter == "\t"
    if fields is not None and text_col is not None:
        raise CorpusFormatError("both a text column (--text-col) and fields (--fields) are chosen", path=path,
                                fix="choose the fields of an example of several texts, or one text column")
    cols = {"text": text_col, "label": label_col, "id": id_col, "target": target_col, "group": group_col}
    cols = {role: None if c is None else column(c) for role, c in cols.items()}
    if fields is not None:
        del cols["text"]
        cols.update({FIELD + name: c for name, c in field_columns(fields).items()})
    named = any(isinstance(c, str) for c in cols.values())
    if header is False and named:
        raise CorpusFormatError(f"columns chosen by name ({[c for c in cols.values() if isinstance(c, str)]}) "
                                "need a header line", path=path,
                                fix="drop --no-header (header=False), or choose the columns by 1-based position")
    legacy = tsv and header is not True and not any(c is not None for c in cols.values())
    declared = header
    if header is None:
        header = named
    lay = _Layout(path, header, cols, legacy, missing_fix)
    quoting = csv.QUOTE_NONE if tsv else csv.QUOTE_MINIMAL
    blank, ids, first = [], set(), True
    for start, end, row, damaged in _rows(path, policy, encoding, delimiter, quoting):
        if not damaged and all(not c.strip() for c in row):
            blank.append(start)
            continue
        for b in blank:
            policy.handle(_blank_line(path, b))
        blank = []
        if damaged:
            continue
        if first:
            first = False
            if not header and not legacy and cols.get("text", 0) is None:  # checked here: an empty file says so first
                raise CorpusFormatError("no text column chosen", path=path,
                                        fix="pass --header (header=True) if the first line names the columns (a "
                                            "column named 'text' is the text), or --text-col N (text_col=)")
            if header:
                lay.read_header(row, start)
                continue
            lay.first_row(row, start)
            if declared is None:
                lay.looks_like_header(row, start)
        try:
            yield _document(lay, row, path, start, max_tokens, ids, tsv)
        except CorpusFormatError as e:
            policy.handle(e)


def read_csv(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8", header=None,
             text_col=None, label_col=None, id_col=None, fields=None, target_col=None, group_col=None):
    """Read a CSV file (comma-separated, fields quoted as needed) with chosen columns
    (:func:`read_table`)."""
    yield from read_table(path, policy, max_tokens, on_error, encoding, ",", header, text_col, label_col, id_col,
                          fields, target_col, group_col)


def read_tsv(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8", header=None,
             text_col=None, label_col=None, id_col=None, fields=None, target_col=None, group_col=None):
    """Read a TSV file: ``label<TAB>text`` lines, or chosen columns (:func:`read_table`).

    Yields
    ------
    Document
        ``id`` = ``"<stem>:<line>"`` (or from ``id_col``), ``label``, ``text``.
    """
    yield from read_table(path, policy, max_tokens, on_error, encoding, "\t", header, text_col, label_col, id_col,
                          fields, target_col, group_col)


# ---- values of a record held in memory or in a parquet / JSON-lines field ------------------------

def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or type(v).__name__ in ("NAType", "NaTType")


def cell_text(v, where, path=None, line=None) -> str:
    """The text of one cell: a non-empty string."""
    if _missing(v):
        raise CorpusFormatError(f"{where}: no text (missing value)", path=path, line=line,
                                fix="give every row a text, or drop the rows without one")
    if not isinstance(v, str):
        raise CorpusFormatError(f"{where}: {v!r} is a {type(v).__name__}, not a text", path=path, line=line,
                                fix="choose the column that holds the texts")
    if not v.strip():
        raise CorpusFormatError(f"{where}: empty text", path=path, line=line,
                                fix="write a text in every row, or drop the row")
    return check_encodable(v, where, path, line)


def cell_label(v, where, path=None, line=None):
    """The label of one cell: a string, an integer (as its decimal string; a float with no fraction
    too) or a list of strings (several labels)."""
    if _missing(v):
        raise CorpusFormatError(f"{where}: no label (missing value)", path=path, line=line,
                                fix="give every row a label, or drop the unlabelled rows")
    if isinstance(v, str):
        if not v.strip():
            raise CorpusFormatError(f"{where}: empty label", path=path, line=line, fix="write a label in every row")
        return check_encodable(v.strip(), where, path, line)
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return str(bool(v)).lower()
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real) and float(v).is_integer():
        return str(int(v))
    if isinstance(v, (list, tuple)) or type(v).__name__ == "ndarray":
        items = list(v)
        if items and all(isinstance(x, str) and x.strip() for x in items):
            return [x.strip() for x in items]
    raise CorpusFormatError(f"{where}: {v!r} ({type(v).__name__}) is not a label", path=path, line=line,
                            fix="labels are strings, integers, or lists of strings (several labels)")


def cell_id(v, where, ids, path=None, line=None) -> str:
    """The id of one cell: a string or an integer, unique."""
    if _missing(v) or (isinstance(v, str) and not v.strip()):
        raise CorpusFormatError(f"{where}: no id", path=path, line=line,
                                fix="give every row an id, or leave the id column out")
    if isinstance(v, bool) or not isinstance(v, (str, numbers.Integral)):
        raise CorpusFormatError(f"{where}: {v!r} ({type(v).__name__}) is not an id", path=path, line=line,
                                fix="ids are strings or integers")
    v = check_encodable(v.strip(), where, path, line) if isinstance(v, str) else str(int(v))
    if v in ids:
        raise CorpusFormatError(f"{where}: duplicate id {v!r}", path=path, line=line, fix="give every row a unique id")
    ids.add(v)
    return v


def choose_columns(names, text=None, label=None, id=None, path=None, what="the table", fields=None, target=None,
                   group=None) -> dict:
    """``{"text": name, "label": name or None, "id": name or None, "fields": None, "target": None,
    "group": None}`` among the column ``names``: the ones given (each must exist), else ``text`` /
    ``label`` / ``id`` when present; a table of one column has its texts there. With ``fields``
    (:func:`field_columns`, by name): ``"fields"`` maps each field to its column and ``"text"`` is
    None; ``"target"`` and ``"group"`` are the columns given."""
    names = list(names)

    def given(c, option):
        if c not in names:
            raise CorpusFormatError(f"{what} has no column {c!r} ({option}); its columns are {names}", path=path,
                                    fix=f"give {option} one of its columns")
        return c

    chosen = {"text": None, "fields": None}
    if fields is not None:
        if text is not None:
            raise CorpusFormatError("both a text column (text=) and fields (fields=) are chosen", path=path,
                                    fix="choose the fields of an example of several texts, or one text column")
        chosen["fields"] = {name: given(c, "fields=") for name, c in field_columns(fields, positions=False).items()}
    roles = (("label", label), ("id", id)) if fields is not None else (("text", text), ("label", label), ("id", id))
    for role, c in roles:
        if c is not None:
            chosen[role] = given(c, f"{role}=")
        elif DEFAULT_COLUMNS[role] in names:
            chosen[role] = DEFAULT_COLUMNS[role]
        elif role == "text" and len(names) == 1:
            chosen[role] = names[0]
        elif role == "text":
            raise CorpusFormatError(f"{what} has no column named 'text' (its columns are {names})", path=path,
                                    fix="name the column that holds the texts: text='COLUMN' (--text-col COLUMN)")
        else:
            chosen[role] = None
    for role, c in (("target", target), ("group", group)):
        chosen[role] = None if c is None else given(c, f"{role}=")
    return chosen


def chosen_columns(chosen) -> list:
    """The distinct columns a :func:`choose_columns` choice reads."""
    cols = [chosen[r] for r in ("text", "label", "id", "target", "group")] + list((chosen["fields"] or {}).values())
    return list(dict.fromkeys(c for c in cols if c is not None))


def record_document(get, chosen, number, ids, where, default_id, path=None, line=None, max_tokens=None) -> Document:
    """The Document of one record whose column values ``get(name)`` returns; ``where(name)`` says where a
    value is, for errors (``"row 3, column 'text'"``)."""
    fields = chosen.get("fields")
    text = None
    if fields:
        fields = {name: cell_text(get(c), where(c), path, line) for name, c in fields.items()}
        for name, c in chosen["fields"].items():
            check_text(fields[name], max_tokens, path, line, f"text of field {name!r} ({where(c)})")
    else:
        text = cell_text(get(chosen["text"]), where(chosen["text"]), path, line)
        check_text(text, max_tokens, path, line, f"text ({where(chosen['text'])})")
    label = None if chosen["label"] is None else cell_label(get(chosen["label"]), where(chosen["label"]), path, line)
    doc_id = default_id if chosen["id"] is None else cell_id(get(chosen["id"]), where(chosen["id"]), ids, path, line)
    target = None if chosen.get("target") is None else cell_target(get(chosen["target"]), where(chosen["target"]),
                                                                   path, line)
    group = None if chosen.get("group") is None else cell_group(get(chosen["group"]), where(chosen["group"]),
                                                                path, line)
    return Document(id=doc_id, label=label, text=text, fields=fields or None, target=target, group=group,
                    source=None if path is None else source(path, line or number))


# ---- tables held in memory -------------------------------------------------------------------------

def table_kind(x) -> str | None:
    """``"frame"`` (pandas DataFrame), ``"series"`` (pandas Series), ``"arrow"`` (pyarrow Table or
    RecordBatch), ``"dataset"`` (Hugging Face ``datasets.Dataset``, or anything with
    ``column_names`` whose columns index it), ``"dicts"`` (a list or tuple of dicts) or None."""
    if isinstance(x, (str, bytes, dict)):
        return None
    if hasattr(x, "column_names") and hasattr(x, "to_pydict"):
        return "arrow"
    if hasattr(x, "column_names") and hasattr(x, "features"):
        return "dataset"
    if hasattr(x, "columns") and hasattr(x, "iloc"):
        return "frame"
    if hasattr(x, "iloc") and hasattr(x, "to_list"):
        return "series"
    if isinstance(x, (list, tuple)) and x and all(isinstance(r, dict) for r in x):
        return "dicts"
    return None


def _columns_of(x, kind):
    """The column names and a dict name -> list of values."""
    if kind == "frame":
        names = list(x.columns)
        if len(set(map(str, names))) != len(names):
            raise CorpusFormatError(f"the DataFrame has repeated column names {names}", fix="rename its columns")
        return names, {c: x[c].tolist() for c in names}
    if kind == "series":
        name = x.name if x.name is not None else "text"
        return [name], {name: x.tolist()}
    if kind == "arrow":
        return list(x.column_names), x.to_pydict()
    if kind == "dataset":
        if type(x).__name__ in ("DatasetDict", "IterableDatasetDict"):
            raise CorpusFormatError(f"a {type(x).__name__} holds several splits ({list(x)})",
                                    fix="pass one split, e.g. ds['train']")
        return list(x.column_names), {c: list(x[c]) for c in x.column_names}
    names = []
    for r in x:
        names += [k for k in r if k not in names]
    return names, None


def table_documents(x, text=None, label=None, id=None, what="the table", fields=None, target=None,
                    group=None) -> list:
    """Documents (text, label, id; not parsed yet) of the rows of a table held in memory.

    Parameters
    ----------
    x : pandas DataFrame or Series, pyarrow Table, ``datasets.Dataset``, or a list of dicts
        (see :func:`table_kind`; nothing is imported to recognise them).
    text, label, id : column names, optional
        Default: the columns named ``text`` (or the only column), ``label`` and ``id`` when present.
    fields : dict or list, optional
        Examples of several texts: ``{field: column}``, or a list of columns (each field named as
        its column); ``text`` is then not read (:func:`choose_columns`).
    target, group : column names, optional
        Columns of real-valued targets and of group ids.

    Raises
    ------
    CorpusFormatError
        A missing column, or a row whose value is missing or of the wrong type, naming the row
        (0-based, as the table counts them) and the column.
    """
    kind = table_kind(x)
    if kind is None:
        raise TypeError(f"{what}: a {type(x).__name__} is not a table (a pandas DataFrame or Series, a pyarrow Table, "
                        "a datasets.Dataset, or a list of dicts)")
    names, values = _columns_of(x, kind)
    chosen = choose_columns(names, text, label, id, what=what, fields=fields, target=target, group=group)
    ids = set()
    docs = []
    n = len(x) if kind != "arrow" else x.num_rows
    index = list(x.index) if kind in ("frame", "series") else None
    for i in range(n):
        row = x[i] if kind == "dicts" else None
        at = f"row {i}" if index is None or index[i] == i else f"row {i} (index {index[i]!r})"

        def get(c, row=row, i=i, at=at):
            if row is None:
                return values[c][i]
            if c not in row:
                raise CorpusFormatError(f"{at}: no key {c!r}", fix=f"give every dict the key {c!r}")
            return row[c]

        docs.append(record_document(get, chosen, i, ids, lambda c, at=at: f"{at}, column {c!r}", str(i)))
    if not docs:
        raise CorpusFormatError(f"{what} has no rows", fix="pass at least one example")
    return docs
