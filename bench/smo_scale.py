"""Exact SVM (smo) under a row cache smaller than K(train, train): one `gramtile evaluate`.

Runs ``gramtile -v evaluate --gram G --folds K --C 1 --normalized --solver smo --cache-mb MB
--scratch WORKDIR [--cluster PROFILE]`` in a child process and reports its wall time, user and
system CPU, peak RSS (``os.wait4``), the load average over the run (sampled every 15 s), and the
phases the command logs: the kernel row file written (``learn/rowfile.py``), each fold's fits
per one-vs-rest problem (its fits along the C grid: iterations, row reads, cache hit rate,
support vectors, prediction); then the accuracy from
results.json. ``--solver libsvm`` (or any other evaluate options after ``--``) runs the same
evaluation for comparison.

    .venv/bin/python bench/smo_scale.py --gram SCALE/full50k/st.zarr --workdir WORKDIR --cache-mb 3000
    .venv/bin/python bench/smo_scale.py --gram G --workdir WORKDIR -- --solver libsvm
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

FITS = re.compile(r"smo (.+?), class (.+?): (\d+) C, (\d+) iterations, (\d+) row reads, hit rate ([\d.]+), "
                  r"([\d.]+) s; prediction of (\d+) on (\d+) support vectors ([\d.]+) s")
WRITTEN = re.compile(r"kernel rows written in ([\d.]+) s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gram", required=True)
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--cache-mb", default="3000")
    ap.add_argument("--cluster", default=None)
    ap.add_argument("extra", nargs="*", help="more evaluate options (after --), e.g. --solver libsvm")
    a = ap.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    out = a.workdir / f"out-smo-scale-{int(time.time())}"
    cmd = [sys.executable, "-m", "gramtile", "-v", "evaluate", "--gram", a.gram, "--folds", str(a.folds), "--C", "1",
           "--normalized", "--folds-dir", str(a.workdir), "--out", str(out), "--no-progress"]
    if not any(x == "--solver" for x in a.extra):
        cmd += ["--solver", "smo", "--cache-mb", a.cache_mb, "--scratch", str(a.workdir)]
    if a.cluster:
        cmd += ["--cluster", a.cluster]
    cmd += a.extra
    print("command:", " ".join(cmd), flush=True)
    loads, stop = [os.getloadavg()[0]], threading.Event()

    def sample():
        while not stop.wait(15):
            loads.append(os.getloadavg()[0])

    threading.Thread(target=sample, daemon=True).start()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    for line in p.stderr:
        stamp = time.perf_counter() - t0
        lines.append((stamp, line.rstrip()))
        print(f"[{stamp:8.1f} s] {line.rstrip()}", flush=True)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    stop.set()
    loads.append(os.getloadavg()[0])
    if status != 0:
        raise SystemExit(f"evaluate failed (status {status})")
    res = json.loads((out / "results.json").read_text())
    row = res["rows"][0]
    print()
    print(f"wall {wall:.1f} s, user {ru.ru_utime:.1f} s, system {ru.ru_stime:.1f} s, peak RSS "
          f"{ru.ru_maxrss / 1024:.0f} MiB; load (1 min) at start {loads[0]:.2f}, mean {sum(loads) / len(loads):.2f}, "
          f"max {max(loads):.2f}, at end {loads[-1]:.2f}")
    print(f"accuracy {row['accuracy']:.4f} (std {row.get('accuracy_std', 0):.4f}), solver {res.get('solver')}")
    for _, ln in lines:
        m = WRITTEN.search(ln)
        if m:
            print(f"row file written in {m.group(1)} s")
    print("| split | class | C values | iterations | row reads | hit rate | fits s | n_test | support vectors | "
          "prediction s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for _, ln in lines:
        m = FITS.search(ln)
        if m:
            print("| " + " | ".join(m.groups()) + " |")


if __name__ == "__main__":
    main()
