"""``gramtile run NAME|WORKFLOW.yaml --out DIR``: run a workflow file end to end (see
:mod:`gramtile.workflows.runner` for the schema, docs/formats.md for its documentation).

A shipped workflow runs by name (``gramtile run num_qc --data DIR --out OUT``; ``--list`` shows
them); ``--data DIR`` (or ``$GRAMTILE_DATA``) is the folder ``${DATA}``/``${SHARED}`` in the file
stand for. Writes ``DIR/results.json`` (one row per kernel x model x setting), ``DIR/results.md``
and ``DIR/results.png``; the corpus and Gram stores in DIR are reused by a rerun (resumable).
"""
from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

from gramtile.pipeline.learn.report import markdown_table
from gramtile.workflows.commands import add_cluster_options, runtime
from gramtile.workflows.commands.evaluate import add_learn_options
from gramtile.workflows.errors import WorkflowError
from gramtile.workflows.runner import find_workflow, load_workflow, run_workflow, shipped_workflows


def add_parser(sub):
    p = sub.add_parser("run", help="run a workflow (a shipped one by name, or a YAML file): data, kernels, "
                                   "protocol, report",
                       description="Prepare the workflow's data, compute its Gram stores (resumable), train and "
                                   "score every kernel and write DIR/results.json, results.md and a plot. "
                                   "Shipped workflows run by name (`gramtile run --list`); in a file, a relative "
                                   "path starts at the file's folder and ${DATA} (or ${SHARED}) is --data.")
    p.add_argument("workflow", nargs="?", metavar="NAME|WORKFLOW.yaml",
                   help="a shipped workflow's name (e.g. num_qc) or a workflow file")
    p.add_argument("--list", action="store_true", help="list the shipped workflows and exit")
    p.add_argument("--data", default=None, metavar="DIR",
                   help="the data folder ${DATA} / ${SHARED} stand for (default $GRAMTILE_DATA, else "
                        "../shared/data beside a checkout)")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (stores are reused across reruns)")
    add_cluster_options(p)
    p.add_argument("--tile", type=int, default=None, help="tile edge of new Gram stores (default: chosen)")
    p.add_argument("--no-progress", action="store_true", help="no progress output")
    add_learn_options(p, cluster_default=None)  # the learning fits run on --cluster too
    p.set_defaults(func=run)
    return p


def list_workflows() -> int:
    for name, path in shipped_workflows().items():
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:
            raw = {}
        desc = raw.get("description") or (raw.get("report") or {}).get("title") or ""
        print(f"{name:<24} {desc}")
    print(f"(from {next(iter(shipped_workflows().values())).parent}; run one with "
          "`gramtile run NAME --data DIR --out OUT`)")
    return 0


@contextmanager
def data_folder(data):
    """``$GRAMTILE_DATA`` = ``data`` while the workflow runs (recipes resolve their paths then too)."""
    if data is None:
        yield
        return
    d = Path(data).expanduser().resolve()
    if not d.is_dir():
        raise WorkflowError(f"--data {data}: no such folder; give the folder holding the workflow's data sets")
    old = os.environ.get("GRAMTILE_DATA")
    os.environ["GRAMTILE_DATA"] = str(d)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("GRAMTILE_DATA", None)
        else:
            os.environ["GRAMTILE_DATA"] = old


def run(args) -> int:
    if args.list:
        return list_workflows()
    if args.workflow is None or args.out is None:
        raise WorkflowError("gramtile run needs a workflow (a shipped name such as num_qc, or a YAML file) and "
                            "--out DIR; `gramtile run --list` shows the shipped ones")
    t0 = time.perf_counter()
    path = find_workflow(args.workflow)
    with data_folder(args.data):
        wf = load_workflow(path)
        rows = run_workflow(wf, args.out, cluster=runtime(args), tile=args.tile, solver=args.solver)
    cols = [c for c in ("kernel", "model", "C", "accuracy", "precision", "recall", "f1", "macro_f1")
            if any(r.get(c) is not None for r in rows)]
    print(markdown_table(rows, columns=cols))
    print(f"gramtile run {args.workflow}: {len(rows)} row(s) in {time.perf_counter() - t0:.1f} s; "
          f"results in {args.out}", file=sys.stderr)
    return 0
