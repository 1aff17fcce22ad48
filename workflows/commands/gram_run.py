"""The run of ``gramtile gram`` (its options and help: :mod:`gramtile.workflows.commands.gram`)."""
from __future__ import annotations

from pathlib import Path

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.storage import beside, is_url
from gramtile.workflows.commands.running import runtime
from gramtile.workflows.errors import UsageError


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
