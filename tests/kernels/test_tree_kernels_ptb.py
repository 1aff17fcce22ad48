"""SST on PTB trees (the NUM training trees of ../shared/data): nothing changed with issue 19.

Label-only productions (the default since issue 19) and leaf-typed ones (``typed_leaves``, the
earlier SST) differ only where a label is a leaf in one place and an internal node in another;
PTB leaves are words, so the two kernels must agree bitwise here.
"""
import numpy as np
from conftest import num_trees

from gramtile.kernels.tree_kernels import SubsetTreeKernel
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies


def test_label_only_sst_equals_the_leaf_typed_sst_on_num_trees():
    trees = [d.structures["tree"] for d in num_trees(800)]
    X = encode(trees, Vocabularies())
    A, B = X.slice(0, 400), X.slice(400, 800)
    for lam, leaves in [(0.4, False), (1.0, True)]:
        new = SubsetTreeKernel(lam=lam, leaves=leaves)
        old = SubsetTreeKernel(lam=lam, leaves=leaves, typed_leaves=True)
        assert new.spec_hash != old.spec_hash
        assert np.array_equal(new.block(A), old.block(A))
        assert np.array_equal(new.block(A, B), old.block(A, B))
        assert np.array_equal(new.diag(X), old.diag(X))
        assert np.count_nonzero(new.block(A, B)) > 0.5 * A.n * B.n  # a real comparison, not of zeros
