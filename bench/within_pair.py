"""The within-pair similarity kernel over the SICK training pairs: its similarities s(p) = K(p.a,
p.b) one example at a time (the generic :meth:`BaseSpec.paired`) against one pass of the kernel's
core (the kernel's own ``paired``), and its Gram store against a field kernel's store, through
the engine.

Workload: the 4,500 pairs of ``sick2014/SICK_train.txt`` parsed by spaCy into a corpus store
(``prepare --format sick2014``, once, in ``--workdir``). For each base kernel (SST lam 0.4 on
``tree``, bag of words on ``seq``):

- similarities: ``BaseSpec.paired`` (one block per pair) and the kernel's ``paired``, best of
  ``--repeat``, on the whole corpus's batches; equal to the last bit (checked);
- stores: ``run_gram`` of ``within_pair`` and of the field kernel over ``a`` into fresh stores,
  ``--cluster threads``, default tile; wall seconds.

Usage::

    .venv/bin/python bench/within_pair.py --workdir DIR [--repeat 3]
"""
from __future__ import annotations

import argparse
import datetime
import os
import shutil
import time
from pathlib import Path

import numpy as np
from _timing import best_of  # bench/_timing.py (bench/ is on sys.path)

from gramtile.kernels.registry import as_spec
from gramtile.kernels.spec import BaseSpec
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.inmemory import batch_for
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.stores.corpus_store import CorpusStore

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
BASES = {"SST": {"kind": "sst", "lam": 0.4}, "BOW": {"kind": "bow"}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", required=True, type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    corpus = args.workdir / "sick-train.zarr"
    if not corpus.exists():
        prepare(DATA / "sick2014" / "SICK_train.txt", "sick2014", corpus, cluster="local")
    cs = CorpusStore.open(corpus)
    docs = cs.documents()
    print(f"# within_pair, {cs.n} SICK training pairs, {datetime.date.today()}, load {os.getloadavg()[0]:.1f}")
    print("| base | similarities one pair at a time (s) | one pass (s) | speed-up | within-pair store (s) | "
          "field store K(a1, a2) (s) |")
    print("|---|---|---|---|---|---|")
    for name, base in BASES.items():
        spec = as_spec({"kind": "within_pair", "kernel": base, "fields": ["a", "b"]})
        inner = spec.kernel
        v = Vocabularies()
        data = batch_for({r: encode([d.structures[r] for d in docs], v) for r in spec.rep_names}, spec)
        xa, xb = (data[r] for r in spec.rep_names)
        t_loop, s_loop = best_of(lambda: BaseSpec.paired(inner, xa, xb), args.repeat)
        t_pass, s_pass = best_of(lambda: inner.paired(xa, xb), args.repeat)
        assert np.array_equal(s_loop, s_pass), f"{name}: paired differs from the one-pair-at-a-time values"
        stores = {}
        for what, sp in (("within", spec), ("field", {**base, "rep": f"a.{'tree' if name == 'SST' else 'seq'}"})):
            out = args.workdir / f"{name}-{what}.zarr"
            shutil.rmtree(out, ignore_errors=True)
            t = time.perf_counter()
            run_gram(corpus, sp, out, cluster=Runtime.of("threads", progress=False))
            stores[what] = time.perf_counter() - t
        print(f"| {name} | {t_loop:.2f} | {t_pass:.3f} | {t_loop / t_pass:.0f}x | {stores['within']:.1f} | "
              f"{stores['field']:.1f} |")
    print(f"load after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
