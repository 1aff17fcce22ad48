"""``gramtile verify``: re-read every done tile of a Gram store (checksums, NaN; ``--repair``
recomputes bad ones), or check every file of a model directory or array of a feature store against
its checksum (``--repair`` records the checksums of one written before they existed)."""
from __future__ import annotations

from gramtile.workflows.commands import DeferredRun, add_cluster_options, add_storage_options


def add_parser(sub):
    p = sub.add_parser("verify", help="re-check every done tile of a Gram store (--repair recomputes bad tiles), "
                                      "or every file of a model directory")
    p.add_argument("store", help="Gram store (GRAM.zarr), feature store (F.zarr) or model directory")
    add_storage_options(p)
    p.add_argument("--repair", action="store_true",
                   help="clear the done bits of bad tiles and recompute them from the corpus store; for a model "
                        "directory or feature store written before its files had checksums, record them")
    add_cluster_options(p, default="sequential", help="cluster.yaml profile or scheduler address for the repair")
    p.set_defaults(func=DeferredRun("verify"))
    return p
