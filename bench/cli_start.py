"""How fast the command line starts: ``gramtile --version``, ``gramtile --help`` and every
``gramtile COMMAND --help``, each the wall time of a new process (the installed console script,
as a user runs it), the median of ``--repeat`` runs, with the load average beside it.

Usage::

    .venv/bin/python bench/cli_start.py [--repeat 7]

Prints a markdown table for BENCHMARKS.md.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from gramtile.workflows.cli import COMMANDS


def timed(argv, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = subprocess.run(argv, capture_output=True, text=True)
        runs.append(time.perf_counter() - t0)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {r.returncode}: {r.stderr[-500:]}")
    return statistics.median(runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    exe = Path(sys.executable).parent / "gramtile"
    base = [str(exe)] if exe.exists() else [sys.executable, "-m", "gramtile"]
    print(f"{datetime.date.today()}, load average {os.getloadavg()[0]:.2f} at start, median of {a.repeat} runs\n")
    print("| command | seconds |")
    print("|---|---:|")
    for extra in (["--version"], ["--help"], *([name, "--help"] for name in COMMANDS)):
        print(f"| `gramtile {' '.join(extra)}` | {timed(base + extra, a.repeat):.2f} |", flush=True)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
