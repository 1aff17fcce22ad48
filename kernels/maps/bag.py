"""Feature map of the bag-of-words kernel: one feature per symbol (or stored bag feature), value
its count, presence or stored weight, weight 1 (docs/kernels.md, "Feature maps")."""
from __future__ import annotations

import numpy as np

from gramtile.kernels.bag_kernels import sparse_rows
from gramtile.kernels.maps import FeatureMap, LocalFeatures, flat_features, register_map


def _local(spec, batch) -> LocalFeatures:
    ptr, feat, weight = sparse_rows(batch, spec.on, spec.binary)
    ex = np.repeat(np.arange(batch.n, dtype=np.int64), np.diff(ptr))
    return flat_features(ex, feat.astype(np.int64).reshape(-1, 1), weight, batch.n)


BOW = register_map(FeatureMap(
    kind="bow", admits=lambda spec: None, local=_local,
    params=lambda spec: {"rep": spec.rep_name, "on": spec.on, "binary": spec.binary},
    base=lambda spec: 1.0))
