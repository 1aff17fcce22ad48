"""The Microsoft Research Paraphrase Corpus: sentence pairs judged paraphrases (1) or not (0).

A tab-separated file (UTF-8, perhaps with a byte-order mark and CRLF line ends) with the header
``Quality #1 ID #2 ID #1 String #2 String``; the sentences are not quoted (they may hold
double quotes), so lines are split on tabs only. Each row becomes an example of the two fields
``a`` and ``b`` with the label ``"0"`` or ``"1"`` (the Quality column) and the id
``"<stem>:<line>"``.
"""
from __future__ import annotations

from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS, make_policy
from gramtile.pipeline.readers.pairs import checked_labels
from gramtile.pipeline.readers.table import read_table

HEADER = "Quality<TAB>#1 ID<TAB>#2 ID<TAB>#1 String<TAB>#2 String"
FIELDS = {"a": "#1 String", "b": "#2 String"}


def read_msrp(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8"):
    """Read an MSRP ``msr-para-train.tsv`` / ``msr-para-val.tsv`` file (module docstring).

    Yields
    ------
    Document
        ``fields`` {a, b}, ``label`` "0" or "1", ``id`` ``"<stem>:<line>"``.
    """
    policy = make_policy(on_error, policy)
    docs = read_table(path, policy, max_tokens, encoding=encoding, delimiter="\t", header=True, fields=FIELDS,
                      label_col="Quality",
                      missing_fix=f"an msrp file has the header {HEADER}; read other tables with --format tsv and "
                                  "--fields")
    yield from checked_labels(docs, ("0", "1"), policy, "the Quality column says whether the sentences are "
                                                        "paraphrases: 0 or 1", "Quality")
