"""``gramtile gram``: compute (or resume) a tiled Gram matrix into a Zarr Gram store.

Selections (``--rows``/``--cols``) index the corpus store's examples (0-based):

- ``all`` — every example (default);
- ``a:b`` — examples a..b-1 (Python slice rules; ``:500`` and ``4000:`` work);
- ``@file.txt`` — one index per line (blank lines and ``#`` comments ignored).

Without ``--cols`` the matrix is the symmetric K(rows, rows) and only tiles i <= j are
computed; with ``--cols`` it is the rectangular K(rows, cols) (e.g. test x train). Rerunning
the same command resumes: only tiles not marked done are computed.
"""
from __future__ import annotations

import sys
from pathlib import Path

from gramtile.kernels.errors import GramtileError


def add_parser(sub):
    p = sub.add_parser("gram", help="compute a tiled Gram matrix into a Zarr store (resumable)",
                       description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
                       formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--corpus", help="corpus store made by `gramtile prepare`")
    src.add_argument("--input", help="JSON-lines file: prepared on the fly into OUT.corpus.zarr beside --out")
    p.add_argument("--kernel", required=True, help="kernel spec JSON or @spec.json")
    p.add_argument("--out", required=True, help="Gram store to create or resume (GRAM.zarr)")
    p.add_argument("--rows", default="all", help="row selection: all | a:b | @file.txt (default all)")
    p.add_argument("--cols", default=None, help="column selection (default: the rows, symmetric K)")
    p.add_argument("--tile", type=int, default=None,
                   help="tile edge in examples (default: the store's, else chosen from a memory budget)")
    p.add_argument("--cluster", default="local", help="cluster.yaml profile (default local; sequential = no Dask)")
    p.add_argument("--cluster-file", default=None, help="cluster.yaml to read profiles from")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
    return p


def _prepare_input(path: Path, out: Path, cluster: str, cluster_file) -> Path:
    """Prepare a JSON-lines input into a corpus store beside ``out`` (reused when complete)."""
    corpus = out.with_name(out.name + ".corpus.zarr")
    try:
        from gramtile.pipeline import prepare as prep
    except ImportError:
        prep = None
    fn = getattr(prep, "prepare", None) if prep is not None else None
    if fn is not None:
        fn(path, "jsonl", corpus, cluster=cluster, cluster_file=cluster_file)
        return corpus
    # fallback while no prepare module exists: gold structures only (no parsing)
    from gramtile.pipeline.corpus_store import CorpusStore
    from gramtile.pipeline.readers import read

    if (corpus / "zarr.json").exists():
        cs = CorpusStore.open(corpus)
        if cs.complete:
            return corpus
        raise GramtileError(f"{corpus} is an unfinished corpus store; delete it and rerun")
    cs = CorpusStore.create(corpus, source=str(path), input_format="jsonl", shard_size=1000)
    try:
        batch, k = [], 0
        for doc in read(path, "jsonl"):
            batch.append(doc)
            if len(batch) == 1000:
                cs.write_shard(k, batch)
                batch, k = [], k + 1
        if batch:
            cs.write_shard(k, batch)
        cs.finish()
    finally:
        cs.close()
    return corpus


def run(args) -> int:
    from gramtile.pipeline.engine import run_gram

    out = Path(args.out)
    corpus = args.corpus
    if args.input:
        corpus = _prepare_input(Path(args.input), out, args.cluster, args.cluster_file)
    st = run_gram(corpus, args.kernel, out, rows=args.rows, cols=args.cols, tile=args.tile,
                  cluster=args.cluster, cluster_file=args.cluster_file, progress=not args.no_progress)
    done, total = st.tiles_done()
    print(f"{out}: {done}/{total} tiles done, K {st.shape[0]} x {st.shape[1]}, kernel {st.kernel_hash[:16]}")
    return 0 if done == total else 1
