"""``gramtile inspect CORPUS.zarr``: what a corpus store holds."""
from __future__ import annotations

from gramtile.workflows.commands import DeferredRun, add_storage_options


def add_parser(sub):
    p = sub.add_parser("inspect", help="counts, labels, sizes, vocabularies and provenance of a corpus store",
                       description="Show what a corpus store holds: example and label counts, per-representation "
                                   "sizes, vocabulary sizes, shards done, content hash and provenance.")
    p.add_argument("corpus", metavar="CORPUS.zarr")
    add_storage_options(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=DeferredRun("inspect"))
    return p
