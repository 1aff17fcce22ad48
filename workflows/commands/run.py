"""``gramtile run NAME|WORKFLOW.yaml --out DIR``: run a workflow file end to end (see
:mod:`gramtile.workflows.runner` for the schema, docs/formats.md for its documentation).

A shipped workflow runs by name (``gramtile run num_qc --data DIR --out OUT``; ``--list`` shows
them); ``--data DIR`` (or ``$GRAMTILE_DATA``) is the folder ``${DATA}``/``${SHARED}`` in the file
stand for. Writes ``DIR/results.json`` (one row per kernel x model x setting), ``DIR/results.md``
and ``DIR/results.png``; the corpus and Gram stores in DIR are reused by a rerun (resumable).
"""
from __future__ import annotations

from gramtile.workflows.commands import DeferredRun, add_cluster_options
from gramtile.workflows.commands.evaluate import add_learn_options


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
    p.set_defaults(func=DeferredRun("run"))
    return p
