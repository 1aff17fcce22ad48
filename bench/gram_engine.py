"""Benchmark of the tiled Gram engine; prints markdown for BENCHMARKS.md.

1. The full 5,483 x 5,483 SST Gram matrix of NUM_train.dat through the engine on a 2-worker
   LocalCluster (Dask + Zarr store + done bits + log), for several tile sizes, against the
   one-process, kernel-only time of the same matrix (``spec.block`` on the whole batch in
   memory). Target: engine / kernel-only <= 0.6 (parallel efficiency >= 83 %).
2. A large corpus (PTB WSJ sample + NUM train/test + KeLP GRCT/LCT question trees, written to one
   JSON-lines file and prepared into one corpus store) computed at growing n, each run in a fresh
   driver process whose peak RSS (ru_maxrss) is recorded. Target: <= 1 GB, flat in n.

Usage::

    .venv/bin/python bench/gram_engine.py                       # both parts
    .venv/bin/python bench/gram_engine.py --tiles 250,500,1000 --sizes 5000,10000,20000
    .venv/bin/python bench/gram_engine.py --skip-big            # part 1 only
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SST = '{"kind": "sst", "lam": 0.4}'


def _cluster_file(work: Path, workers: int) -> Path:
    p = work / "cluster.yaml"
    p.write_text(f"profiles:\n  local: {{n_workers: {workers}, threads_per_worker: 1, memory_limit: 3GiB, "
                 f"dashboard_address: ':0'}}\n")
    return p


def _prepare(src, fmt, out):
    from gramtile.pipeline.prepare import prepare

    if not (Path(out) / "zarr.json").exists():
        prepare(src, fmt, out, shard_size=1000, cluster="sequential", progress=False)
    return out


def part1(work: Path, tiles, workers: int):
    from gramtile.pipeline.corpus_store import CorpusStore
    from gramtile.pipeline.engine import run_gram
    from gramtile.pipeline.evaluate import as_spec

    corpus = _prepare(DATA / "trec_qc_num_constituency" / "NUM_train.dat", "svmlighttk", work / "num.zarr")
    cs = CorpusStore.open(corpus)
    n = cs.n
    spec = as_spec(SST)
    X = cs.load("tree", 0, n)
    spec.block(X.slice(0, 50))  # JIT / cache load outside the timing
    t0, c0 = time.perf_counter(), time.process_time()
    K1 = spec.block(X)
    t_kernel, c_kernel = time.perf_counter() - t0, time.process_time() - c0
    pairs = n * (n + 1) // 2
    print(f"## Tiled SST Gram, NUM_train.dat ({n:,} x {n:,}), {workers} local workers\n")
    load = os.getloadavg()[0]
    print(f"One process, kernel only (`spec.block` on the whole batch): **{t_kernel:.1f} s** wall, "
          f"{c_kernel:.1f} s CPU ({pairs / t_kernel / 1e6:.2f} M distinct pairs/s); load average {load:.1f}\n")
    print("| tile | tiles | wall incl. cluster start (s) | run start to end (s) | tiles phase (s) "
          "| wall / kernel-only | tiles phase / kernel-only | task CPU sum / kernel-only CPU "
          "| max rel. diff vs kernel-only |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    cfile = _cluster_file(work, workers)
    # warm-up run: Numba compiles (and caches on disk) the signatures the workers need, so the
    # timed runs measure the engine, not one-off compilation
    warm = work / "warmup.zarr"
    shutil.rmtree(warm, ignore_errors=True)
    run_gram(corpus, SST, warm, rows="0:400", tile=100, cluster="local", cluster_file=cfile, progress=False)
    shutil.rmtree(warm, ignore_errors=True)
    rows = []
    for t in tiles:
        out = work / f"sst_t{t}.zarr"
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        st = run_gram(corpus, SST, out, tile=t, cluster="local", cluster_file=cfile, progress=False)
        wall = time.perf_counter() - t0
        log = st.read_log()
        tile_recs = [r for r in log if r["event"] == "tile"]
        start = [r for r in log if r["event"] == "start"][-1]["time"]
        end = [r for r in log if r["event"] == "end"][-1]["time"]
        # tiles phase: from the start of the first finished task to the last recorded tile
        # (excludes cluster start-up and the workers' one-off imports)
        first = min(tile_recs, key=lambda r: r["time"])
        tiles_span = max(r["time"] for r in tile_recs) - (first["time"] - first["seconds"])
        compute = end - start
        K = st.view().block()
        rel = float(np.max(np.abs(K - K1) / np.maximum(np.abs(K1), 1e-300)))
        n_tiles = len(tile_recs)
        rows.append((t, wall, compute))
        cpu = sum(r.get("cpu_seconds", 0.0) for r in tile_recs)
        print(f"| {t} | {n_tiles} | {wall:.1f} | {compute:.1f} | {tiles_span:.1f} | {wall / t_kernel:.2f} "
              f"| {tiles_span / t_kernel:.2f} | {cpu / c_kernel:.2f} | {rel:.1e} |", flush=True)
        del K
        shutil.rmtree(out, ignore_errors=True)
    print("\n'run' spans the run's start and end records in log.jsonl (cluster start-up included); 'tiles phase' "
          "runs from the start of the first finished tile task to the last recorded tile; 'wall' adds "
          "corpus opening and cluster shutdown. 'task CPU' sums the tile tasks' thread CPU time (kernel, "
          "example loading, the task thread's share of the Zarr writes): it shows the engine's overhead independently of other load on the "
          "machine.\n")
    return t_kernel, rows


def build_big(work: Path, limit: int) -> Path:
    """PTB + NUM train/test + KeLP GRCT and LCT trees as one JSON-lines file, prepared once."""
    from gramtile.pipeline.readers import read, write_jsonl
    from gramtile.pipeline.structures import Document

    out = work / f"big{limit}.zarr"
    if (out / "zarr.json").exists():
        return out
    src = [(DATA / "ptb_wsj_sample" / "combined", "ptb", "tree"),
           (DATA / "trec_qc_num_constituency" / "NUM_train.dat", "svmlighttk", "tree"),
           (DATA / "trec_qc_num_constituency" / "NUM_test.dat", "svmlighttk", "tree"),
           (DATA / "trec_qc_kelp_trees" / "train_5500.coarse.klp.gz", "kelp", "grct"),
           (DATA / "trec_qc_kelp_trees" / "TREC_10.coarse.klp.gz", "kelp", "grct"),
           (DATA / "trec_qc_kelp_trees" / "train_5500.coarse.klp.gz", "kelp", "lct")]

    def docs():
        k = 0
        for path, fmt, name in src:
            for d in read(path, fmt):
                if k >= limit:
                    return
                yield Document(id=f"{k}", label=None, text=None, structures={"tree": d.structures[name]})
                k += 1

    jl = work / f"big{limit}.jsonl"
    write_jsonl(docs(), jl)
    return _prepare(jl, "jsonl", out)


def _peak_rss_kib() -> int:
    """This process's peak RSS (KiB): VmHWM, which starts afresh at exec.

    ``ru_maxrss`` is not used: Linux carries it over from the parent across fork + exec, so a
    driver started by this (large) benchmark process would report the benchmark's own peak.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _driver(args):
    """One engine run in this (fresh) process; prints JSON with its peak RSS."""
    from gramtile.pipeline.engine import run_gram

    if args.n <= 0:  # warm-up: compile and cache the kernels for the workers
        warm = Path(args.out)
        run_gram(args.corpus, SST, warm, rows="0:300", tile=100, cluster="local",
                 cluster_file=args.cluster_file, progress=False)
        shutil.rmtree(warm, ignore_errors=True)
        print(json.dumps({}))
        return

    t0 = time.perf_counter()
    st = run_gram(args.corpus, SST, args.out, rows=f"0:{args.n}", tile=args.tile, cluster="local",
                  cluster_file=args.cluster_file, progress=False)
    wall = time.perf_counter() - t0
    rss_kib = _peak_rss_kib()
    print(json.dumps({"n": args.n, "wall": wall, "rss_mib": rss_kib / 1024, "tiles": st.tiles_done()[1]}))


