"""``gramtile verify``: re-read every done tile (checksums, NaN); ``--repair`` recomputes bad ones."""
from __future__ import annotations

from gramtile.pipeline.compute.repair import repair
from gramtile.pipeline.stores.gram_store import verify
from gramtile.workflows.commands import add_cluster_options, add_storage_options, runtime


def add_parser(sub):
    p = sub.add_parser("verify", help="re-check every done tile of a Gram store; --repair recomputes bad tiles")
    p.add_argument("store", help="Gram store (GRAM.zarr)")
    add_storage_options(p)
    p.add_argument("--repair", action="store_true",
                   help="clear the done bits of bad tiles and recompute them from the corpus store")
    add_cluster_options(p, default="sequential", help="cluster.yaml profile or scheduler address for the repair")
    p.set_defaults(func=run)
    return p


def run(args) -> int:
    if args.repair:
        rt = runtime(args)  # a bad profile fails even when nothing needs repair
        rep = repair(args.store, cluster=rt, progress=True)
    else:
        rep = verify(args.store)
    if rep.metadata:
        print(rep.metadata)
    if rep.done_damaged:
        print(f"damaged done mask: {rep.done_damaged}")
    if rep.rebuilt is not None:
        print(f"rebuilt the done mask: {len(rep.rebuilt)} stored tile(s) intact and kept, the rest recomputed")
    for t, why in rep.bad:
        print(f"bad tile {tuple(t)}: {why}")
    if rep.repaired:
        print(f"repaired {len(rep.repaired)} tile(s): {[tuple(t) for t in rep.repaired]}")
    hint = "" if rep.ok else ("; still bad after recomputing: the kernel gives these values (check the input)"
                              if args.repair else "; run `gramtile verify --repair` to repair the store")
    print(f"{rep.path}: {rep.checked} done tile(s) checked, {len(rep.bad)} bad{hint}")
    return 0 if rep.ok else 1
