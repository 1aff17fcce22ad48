"""Product path against the pairwise core through the engine on a large corpus store.

``bench/features.py`` compares the two paths on full in-memory matrices of about 5,000
examples; at 50,000 examples a dense K is 20 GB, so this script compares them where they are
used, in ``run_gram``: the same command (``threads``, tile 1000) once with ``--path pairwise``
and once with ``--path product`` (the feature set is built inside the product run, its time
included), one after the other in this process, wall and process CPU time of each (every
worker thread's CPU counts: ``threads`` runs in this process). Then both stores are read tile
row by tile row and compared: the largest relative difference of any entry (``|a - b| /
max(|a|, |b|)``, 0 where both are 0) and the largest absolute difference of the normalised
matrices. The stores are deleted afterwards unless ``--keep``.

``--sample R`` (with ``--seed S``) compares the paths on a rectangular block instead: R rows drawn
at random (seeded) from ``--rows`` against R other rows drawn from the rest, an unbiased sample of
the full matrix's pairs, for kernels whose full pairwise Gram at this n takes too long to run;
both paths are first warmed up on an 8 x 8 block (compiling their cores and building the
feature set over the whole corpus, whose time is printed apart), then timed; the per-pair CPU
cost of each path and the full matrix's time at those costs are printed, and the full matrix's
CPU speed-up with the feature set's build (the product warm-up's CPU time) added to the product
path (extrapolations, labelled as such).

Usage::

    .venv/bin/python bench/features_scale.py --corpus SCALE/all2.zarr --rows 0:50068 \\
        --kernel '{"kind": "st", "lam": 0.4, "rep": "tree"}' --workdir WORKDIR
    .venv/bin/python bench/features_scale.py --corpus SCALE/real.zarr --rows 0:50068 --sample 3000 \\
        --kernel '{"kind": "subsequence", "n": 3, "lam": 0.5}' --workdir WORKDIR
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from gramtile.pipeline.cache import Cache
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.tiles import parse_selection


def timed_gram(corpus, spec, out: Path, rows, path: str, tile: int, cols=None):
    shutil.rmtree(out, ignore_errors=True)
    t, c = time.perf_counter(), time.process_time()
    st = run_gram(corpus, spec, out, rows=rows, cols=cols, tile=tile, cluster="threads", path=path)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    log = st.read_log()
    chosen = [p["path"] for r in log if r.get("event") == "tile" for p in r.get("paths", [])]
    build = sum(m["build_seconds"] for r in log if r.get("event") == "start"
                for m in r.get("feature_sets", {}).values())
    return st, wall, cpu, {k: chosen.count(k) for k in sorted(set(chosen))}, build


def compare(a: GramStore, b: GramStore, band: int):
    """(max relative difference of raw K, max absolute difference of normalised K), by row bands."""
    va, vb = a.view(), b.view()
    n = va.shape[0]
    da, ca = va.diag()
    db, cb = vb.diag()
    rel = absn = 0.0
    for lo in range(0, n, band):
        hi = min(lo + band, n)
        A, B = va.block(slice(lo, hi), None), vb.block(slice(lo, hi), None)
        scale = np.maximum(np.abs(A), np.abs(B))
        d = np.abs(A - B)
        rel = max(rel, float(np.max(np.where(scale > 0, d / np.where(scale > 0, scale, 1), 0.0))))
        na = A / np.sqrt(np.outer(da[lo:hi], ca))
        nb = B / np.sqrt(np.outer(db[lo:hi], cb))
        absn = max(absn, float(np.max(np.abs(na - nb))))
    return rel, absn


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--rows", default="all")
    ap.add_argument("--kernel", default='{"kind": "st", "lam": 0.4, "rep": "tree"}')
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--tile", type=int, default=1000)
    ap.add_argument("--keep", action="store_true", help="keep both Gram stores")
    ap.add_argument("--sample", type=int, default=0, help="compare on R random rows x R other random rows")
    ap.add_argument("--seed", type=int, default=0, help="seed of --sample")
    a = ap.parse_args()
    spec = json.loads(a.kernel)
    wd = Path(a.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    rows, cols = a.rows, None
    if a.sample:
        pool = parse_selection(a.rows, CorpusStore.open(a.corpus).n, "--rows")
        pick = np.random.default_rng(a.seed).choice(pool, 2 * a.sample, replace=False)
        rows, cols = np.sort(pick[:a.sample]), np.sort(pick[a.sample:])
    warm = 0.0
    if a.sample:  # compile both paths' cores and build the corpus feature set before timing
        with Cache().active() as cache:
            for path in ("pairwise", "product"):
                _, _, cpu, _, build = timed_gram(a.corpus, spec, wd / "warm.zarr", rows[:8], path, a.tile, cols[:8])
                warm += build
        if cache.counts("feature-meta").get("built", 0):
            warm_cpu = cpu  # the product warm-up: the feature set's build and an 8 x 8 block
            print(f"warm-up: feature set built in {warm:.1f} s wall, product warm-up {warm_cpu:.1f} s process CPU "
                  f"(in the corpus store from now on)")
        else:  # built by an earlier run: its recorded build time (wall) stands in for its CPU
            warm_cpu = warm
            print(f"warm-up: the feature set was already in the corpus store (its recorded build: {warm:.1f} s "
                  f"wall, used below as its CPU time)")
    print(f"load before: {os.getloadavg()[0]:.2f}")
    res = {}
    for path in ("pairwise", "product"):
        st, wall, cpu, chosen, build = timed_gram(a.corpus, spec, wd / f"{path}.zarr", rows, path, a.tile, cols)
        res[path] = st
        built = "" if a.sample or path == "pairwise" else f" (the feature set's recorded build time: {build:.1f} s)"
        print(f"{path}: {st.shape[0]} x {st.shape[1]}, wall {wall:.1f} s, process CPU {cpu:.1f} s{built}, "
              f"tiles by path {chosen or 'pairwise (forced)'}, "
              f"load now {os.getloadavg()[0]:.2f}", flush=True)
        res[path + "_t"] = (wall, cpu, build)
    rel, absn = compare(res["product"], res["pairwise"], a.tile)
    (wp, cp, _), (wq, cq, _) = res["pairwise_t"], res["product_t"]
    print(f"speed-up product over pairwise: wall {wp / wq:.2f}x, CPU {cp / cq:.2f}x; "
          f"max relative difference of K {rel:.2e}, of normalised K (absolute) {absn:.2e}")
    if a.sample:
        pairs = float(a.sample) ** 2
        n = len(parse_selection(a.rows, CorpusStore.open(a.corpus).n, "--rows"))
        full = n * (n + 1) / 2
        print(f"per pair, process CPU: pairwise {cp / pairs * 1e6:.3f} us, product {cq / pairs * 1e6:.3f} us; at "
              f"these costs the full {n:,}-row matrix would take about {cp / pairs * full:,.0f} (pairwise) and "
              f"{cq / pairs * full:,.0f} (product) CPU s (extrapolations, not runs)")
        print(f"with the feature set's build ({warm_cpu:.1f} CPU s, once per corpus) added to the product path: "
              f"full-matrix CPU speed-up about {cp / pairs * full / (cq / pairs * full + warm_cpu):.2f}x (extrapolation)")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    if not a.keep:
        for path in ("pairwise", "product", "warm"):
            shutil.rmtree(wd / f"{path}.zarr", ignore_errors=True)


if __name__ == "__main__":
    main()
