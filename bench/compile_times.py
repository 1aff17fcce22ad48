"""First-run (cold Numba cache) cost of each kernel family, as a fresh install meets it.

For every kernel below, two new Python processes each call ``gramtile.gram(spec, X)`` once on 8
small seeded examples (the contract-test generators of ``tests/``): the first with an empty
``NUMBA_CACHE_DIR`` (the cores compile), the second with the cache the first one wrote (the
cores load). ``compile`` = cold first call - warm first call.

``--first-tile`` times the demo's first SST tile as a fresh install meets it: the demo corpus is
prepared once (spaCy, outside the timing), then for each profile (``sequential``: in-process;
``local``: the demo's LocalCluster of 2 worker processes, started before the clock as the demo
does) a new process with an empty ``NUMBA_CACHE_DIR`` runs ``run_gram`` for the demo's SST spec
(tile 64) and reports the seconds from the call to the first tile recorded, and to the last; a
second process with the cache the first wrote gives the warm figures. The process's import time
(gramtile, the engine) is reported beside them.

``--demo`` times ``gramtile demo`` in a fresh cache: the whole demo's wall time cold and warm.
Prints markdown tables for BENCHMARKS.md.

Usage::

    .venv/bin/python bench/compile_times.py [--kinds st,sst,...] [--first-tile] [--demo]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

KERNELS = {
    "st": {"kind": "st", "lam": 0.4},
    "sst": {"kind": "sst", "lam": 0.4},
    "pt": {"kind": "pt", "lam": 0.4, "mu": 0.4},
    "route": {"kind": "route"},
    "dependency_path": {"kind": "dependency_path"},
    "relation_subtree": {"kind": "relation_subtree"},
    "subsequence": {"kind": "subsequence"},
    "hdag": {"kind": "hdag"},
    "bow": {"kind": "bow"},
    "syntagmatic": {"kind": "syntagmatic"},
    "domain": {"kind": "domain"},
}

CHILD = r"""
import json, random, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[3])
import gramtile
from test_contracts import GENERATORS, INSTANCES
t_import = time.perf_counter() - t0
spec = json.loads(sys.argv[1])
gens = {json.dumps(d, sort_keys=True): g for d, g in INSTANCES}
gen = gens[json.dumps(spec, sort_keys=True)]
rng = random.Random(0)
X = [GENERATORS[gen](rng) for _ in range(8)]
t1 = time.perf_counter()
gramtile.gram(spec, X)
t_first = time.perf_counter() - t1
t2 = time.perf_counter()
gramtile.gram(spec, X)
print(json.dumps({"import": t_import, "first": t_first, "second": time.perf_counter() - t2}))
"""


FIRST_TILE = r"""
import contextlib, json, sys, time
t0 = time.perf_counter()
import gramtile
from gramtile.pipeline.compute.engine import run_gram
from gramtile.workflows.recipes.demo import BASE_KERNELS
from gramtile.pipeline.compute.runtime import Runtime
t_import = time.perf_counter() - t0
corpus, out, cluster = sys.argv[1:4]
first = []
with Runtime(cluster) as rt, rt.session():
    t1 = time.perf_counter()
    run_gram(corpus, BASE_KERNELS["sst"], out, tile=64, cluster=rt,
             on_tile=lambda res: first.append(time.perf_counter()))
    t2 = time.perf_counter()
print(json.dumps({"import": t_import, "first_tile": first[0] - t1, "all_tiles": t2 - t1, "tiles": len(first)}))
"""


def first_tile(corpus, cache, out, cluster):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    r = subprocess.run([sys.executable, "-c", FIRST_TILE, str(corpus), str(out), cluster],
                       env=env, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(r.stdout.strip().splitlines()[-1])


def prepare_demo_corpus(d):
    """The demo corpus store (parsed with spaCy once; its own throwaway Numba cache)."""
    from gramtile.workflows.recipes.demo import demo_corpus_path
    env = {**os.environ, "NUMBA_CACHE_DIR": str(d / "prepare-cache")}
    subprocess.run([str(Path(sys.executable).parent / "gramtile"), "prepare", "--input", str(demo_corpus_path()),
                    "--format", "tsv", "--out", str(d / "corpus.zarr"), "--shard-size", "100",
                    "--cluster", "sequential", "--no-progress"], env=env, check=True, capture_output=True)
    return d / "corpus.zarr"


def load():
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def child(spec, cache):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    r = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec), str(cache), str(REPO / "tests")],
                       env=env, capture_output=True, text=True, check=True, cwd=REPO)
    return json.loads(r.stdout.strip().splitlines()[-1])


def demo(cache, out):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    t = time.perf_counter()
    subprocess.run([str(Path(sys.executable).parent / "gramtile"), "demo", "--out", str(out), "--no-progress"],
                   env=env, check=True, capture_output=True, cwd=out.parent)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kinds", default=",".join(KERNELS))
    ap.add_argument("--first-tile", action="store_true",
                    help="also time the demo's first SST tile, cold and warm (sequential and local)")
    ap.add_argument("--demo", action="store_true", help="also time `gramtile demo` cold and warm")
    args = ap.parse_args()
    rows = []
    for kind in filter(None, args.kinds.split(",")):
        with tempfile.TemporaryDirectory() as d:
            cold = child(KERNELS[kind], Path(d))
            warm = child(KERNELS[kind], Path(d))
        rows.append((kind, cold["first"], warm["first"], cold["first"] - warm["first"], cold["import"]))
        print(f"{kind}: cold {cold['first']:.1f} s, warm {warm['first']:.3f} s", file=sys.stderr)
    print(f"\n{datetime.date.today()}, Python {platform.python_version()}, {os.cpu_count()} CPUs; "
          f"`python bench/compile_times.py`; load average {load()}\n")
    if rows:
        print("| kernel | first call, cold cache (s) | first call, warm cache (s) | compile (s) |")
        print("|---|---|---|---|")
        for kind, c, w, comp, _ in rows:
            print(f"| {kind} | {c:.1f} | {w:.3f} | {comp:.1f} |")
    if args.first_tile:
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            corpus = prepare_demo_corpus(d)
            print("\n| demo SST, tile 64 | cache | import (s) | first tile (s) | all tiles (s) | load |")
            print("|---|---|---|---|---|---|")
            for cluster in ("sequential", "local"):
                cache = d / f"cache-{cluster}"
                for which in ("cold", "warm"):
                    r = first_tile(corpus, cache, d / f"gram-{cluster}-{which}.zarr", cluster)
                    print(f"| {cluster} | {which} | {r['import']:.2f} | {r['first_tile']:.2f} | "
                          f"{r['all_tiles']:.2f} ({r['tiles']} tiles) | {load()} |", flush=True)
    if args.demo:
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            cold = demo(d / "cache", d / "demo-cold")
            warm = demo(d / "cache", d / "demo-warm")
        print(f"\n`gramtile demo` wall time: cold cache {cold:.1f} s, warm cache {warm:.1f} s")


if __name__ == "__main__":
    main()
