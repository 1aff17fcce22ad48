"""The copy of a stored tile's values into a block of K, as one Numba loop without the GIL.

:meth:`~gramtile.pipeline.stores.gram_view.GramView.block` assembles ``K[rows][:, cols]`` from
the tiles the positions fall in. NumPy's ``out[np.ix_(ri, ci)] = chunk[np.ix_(lr, lc)]`` makes a
temporary of the gathered values and scatters it again, holding the GIL; on a 3,290 x 3,290 block
of a 1,000-tile store it was half of the read's time and kept two learning threads from reading
at once (bench/learn_parallel.py, BENCHMARKS.md). :func:`gather` writes each value once, straight from the
chunk, and releases the GIL. A tile below the diagonal of a symmetric store is read from its
mirror above it without materialising the transpose. :func:`gather_scaled` divides by the row
and column norms on the way (the cosine normalisation), in the order and arithmetic of
:func:`gramtile.kernels.composite.normalize_block`, so the numbers are the same.
"""
from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True)
def gather(out, chunk, ri, ci, lr, lc, transposed):
    """``out[ri[i], ci[j]] = chunk[lr[i], lc[j]]`` (``transposed``: ``chunk[lc[j], lr[i]]``, i.e. the
    chunk holds the mirror tile of a symmetric store) for every i, j."""
    if transposed:
        for j in range(ci.size):
            cj = ci[j]
            row = chunk[lc[j]]
            for i in range(ri.size):
                out[ri[i], cj] = row[lr[i]]
    else:
        for i in range(ri.size):
            oi = ri[i]
            row = chunk[lr[i]]
            for j in range(ci.size):
                out[oi, ci[j]] = row[lc[j]]


# gather_scaled repeats gather's loops with the division inside: one function for both, with the
# division behind a flag, made the normalised copy (the learners' path) 22 % slower: 2.81 against
# 2.31 ms per 600 x 600 piece, plain and transposed, alternating in one process
@njit(cache=True, nogil=True)
def gather_scaled(out, chunk, ri, ci, lr, lc, transposed, sr, sc):
    """:func:`gather`, each value divided by ``sr[ri[i]]`` and then by ``sc[ci[j]]`` (the square
    roots of the self-kernels of the block's rows and columns)."""
    if transposed:
        for j in range(ci.size):
            cj = ci[j]
            s = sc[cj]
            row = chunk[lc[j]]
            for i in range(ri.size):
                oi = ri[i]
                out[oi, cj] = row[lr[i]] / sr[oi] / s
    else:
        for i in range(ri.size):
            oi = ri[i]
            r = sr[oi]
            row = chunk[lr[i]]
            for j in range(ci.size):
                cj = ci[j]
                out[oi, cj] = row[lc[j]] / r / sc[cj]
