"""spaCy parsing throughput on TREC QC train with 1 and 2 Dask workers (LocalCluster).

Usage::

    .venv/bin/python bench/parse_throughput.py [--input PATH] [--chunk 500] [--workers 1 2]

Each worker loads the model once before timing starts (as in ``gramtile prepare``); the timed
part submits the questions in chunks (one task per chunk, like one task per shard) and waits
for all parses. Prints one markdown table row per worker count, to paste into BENCHMARKS.md:
wall-clock sentences/s, and sentences per CPU-second of the workers (which says how fast the
parser is even on a machine shared with other jobs; the load average is printed too).
"""
from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

DEFAULT_INPUT = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec_qc" / "train.txt"


def _warm(model=None):
    from gramtile.pipeline.parsing.parse import load_model

    load_model(model)
    return os.getpid()


def _timed_parse(texts, pretokenized):
    from gramtile.pipeline.parsing.parse import parse_shard

    t = time.process_time()
    deps, prov = parse_shard(texts, pretokenized)
    return len(deps), time.process_time() - t, prov


def run(texts, workers: int, chunk: int) -> tuple:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=40) as cluster, Client(cluster) as client:
        client.run(_warm)
        chunks = [texts[i:i + chunk] for i in range(0, len(texts), chunk)]
        t0 = time.perf_counter()
        futures = [client.submit(_timed_parse, c, True, pure=False) for c in chunks]
        results = [f.result() for f in futures]
        seconds = time.perf_counter() - t0
    assert sum(r[0] for r in results) == len(texts)
    cpu = sum(r[1] for r in results)
    return len(texts) / seconds, seconds, len(texts) / cpu, results[0][2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", default=str(DEFAULT_INPUT))
    ap.add_argument("--chunk", type=int, default=500, help="questions per task (shard size)")
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)
    with open(args.input, encoding="latin-1") as f:
        texts = [line.rstrip("\n").partition(" ")[2] for line in f if line.strip()]
    load = os.getloadavg()[0]
    print("| benchmark | workers | sentences | seconds | sentences/s | sentences/CPU-s | model | machine |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for w in args.workers:
        rate, seconds, per_cpu, prov = run(texts, w, args.chunk)
        print(f"| spaCy parse, TREC QC train (pretokenized, {args.chunk}/task) | {w} | {len(texts)} | "
              f"{seconds:.1f} | {rate:.0f} | {per_cpu:.0f} | {prov['model']} {prov['model_version']} "
              f"(spaCy {prov['spacy_version']}) | {os.cpu_count()} cores {platform.machine()}, "
              f"load {load:.1f} at start |", flush=True)


if __name__ == "__main__":
    main()
