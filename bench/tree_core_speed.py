"""Tree kernel cores of several git revisions, timed in one process, and whether their K agree.

Each revision's ``kernels/tree_kernels.py`` (``git show REF:kernels/tree_kernels.py``) is loaded as
a module of its own (its spec classes are built with registration switched off, so they do not
collide with the installed ones) and run through its own spec's ``block``/``diag``, which
prepare the batches the way that revision does. Workload as in bench/tree_kernels.py: the first
N NUM_train trees, the full upper triangle of K in tiles (``block(A)`` on the diagonal tiles,
``block(A, B)`` above them) plus ``diag``. Revisions alternate within each of R rounds; the
figure kept is the best CPU time (process time of the block and diag calls only, compile time
excluded by a warm-up call) per revision and kernel. K of every revision is compared with the
first revision's: "bitwise" or the largest relative difference.

Usage::

    .venv/bin/python bench/tree_core_speed.py [--refs 46b3b88,HEAD] [--kernels st,sst,pt]
        [--n N] [--tile T] [--rounds R]

``--refs``: comma-separated revisions; "." stands for the working tree's file.

``--kernels``: any of st, sst, pt5 (PT, max_length 5), pt (expands to pt5, ptinf and ptspan),
ptinf (PT without a length limit), ptspan (PT, gap "span", no limit). lam = mu = 0.4.
Prints a markdown table.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import gramtile.kernels.spec as spec_module
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tree_kernels import DATA, read_trees  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

#: name: (spec class name, parameters)
KERNELS = {
    "st": ("SubtreeKernel", {"lam": 0.4}),
    "sst": ("SubsetTreeKernel", {"lam": 0.4}),
    "pt5": ("PartialTreeKernel", {"lam": 0.4, "mu": 0.4, "max_length": 5}),
    "ptinf": ("PartialTreeKernel", {"lam": 0.4, "mu": 0.4}),
    "ptspan": ("PartialTreeKernel", {"lam": 0.4, "mu": 0.4, "gap": "span"}),
}
GROUPS = {"pt": ["pt5", "ptinf", "ptspan"]}


def load_revision(ref, tmp):
    """(commit, module) for ``ref``'s kernels/tree_kernels.py, loaded under a fresh name
    (``ref`` "." is the working tree's file)."""
    if ref == ".":
        sha, src = "worktree", (REPO / "kernels" / "tree_kernels.py").read_text()
    else:
        sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short=7", ref], check=True,
                             capture_output=True, text=True).stdout.strip()
        src = subprocess.run(["git", "-C", str(REPO), "show", f"{sha}:kernels/tree_kernels.py"], check=True,
                             capture_output=True, text=True).stdout
    name = f"tree_kernels_{sha}"
    path = Path(tmp) / f"{name}.py"  # a file per revision: Numba caches by file and time stamp
    if not path.exists() or path.read_text() != src:
        path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up
    register = spec_module.register
    spec_module.register = lambda cls: cls  # the classes would clash with the installed kinds
    try:
        spec.loader.exec_module(mod)
    finally:
        spec_module.register = register
    return sha, mod


def triangle(kernel, parts):
    """Upper triangle of K (tiles i <= j) and diag; returns (K, CPU s of the block/diag calls)."""
    n = sum(p.n for p in parts)
    K = np.zeros((n, n))
    cpu = 0.0
    a = 0
    for bi, A in enumerate(parts):
        b = a
        for bj in range(bi, len(parts)):
            B = parts[bj]
            c = time.process_time()
            blk = kernel.block(A) if bi == bj else kernel.block(A, B)
            cpu += time.process_time() - c
            K[a:a + A.n, b:b + B.n] = blk
            b += B.n
        a += A.n
    c = time.process_time()
    d = kernel.diag(parts[0]) if len(parts) == 1 else np.concatenate([kernel.diag(p) for p in parts])
    cpu += time.process_time() - c
    if not np.array_equal(d, np.diag(K)):
        raise AssertionError("diag differs from the block diagonal")
    return K, cpu


def compare(K, K0):
    if np.array_equal(K, K0):
        return "bitwise"
    nz = K0 != 0
    rel = np.abs(K - K0)[nz] / np.abs(K0[nz])
    extra = np.abs(K[~nz]).max() if (~nz).any() else 0.0
    return f"max rel {rel.max():.1e}" + (f", {extra:.1e} where K0 = 0" if extra else "")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--refs", default="46b3b88,HEAD")
    p.add_argument("--kernels", default="st,sst,pt")
    p.add_argument("--n", type=int, default=None, help="the first N trees (default: all 5,483)")
    p.add_argument("--tile", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    names = [k for name in args.kernels.split(",") for k in GROUPS.get(name, [name])]

    trees = read_trees(DATA / "NUM_train.dat")
    n = len(trees) if args.n is None else min(args.n, len(trees))
    X = encode(trees[:n], Vocabularies())
    parts = [X.slice(a, min(a + args.tile, n)) for a in range(0, n, args.tile)]
    print(f"# Tree cores by revision: {n:,} NUM_train trees, tile {args.tile}, best of {args.rounds} rounds\n")
    print(f"- load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores; command: "
          f"`{' '.join([Path(sys.executable).name, *sys.argv])}`\n")
    tmp = Path(tempfile.gettempdir()) / "gramtile-tree-core-speed"
    tmp.mkdir(exist_ok=True)
    revs = [load_revision(r, tmp) for r in args.refs.split(",")]
    if True:
        print("| kernel | " + " | ".join(f"{r} ({sha}) CPU s" for r, (sha, _) in zip(args.refs.split(","), revs))
              + " | speed-up vs first | K vs first |")
        print("|---|" + "---|" * (len(revs) + 2))
        for name in names:
            cls, par = KERNELS[name]
            kernels = [getattr(mod, cls)(**par) for _, mod in revs]
            few = parts[0].slice(0, min(8, n))
            for k in kernels:  # compile or load the Numba cache of every core the timing calls
                k.block(few), k.block(few, few), k.diag(few)
            best = [float("inf")] * len(revs)
            same = [None] * len(revs)
            K0 = None
            for _ in range(args.rounds):
                for r, k in enumerate(kernels):
                    K, cpu = triangle(k, parts)
                    best[r] = min(best[r], cpu)
                    if r == 0:
                        K0 = K if K0 is None else K0
                    elif same[r] is None:
                        same[r] = compare(K, K0)
                    del K
            speed = ", ".join(f"{best[0] / b:.2f}x" for b in best[1:])
            print(f"| {name} `{kernels[0].to_json()}` | " + " | ".join(f"{b:.2f}" for b in best)
                  + f" | {speed} | {', '.join(same[1:])} |", flush=True)


if __name__ == "__main__":
    main()
