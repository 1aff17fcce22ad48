"""Command-line options for data as users hold it: chosen table columns, a labels file, stdin.

``--text-col``, ``--label-col``, ``--id-col`` (a column name, or a 1-based position) and
``--header`` / ``--no-header`` become the reader options of the table formats
(:mod:`gramtile.pipeline.readers.table`), and so do, for examples of several texts, ``--fields``
(``question=qtext,answer=atext``), ``--target-col`` (a real-valued target) and ``--group-col``
(a group id); ``--labels FILE`` gives records one label per line
(:mod:`gramtile.pipeline.readers.labels`); ``--input -`` reads standard input, spooled to a
temporary file named by its content (so rerunning with the same input resumes), which errors call
``<stdin>``.
"""
from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from gramtile.pipeline.parsing.choices import FIELD_FORMATS, PAIR_FORMATS, TABLE_FORMATS
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.workflows.errors import UsageError

#: Formats whose records are raw text, always parsed by spaCy.
RAW_TEXT_FORMATS = ("text", "tsv", "trec", "csv", "parquet", "files", *PAIR_FORMATS)
_TABLE_OPTIONS = (("text_col", "--text-col"), ("label_col", "--label-col"), ("id_col", "--id-col"))
_FIELD_OPTIONS = (("fields", "--fields"), ("target_col", "--target-col"), ("group_col", "--group-col"))


def add_table_options(p, fields: bool = False) -> None:
    """--text-col, --label-col, --id-col, --header/--no-header; with ``fields`` also --fields,
    --target-col, --group-col (examples of several texts)."""
    for dest, flag in _TABLE_OPTIONS:
        what = dest.split("_")[0]
        p.add_argument(flag, dest=dest, default=None, metavar="COL",
                       help=f"tsv, csv, parquet, jsonl: the column (JSON-lines field) holding the {what}, by name or "
                            f"1-based position (default: the one named '{what}'" +
                            (", or the only column)" if what == "text" else ", if any)"))
    if fields:
        add_field_options(p)
    p.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                   help="tsv, csv: the first line names the columns (--no-header: it is a record). Default: a "
                        "header when a column is chosen by name; a first line that looks like one is refused")


def add_field_options(p) -> None:
    """--fields, --target-col, --group-col: examples of several texts, their targets and groups."""
    p.add_argument("--fields", default=None, metavar="NAME=COL,...",
                   help="tsv, csv, jsonl: examples of several texts (pairs): each field's name and the column "
                        "holding its text, e.g. question=qtext,answer=atext (a column by name or 1-based position; "
                        "'qtext,atext' names the fields as the columns). Every field's text is parsed and stored "
                        "with its own representations (<field>.<rep>, e.g. question.ptree); instead of --text-col")
    p.add_argument("--target-col", dest="target_col", default=None, metavar="COL",
                   help="tsv, csv, jsonl: the column holding each example's real-valued target (e.g. a relatedness "
                        "score)")
    p.add_argument("--group-col", dest="group_col", default=None, metavar="COL",
                   help="tsv, csv, jsonl: the column holding each example's group id (e.g. the question whose "
                        "candidate answers are ranked)")


def add_labels_option(p, what: str) -> None:
    p.add_argument("--labels", metavar="FILE", default=None,
                   help=f"one label per line for {what}, in order (their count must match)")


def reader_options(args, fmt: str | None = None) -> dict:
    """The reader options the table options and ``--labels`` of ``args`` ask for (checked against the
    format ``fmt``, default ``args.fmt``)."""
    fmt = fmt or args.fmt
    out = {}
    for dest, flag in _TABLE_OPTIONS:
        if getattr(args, dest, None) is not None:
            if fmt not in TABLE_FORMATS:
                raise UsageError(f"{flag} applies to --format {', '.join(TABLE_FORMATS)}, not {fmt!r}. "
                                 f"Fix: drop {flag}")
            out[dest] = args.__dict__[dest]
    for dest, flag in _FIELD_OPTIONS:
        if getattr(args, dest, None) is not None:
            if fmt not in FIELD_FORMATS:
                raise UsageError(f"{flag} applies to --format {', '.join(FIELD_FORMATS)}, not {fmt!r}"
                                 + (" (whose fields are fixed)" if fmt in PAIR_FORMATS else "")
                                 + f". Fix: drop {flag}")
            out[dest] = args.__dict__[dest]
    if "fields" in out and "text_col" in out:
        raise UsageError("--fields and --text-col both choose the texts. Fix: give --fields for examples of several "
                         "texts, or --text-col for one")
    if getattr(args, "header", None) is not None:
        if fmt not in ("tsv", "csv"):
            raise UsageError(f"--header/--no-header applies to --format tsv and csv, not {fmt!r}. Fix: drop it")
        out["header"] = args.header
    if getattr(args, "labels", None) is not None:
        if not Path(args.labels).is_file():
            raise UsageError(f"--labels {args.labels}: no such file. Fix: pass a file with one label per line")
        out["labels"] = str(Path(args.labels).resolve())
    return out


def needs_spacy(fmt: str, options: dict) -> bool:
    """Whether the records of ``fmt`` read with ``options`` are raw text for spaCy."""
    return fmt in RAW_TEXT_FORMATS or (fmt == "jsonl" and any(k in options for k, _ in _TABLE_OPTIONS + _FIELD_OPTIONS))


@contextmanager
def stdin_input(path, fmt: str):
    """``path``, or for ``-`` a temporary file holding standard input (removed at the end); an input
    error names ``<stdin>`` instead of that file."""
    if str(path) != "-":
        yield path
        return
    if fmt == "files":
        raise UsageError("--format files reads a folder, which cannot come on standard input. Fix: pass --input "
                         "FOLDER")
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError("--input - reads standard input, but none is piped in. Fix: pipe the data in "
                         "(cat FILE | gramtile ...) or pass --input FILE")
    data = sys.stdin.buffer.read()
    if not data.strip():
        raise CorpusFormatError("empty input: standard input holds no records", path="<stdin>",
                                fix="pipe the corpus in, e.g. cat corpus.tsv | gramtile prepare --input - ...")
    spool = Path(tempfile.gettempdir()) / f"gramtile-stdin-{hashlib.sha256(data).hexdigest()[:16]}.{fmt}"
    spool.write_bytes(data)
    try:
        yield spool
    except CorpusFormatError as e:
        names = {str(spool), str(spool.resolve())}
        if not any(n in str(e) for n in names):
            raise
        reason = e.reason
        for n in names:
            reason = reason.replace(n, "<stdin>")
        raise CorpusFormatError(reason, path="<stdin>" if e.path in names else e.path, line=e.line, fix=e.fix) \
            from None
    finally:
        spool.unlink(missing_ok=True)
