"""Parquet files (through pyarrow, an optional dependency): one record per row, the text, label and id
in chosen columns (:mod:`gramtile.pipeline.readers.table`: ``text_col``, ``label_col``, ``id_col``,
by name or 1-based position; default the columns named ``text``, ``label`` and ``id``).

Rows are read in batches, only the chosen columns. An error names the file, the row (1-based) and
the column.
"""
from __future__ import annotations

from gramtile.pipeline.optional import load
from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS, check_path, guarded, make_policy, record_id
from gramtile.pipeline.readers.table import choose_columns, chosen_columns, column, record_document
from gramtile.pipeline.representations.errors import CorpusFormatError

#: The pip command that installs what parquet input needs.
PARQUET_FIX = "pip install 'gramtile[parquet]' (or pip install pyarrow)"
BATCH_ROWS = 4096


def parquet_module(path=None):
    """``pyarrow.parquet``, or a CorpusFormatError naming the pip command when pyarrow is missing."""
    try:
        return load("pyarrow.parquet", "pyarrow")
    except ModuleNotFoundError:
        raise CorpusFormatError("reading parquet needs the pyarrow package, which is not installed", path=path,
                                fix=PARQUET_FIX) from None


def read_parquet(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", text_col=None, label_col=None,
                 id_col=None):
    """Read the rows of a parquet file as Documents (text, label, id; parsed by spaCy later).

    Yields
    ------
    Document
        ``id`` from ``id_col`` or ``"<stem>:<row>"``; ``source`` = ``"path:row"``.
    """
    policy = make_policy(on_error, policy)
    p = check_path(path)
    if p.is_dir():
        raise CorpusFormatError("is a directory, not a parquet file", path=p, fix="pass one .parquet file")
    if p.stat().st_size <= 4096 and not p.read_bytes().strip():
        policy.handle(CorpusFormatError("empty file: it holds no records", path=p,
                                        fix="check that the right file was given and that it was written completely"))
        return
    pq = parquet_module(p)
    try:
        f = pq.ParquetFile(p)
    except Exception as e:  # pyarrow raises ArrowInvalid / OSError subclasses for a file it cannot read
        raise CorpusFormatError(f"not a readable parquet file ({type(e).__name__}: {e})", path=p,
                                fix="pass a parquet file (written by pandas.DataFrame.to_parquet or pyarrow)") from None
    names = list(f.schema_arrow.names)
    given = {}
    for role, c in (("text", text_col), ("label", label_col), ("id", id_col)):
        c = None if c is None else column(c)
        if isinstance(c, int):
            if c > len(names):
                raise CorpusFormatError(f"column {c}: the file has {len(names)} columns {names}", path=p,
                                        fix="give a position from 1 to the number of columns, or a name")
            c = names[c - 1]
        given[role] = c
    chosen = choose_columns(names, given["text"], given["label"], given["id"], path=p, what="the parquet file")
    wanted = chosen_columns(chosen)
    ids, row = set(), 0
    for batch in f.iter_batches(columns=wanted, batch_size=BATCH_ROWS):
        data = batch.to_pydict()
        for i in range(batch.num_rows):
            row += 1
            doc = guarded(policy, record_document, lambda c, i=i: data[c][i], chosen, row, ids,
                          lambda c, r=row: f"row {r}, column {c!r}", record_id(p, row), p, None, max_tokens)
            if doc is not None:
                doc.source = f"{p}:{row}"
                yield doc
    if row == 0:
        policy.handle(CorpusFormatError("the parquet file holds no rows", path=p,
                                        fix="check that the right file was given and that it was written completely"))
