"""``gramtile features``: the explicit feature rows of a kernel with a feature map, as a feature store.

Writes, for every example of a corpus store, the row x = phi(x) sqrt(w) (normalised for
``normalized`` of a mapped kernel), so that <x, y> = K(x, y): rows chunked by the corpus's
shards, with the examples' ids and labels, and a copy of the feature vocabulary and the corpus's
string vocabularies (so models trained on the store map new examples onto its columns). The
corpus store's feature set is built first if it is missing (``docs/kernels.md``, "Feature
maps"). ``gramtile evaluate/train --features F.zarr --model linear`` learn from the store
without any Gram matrix (docs/learning.md).
"""
from __future__ import annotations

from gramtile.workflows.commands import DeferredRun, add_storage_options


def add_parser(sub):
    p = sub.add_parser("features", help="explicit feature rows of st, bow, route or exact subsequence kernels",
                       description=__doc__.split("\n\n")[1])
    p.add_argument("--corpus", required=True, help="corpus store made by `gramtile prepare`")
    p.add_argument("--kernel", required=True,
                   help="spec JSON or @spec.json: a kernel with a feature map, or 'normalized' of one")
    p.add_argument("--out", required=True, help="the feature store to write (F.zarr, a new local path)")
    add_storage_options(p)
    p.set_defaults(func=DeferredRun("features"))
    return p
