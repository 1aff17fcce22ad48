"""Size of a feature map's corpus vocabulary, shard by shard (the bound of the product path).

For a kernel with a feature map (``kernels/maps``), the product path first builds the corpus
feature set, whose vocabulary holds every distinct feature key. This script enumerates the
first ``--shards`` shards of a corpus store as the build does (``fmap.local`` per shard,
``FeatureVocab.intern``) and prints, after each shard: the occurrences the map enumerates (the
subsequence map's, from ``occurrences``; the CSR non-zeros otherwise), the distinct features so
far and their ratio, and the resident memory the vocabulary takes per feature (RSS growth over
the interning, the shards' local features excluded). With the corpus's total occurrences
(printed first, for the subsequence map) this gives the vocabulary of the whole corpus.

Usage::

    .venv/bin/python bench/feature_vocab.py --corpus SCALE/real.zarr --shards 6 \\
        --kernel '{"kind": "subsequence", "n": 3, "lam": 0.5}'
"""
from __future__ import annotations

import argparse
import gc
import json

from gramtile.kernels.maps import feature_map
from gramtile.kernels.maps.subsequence import occurrences
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.compute.feature_sets import FeatureVocab
from gramtile.pipeline.stores.corpus_store import CorpusStore


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--kernel", default='{"kind": "subsequence", "n": 3, "lam": 0.5}')
    ap.add_argument("--shards", type=int, default=6)
    a = ap.parse_args()
    spec = spec_from_dict(json.loads(a.kernel))
    fmap = feature_map(spec)
    if fmap is None:
        raise SystemExit(f"--kernel {a.kernel}: this kernel has no feature map")
    cs = CorpusStore.open(a.corpus)
    rep = spec.rep_name
    if spec.kind == "subsequence":
        print(f"corpus: {cs.n:,} examples, {occurrences(spec, cs.sizes(rep)):,} occurrences in all")
    vocab = FeatureVocab()
    grown = 0
    occ = 0
    for k, (lo, hi) in enumerate(cs.shard_ranges[:a.shards]):
        batch = cs.load(rep, int(lo), int(hi))
        lf = fmap.local(spec, batch)
        occ += occurrences(spec, batch.sizes()) if spec.kind == "subsequence" else int(lf.idx.shape[0])
        gc.collect()
        r0 = rss()
        vocab.intern(lf)
        gc.collect()
        grown += rss() - r0
        print(f"shard {k}: rows {int(hi):,}, occurrences {occ:,}, distinct features {len(vocab):,} "
              f"({len(vocab) / max(occ, 1):.3f} per occurrence), vocabulary {grown / 2**20:,.0f} MiB "
              f"({grown / max(len(vocab), 1):.0f} B per feature)", flush=True)


if __name__ == "__main__":
    main()
