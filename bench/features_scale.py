"""Product path against the pairwise core through the engine on a large corpus store (issue 18, 5a).

``bench/features.py`` compares the two paths on full in-memory matrices of about 5,000
examples; at 50,000 examples a dense K is 20 GB, so this script compares them where they are
used, in ``run_gram``: the same command (``threads``, tile 1000) once with ``--path pairwise``
and once with ``--path product`` (the feature set is built inside the product run, its time
included), one after the other in this process, wall and process CPU time of each (every
worker thread's CPU counts: ``threads`` runs in this process). Then both stores are read tile
row by tile row and compared: the largest relative difference of any entry (``|a - b| /
max(|a|, |b|)``, 0 where both are 0) and the largest absolute difference of the normalised
matrices. The stores are deleted afterwards unless ``--keep``.

Usage::

    .venv/bin/python bench/features_scale.py --corpus SCALE/all2.zarr --rows 0:50068 \\
        --kernel '{"kind": "st", "lam": 0.4, "rep": "tree"}' --workdir WORKDIR
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.stores.feature_store import clear_cache
from gramtile.pipeline.stores.gram_store import GramStore


def timed_gram(corpus, spec, out: Path, rows, path: str, tile: int):
    shutil.rmtree(out, ignore_errors=True)
    clear_cache()
    t, c = time.perf_counter(), time.process_time()
    st = run_gram(corpus, spec, out, rows=rows, tile=tile, cluster="threads", progress=False, path=path)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    chosen = [p["path"] for r in st.read_log() if r.get("event") == "tile" for p in r.get("paths", [])]
    return st, wall, cpu, {k: chosen.count(k) for k in sorted(set(chosen))}


def compare(a: GramStore, b: GramStore, band: int):
    """(max relative difference of raw K, max absolute difference of normalised K), by row bands."""
    va, vb = a.view(), b.view()
    n = va.shape[0]
    da, _ = va.diag()
    db, _ = vb.diag()
    rel = absn = 0.0
    for lo in range(0, n, band):
        hi = min(lo + band, n)
        A, B = va.block(slice(lo, hi), None), vb.block(slice(lo, hi), None)
        scale = np.maximum(np.abs(A), np.abs(B))
        d = np.abs(A - B)
        rel = max(rel, float(np.max(np.where(scale > 0, d / np.where(scale > 0, scale, 1), 0.0))))
        na = A / np.sqrt(np.outer(da[lo:hi], da))
        nb = B / np.sqrt(np.outer(db[lo:hi], db))
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
    a = ap.parse_args()
    spec = json.loads(a.kernel)
    wd = Path(a.workdir)
    wd.mkdir(parents=True, exist_ok=True)
    print(f"load before: {os.getloadavg()[0]:.2f}")
    res = {}
    for path in ("pairwise", "product"):
        st, wall, cpu, chosen = timed_gram(a.corpus, spec, wd / f"{path}.zarr", a.rows, path, a.tile)
        res[path] = st
        print(f"{path}: {st.shape[0]} x {st.shape[1]}, wall {wall:.1f} s, process CPU {cpu:.1f} s, "
              f"tiles by path {chosen or 'pairwise (forced)'}, load now {os.getloadavg()[0]:.2f}", flush=True)
        res[path + "_t"] = (wall, cpu)
    rel, absn = compare(res["product"], res["pairwise"], a.tile)
    (wp, cp), (wq, cq) = res["pairwise_t"], res["product_t"]
    print(f"speed-up product over pairwise: wall {wp / wq:.2f}x, CPU {cp / cq:.2f}x; "
          f"max relative difference of K {rel:.2e}, of normalised K (absolute) {absn:.2e}")
    print(f"load after: {os.getloadavg()[0]:.2f}")
    if not a.keep:
        for path in ("pairwise", "product"):
            shutil.rmtree(wd / f"{path}.zarr", ignore_errors=True)


if __name__ == "__main__":
    main()
