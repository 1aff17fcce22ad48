"""Benchmark of the tiled Gram engine; prints markdown for BENCHMARKS.md.

1. The full 5,483 x 5,483 SST Gram matrix of NUM_train.dat through `gramtile gram` commands (each
   a fresh process: executor + Zarr store + done bits + log) on 2 workers of the ``local`` (Dask
   LocalCluster of worker processes) and ``threads`` (a thread pool of the driver, no Dask)
   profiles, for several tile sizes,
   against the one-process, kernel-only time of the same matrix (the fastest of ``spec.block`` on
   the whole batch and on the same tiles, in this process, after Numba is initialised), and
   against the same kernel-only computation run as a command of its own (``_kernel_only``: a
   fresh process timed start to exit, which pays the same interpreter start, imports and Numba
   initialisation as a ``gramtile gram`` command). Target: engine / kernel-only <= 0.6 (parallel
   efficiency >= 83 %).
2. A large corpus (PTB WSJ sample + NUM train/test + KeLP GRCT/LCT question trees, written to one
   JSON-lines file and prepared into one corpus store) computed at growing n, each run in a fresh
   driver process whose peak RSS (VmHWM) is recorded. Target: <= 1 GB, flat in n. With
   ``--big-kernel-only`` the largest n is also computed kernel-only in this process, giving the
   parallel efficiency at that size.

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

from gramtile.pipeline.compute.runtime import Runtime

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SST = '{"kind": "sst", "lam": 0.4}'


def _cluster_file(work: Path, workers: int) -> Path:
    p = work / "cluster.yaml"
    p.write_text(f"profiles:\n  local: {{n_workers: {workers}, threads_per_worker: 1, memory_limit: 3GiB, "
                 f"dashboard_address: ':0'}}\n"
                 f"  threads: {{type: threads, n_workers: {workers}}}\n")
    return p


def _prepare(src, fmt, out):
    from gramtile.pipeline.compute.prepare import prepare

    if not (Path(out) / "zarr.json").exists():
        prepare(src, fmt, out, shard_size=1000, cluster="sequential")
    return out


def _upper_tiles(spec, X, tile: int):
    """The upper triangle of K(X, X) block by block, tiles of ``tile``, kernel only (results dropped)."""
    n = X.n
    parts = [X.slice(a, min(a + tile, n)) for a in range(0, n, tile)]
    for i in range(len(parts)):
        for j in range(i, len(parts)):
            spec.block(parts[i]) if i == j else spec.block(parts[i], parts[j])


def _kernel_only_command(args):
    """One-process kernel-only program, run as its own command: load the trees, compute the upper
    triangle in tiles of ``args.tile`` with the kernel alone (no Dask, no Zarr output), exit the way
    ``gramtile`` does (``os._exit`` after flushing). Timed from outside, start to exit, it pays the
    same interpreter start, numpy/numba/zarr imports and Numba initialisation as a ``gramtile gram``
    command, so command / kernel-only command isolates what Dask, the Gram store and the second
    worker add or save."""
    from gramtile.kernels.registry import as_spec
    from gramtile.pipeline.stores.corpus_store import CorpusStore

    cs = CorpusStore.open(args.corpus)
    _upper_tiles(as_spec(SST), cs.load("tree", 0, cs.n), args.tile)
    sys.stdout.flush()
    os._exit(0)


def _time_kernel_only_command(corpus, tile: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(max(repeats, 1)):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, __file__, "_kernel_only", "--corpus", str(corpus), "--tile", str(tile)],
                       check=True, capture_output=True)
        best = min(best, time.perf_counter() - t0)
    return best


def part1(work: Path, tiles, workers: int, profiles=("local", "threads"), repeats: int = 1):
    from gramtile.kernels.registry import as_spec
    from gramtile.pipeline.compute.engine import run_gram
    from gramtile.pipeline.stores.corpus_store import CorpusStore
    from gramtile.pipeline.stores.gram_store import GramStore

    corpus = _prepare(DATA / "trec_qc_num_constituency" / "NUM_train.dat", "svmlighttk", work / "num.zarr")
    cs = CorpusStore.open(corpus)
    n = cs.n
    spec = as_spec(SST)
    X = cs.load("tree", 0, n)
    spec.block(X.slice(0, 50))  # JIT / cache load outside the timing
    t0, c0 = time.perf_counter(), time.process_time()
    K1 = spec.block(X)
    t_whole, c_whole = time.perf_counter() - t0, time.process_time() - c0
    # the same upper triangle block by block in this process: tiles that fit the CPU caches are
    # faster than one whole-batch call, so the fairest one-process baseline is the fastest of these
    singles = {"whole batch": (t_whole, c_whole)}
    for t in tiles:
        t0, c0 = time.perf_counter(), time.process_time()
        _upper_tiles(spec, X, t)
        singles[f"tiles of {t}"] = (time.perf_counter() - t0, time.process_time() - c0)
    best = min(singles, key=lambda k: singles[k][0])
    t_kernel, c_kernel = singles[best]
    cmd_times = {t: _time_kernel_only_command(corpus, t, repeats) for t in tiles}
    t_cmd = min(cmd_times.values())
    pairs = n * (n + 1) // 2
    print(f"## Tiled SST Gram, NUM_train.dat ({n:,} x {n:,}), {workers} local workers\n")
    load = os.getloadavg()[0]
    print("One process, kernel only (no Dask, no Zarr; upper triangle + diagonal), load average "
          f"{load:.1f}: " + "; ".join(f"{k} {w:.2f} s wall / {c:.2f} s CPU" for k, (w, c) in singles.items())
          + f". Baseline = the fastest, {best}: **{t_kernel:.2f} s** ({pairs / t_kernel / 1e6:.2f} M distinct "
          "pairs/s).\n")
    print("The same kernel-only computation as a command of its own (`bench/gram_engine.py _kernel_only`, a fresh "
          "process timed from start to exit: interpreter start, imports, corpus load, Numba initialisation, the "
          "tiles, exit; best of the repeats): " + "; ".join(f"tiles of {t} {w:.2f} s" for t, w in cmd_times.items())
          + f". Command baseline = **{t_cmd:.2f} s**.\n")
    print("Each row is one `gramtile gram --corpus num.zarr --kernel '{\"kind\": \"sst\", \"lam\": 0.4}' "
          "--tile T --cluster P` command in a fresh process. 'command' is its whole wall time (interpreter "
          "start, imports, store creation, cluster start and shutdown included); 'run' spans the run's "
          "start and end records in log.jsonl (cluster start-up and shutdown included, interpreter start and "
          "imports not); 'tiles' runs from the start of the first finished tile task to the last recorded "
          "tile. 'task CPU' sums the tile tasks' thread CPU time over the kernel-only CPU time: the engine's "
          "overhead independently of other load.\n")
    print("| profile | tile | tiles | command (s) | run (s) | tiles phase (s) | command / kernel-only "
          "| run / kernel-only | tiles / kernel-only | command / kernel-only command | task CPU / kernel-only CPU "
          "| max rel. diff |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    cfile = _cluster_file(work, workers)
    exe = str(Path(sys.executable).parent / "gramtile")
    rows = []
    for prof in profiles:
        # warm-up run: Numba compiles (and caches on disk) the signatures the workers need, so the
        # timed runs measure the engine, not one-off compilation
        warm = work / "warmup.zarr"
        shutil.rmtree(warm, ignore_errors=True)
        run_gram(corpus, SST, warm, rows="0:400", tile=100, cluster=Runtime(prof, cfile))
        shutil.rmtree(warm, ignore_errors=True)
        for t in tiles:
            for rep in range(repeats):
                out = work / f"sst_{prof}_t{t}.zarr"
                shutil.rmtree(out, ignore_errors=True)
                t0 = time.perf_counter()
                subprocess.run([exe, "gram", "--corpus", str(corpus), "--kernel", SST, "--out", str(out),
                                "--tile", str(t), "--cluster", prof, "--cluster-file", str(cfile),
                                "--no-progress"], check=True, capture_output=True)
                wall = time.perf_counter() - t0
                st = GramStore.open(out)
                log = st.read_log()
                tile_recs = [r for r in log if r["event"] == "tile"]
                start = [r for r in log if r["event"] == "start"][-1]["time"]
                end = [r for r in log if r["event"] == "end"][-1]["time"]
                first = min(tile_recs, key=lambda r: r["time"])
                tiles_span = max(r["time"] for r in tile_recs) - (first["time"] - first["seconds"])
                run = end - start
                K = st.view().block()
                rel = float(np.max(np.abs(K - K1) / np.maximum(np.abs(K1), 1e-300)))
                cpu = sum(r.get("cpu_seconds", 0.0) for r in tile_recs)
                rows.append((prof, t, wall, run))
                print(f"| {prof} | {t} | {len(tile_recs)} | {wall:.2f} | {run:.2f} | {tiles_span:.2f} "
                      f"| {wall / t_kernel:.2f} | {run / t_kernel:.2f} | {tiles_span / t_kernel:.2f} "
                      f"| {wall / t_cmd:.2f} | {cpu / c_kernel:.2f} | {rel:.1e} |", flush=True)
                del K
                shutil.rmtree(out, ignore_errors=True)
    print()
    return t_kernel, rows


def build_big(work: Path, limit: int) -> Path:
    """PTB + NUM train/test + KeLP GRCT and LCT trees as one JSON-lines file, prepared once."""
    from gramtile.pipeline.parsing.formats import read
    from gramtile.pipeline.readers.jsonl import write_jsonl
    from gramtile.pipeline.representations.structures import Document

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
    from gramtile.pipeline.compute.engine import run_gram

    if args.n <= 0:  # warm-up: compile and cache the kernels for the workers
        warm = Path(args.out)
        run_gram(args.corpus, SST, warm, rows="0:300", tile=100, cluster=Runtime(args.profile, args.cluster_file))
        shutil.rmtree(warm, ignore_errors=True)
        print(json.dumps({}))
        return

    t0 = time.perf_counter()
    st = run_gram(args.corpus, SST, args.out, rows=f"0:{args.n}", tile=args.tile, cluster=Runtime(args.profile, args.cluster_file))
    wall = time.perf_counter() - t0
    rss_kib = _peak_rss_kib()
    print(json.dumps({"n": args.n, "wall": wall, "rss_mib": rss_kib / 1024, "tiles": st.tiles_done()[1]}))


def part2(work: Path, sizes, tile: int, workers: int, kernel_only: bool = False, profile: str = "local"):
    corpus = build_big(work, max(sizes))
    cfile = _cluster_file(work, workers)
    print(f"## Driver memory at growing n (SST, tile {tile}, {workers} workers, profile {profile})\n")
    print("| n | tiles | wall (s) | pairs/s | driver peak RSS (MiB) |")
    print("|---:|---:|---:|---:|---:|")
    subprocess.run([sys.executable, __file__, "_driver", "--corpus", str(corpus), "--n", "0", "--out",
                    str(work / "big_warm.zarr"), "--tile", str(tile), "--cluster-file", str(cfile),
                    "--profile", profile], check=True, capture_output=True)
    for n in sizes:
        out = work / f"big_n{n}.zarr"
        shutil.rmtree(out, ignore_errors=True)
        res = subprocess.run([sys.executable, __file__, "_driver", "--corpus", str(corpus), "--n", str(n),
                              "--out", str(out), "--tile", str(tile), "--cluster-file", str(cfile),
                              "--profile", profile],
                             capture_output=True, text=True)
        if res.returncode != 0:
            print(res.stderr[-3000:], file=sys.stderr)
            raise SystemExit(res.returncode)
        r = json.loads(res.stdout.strip().splitlines()[-1])
        pairs = n * (n + 1) // 2
        print(f"| {n:,} | {r['tiles']} | {r['wall']:.1f} | {pairs / r['wall'] / 1e6:.2f} M | {r['rss_mib']:.0f} |",
              flush=True)
        last = (n, r["wall"])
        shutil.rmtree(out, ignore_errors=True)
    print()
    if kernel_only:
        from gramtile.kernels.registry import as_spec
        from gramtile.pipeline.stores.corpus_store import CorpusStore

        n, wall = last
        spec = as_spec(SST)
        X = CorpusStore.open(corpus).load("tree", 0, n)
        spec.block(X.slice(0, 50))
        # the same tiles in one process, no Dask, no Zarr (faster than one whole-batch call)
        t0 = time.perf_counter()
        _upper_tiles(spec, X, tile)
        tk = time.perf_counter() - t0
        print(f"Kernel-only, one process (the same tiles of {tile}, no Dask, no Zarr), n = {n:,}: {tk:.1f} s; "
              f"`gramtile gram` on {workers} workers {wall:.1f} s = {wall / tk:.2f}x, parallel efficiency "
              f"{tk / (workers * wall):.0%}.\n")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd")
    d = sub.add_parser("_driver")
    d.add_argument("--corpus")
    d.add_argument("--n", type=int)
    d.add_argument("--out")
    d.add_argument("--tile", type=int)
    d.add_argument("--cluster-file")
    d.add_argument("--profile", default="local")
    k = sub.add_parser("_kernel_only")
    k.add_argument("--corpus")
    k.add_argument("--tile", type=int)
    p.add_argument("--workdir", default=None, help="where corpora and stores go (default: a temp dir)")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--tiles", default="500,1000,1500", help="tile sizes of part 1")
    p.add_argument("--profiles", default="local,threads", help="cluster profiles of part 1 (local = worker "
                   "processes, threads = worker threads of the driver process)")
    p.add_argument("--repeats", type=int, default=1, help="runs per profile and tile size in part 1")
    p.add_argument("--sizes", default="5000,10000,20000", help="n values of part 2")
    p.add_argument("--big-tile", type=int, default=500)
    p.add_argument("--skip-big", action="store_true")
    p.add_argument("--big-profile", default="local", help="cluster profile of part 2")
    p.add_argument("--big-kernel-only", action="store_true",
                   help="also time the largest n of part 2 kernel-only in one process (efficiency)")
    p.add_argument("--skip-num", action="store_true")
    args = p.parse_args(argv)
    if args.cmd == "_driver":
        return _driver(args)
    if args.cmd == "_kernel_only":
        return _kernel_only_command(args)
    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="gramtile-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"<!-- bench/gram_engine.py on {platform.node()}, {os.cpu_count()} CPUs, python "
          f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')} -->\n")
    if not args.skip_num:
        part1(work, [int(x) for x in args.tiles.split(",")], args.workers, args.profiles.split(","), args.repeats)
    if not args.skip_big:
        part2(work, [int(x) for x in args.sizes.split(",")], args.big_tile, args.workers, args.big_kernel_only,
              args.big_profile)


if __name__ == "__main__":
    main()
