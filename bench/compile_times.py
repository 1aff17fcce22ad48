"""First-run (cold Numba cache) cost of each kernel family, as a fresh install meets it.

For every kernel below, two new Python processes each call ``gramtile.gram(spec, X)`` once on 8
small seeded examples (the contract-test generators of ``tests/``): the first with an empty
``NUMBA_CACHE_DIR`` (the cores compile), the second with the cache the first one wrote (the
cores load). ``compile`` = cold first call - warm first call. Then ``gramtile demo`` is timed in
a fresh cache: its log line "first tile" is not printed, so the figure is the whole demo's wall
time cold and warm. Prints a markdown table for BENCHMARKS.md.

Usage::

    .venv/bin/python bench/compile_times.py [--kinds st,sst,...] [--demo]
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
    ap.add_argument("--demo", action="store_true", help="also time `gramtile demo` cold and warm")
    args = ap.parse_args()
    rows = []
    for kind in args.kinds.split(","):
        with tempfile.TemporaryDirectory() as d:
            cold = child(KERNELS[kind], Path(d))
            warm = child(KERNELS[kind], Path(d))
        rows.append((kind, cold["first"], warm["first"], cold["first"] - warm["first"], cold["import"]))
        print(f"{kind}: cold {cold['first']:.1f} s, warm {warm['first']:.3f} s", file=sys.stderr)
    print(f"\n{datetime.date.today()}, Python {platform.python_version()}, {os.cpu_count()} CPUs; "
          f"`python bench/compile_times.py`\n")
    print("| kernel | first call, cold cache (s) | first call, warm cache (s) | compile (s) |")
    print("|---|---|---|---|")
    for kind, c, w, comp, _ in rows:
        print(f"| {kind} | {c:.1f} | {w:.3f} | {comp:.1f} |")
    if args.demo:
        with tempfile.TemporaryDirectory() as d:
            d = Path(d)
            cold = demo(d / "cache", d / "demo-cold")
            warm = demo(d / "cache", d / "demo-warm")
        print(f"\n`gramtile demo` wall time: cold cache {cold:.1f} s, warm cache {warm:.1f} s")


if __name__ == "__main__":
    main()
