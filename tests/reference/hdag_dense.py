"""The HDAG kernel's dense table recursion: the pair core of kernels/hdag.py up to commit ff36637,
kept verbatim as a second reference for the sparse core that replaced it.

It fills tables of shape (N1, N2, p+1) for E, H, J, J', M, JL, JL' and L over every node pair in
processing order, as docs/kernels.md, "HDAG kernel: Recursion" writes them (J' over s's parents,
then J over t's parents), with a flag per node pair saying which tables are non-zero there. The
explicit enumeration of tests/reference/hdag.py is exact but only reaches small HDAGs; this one
reaches large ones, and ``bench/trec_qc_hdag.py --compare`` times it against the current core in one
process. Its inputs are the arrays of :func:`gramtile.kernels.hdag.prepare`.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from gramtile.kernels.hdag import prepare

# Flags of a node pair (table NZ): which quantities are non-zero at some length. About 85 % of
# the node pairs of two parsed questions have H = 0 at every length (no shared attribute below
# them), and then M = 0 too; the flags let the core skip those terms instead of adding zeros.
_NZ_H, _NZ_JP, _NZ_J, _NZ_JLP, _NZ_JL, _NZ_E, _NZ_L = 1, 2, 4, 8, 16, 32, 64


@njit(cache=True, nogil=True)
def _gamma_table(G, head, nxt, own, n1, aptr2, aids2, b2, n2):
    """G[i, j] = |own attrs(i) & own attrs(j)| for all node pairs of two graphs.

    ``head`` (indexed by attribute id) and ``nxt`` / ``own`` hold, for the attributes of graph 1,
    linked lists of the nodes carrying them (built by :func:`_index_attrs`); each attribute of
    graph 2 walks its list, so the cost is the number of attribute occurrences plus matches, not
    N1 N2 sorted-list merges.
    """
    for i in range(n1):
        for j in range(n2):
            G[i, j] = 0.0
    for j in range(n2):
        for q in range(aptr2[b2 + j], aptr2[b2 + j + 1]):
            x = aids2[q]
            r = head[x]
            while r >= 0:
                G[own[r], j] += 1.0
                r = nxt[r]


@njit(cache=True, nogil=True)
def _index_attrs(head, nxt, own, aptr1, aids1, b1, n1, on):
    """Link (``on``) or unlink the attribute occurrences of graph 1 into ``head``/``nxt``/``own``."""
    base = aptr1[b1]
    for i in range(n1):
        for q in range(aptr1[b1 + i], aptr1[b1 + i + 1]):
            if on:
                own[q - base] = i
                nxt[q - base] = head[aids1[q]]
                head[aids1[q]] = q - base
            else:
                head[aids1[q]] = -1


@njit(cache=True, nogil=True)
def _pair(p, exact, b1, n1, b2, n2, P1, P2, G, NZ, E, H, J, Jp, M, JL, JLp, L):
    """K(G1, G2) for graphs with nodes b1..b1+n1-1 and b2..b2+n2-1 of the prepared arrays.

    ``P1``/``P2`` are the tuples returned by :func:`_prepare`; ``G`` holds Gamma of every node
    pair (:func:`_gamma_table`); NZ (uint8) and E..L are scratch tables of shape at least
    (n1, n2) and (n1, n2, p+1). A table's entries at a pair are written, and read, only where the
    pair's NZ flag for it is set; an unset flag stands for zeros at every length. Only M is needed up to
    length p: M_k reads H_q and J_{k-q} with q, k-q <= p-1, J reads A up to p-1, and S reads L at
    the length of the H it builds, so every other table stops at p-1.
    """
    par1, D1, U1, B1, C1, aptr1, aids1, pptr1, pidx1, iptr1, iidx1 = P1
    par2, D2, U2, B2, C2, aptr2, aids2, pptr2, pidx2, iptr2, iidx2 = P2
    q1 = p - 1
    K = 0.0
    for i in range(n1):
        g1 = b1 + i
        in_lo1, in_hi1 = iptr1[g1], iptr1[g1 + 1]
        pa_lo1, pa_hi1 = pptr1[g1], pptr1[g1 + 1]
        inner1 = par1[g1] >= 0
        for j in range(n2):
            gam = G[i, j]
            if p == 1:  # one-node features only: Gamma
                K += gam
                continue
            if not exact:
                K += gam
            g2 = b2 + j
            in_lo2, in_hi2 = iptr2[g2], iptr2[g2 + 1]
            pa_lo2, pa_hi2 = pptr2[g2], pptr2[g2 + 1]
            # item kernels: S (groups formed here), E (t hands an item up), H (s hands one up);
            # each term is added only from pairs flagged non-zero
            nz = 0
            if gam != 0.0:
                nz = _NZ_E
                E[i, j, 1] = gam
                for k in range(2, q1 + 1):
                    E[i, j, k] = 0.0
            if q1 >= 2:
                for x in range(in_lo1, in_hi1):
                    si = iidx1[x]
                    bs = B1[b1 + si]
                    for y in range(in_lo2, in_hi2):
                        tj = iidx2[y]
                        if NZ[si, tj] & _NZ_L:
                            if not nz & _NZ_E:
                                nz = _NZ_E
                                for k in range(1, q1 + 1):
                                    E[i, j, k] = 0.0
                            w = bs * B2[b2 + tj]
                            for k in range(2, q1 + 1):
                                E[i, j, k] += w * L[si, tj, k]
            for y in range(in_lo2, in_hi2):
                tj = iidx2[y]
                if NZ[i, tj] & _NZ_E:
                    if not nz & _NZ_E:
                        nz = _NZ_E
                        for k in range(1, q1 + 1):
                            E[i, j, k] = 0.0
                    w = C2[b2 + tj]
                    for k in range(1, q1 + 1):
                        E[i, j, k] += w * E[i, tj, k]
            if nz & _NZ_E:
                nz |= _NZ_H
                for k in range(1, q1 + 1):
                    H[i, j, k] = E[i, j, k]
            for x in range(in_lo1, in_hi1):
                si = iidx1[x]
                if NZ[si, j] & _NZ_H:
                    if not nz & _NZ_H:
                        nz |= _NZ_H
                        for k in range(1, q1 + 1):
                            H[i, j, k] = 0.0
                    w = C1[b1 + si]
                    for k in range(1, q1 + 1):
                        H[i, j, k] += w * H[si, j, k]
            # sequence sums, top mode: J' walks back over s's parents, J over t's parents
            for x in range(pa_lo1, pa_hi1):
                si = pidx1[x]
                f = NZ[si, j]
                if f & (_NZ_H | _NZ_JP):
                    if not nz & _NZ_JP:
                        nz |= _NZ_JP
                        for k in range(1, q1 + 1):
                            Jp[i, j, k] = 0.0
                    d = D1[b1 + si]
                    if f & _NZ_JP:
                        for k in range(1, q1 + 1):
                            Jp[i, j, k] += d * Jp[si, j, k]
                    if f & _NZ_H:
                        for k in range(1, q1 + 1):
                            Jp[i, j, k] += H[si, j, k] + M[si, j, k]
            for y in range(pa_lo2, pa_hi2):
                tj = pidx2[y]
                f = NZ[i, tj]
                if f & (_NZ_J | _NZ_JP):
                    if not nz & _NZ_J:
                        nz |= _NZ_J
                        for k in range(1, q1 + 1):
                            J[i, j, k] = 0.0
                    d = D2[b2 + tj]
                    if f & _NZ_J:
                        for k in range(1, q1 + 1):
                            J[i, j, k] += d * J[i, tj, k]
                    if f & _NZ_JP:
                        for k in range(1, q1 + 1):
                            J[i, j, k] += Jp[i, tj, k]
            if nz & _NZ_H:  # M = sum H J is 0 unless H is non-zero (A = H + M is read only then)
                M[i, j, 1] = 0.0
                for k in range(2, p + 1):
                    m = 0.0
                    if nz & _NZ_J:
                        for q in range(1, k):
                            m += H[i, j, q] * J[i, j, k - q]
                    M[i, j, k] = m
                    if k == p or not exact:
                        K += m
            # lead mode (first chosen pair also weighted by U U): only inner pairs feed S
            if inner1 and par2[g2] >= 0:
                u2 = U2[g2]
                for x in range(pa_lo1, pa_hi1):
                    si = pidx1[x]
                    f = NZ[si, j]
                    if f & (_NZ_H | _NZ_JLP):
                        if not nz & _NZ_JLP:
                            nz |= _NZ_JLP
                            for k in range(1, q1 + 1):
                                JLp[i, j, k] = 0.0
                        if f & _NZ_JLP:
                            d = D1[b1 + si]
                            for k in range(1, q1 + 1):
                                JLp[i, j, k] += d * JLp[si, j, k]
                        if f & _NZ_H:
                            w = U1[b1 + si] * u2
                            for k in range(1, q1 + 1):
                                JLp[i, j, k] += w * H[si, j, k]
                            if f & _NZ_L:
                                for k in range(2, q1 + 1):
                                    JLp[i, j, k] += L[si, j, k]
                for y in range(pa_lo2, pa_hi2):
                    tj = pidx2[y]
                    f = NZ[i, tj]
                    if f & (_NZ_JL | _NZ_JLP):
                        if not nz & _NZ_JL:
                            nz |= _NZ_JL
                            for k in range(1, q1 + 1):
                                JL[i, j, k] = 0.0
                        d = D2[b2 + tj]
                        if f & _NZ_JL:
                            for k in range(1, q1 + 1):
                                JL[i, j, k] += d * JL[i, tj, k]
                        if f & _NZ_JLP:
                            for k in range(1, q1 + 1):
                                JL[i, j, k] += JLp[i, tj, k]
                if nz & _NZ_H and nz & _NZ_JL and q1 >= 2:  # L = sum H JL, read by S at lengths >= 2
                    nz |= _NZ_L
                    for k in range(2, q1 + 1):
                        m = 0.0
                        for q in range(1, k):
                            m += H[i, j, q] * JL[i, j, k - q]
                        L[i, j, k] = m
            NZ[i, j] = nz
    return K


@njit(cache=True, nogil=True)
def _scratch(m1, m2, p):
    """Gamma, NZ, then E, H, J, J', M, JL, JL', L tables for graphs of up to m1 and m2 nodes."""
    sh = (max(m1, 1), max(m2, 1), p + 1)
    return (np.empty(sh[:2]), np.empty(sh[:2], dtype=np.uint8), np.empty(sh), np.empty(sh), np.empty(sh), np.empty(sh),
            np.empty(sh), np.empty(sh), np.empty(sh), np.empty(sh))


@njit(cache=True, nogil=True)
def _eval(p, exact, b1, n1, b2, n2, P1, P2, head, nxt, own, T):
    """K of one pair of graphs; graph 1's attributes are linked into head/nxt/own."""
    G, NZ, E, H, J, Jp, M, JL, JLp, L = T
    _gamma_table(G, head, nxt, own, n1, P2[5], P2[6], b2, n2)
    return _pair(p, exact, b1, n1, b2, n2, P1, P2, G, NZ, E, H, J, Jp, M, JL, JLp, L)


