"""SICK (SemEval-2014 Task 1): sentence pairs with a relatedness score and an entailment label.

A tab-separated file with the header ``pair_ID sentence_A sentence_B relatedness_score
entailment_judgment``. Each row becomes an example of the two fields ``a`` and ``b``: its
``target`` the relatedness score (a real number from 1 to 5), its ``label`` the entailment
judgement (``ENTAILMENT``, ``CONTRADICTION`` or ``NEUTRAL``), its id the ``pair_ID``.
"""
from __future__ import annotations

from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS, make_policy
from gramtile.pipeline.readers.pairs import checked_labels, checked_targets
from gramtile.pipeline.readers.table import read_table

HEADER = "pair_ID<TAB>sentence_A<TAB>sentence_B<TAB>relatedness_score<TAB>entailment_judgment"
FIELDS = {"a": "sentence_A", "b": "sentence_B"}
LABELS = ("ENTAILMENT", "CONTRADICTION", "NEUTRAL")


def read_sick2014(path, policy=None, max_tokens=DEFAULT_MAX_TOKENS, on_error="raise", encoding="utf-8"):
    """Read a SICK ``SICK_train.txt`` / ``SICK_trial.txt`` file (module docstring).

    Yields
    ------
    Document
        ``fields`` {a, b}, ``target`` the relatedness score, ``label`` the entailment judgement,
        ``id`` the pair id.
    """
    policy = make_policy(on_error, policy)
    docs = read_table(path, policy, max_tokens, encoding=encoding, delimiter="\t", header=True, fields=FIELDS,
                      label_col="entailment_judgment", target_col="relatedness_score", id_col="pair_ID",
                      missing_fix=f"a sick2014 file has the header {HEADER}; read other tables with --format tsv "
                                  "and --fields")
    docs = checked_labels(docs, LABELS, policy, f"write one of {', '.join(LABELS)}", "entailment_judgment")
    yield from checked_targets(docs, 1.0, 5.0, policy, "the relatedness score is the mean of judgements from 1 to 5",
                               "relatedness_score")
