"""Labels from a file of their own (``--labels FILE``): one label per line, in the order of the records.

Any format's records can take their labels from such a file: CoNLL-U sentences, bracket trees,
texts, tables without a label column. The file must hold exactly one label per record (a record
that ``--on-error skip`` drops keeps its line); a count that differs is an error naming both
counts, and a record that already carries a label of its own is an error rather than a label
silently replaced.
"""
from __future__ import annotations

from gramtile.pipeline.readers.base import ErrorPolicy, lines
from gramtile.pipeline.representations.errors import CorpusFormatError


def read_label_file(path, n: int | None = None, what: str = "records") -> list:
    """The labels of ``path`` (UTF-8, one per line, blanks around them stripped; blank lines at
    the end ignored), exactly ``n`` of them when ``n`` is given (``what`` names what they label)."""
    numbered = list(lines(path, ErrorPolicy("raise")))
    while numbered and not numbered[-1][1].strip():
        numbered.pop()
    for line, text in numbered:
        if not text.strip():
            raise CorpusFormatError("empty label: the line is blank", path=path, line=line,
                                    fix="write one label on every line")
    if n is not None and len(numbered) != n:
        raise CorpusFormatError(f"{len(numbered)} labels for {n} {what}", path=path,
                                fix=f"give exactly {n} labels, one per line, in the order of the {what}")
    return [text.strip() for _, text in numbered]


def with_labels(make, labels, labels_path, input_path, policy):
    """The Documents of ``make(policy)`` (a reader), each given the next label of ``labels``.

    A first pass reads the records without keeping them, to compare their count with the labels'
    before any record is handed on; a record with a label of its own stops it.
    """
    counting = ErrorPolicy(policy.mode)
    n = 0
    for doc in make(counting):
        if doc.label is not None:
            raise CorpusFormatError(f"record {doc.id!r} ({doc.source}) already has the label {doc.label!r}; --labels "
                                    "would replace it", path=labels_path,
                                    fix="drop --labels, or read the input without its own labels (a table "
                                        "without --label-col)")
        n += 1
    n += len(counting.skipped)
    if n != len(labels):
        raise CorpusFormatError(f"{len(labels)} labels for {n} records of {input_path}", path=labels_path,
                                fix=f"give exactly {n} labels, one per line, in the order of the records")
    base, k = len(policy.skipped), 0
    for doc in make(policy):
        doc.label = labels[k + len(policy.skipped) - base]
        k += 1
        yield doc
