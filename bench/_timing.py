"""Timing shared by the kernel benchmarks in bench/ (imported as ``_timing``: each script runs
with bench/ on ``sys.path``)."""
from __future__ import annotations

import os
import subprocess
import time


def best_of(fn, repeat: int):
    """Best wall time of ``repeat`` calls of ``fn`` and the last call's result: ``(seconds, result)``."""
    t_best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        t_best = min(t_best, time.perf_counter() - t)
    return t_best, out


def best_block_times(spec, X, Y, repeat: int, square=None):
    """Best of ``repeat`` runs of ``spec.block(square)`` (default ``X``) and ``spec.block(X, Y)``.

    Wall time, and CPU time of this process (the fairer figure on a shared, loaded machine).

    Returns
    -------
    (wall_sq, cpu_sq, wall_rect, cpu_rect, K_sq) : the square block of the last run is returned
    for scripts that report on its entries.
    """
    sq = X if square is None else square
    wall_sq = cpu_sq = wall_rect = cpu_rect = float("inf")
    K = None
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        K = spec.block(sq)
        wall_sq, cpu_sq = min(wall_sq, time.perf_counter() - t), min(cpu_sq, time.process_time() - c)
        t, c = time.perf_counter(), time.process_time()
        spec.block(X, Y)
        wall_rect, cpu_rect = min(wall_rect, time.perf_counter() - t), min(cpu_rect, time.process_time() - c)
    return wall_sq, cpu_sq, wall_rect, cpu_rect, K


def print_rates(n_sq: int, nx: int, ny: int, wall_sq, cpu_sq, wall_rect, cpu_rect):
    """The two result lines (square block over distinct pairs, rectangular block) per core."""
    pairs_sq = n_sq * (n_sq + 1) // 2
    print(f"square {n_sq}x{n_sq}: {pairs_sq / wall_sq / 1e6:.2f} M evaluations/s per core "
          f"({pairs_sq} distinct pairs in {wall_sq:.3f} s; {pairs_sq / cpu_sq / 1e6:.2f} M/s of process CPU time)")
    print(f"rectangular {nx}x{ny}: {nx * ny / wall_rect / 1e6:.2f} M evaluations/s per core "
          f"({nx * ny} pairs in {wall_rect:.3f} s; {nx * ny / cpu_rect / 1e6:.2f} M/s of process CPU time)")


def run_measured(cmd, env=None, cwd=None):
    """Run a command to completion; return (wall seconds, rusage of the child, its stderr), or exit showing its stderr."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    err = p.stderr.read()
    if status != 0:
        raise SystemExit(f"{' '.join(map(str, cmd))} failed:\n{err}")
    return wall, ru, err
