"""Corpus and Gram stores at a local path, a ``file://`` URL and a ``memory://`` URL; prints
markdown for BENCHMARKS.md.

1. ``prepare`` of all 5,483 NUM training trees (pre-parsed, no spaCy; shards of 500, sequential)
   into each kind of location, ``--rounds`` rounds; every store's content hash is checked equal.
2. The Gram matrix, as follows.

The full 5,483 x 5,483 SST Gram matrix of NUM_train.dat (lam 0.4, tile 1000, ``threads``
executor) computed into three kinds of location in turn, for ``--rounds`` rounds; the corpus
store is read from the same kind of location as the Gram store is written to (for
``memory://`` it is copied into fsspec's in-process memory filesystem first). Each ``run_gram``
call is timed in this process after a warm-up run (Numba initialised); every K is checked to be
bitwise equal to the first.

Usage::

    .venv/bin/python bench/store_urls.py [--workdir DIR] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from gram_engine import DATA, SST, _prepare


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workdir", default=None, help="where the stores go (default: a temp dir)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--tile", type=int, default=1000)
    args = p.parse_args(argv)

    import fsspec

    from gramtile.pipeline.compute.engine import run_gram

    work = Path(args.workdir or tempfile.mkdtemp(prefix="gramtile-urls-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    corpus = _prepare(DATA / "trec_qc_num_constituency" / "NUM_train.dat", "svmlighttk", work / "num.zarr")
    mem = fsspec.filesystem("memory")
    mem.put(str(corpus), "/bench/num.zarr", recursive=True)
    places = {
        "local path": (str(corpus), lambda r: str(work / f"g{r}.zarr")),
        "`file://` URL": (f"file://{corpus}", lambda r: f"file://{work}/u{r}.zarr"),
        "`memory://` URL": ("memory:///bench/num.zarr", lambda r: f"memory:///bench/g{r}.zarr"),
    }
    from gramtile.pipeline.compute.prepare import prepare
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    src = DATA / "trec_qc_num_constituency" / "NUM_train.dat"
    prep = {"local path": lambda r: str(work / f"p{r}.zarr"), "`file://` URL": lambda r: f"file://{work}/pu{r}.zarr",
            "`memory://` URL": lambda r: f"memory:///bench/p{r}.zarr"}
    prep_times = {k: [] for k in prep}
    hashes = set()
    for r in range(args.rounds):
        for name, out in prep.items():
            o = out(r)
            t0 = time.perf_counter()
            prepare(src, "svmlighttk", o, shard_size=500, cluster="sequential")
            prep_times[name].append(time.perf_counter() - t0)
            hashes.add(CorpusStore.open(o).content_hash)
            if o.startswith("memory://"):
                mem.rm(o.replace("memory://", ""), recursive=True)
            else:
                shutil.rmtree(o.replace("file://", ""), ignore_errors=True)
    if len(hashes) != 1:
        raise SystemExit(f"content hashes differ between locations: {sorted(hashes)}")
    warm = work / "warm.zarr"
    run_gram(str(corpus), SST, warm, rows="0:300", tile=100, cluster="threads")
    shutil.rmtree(warm, ignore_errors=True)
    times = {k: [] for k in places}
    ref = None
    for r in range(args.rounds):
        for name, (c, out) in places.items():
            o = out(r)
            t0 = time.perf_counter()
            st = run_gram(c, SST, o, tile=args.tile, cluster="threads")
            times[name].append(time.perf_counter() - t0)
            K = st.view().block()
            if ref is None:
                ref = K
            elif not np.array_equal(K, ref):
                raise SystemExit(f"{name} round {r}: K differs from the first run")
            if not o.startswith("memory://"):
                shutil.rmtree(o.replace("file://", ""), ignore_errors=True)
            else:
                mem.rm(o.replace("memory://", ""), recursive=True)
    print(f"<!-- bench/store_urls.py on {platform.node()}, {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}, load {os.getloadavg()[0]:.1f} -->\n")
    print("`prepare` of the 5,483 NUM trees (pre-parsed; 11 shards of 500; sequential):\n")
    print("| corpus store at | " + " | ".join(f"round {r + 1}" for r in range(args.rounds)) + " |")
    print("|---|" + "---:|" * args.rounds)
    for name, ts in prep_times.items():
        print(f"| {name} | " + " | ".join(f"{t:.2f} s" for t in ts) + " |")
    print(f"\nEvery store's content hash {next(iter(hashes))[:16]}...\n")
    print(f"`run_gram` of the full SST Gram (tile {args.tile}, `threads`), the corpus store read from the same kind of "
          "location:\n")
    print("| stores at | " + " | ".join(f"round {r + 1}" for r in range(args.rounds)) + " |")
    print("|---|" + "---:|" * args.rounds)
    for name, ts in times.items():
        print(f"| {name} | " + " | ".join(f"{t:.2f} s" for t in ts) + " |")
    print("\nEvery K bitwise equal to the first run's.")


if __name__ == "__main__":
    sys.exit(main())
