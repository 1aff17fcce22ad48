"""The run of ``gramtile demo`` (its options and help: :mod:`gramtile.workflows.commands.demo`)."""
from __future__ import annotations

from gramtile.workflows.commands.running import runtime
from gramtile.workflows.recipes.demo import run_demo


def run(args) -> int:

    run_demo(args.out, cluster=runtime(args), folds=args.folds, seed=args.fold_seed)
    return 0
