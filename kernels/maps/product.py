"""The sparse part of a product-path block: ``K[a, b] = sum_f w_f X[a, f] Y[b, f]`` into a dense
block, from CSR rows of both sides.

SciPy multiplies two sparse matrices into a *sparse* result, which for a Gram block (most entries
non-zero) costs far more per entry than the products themselves. This core scatters each row's
features into the postings of an inverted index of the column side (feature -> column rows
holding it), so the work is exactly the sum over features of row-count x column-count
multiply-adds plus one pass over the block, as in the route core's block product.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def sparse_block(xp, xi, xv, yp, yi, yv, w, n_feat, symmetric, out):
    """Add ``X diag(w) Y^T`` (CSR arrays, indices int64, any order within a row) into the dense
    (nx, ny) block ``out``. With ``symmetric`` (Y is X) only b >= a is accumulated: the lower
    triangle is left as it was (:func:`mirror_upper` fills it)."""
    nx = xp.shape[0] - 1
    ny = yp.shape[0] - 1
    m = yi.shape[0]
    post_ptr = np.zeros(n_feat + 1, np.int64)
    for k in range(m):
        post_ptr[yi[k] + 1] += 1
    for f in range(n_feat):
        post_ptr[f + 1] += post_ptr[f]
    fill = post_ptr[:-1].copy()
    post_b = np.empty(m, np.int64)
    post_v = np.empty(m, np.float64)
    for b in range(ny):
        for k in range(yp[b], yp[b + 1]):
            f = yi[k]
            post_b[fill[f]] = b
            post_v[fill[f]] = yv[k]
            fill[f] += 1
    cursor = post_ptr[:-1].copy()
    for a in range(nx):
        row = out[a]
        for k in range(xp[a], xp[a + 1]):
            f = xi[k]
            v = xv[k] * w[f]
            q = cursor[f]
            if symmetric:
                # postings are sorted by column row: skip those left of the diagonal for good
                while q < post_ptr[f + 1] and post_b[q] < a:
                    q += 1
                cursor[f] = q
            for t in range(q, post_ptr[f + 1]):
                row[post_b[t]] += v * post_v[t]


@njit(cache=True, nogil=True)
def mirror_upper(K):
    """Copy the strict upper triangle of square K onto the lower one, in place, by 64 x 64 tiles
    (a transpose touching whole cache lines)."""
    n = K.shape[0]
    B = 64
    for i0 in range(0, n, B):
        for j0 in range(i0, n, B):
            for i in range(i0, min(i0 + B, n)):
                for j in range(max(j0, i + 1), min(j0 + B, n)):
                    K[j, i] = K[i, j]
