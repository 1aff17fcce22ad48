"""Small Numba helpers over CSR pointer arrays, shared by the kernel cores."""
from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True)
def max_run(ptr):
    """Largest ``ptr[k + 1] - ptr[k]`` (at least 1): the biggest example or child list of a CSR
    array, used to size per-block scratch."""
    m = 1
    for k in range(ptr.shape[0] - 1):
        d = ptr[k + 1] - ptr[k]
        if d > m:
            m = d
    return m