@njit(cache=True, nogil=True)
def _max_size(nptr):
    m = 0
    for e in range(nptr.shape[0] - 1):
        m = max(m, nptr[e + 1] - nptr[e])
    return m


@njit(cache=True, nogil=True)
def _attr_index(aids1, aids2):
    """Scratch for :func:`_gamma_table`: ``head`` over every attribute id of both sides (-1 =
    empty list) and per-occurrence ``nxt``/``own``, sized for all of side 1's occurrences."""
    top = 0
    for q in range(aids1.shape[0]):
        top = max(top, aids1[q] + 1)
    for q in range(aids2.shape[0]):
        top = max(top, aids2[q] + 1)
    m = max(aids1.shape[0], 1)
    return np.full(top, -1, dtype=np.int64), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)


@njit(cache=True, nogil=True)
def _block(p, exact, nptr1, P1, nptr2, P2, symmetric):
    na = nptr1.shape[0] - 1
    nb = nptr2.shape[0] - 1
    T = _scratch(_max_size(nptr1), _max_size(nptr2), p)
    head, nxt, own = _attr_index(P1[6], P2[6])
    aptr1, aids1 = P1[5], P1[6]
    out = np.empty((na, nb))
    for x in range(na):
        b1, n1 = nptr1[x], nptr1[x + 1] - nptr1[x]
        _index_attrs(head, nxt, own, aptr1, aids1, b1, n1, True)
        start = x if symmetric else 0
        for y in range(start, nb):
            v = _eval(p, exact, b1, n1, nptr2[y], nptr2[y + 1] - nptr2[y], P1, P2, head, nxt, own, T)
            out[x, y] = v
            if symmetric:
                out[y, x] = v
        _index_attrs(head, nxt, own, aptr1, aids1, b1, n1, False)
    return out


@njit(cache=True, nogil=True)
def _diag(p, exact, nptr, P):
    n = nptr.shape[0] - 1
    m = _max_size(nptr)
    T = _scratch(m, m, p)
    head, nxt, own = _attr_index(P[6], P[6])
    aptr, aids = P[5], P[6]
    out = np.empty(n)
    for x in range(n):
        b, size = nptr[x], nptr[x + 1] - nptr[x]
        _index_attrs(head, nxt, own, aptr, aids, b, size, True)
        out[x] = _eval(p, exact, b, size, b, size, P, P, head, nxt, own, T)
        _index_attrs(head, nxt, own, aptr, aids, b, size, False)
    return out


def dense_block(X, Y, lam, p, exact=False):
    """K(X, Y) (``Y=None``: K(X, X), symmetric) by the dense recursion."""
    n1, P1, _ = prepare(X, lam)
    if Y is None:
        return _block(p, exact, n1, P1, n1, P1, True)
    n2, P2, _ = prepare(Y, lam)
    return _block(p, exact, n1, P1, n2, P2, False)


def dense_diag(X, lam, p, exact=False):
    """K(x, x) for each example of X by the dense recursion."""
    n1, P1, _ = prepare(X, lam)
    return _diag(p, exact, n1, P1)
