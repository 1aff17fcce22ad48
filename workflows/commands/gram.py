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
from pathlib import Path

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.storage import beside, is_url
from gramtile.workflows.commands import add_cluster_options, add_storage_options, runtime
from gramtile.workflows.errors import UsageError


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
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
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
    p.set_defaults(func=run)
    return p


def _prepare_input(path: Path, out, cluster):
    """Prepare a JSON-lines input into the corpus store ``OUT.corpus.zarr`` beside ``out``
    (a path, or the URL ``out`` + ``.corpus.zarr`` when ``out`` is a URL).

    ``prepare`` resumes or reuses a store it already completed, so a rerun of the same
    ``gram --input`` command resumes both steps.
    """

    corpus = beside(out, ".corpus.zarr")
    # every derivable representation (ptree of a bracket tree, tree/ptree/seq of a dependency tree), so
    # any kernel can read the store a rerun with another --kernel reuses
    prepare(path, "jsonl", corpus, cluster=cluster, reps="all")
    return corpus


def run(args) -> int:
    # a URL stays a string: Path() would fold "memory://g" into the local path "memory:/g"
    out = args.out if is_url(args.out) else Path(args.out)
    if isinstance(out, Path) and out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a Gram store. Fix: choose another --out (e.g. {out}.zarr)")
    corpus = args.corpus
    as_spec(args.kernel)  # a bad spec fails before --input is prepared
    if args.landmarks is not None and args.cols is not None:
        raise StoreError("--landmarks chooses the columns itself (landmarks drawn from the rows); drop --cols")
    with runtime(args) as rt:
        if args.input:
            corpus = _prepare_input(Path(args.input), out, rt)
        st = run_gram(corpus, args.kernel, out, rows=args.rows, cols=args.cols, tile=args.tile, cluster=rt,
                      path=args.path, dtype=args.dtype, landmarks=args.landmarks,
                      landmark_seed=args.landmark_seed)
    done, total = st.tiles_done()
    lm = st.landmarks
    extra = "" if lm is None else f", {lm['taken']} landmarks ({lm['how']}, seed {lm['seed']})"
    print(f"{out}: {done}/{total} tiles done, K {st.shape[0]} x {st.shape[1]} {st.dtype}{extra}, "
          f"kernel {st.kernel_hash[:16]}")
    return 0 if done == total else 1
