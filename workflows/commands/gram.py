"""``gramtile gram``: compute (or resume) a tiled Gram matrix into a Zarr Gram store.

Selections (``--rows``/``--cols``) index the corpus store's examples (0-based):

- ``all`` — every example (default);
- ``a:b`` — examples a..b-1 (Python slice rules; ``:500`` and ``4000:`` work);
- ``@file.txt`` — one index per line (blank lines and ``#`` comments ignored).

Without ``--cols`` the matrix is the symmetric K(rows, rows) and only tiles i <= j are
computed; with ``--cols`` it is the rectangular K(rows, cols) (e.g. test x train). Rerunning
the same command resumes: only tiles not marked done are computed.

``--landmarks M [--landmark-seed S]`` computes only K(rows, L) for M landmarks L drawn from the
rows (stratified by the corpus labels when every row has one, else uniform; seeded), for
``evaluate --model nystroem``: memory and work O(n M) instead of O(n^2). The store records the
landmarks (corpus indices, ids, positions among the rows, how they were drawn) and their
self-kernels. ``--dtype float32`` stores K in single precision: half the disk, memory and reads
(a composite refuses to mix it with float64 stores).
"""
from __future__ import annotations

import argparse

from gramtile.pipeline.stores.choices import DTYPES
from gramtile.workflows.commands import DeferredRun, add_cluster_options, add_storage_options


def add_parser(sub):
    p = sub.add_parser("gram", help="compute a tiled Gram matrix into a Zarr store (resumable)",
                       description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="corpus store made by `gramtile prepare`")
    src.add_argument("--input", help="JSON-lines file: prepared on the fly into OUT.corpus.zarr beside --out, with "
                                     "every derivable representation (prepare --reps all)")
    p.add_argument("--kernel", required=True, help="kernel spec JSON or @spec.json")
    p.add_argument("--out", required=True,
                   help="Gram store to create or resume (GRAM.zarr; a path or an fsspec URL such as s3://b/g.zarr)")
    p.add_argument("--rows", default="all", help="row selection: all | a:b | @file.txt (default all)")
    p.add_argument("--cols", default=None, help="column selection (default: the rows, symmetric K)")
    p.add_argument("--landmarks", type=int, default=None, metavar="M",
                   help="compute only K(rows, L) for M landmarks drawn from the rows, stratified by label when "
                        "every row has one (a landmark store for evaluate --model nystroem); not with --cols")
    p.add_argument("--landmark-seed", type=int, default=0, metavar="S", help="seed of the landmark draw (default 0)")
    p.add_argument("--dtype", choices=DTYPES, default="float64",
                   help="K's precision in the store (default float64; float32 halves disk, memory and reads)")
    p.add_argument("--tile", type=int, default=None,
                   help="tile edge in examples (default: the store's, else chosen from a memory budget)")
    add_cluster_options(p)
    add_storage_options(p)
    p.add_argument("--path", choices=("auto", "pairwise", "product"), default="auto",
                   help="for kernels with an explicit feature map (st, bow, route, exact subsequence): compute "
                        "tiles as matrix products of stored feature rows when estimated cheaper (auto, the "
                        "default), always (product) or never (pairwise); each tile's choice is in the store's log")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=DeferredRun("gram"))
    return p
