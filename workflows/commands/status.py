"""``gramtile status``: tiles done / total and the provenance of a Gram store."""
from __future__ import annotations

from gramtile.workflows.commands import DeferredRun, add_storage_options


def add_parser(sub):
    p = sub.add_parser("status", help="tiles done / total and provenance of a Gram store")
    p.add_argument("store", help="Gram store (GRAM.zarr)")
    add_storage_options(p)
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=DeferredRun("status"))
    return p
