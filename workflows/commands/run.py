"""``gramtile run WORKFLOW.yaml --out DIR``: run a workflow file end to end (see
:mod:`gramtile.workflows.runner` for the schema).

Writes ``DIR/results.json`` (one row per kernel x model x setting), ``DIR/results.md`` and
``DIR/results.png``; the corpus and Gram stores in DIR are reused by a rerun (resumable).
"""
from __future__ import annotations

import sys
import time

from gramtile.pipeline.learn.report import markdown_table
from gramtile.workflows.commands import CLUSTER_HELP
from gramtile.workflows.runner import load_workflow, run_workflow


def add_parser(sub):
    p = sub.add_parser("run", help="run a workflow YAML file (data, kernels, protocol, report)",
                       description="Prepare the workflow's data, compute its Gram stores (resumable), train and "
                                   "score every kernel and write DIR/results.json, results.md and a plot.")
    p.add_argument("workflow", metavar="WORKFLOW.yaml", help="e.g. workflows/num_qc.yaml")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (stores are reused across reruns)")
    p.add_argument("--cluster", default="local", help=CLUSTER_HELP)
    p.add_argument("--cluster-file", default=None, help="cluster.yaml to read profiles from")
    p.add_argument("--tile", type=int, default=None, help="tile edge of new Gram stores (default: chosen)")
    p.add_argument("--no-progress", action="store_true", help="no progress output")
    p.set_defaults(func=run)
    return p


def run(args) -> int:

    t0 = time.perf_counter()
    wf = load_workflow(args.workflow)
    rows = run_workflow(wf, args.out, cluster=args.cluster, cluster_file=args.cluster_file,
                        progress=not args.no_progress, tile=args.tile)
    cols = [c for c in ("kernel", "model", "C", "accuracy", "precision", "recall", "f1", "macro_f1")
            if any(r.get(c) is not None for r in rows)]
    print(markdown_table(rows, columns=cols))
    print(f"gramtile run {args.workflow}: {len(rows)} row(s) in {time.perf_counter() - t0:.1f} s; "
          f"results in {args.out}", file=sys.stderr)
    return 0
