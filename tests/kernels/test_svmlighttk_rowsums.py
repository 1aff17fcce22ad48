"""ST, SST and PT on 5,483 real constituency trees against SVM-Light-TK 1.5.

For every training tree of NUM_train.dat, the row sum of the normalised Gram matrix
K(x_i, x_j) / sqrt(K(x_i, x_i) K(x_j, x_j)) must equal SVM-Light-TK's printed value
(svmlighttk_rowsums_F0/F1/F3.txt, 8 significant digits) to 1e-6 relative, on every line.
The full matrix (15 M evaluations per kernel) is computed tile by tile over i <= j, the way
the tiled pipeline does, so memory stays at one tile.

SVM-Light-TK's PT only sums child subsequences of length <= 5 (``MAX_CHILDREN`` in its
svm_common.h), hence ``max_length=5``: without it 2 of the 5,483 rows (trees with 13-19
children under one node) differ by more than 1e-6.
"""
import numpy as np
import pytest
from conftest import require_data

from gramtile.kernels.composite import normalize_block
from gramtile.kernels.tree_kernels import PartialTreeKernel, SubsetTreeKernel, SubtreeKernel
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies

TILE = 1024


@pytest.fixture(scope="module")
def num_train():
    d = require_data("trec_qc_num_constituency")
    trees = []
    with open(d / "NUM_train.dat", encoding="utf-8") as f:
        for line in f:
            a, b = line.index("|BT|"), line.index("|ET|")
            trees.append(parse_tree(line[a + 4:b]))
    assert len(trees) == 5483
    return d, encode(trees, Vocabularies())


def normalized_row_sums(spec, X, tile=TILE):
    d = spec.diag(X)
    parts = [X.slice(a, min(a + tile, X.n)) for a in range(0, X.n, tile)]
    rows = np.zeros(X.n)
    for bi, A in enumerate(parts):
        a = bi * tile
        for bj in range(bi, len(parts)):
            B, b = parts[bj], bj * tile
            K = spec.block(A) if bi == bj else spec.block(A, B)
            N = normalize_block(K, d[a:a + A.n], d[b:b + B.n])
            rows[a:a + A.n] += N.sum(axis=1)
            if bj != bi:
                rows[b:b + B.n] += N.sum(axis=0)
    return rows


@pytest.mark.parametrize("spec,ref_file", [
    (SubtreeKernel(lam=0.4), "svmlighttk_rowsums_F0.txt"),
    (SubsetTreeKernel(lam=0.4), "svmlighttk_rowsums_F1.txt"),
    (PartialTreeKernel(lam=0.4, mu=0.4, max_length=5), "svmlighttk_rowsums_F3.txt"),
], ids=["st", "sst", "pt"])
def test_normalized_row_sums_equal_svmlighttk(num_train, spec, ref_file):
    d, X = num_train
    ref = np.loadtxt(d / ref_file)
    assert ref.shape == (X.n,)
    rows = normalized_row_sums(spec, X)
    rel = np.abs(rows - ref) / np.abs(ref)
    worst = int(np.argmax(rel))
    assert rel.max() <= 1e-6, f"line {worst + 1}: {rows[worst]!r} vs SVM-Light-TK {ref[worst]!r}"
