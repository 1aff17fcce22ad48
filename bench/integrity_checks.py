"""Cost of the integrity checks of the stores and batches, next to the work they guard.

- Batch validation (``kernels.batches.validate``, run once per Batch built) on the 5,483 NUM
  training trees, against encoding them and against the SST Gram block of 100 x 100 of them.
- The per-chunk checks of every Gram-store read (finite values, crc32c against the manifest) on
  float64 tiles of 100 x 100, against reading the same tiles back from a Zarr store.

Run: .venv/bin/python bench/integrity_checks.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import zarr

from gramtile.kernels.batches import validate
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies
from gramtile.pipeline.stores.gram_format import tile_checksum

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "trec_qc_num_constituency" / "NUM_train.dat"


def best(f, repeats):
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        f()
        out.append(time.perf_counter() - t)
    return min(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    trees = [d.structures["tree"] for d in read(DATA, "svmlighttk")]
    b = encode(trees, Vocabularies())
    t_val = best(lambda: validate(b), a.repeats)
    t_enc = best(lambda: encode(trees, Vocabularies()), a.repeats)
    sst = as_spec({"kind": "sst", "lam": 0.4})
    x = b.slice(0, 100).readonly()
    sst.block(x, x)  # compile / load the core
    t_blk = best(lambda: sst.block(x, x), a.repeats)
    t_val100 = best(lambda: validate(b.slice(0, 100)), a.repeats)
    print(f"validate {b.n} trees ({int(b.offsets[-1])} nodes): {t_val * 1e3:.1f} ms; encoding them: "
          f"{t_enc * 1e3:.0f} ms ({t_val / t_enc:.1%})")
    print(f"validate a 100-tree batch (not on the tile path: slices of validated batches skip it): "
          f"{t_val100 * 1e3:.2f} ms; its SST 100 x 100 block: {t_blk * 1e3:.1f} ms "
          f"({t_val100 / t_blk:.1%})")

    tiles = np.random.default_rng(0).random((64, 100, 100))
    with tempfile.TemporaryDirectory() as d:
        z = zarr.create_array(str(Path(d) / "K"), shape=(6400, 100), chunks=(100, 100), dtype="float64")
        z[...] = tiles.reshape(6400, 100)
        t_read = best(lambda: [np.asarray(z[k * 100:(k + 1) * 100]) for k in range(64)], a.repeats)
    t_fin = best(lambda: [np.isfinite(v).all() for v in tiles], a.repeats)
    t_crc = best(lambda: [tile_checksum(v) for v in tiles], a.repeats)
    mb = tiles.nbytes / 1e6
    print(f"64 tiles of 100 x 100 ({mb:.1f} MB): Zarr read {t_read * 1e3:.1f} ms, isfinite {t_fin * 1e3:.1f} ms "
          f"({t_fin / t_read:.1%}), crc32c {t_crc * 1e3:.1f} ms ({t_crc / t_read:.1%})")


if __name__ == "__main__":
    main()