def part2(work: Path, sizes, tile: int, workers: int):
    corpus = build_big(work, max(sizes))
    cfile = _cluster_file(work, workers)
    print(f"## Driver memory at growing n (SST, tile {tile}, {workers} local workers)\n")
    print("| n | tiles | wall (s) | pairs/s | driver peak RSS (MiB) |")
    print("|---:|---:|---:|---:|---:|")
    subprocess.run([sys.executable, __file__, "_driver", "--corpus", str(corpus), "--n", "0", "--out",
                    str(work / "big_warm.zarr"), "--tile", str(tile), "--cluster-file", str(cfile)],
                   check=True, capture_output=True)
    for n in sizes:
        out = work / f"big_n{n}.zarr"
        shutil.rmtree(out, ignore_errors=True)
        res = subprocess.run([sys.executable, __file__, "_driver", "--corpus", str(corpus), "--n", str(n),
                              "--out", str(out), "--tile", str(tile), "--cluster-file", str(cfile)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            print(res.stderr[-3000:], file=sys.stderr)
            raise SystemExit(res.returncode)
        r = json.loads(res.stdout.strip().splitlines()[-1])
        pairs = n * (n + 1) // 2
        print(f"| {n:,} | {r['tiles']} | {r['wall']:.1f} | {pairs / r['wall'] / 1e6:.2f} M | {r['rss_mib']:.0f} |",
              flush=True)
        shutil.rmtree(out, ignore_errors=True)
    print()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd")
    d = sub.add_parser("_driver")
    d.add_argument("--corpus")
    d.add_argument("--n", type=int)
    d.add_argument("--out")
    d.add_argument("--tile", type=int)
    d.add_argument("--cluster-file")
    p.add_argument("--workdir", default=None, help="where corpora and stores go (default: a temp dir)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--tiles", default="250,500,1000", help="tile sizes of part 1")
    p.add_argument("--sizes", default="5000,10000,20000", help="n values of part 2")
    p.add_argument("--big-tile", type=int, default=500)
    p.add_argument("--skip-big", action="store_true")
    p.add_argument("--skip-num", action="store_true")
    args = p.parse_args(argv)
    if args.cmd == "_driver":
        return _driver(args)
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="gramtile-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"<!-- bench/gram_engine.py on {platform.node()}, {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')} -->\n")
    if not args.skip_num:
        part1(work, [int(x) for x in args.tiles.split(",")], args.workers)
    if not args.skip_big:
        part2(work, [int(x) for x in args.sizes.split(",")], args.big_tile, args.workers)


if __name__ == "__main__":
    main()
