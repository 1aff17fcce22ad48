"""The run of ``gramtile run`` (its options and help: :mod:`gramtile.workflows.commands.run`)."""
from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import yaml

from gramtile.pipeline.learn.report import markdown_table
from gramtile.workflows.commands.running import runtime
from gramtile.workflows.errors import WorkflowError
from gramtile.workflows.runner import find_workflow, load_workflow, run_workflow, shipped_workflows


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
