"""The run of ``gramtile features`` (its options and help: :mod:`gramtile.workflows.commands.features`)."""
from __future__ import annotations

from gramtile.kernels.registry import as_spec
from gramtile.pipeline.compute.feature_sets import write_store


def run(args) -> int:
    meta = write_store(args.corpus, as_spec(args.kernel), args.out)
    print(f"{args.out}: {meta['n_examples']} rows x {meta['n_features']} features, {meta['nnz']} non-zeros, "
          f"{len(meta['shards'])} shard(s)")
    return 0
