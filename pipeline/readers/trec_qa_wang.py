"""TREC QA answer sentence selection (Wang et al. 2007): question / candidate-sentence pairs.

A CSV file with the header ``qtext,label,atext`` (standard CSV quoting), one row per (question,
candidate); the label is 1 when the candidate holds the answer, else 0. Each row becomes an
example of the two fields ``question`` and ``answer``, its label ``"0"`` or ``"1"``, and its
group the question's text (the candidates of one question are ranked together). Texts are
PTB-tokenised (``-LRB-``, `````` ``), so ``gramtile prepare`` parses their tokens as given.
"""
from __future__ import annotations

from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS, make_policy
from gramtile.pipeline.readers.pairs import checked_labels
from gramtile.pipeline.readers.table import read_table

HEADER = "qtext,label,atext"
FIELDS = {"question": "qtext", "answer": "atext"}


def read_trec_qa_wang(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8"):
    """Read a TREC QA (Wang) ``train.csv`` / ``dev.csv`` file (module docstring).

    Yields
    ------
    Document
        ``fields`` {question, answer}, ``label`` "0" or "1", ``group`` the question text, ``id``
        ``"<stem>:<line>"``.
    """
    policy = make_policy(on_error, policy)
    docs = read_table(path, policy, max_tokens, encoding=encoding, delimiter=",", header=True, fields=FIELDS,
                      label_col="label", group_col="qtext",
                      missing_fix=f"a trec_qa_wang file has the header {HEADER}; read other tables with "
                                  "--format csv and --fields")
    yield from checked_labels(docs, ("0", "1"), policy, "the label column says whether the candidate holds the "
                                                        "answer: 0 or 1")
