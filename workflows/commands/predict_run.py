"""The run of ``gramtile predict`` (its options and help: :mod:`gramtile.workflows.commands.predict`)."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from gramtile.pipeline.learn.errors import EvaluationError, PredictInputError
from gramtile.pipeline.learn.metrics import pearson, ranking_report, spearman
from gramtile.pipeline.learn.model_files import load_model
from gramtile.pipeline.learn.models import read_documents
from gramtile.pipeline.learn.tasks import labels_as_relevance
from gramtile.pipeline.parsing import links
from gramtile.pipeline.progress import log
from gramtile.pipeline.readers.base import tsv_field
from gramtile.workflows.commands.running import check_output_file, write_json_atomic, write_text_atomic
from gramtile.workflows.datainput import reader_options as data_options


def run(args) -> int:
    t0 = time.perf_counter()
    if args.out:
        check_output_file(args.out, "--out", args.overwrite)
    m = load_model(args.model_dir)
    docs = read_documents(args.input, args.format, model=args.spacy_model, links=links.wanted(m.spec.reps()),
                          **data_options(args, args.format))
    got = m.predictions(docs)
    task = getattr(m, "task", "classification")
    if task != "classification":
        return _write_real(args, task, docs, got, t0)
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


def _groups(docs):
    """The inputs' group ids, or None when none has one; some with and some without is refused."""
    have = [d.group is not None for d in docs]
    if not any(have):
        return None
    if not all(have):
        k = have.index(False)
        raise PredictInputError(f"input example {docs[k].id!r} has no group id while others have one; give every "
                                "example its group (--group-col), or none (one ranking of all of them)")
    return [str(d.group) for d in docs]


def ranked(scores, groups) -> list:
    """``(position, rank)`` of every input, group by group (groups in order of first appearance; all in
    one without groups), highest score first (ties in input order), rank 1 the top of its group."""
    s = np.asarray(scores, dtype=np.float64)
    by_group: dict = {}
    for i in range(s.size):
        by_group.setdefault("" if groups is None else groups[i], []).append(i)
    out = []
    for members in by_group.values():
        order = sorted(members, key=lambda i: -s[i])
        out += [(i, r + 1) for r, i in enumerate(order)]
    return out


def _gold(task, docs):
    """The gold targets (regression) or relevance (ranking: targets, else labels read as numbers) of
    the inputs, or None when they carry none."""
    targets = [d.target for d in docs]
    if all(t is not None for t in targets):
        return np.asarray(targets, dtype=np.float64)
    labels = [d.label for d in docs]
    if task == "ranking" and all(lab is not None for lab in labels):
        try:
            return labels_as_relevance(labels, "the input")
        except EvaluationError:  # labels that are not relevance: no score to print
            return None
    return None


def _write_real(args, task, docs, got, t0) -> int:
    """The predictions of a regression (``id<TAB>value``) or a ranking (``id<TAB>group<TAB>score<TAB>rank``)."""
    values = np.asarray(got.scores, dtype=np.float64)
    gold = _gold(task, docs)
    groups = _groups(docs) if task == "ranking" else None
    if task == "regression":
        order = [(i, None) for i in range(len(docs))]
        lines = [f"{tsv_field(d.id)}\t{float(v)!r}" for d, v in zip(docs, values)]
    else:
        order = ranked(values, groups)
        lines = [f"{tsv_field(docs[i].id)}\t" + (f"{tsv_field(groups[i])}\t" if groups is not None else "")
                 + f"{float(values[i])!r}\t{r}" for i, r in order]
    if args.out:
        out = Path(args.out)
        if out.suffix == ".json":
            objs = []
            for i, r in order:
                o = {"id": docs[i].id, "predicted" if task == "regression" else "score": float(values[i])}
                if task == "ranking":
                    o.update({**({"group": groups[i]} if groups is not None else {}), "rank": r})
                if gold is not None:
                    o["gold"] = float(gold[i])
                objs.append(o)
            write_json_atomic(out, objs)
        else:
            write_text_atomic(out, "\n".join(lines) + "\n")
    else:
        print("\n".join(lines))
    msg = f"gramtile predict: {got.what}"
    if gold is not None and task == "regression":
        msg += (f", Pearson {pearson(gold, values):.4f}, Spearman {spearman(gold, values):.4f} against the input's "
                "targets")
    elif gold is not None:
        rep = ranking_report(gold, values, groups if groups is not None else np.zeros(len(docs), dtype=np.int64))
        msg += (f", MAP {rep['map']:.4f}, MRR {rep['mrr']:.4f} over {rep['n_groups']} groups against the input's "
                "relevance")
    log.info(msg + f" in {time.perf_counter() - t0:.1f} s")
    return 0
