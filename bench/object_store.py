"""Stores on an S3-protocol server against local paths: ``prepare``, ``gram`` and ``evaluate`` of the
same input through the real CLI; prints markdown for BENCHMARKS.md.

The server is the one of the cluster tests (moto's server mode on 127.0.0.1, started by
``tests/cluster/services/s3.sh start`` as root, or ``make cluster-services``); its settings are read
from ``$GRAMTILE_SERVICES/s3.env`` (or ``--env FILE``, or the AWS_* variables already set). A fresh
bucket is made and removed afterwards.

Workloads (each a ``gramtile`` subprocess, timed wall-clock; local and S3 runs alternate, round by
round, so that the load of a shared machine hits both alike):

- ``prepare`` of all 5,483 NUM training trees (SVM-Light-TK, gold trees: nothing to parse, so the
  driver alone reads, encodes and writes) in 22 shards of 250;
- ``prepare`` of the 5,452 TREC questions (``trec``: parsed by spaCy on the ``local`` profile's two
  worker processes while the driver writes) in 22 shards of 250 (``--parsed``);
- ``gram``: the SST Gram (lam 0.4) of the NUM store, tile 1000, ``threads`` profile;
- ``evaluate``: 5-fold SVM on that Gram store (``--folds-dir`` beside, as a URL store needs).

Every S3 result is checked against the local one: content hashes, K bitwise, results.json rows.

Usage::

    .venv/bin/python bench/object_store.py [--rounds 3] [--parsed] [--only prepare]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

from _timing import run_measured

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
GRAMTILE = [sys.executable, "-m", "gramtile"]
SST = '{"kind": "sst", "lam": 0.4}'


def _env(path) -> dict:
    env = dict(os.environ)
    p = Path(path) if path else Path(os.environ.get("GRAMTILE_SERVICES", "/tmp/gramtile-services")) / "s3.env"
    if p.is_file():
        for line in p.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                k, _, v = line.partition("=")
                env[k.strip()] = v.strip()
    if "AWS_ENDPOINT_URL" not in env:
        raise SystemExit(f"no S3 endpoint: {p} is missing and AWS_ENDPOINT_URL is not set. Start the server as root "
                         "with `make cluster-services` (or tests/cluster/services/s3.sh start)")
    env.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    return env


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--env", default=None, help="KEY=VALUE file of the S3 settings (default $GRAMTILE_SERVICES/s3.env)")
    p.add_argument("--parsed", action="store_true", help="also prepare the TREC questions (spaCy parse)")
    p.add_argument("--only", choices=["prepare", "gram", "evaluate"], default=None)
    p.add_argument("--workdir", default=None)
    args = p.parse_args(argv)

    env = _env(args.env)
    os.environ.update({k: v for k, v in env.items() if k.startswith("AWS_")})
    import numpy as np
    import s3fs

    from gramtile.pipeline.stores.corpus_store import CorpusStore
    from gramtile.pipeline.stores.gram_store import GramStore

    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    bucket = f"gramtile-bench-{uuid.uuid4().hex[:8]}"
    fs.mkdir(bucket)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="gramtile-s3-bench-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    num = DATA / "trec_qc_num_constituency" / "NUM_train.dat"
    trec = DATA / "trec_qc" / "train.txt"
    rows = []

    def place(kind, r, name):
        return str(work / f"{kind}{r}-{name}") if kind == "local" else f"s3://{bucket}/{kind}{r}-{name}"

    def measure(what, argv_of, check=None):
        times = {"local": [], "S3": []}
        for r in range(args.rounds):
            for kind in ("local", "S3"):
                wall, _, _ = run_measured(GRAMTILE + [str(a) for a in argv_of(kind, r)], env=env, cwd=work)
                times[kind].append(wall)
                print(f"  {what} round {r} {kind}: {wall:.2f} s", file=sys.stderr, flush=True)
        if check:
            check()
        lo, s3m = statistics.median(times["local"]), statistics.median(times["S3"])
        rows.append((what, lo, min(times["local"]), s3m, min(times["S3"]), s3m / lo))

    try:
        if args.only in (None, "prepare", "gram", "evaluate"):
            def prep_num(kind, r):
                return ["prepare", "--input", num, "--format", "svmlighttk", "--shard-size", 250,
                        "--out", place(kind, r, "num.zarr"), "-q"]

            def same_hash():
                hashes = {CorpusStore.open(place(k, r, "num.zarr")).content_hash
                          for k in ("local", "S3") for r in range(args.rounds)}
                assert len(hashes) == 1, hashes
            if args.only in (None, "prepare"):
                measure("prepare NUM (5,483 gold trees, 22 shards)", prep_num, same_hash)
            else:
                for kind in ("local", "S3"):
                    run_measured(GRAMTILE + [str(a) for a in prep_num(kind, 0)], env=env, cwd=work)
        if args.parsed and args.only in (None, "prepare"):
            def prep_trec(kind, r):
                return ["prepare", "--input", trec, "--format", "trec", "--shard-size", 250, "--cluster", "local",
                        "--out", place(kind, r, "trec.zarr"), "-q"]

            def same_trec():
                hashes = {CorpusStore.open(place(k, r, "trec.zarr")).content_hash
                          for k in ("local", "S3") for r in range(args.rounds)}
                assert len(hashes) == 1, hashes
            measure("prepare TREC (5,452 questions parsed on 2 workers, 22 shards)", prep_trec, same_trec)
        if args.only in (None, "gram", "evaluate"):
            def gram(kind, r):
                return ["gram", "--corpus", place(kind, 0, "num.zarr"), "--kernel", SST, "--tile", 1000,
                        "--cluster", "threads", "--out", place(kind, r, "g.zarr"), "--no-progress", "-q"]

            def same_k():
                ref = GramStore.open(place("local", 0, "g.zarr")).view().block()
                for k in ("local", "S3"):
                    for r in range(args.rounds):
                        assert np.array_equal(GramStore.open(place(k, r, "g.zarr")).view().block(), ref), (k, r)
            if args.only in (None, "gram"):
                measure("gram SST 5,483 x 5,483 (tile 1000, threads)", gram, same_k)
            else:
                for kind in ("local", "S3"):
                    run_measured(GRAMTILE + [str(a) for a in gram(kind, 0)], env=env, cwd=work)
        if args.only in (None, "evaluate"):
            def evaluate(kind, r):
                return ["evaluate", "--gram", place(kind, 0, "g.zarr"), "--folds", 5, "--folds-dir",
                        work / f"folds-{kind}", "--out", work / f"ev-{kind}{r}", "--overwrite", "-q"]

            def same_results():
                docs = [json.loads((work / f"ev-{k}{r}" / "results.json").read_text())
                        for k in ("local", "S3") for r in range(args.rounds)]
                assert all(d["rows"] == docs[0]["rows"] and d["fold_rows"] == docs[0]["fold_rows"] for d in docs)
            measure("evaluate 5-fold SVM on that Gram store", evaluate, same_results)
    finally:
        fs.rm(bucket, recursive=True)

    print(f"| step (same input, {args.rounds} rounds, alternating) | local median (min) | S3 median (min) | "
          "S3 / local |")
    print("|---|---|---|---|")
    for what, lo, lomin, s3m, s3min, ratio in rows:
        print(f"| {what} | {lo:.1f} s ({lomin:.1f}) | {s3m:.1f} s ({s3min:.1f}) | {ratio:.2f} |")


if __name__ == "__main__":
    main()
