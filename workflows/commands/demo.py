"""``gramtile demo``: the main job end to end on the embedded demo corpus."""
from __future__ import annotations

from gramtile.workflows.commands import DeferredRun, add_cluster_options, deprecated, int_at_least_2, seed_int


def add_parser(sub):
    p = sub.add_parser("demo", help="run the end-to-end demo (parse, corpus store, Dask Gram tiles, k-fold SVM)",
                       description="Parse the embedded demo corpus with spaCy into a sharded corpus store, "
                                   "compute Gram matrices tile by tile with Dask into Zarr stores, run "
                                   "stratified k-fold SVM from the stores, print a result table and write a plot. "
                                   "Rerunning reuses everything already computed.")
    p.add_argument("--out", default="demo-out", help="output folder (default: demo-out)")
    add_cluster_options(p)
    p.add_argument("--folds", type=int_at_least_2, default=5, help="number of stratified folds (default: 5)")
    p.add_argument("--fold-seed", type=seed_int, default=0, metavar="S", help="fold seed (default: 0)")
    deprecated(p, "--seed", "--fold-seed", "fold_seed", type=seed_int)
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.set_defaults(func=DeferredRun("demo"))
