"""Reading a Gram store through its views and exporting it; prints markdown for
BENCHMARKS.md.

The SST Gram matrix (lam 0.4, tile 500, ``threads``) of the first ``--n`` NUM training trees
is computed once; then each reader or writer is timed (best of ``--repeats``) and checked
bitwise against ``export`` to .npy: ``GramView.to_numpy``, ``to_dask().compute()``,
``to_xarray().values`` (lazy), ``export_selection`` to npy / libsvm / svmlight, and
scikit-learn's ``load_svmlight_file`` reading the svmlight file back.

Usage::

    .venv/bin/python bench/interop.py [--n 2000] [--repeats 2] [--workdir DIR]
"""
from __future__ import annotations

import argparse
import itertools
import tempfile
from pathlib import Path

import numpy as np
from _timing import best_of  # bench/_timing.py (bench/ is on sys.path)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--workdir", default=None)
    args = p.parse_args(argv)

    from sklearn.datasets import load_svmlight_file

    from gramtile.pipeline.compute.engine import run_gram
    from gramtile.pipeline.parsing.formats import read
    from gramtile.pipeline.stores.corpus_store import CorpusStore
    from gramtile.pipeline.stores.gram_export import export, export_selection
    from gramtile.pipeline.stores.gram_store import GramStore

    work = Path(args.workdir or tempfile.mkdtemp(prefix="gramtile-interop-")).resolve()
    docs = list(itertools.islice(read(DATA / "trec_qc_num_constituency" / "NUM_train.dat", "svmlighttk"), args.n))
    cs = CorpusStore.create(work / "c.zarr", shard_size=500, overwrite=True)
    for k in range(0, len(docs), 500):
        cs.write_shard(k // 500, docs[k:k + 500])
    cs.finish()
    cs.close()
    out = work / "g.zarr"
    run_gram(work / "c.zarr", '{"kind": "sst", "lam": 0.4}', out, tile=500, cluster="threads")
    n = len(docs)
    export(out, work / "K.npy")
    K = np.load(work / "K.npy")
    rows = []

    def row(what, t, ok, size=None):
        rows.append(f"| {what} | {t:.2f} s | {'yes' if ok else 'NO'} | {'-' if size is None else f'{size / 2**20:.0f} MiB'} |")

    t, _ = best_of(lambda: export(out, work / "K2.npy"), args.repeats)
    row("`export` to .npy", t, np.array_equal(np.load(work / "K2.npy"), K), (work / "K2.npy").stat().st_size)
    view = GramStore.open(out).view()
    t, a = best_of(view.to_numpy, args.repeats)
    row("`GramView.to_numpy()`", t, np.array_equal(a, K))
    t, a = best_of(lambda: GramStore.open(out).view().to_dask().compute(), args.repeats)
    row("`GramView.to_dask().compute()`", t, np.array_equal(a, K))
    t, a = best_of(lambda: GramStore.open(out).view().to_xarray().values, args.repeats)
    row("`GramView.to_xarray().values`", t, np.array_equal(a, K))
    for fmt in ("libsvm", "svmlight"):
        f = work / f"K.{fmt}"
        t, _ = best_of(lambda f=f, fmt=fmt: export_selection(out, f, fmt), args.repeats)
        if fmt == "svmlight":
            t2, (X, _) = best_of(lambda f=f: load_svmlight_file(str(f), zero_based=False, n_features=n), args.repeats)
            ok = np.array_equal(X.toarray(), K)
        else:
            X, _ = load_svmlight_file(str(f), zero_based=True, n_features=n + 1)
            ok = np.array_equal(X.toarray()[:, 1:], K)
        row(f"`export --format {fmt}`", t, ok, f.stat().st_size)
    row("`load_svmlight_file` of the svmlight file", t2, True)
    print(f"SST over the first {n} NUM training trees (tile 500); best of {args.repeats}\n")
    print("| reader / writer | time | bitwise equal to `export` | file |\n|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
