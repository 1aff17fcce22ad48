"""The bag-of-words kernel's sparse rows (kernels/bag_kernels.py): every example's sorted distinct
symbol ids and their counts, computed for the whole batch at once, against a per-example
reference on random batches (missing symbols, empty examples, offsets not starting at 0)."""
import numpy as np
import pytest

from gramtile.kernels.bag_kernels import sparse_rows
from gramtile.kernels.batches import Batch


def _reference(batch, column, binary):
    ptr, feats, weights = [0], [], []
    for e in range(batch.n):
        ids = batch.columns[column][batch.offsets[e]:batch.offsets[e + 1]]
        u, c = np.unique(ids[ids >= 0], return_counts=True)
        feats += u.tolist()
        weights += [1.0] * len(u) if binary else c.astype(float).tolist()
        ptr.append(ptr[-1] + len(u))
    return np.array(ptr), np.array(feats, dtype=np.int32), np.array(weights, dtype=float)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("binary", [True, False])
def test_sparse_rows_equal_a_per_example_count(seed, binary):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 30))
    lens = rng.integers(0, 9, size=n)
    lens[rng.random(n) < 0.2] = 0  # empty examples
    start = int(rng.integers(0, 3))
    offsets = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64) + start
    total = int(offsets[-1])
    tokens = rng.integers(-1, 12, size=total).astype(np.int32)  # -1: no symbol
    cols = {c: tokens if c == "token" else np.zeros(total, np.int32) for c in ("token", "lemma", "pos")}
    b = Batch.of_valid("seq", offsets, cols)
    got = sparse_rows(b, "tokens", binary)
    want = _reference(b, "token", binary)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert got[0].dtype == np.int64 and got[1].dtype == np.int32 and got[2].dtype == np.float64
