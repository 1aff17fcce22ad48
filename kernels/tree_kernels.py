"""Convolution tree kernels: subtree (ST), subset tree (SST) and partial tree (PT).

All three count common tree fragments, ``K(T1, T2) = sum_{n1 in T1, n2 in T2} Delta(n1, n2)``,
with leaves being childless nodes labelled by their word (docs/kernels.md, "Tree kernels: ST, SST, PT"):

A node's production is its label and its children's labels (Collins & Duffy; Aiolli et al. 2009),
leaf or not: the ``prod`` column of a tree batch holds its id (-1 for leaves).

- ST (Vishwanathan & Smola 2002, "Fast kernels for string and tree matching"; SVM-Light-TK's
  SST recursion with sigma = 0)::

      Delta(n1, n2) = 0                                   if n1 or n2 is a leaf or prod(n1) != prod(n2)
                    = lam * prod_j D_j                    otherwise,
      D_j = 1 when both j-th children are leaves, else Delta(ch_j(n1), ch_j(n2)).

  With ``leaves=True`` every pair of equal leaves adds lam too (a leaf is a complete subtree of
  one node): Vishwanathan & Smola count every complete subtree, and eq. (2) of Aiolli et al. 2009
  gives a pair of equal leaves (equal productions, no children) lam mu^2 = lam at mu = 1.

- SST (Collins & Duffy 2002, "New ranking algorithms for parsing and tagging")::

      Delta(n1, n2) = lam * prod_j (1 + Delta(ch_j(n1), ch_j(n2)))   if prod(n1) == prod(n2)
                    = 0                                              otherwise (and for leaves),

  so a matching pre-terminal pair gives lam. With ``leaves=True`` ("SST-bow", SVM-Light-TK
  ``-F 2``, KeLP's default) every pair of equal leaves adds lam as well.

  Equal productions may pair a leaf child with an internal child of the same label: its Delta
  is 0, a factor 1 + 0 in SST and D_j = 0 in ST (complete subtrees differ), so ST is the same
  whether or not productions tell leaves apart. ``typed_leaves=True`` (SST) gives such a pair
  different productions, Delta(n1, n2) = 0: the kernel gramtile computed before 2026-12.

- PT (Moschitti 2006, "Efficient convolution kernels for dependency and constituent syntactic
  trees")::

      Delta(n1, n2) = 0                                              if label(n1) != label(n2)
                    = mu lam^2 t                                     if n1 or n2 is childless
                    = mu (lam^2 + sum_{J1, J2, |J1| = |J2| >= 1} lam^{g(J1) + g(J2)}
                                  prod_i Delta(ch_{J1_i}(n1), ch_{J2_i}(n2)))   otherwise,

  where J1, J2 are increasing child index sequences, ``g(J)`` is the number of children skipped
  inside the span (``gap="gaps"``: J_last - J_first + 1 - |J|, Moschitti's fast algorithm and
  SVM-Light-TK) or the span itself (``gap="span"``: J_last - J_first, the paper's definition),
  and ``t`` is ``terminal_factor`` (KeLP). ``max_length`` optionally bounds |J| (SVM-Light-TK
  fixes it at 5, KeLP's maxSubseqLeng); by default subsequences of every length count.

Algorithm (Moschitti 2006). For each tree the nodes that can match (internal nodes for ST/SST,
keyed by production id; all nodes for PT, keyed by label id) are grouped by key once per batch.
For a row X_i of a block, X_i's groups are marked in a key-indexed table; each Y_j then looks its
groups up in the table (a join of the two sorted group lists that costs one lookup per group of
Y_j and skips non-matching groups without comparisons), so only matching node pairs are visited,
in decreasing preorder index of the first node: children come after their parent in preorder,
hence every child pair's Delta is final before its parents need it (PT instead marks Y_j's
groups that X_i shares and reads X_i's nodes downwards, which needs no sort). Delta values are memoised in
a table holding exactly the matching pairs of the current tree pair (row of ``n1`` + position of
``n2`` inside its group), so memory follows the number of matches, not a size cap.
PT sums over child subsequences of all lengths at once with an O(|ch1| |ch2|) dynamic programme
(no length index is needed because the weights do not depend on the subsequence length)::

      S[i, j] = Delta(c1_i, c2_j) * (1 + f * D[i-1, j-1])      (f = 1 for "gaps", lam^2 for "span")
      D[i, j] = sum_{i' <= i, j' <= j} lam^{(i - i') + (j - j')} S[i', j']
      Delta(n1, n2) = mu (lam^2 + sum_{i, j} S[i, j])

``S[i, j]`` sums the weights of all subsequence pairs ending at (i, j): extending a pair that ends
at (i', j') multiplies its weight by lam^{(i-i'-1) + (j-j'-1)} (skipped children) or by
lam^{(i-i') + (j-j')} (span growth), which is ``D`` shifted by one, times ``f``. ``D`` is kept
as a row prefix sum plus a column recurrence, so no subtraction (and no cancellation) occurs.

PT shortcuts, each giving the programme's result bit for bit. Only child pairs of equal labels
("matches") have S != 0. Per node a mask of its children's labels (bit label % 64) is kept; two
masks without a common bit mean no match, Delta = mu (lam^2 + 0) = mu lam^2. Otherwise the
matches are scanned in row-major order (the programme's), and:

- no match lies strictly below and right of another (none, one, or an antichain): every D read
  at a match is an exact 0 (sums and products of zeros), so each S is Delta * (1 + f * 0) =
  Delta exactly and the programme's acc is the row-major running sum of the matches' Delta; the
  length-limited programme adds the same first level, and its second level is 0;
- two matches (i1, j1), (i2, j2), i1 < i2, j1 < j2: the only non-zero D entries come from
  S1 = Delta1, and the one read at (i2, j2) is D[i2-1, j2-1] = S1 multiplied by lam
  (i2-i1-1) + (j2-j1-1) times in sequence (each step adds exact zeros), repeated here in the
  same order; then acc = S1 + Delta2 (1 + f p), or, length-limited (max_length >= 2),
  (S1 + Delta2) + (Delta2 f) p, the programmes' own expressions;
- otherwise the programme runs over the box from the first to the last matching row and from
  the smallest to the largest matching column: outside it S = 0, so D is 0 up to the box's
  top and left edges, entries right of or below it feed no match, and acc adds the same terms in
  the same order.

Which programme runs (length-limited or not) still depends on the fan-outs, not on the box.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from gramtile.kernels.errors import RepresentationError
from gramtile.kernels.spec import BaseSpec, register

# ---- per-batch grouping ----------------------------------------------------------------

def _group(offsets, key):
    """Group each example's nodes by ``key`` (nodes with key < 0 are left out).

    Plain NumPy (one stable sort of the whole batch): it runs once per batch, and as a Numba
    function its sort cost seconds of compilation on a first run.

    Parameters
    ----------
    offsets : int64 (n+1,)
    key : int32 (total_nodes,)

    Returns
    -------
    soff : int64 (n+1,)      start of each example in ``snode``
    snode : int32 (m,)       local node indices sorted by (key, node)
    uoff : int64 (n+1,)      start of each example's groups in ``ukey``/``ubeg``/``uend``
    ukey : int32 (u,)        group keys, increasing within an example
    ubeg, uend : int32 (u,)  group extent in the example's part of ``snode``
    gpos : int32 (total_nodes,)  a node's position inside its group, -1 if left out
    """
    n = offsets.shape[0] - 1
    total = key.shape[0]
    ex = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    keep = np.flatnonzero(key >= 0)
    kex = ex[keep]
    kkey = key[keep].astype(np.int64)
    # (example, key) in one int64; the stable sort keeps nodes increasing inside a group
    order = keep[np.argsort(kex * (int(kkey.max()) + 1 if kkey.size else 1) + kkey, kind="stable")]
    sex = ex[order]
    skey = key[order]
    m = order.shape[0]
    soff = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(sex, minlength=n), out=soff[1:])
    new = np.ones(m, bool)
    new[1:] = (skey[1:] != skey[:-1]) | (sex[1:] != sex[:-1])
    gstart = np.flatnonzero(new)
    gend = np.append(gstart[1:], m)
    gex = sex[gstart]
    uoff = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(gex, minlength=n), out=uoff[1:])
    grp = np.cumsum(new) - 1
    gpos = np.full(total, -1, np.int32)
    gpos[order] = np.arange(m) - gstart[grp]
    return (soff, (order - offsets[sex]).astype(np.int32), uoff, skey[gstart].astype(np.int32),
            (gstart - soff[gex]).astype(np.int32), (gend - soff[gex]).astype(np.int32), gpos)


def _index(batch, key_col):
    """The arrays a block core reads for one batch: CSR structure plus grouping by ``key_col``.

    Layout (a tuple, indices used by the cores): 0 offsets, 1 key column, 2 child_ptr,
    3 child_idx, 4 gpos, 5 soff, 6 snode, 7 uoff, 8 ukey, 9 ubeg, 10 uend.
    """
    off = np.ascontiguousarray(batch.offsets, dtype=np.int64)
    col = np.ascontiguousarray(batch.columns[key_col], dtype=np.int32)
    cp = np.ascontiguousarray(batch.child_ptr, dtype=np.int64)
    ci = np.ascontiguousarray(batch.child_idx, dtype=np.int32)
    soff, snode, uoff, ukey, ubeg, uend, gpos = _group(off, col)
    return (off, col, cp, ci, gpos, soff, snode, uoff, ukey, ubeg, uend)


def _compact_keys(*indexes):
    """The cores size their key table by the largest key id (a vocabulary id: dense in a corpus
    store, so the table is as long as the vocabulary). Ids far beyond the number of nodes, as a
    hand-built batch may carry, would make that table huge: they are renumbered jointly, keeping
    order and equality (and -1, "no key"), so the cores see the same matches in a small table."""
    cols = [ix[1] for ix in indexes]
    nodes = sum(int(c.shape[0]) for c in cols)
    kmax = max((int(c.max()) for c in cols if c.shape[0]), default=0)
    if kmax < 8 * nodes + 65536:
        return indexes
    used = np.unique(np.concatenate([c[c >= 0] for c in cols]))
    out = []
    for ix in indexes:
        col = ix[1]
        new = np.where(col >= 0, np.searchsorted(used, col), col).astype(np.int32)
        ukey = np.searchsorted(used, ix[8]).astype(np.int32)
        out.append(ix[:1] + (new,) + ix[2:8] + (ukey,) + ix[9:])
    return tuple(out)


def label_index(batch):
    """The arrays a block core reads for one tree batch, nodes grouped by label (the layout of
    :func:`_index`); the smoothed partial tree kernel (:mod:`gramtile.kernels.sptk`) reads it."""
    return _index(batch, "label")


def check_tree(spec, batch, which):
    """Raise :class:`RepresentationError` unless ``batch`` is an ordered-tree batch."""
    _check_tree(spec, batch, which)


def _leaf_index(batch):
    """Groups of leaves by label (SST-bow): ``(uoff, ukey, ubeg, uend)``."""
    off = np.ascontiguousarray(batch.offsets, dtype=np.int64)
    leaf = np.diff(batch.child_ptr) == 0
    key = np.where(leaf, batch.columns["label"], -1).astype(np.int32)
    _, _, uoff, ukey, ubeg, uend, _ = _group(off, key)
    return (uoff, ukey, ubeg, uend)


# ---- pair cores -------------------------------------------------------------------------
# The per-pair helpers are inlined into the block loops (inline="always"): as separate calls,
# passing the tuples of arrays costs a copy and reference-count updates per array and per call,
# which was half of the time of an ST/SST evaluation (about 30 node pairs per tree pair).

@njit(cache=True, nogil=True, inline="always")
def _mark(i, X, table, value):
    """Point ``table[key]`` at example i's local group of that key (or reset it to -1)."""
    uoffx, ukeyx = X[7], X[8]
    for u in range(uoffx[i], uoffx[i + 1]):
        table[ukeyx[u]] = u - uoffx[i] if value else -1


@njit(cache=True, nogil=True, inline="always")
def _match(i, X, j, Y, table, mnode, mgrp, slot):
    """Matching node pairs of X_i and Y_j, with X_i's groups marked in ``table``.

    Fills ``mnode[:cnt]`` (X nodes that have a partner) in decreasing index order, so that
    children come before parents, and ``mgrp[:cnt]`` (their partners' group in Y). ``slot``
    (one -1 per node of the largest X tree) is scratch, left all -1.
    Returns ``(cnt, number of matching node pairs)``.
    """
    offx, soffx, snodex, uoffx, ubegx, uendx = X[0], X[5], X[6], X[7], X[9], X[10]
    uoffy, ukeyy, ubegy, uendy = Y[7], Y[8], Y[9], Y[10]
    cnt = 0
    need = 0
    sx = soffx[i]
    ux = uoffx[i]
    for g in range(uoffy[j], uoffy[j + 1]):
        r = table[ukeyy[g]]
        if r < 0:
            continue
        u = ux + r
        need += (uendx[u] - ubegx[u]) * (uendy[g] - ubegy[g])
        for s in range(ubegx[u], uendx[u]):
            mnode[cnt] = snodex[sx + s]
            mgrp[cnt] = g
            cnt += 1
    if cnt > 32:
        # many matches: place each at its node index and read them back downwards (the nodes are
        # distinct and < the tree's size; no sort, which also keeps Numba's sort out of the core)
        for t in range(cnt):
            slot[mnode[t]] = mgrp[t]
        c = 0
        for node in range(offx[i + 1] - offx[i] - 1, -1, -1):
            g = slot[node]
            if g >= 0:
                mnode[c] = node
                mgrp[c] = g
                slot[node] = -1
                c += 1
                if c == cnt:
                    break
    else:
        for a in range(1, cnt):
            vn = mnode[a]
            vg = mgrp[a]
            b = a - 1
            while b >= 0 and mnode[b] < vn:
                mnode[b + 1] = mnode[b]
                mgrp[b + 1] = mgrp[b]
                b -= 1
            mnode[b + 1] = vn
            mgrp[b + 1] = vg
    return cnt, need


@njit(cache=True, nogil=True, inline="always")
def _leaf_pairs(i, LX, j, LY):
    """Number of pairs of equal leaves between example i of LX and example j of LY."""
    uoffx, ukeyx, ubegx, uendx = LX
    uoffy, ukeyy, ubegy, uendy = LY
    a = uoffx[i]
    ae = uoffx[i + 1]
    b = uoffy[j]
    be = uoffy[j + 1]
    cnt = 0
    while a < ae and b < be:
        if ukeyx[a] < ukeyy[b]:
            a += 1
        elif ukeyx[a] > ukeyy[b]:
            b += 1
        else:
            cnt += (uendx[a] - ubegx[a]) * (uendy[b] - ubegy[b])
            a += 1
            b += 1
    return cnt


@njit(cache=True, nogil=True, inline="always")
def _sum_sst(i, X, j, Y, cnt, mnode, mgrp, base, memo, lam, st, typed):
    """Sum of Delta over the matching node pairs found by ``_match``, for ST (``st``) or SST
    (``typed``: a pair whose children differ in being leaves has different productions)."""
    offx, prodx, cpx, cix = X[0], X[1], X[2], X[3]
    offy, prody, cpy, ciy, gposy, soffy, snodey, ubegy, uendy = Y[0], Y[1], Y[2], Y[3], Y[4], Y[5], Y[6], Y[9], Y[10]
    ox = offx[i]
    oy = offy[j]
    sy = soffy[j]
    pos = 0
    total = 0.0
    for t in range(cnt):
        n1 = mnode[t]
        g = mgrp[t]
        b0 = ubegy[g]
        m = uendy[g] - b0
        base[n1] = pos
        c1a = cpx[ox + n1]
        nch = cpx[ox + n1 + 1] - c1a
        for k in range(m):
            n2 = snodey[sy + b0 + k]
            c2a = cpy[oy + n2]
            d = lam
            for q in range(nch):
                a1 = cix[c1a + q]
                a2 = ciy[c2a + q]
                p1 = prodx[ox + a1]
                p2 = prody[oy + a2]
                if p1 < 0 or p2 < 0:
                    # equal label-only productions: the q-th children have equal labels, and
                    # one or both are leaves (production -1). Both leaves: factor 1 in ST and
                    # SST. A leaf and an internal node: Delta = 0, so SST multiplies by 1 + 0,
                    # while for ST (the complete subtrees differ) and for typed_leaves (the
                    # productions differ) the pair's Delta is 0.
                    if (p1 < 0) != (p2 < 0) and (st or typed):
                        d = 0.0
                        break
                    continue
                if p1 == p2:
                    # a matching child pair has a larger index, so its Delta is already in memo
                    v = memo[base[a1] + gposy[oy + a2]]
                    if st:
                        d *= v
                    else:
                        d *= 1.0 + v
                elif st:
                    d = 0.0
                    break
            memo[pos + k] = d
            total += d
        pos += m
    return total


@njit(cache=True, nogil=True, inline="always")
def _child_cols(T):
    """Per-batch arrays of the PT core: the label and the group position of the child at each
    entry of ``child_idx`` (read contiguously rather than through ``child_idx``), and per node
    the mask of its children's labels (bit ``label % 64``): two nodes whose masks share no bit
    have no pair of children with equal labels. ``lgrp``: a node's group among its tree's
    groups (-1 for a node without key)."""
    off, col, cp, ci, gpos, soff, snode, uoff, ubeg, uend = T[0], T[1], T[2], T[3], T[4], T[5], T[6], T[7], T[9], T[10]
    clab = np.empty(ci.shape[0], np.int32)
    cgpos = np.empty(ci.shape[0], np.int32)
    cmask = np.zeros(col.shape[0], np.int64)
    lgrp = np.full(col.shape[0], -1, np.int32)
    for t in range(off.shape[0] - 1):
        o = off[t]
        for u in range(uoff[t], uoff[t + 1]):
            for s in range(ubeg[u], uend[u]):
                lgrp[o + snode[soff[t] + s]] = u - uoff[t]
        for node in range(o, off[t + 1]):
            for c in range(cp[node], cp[node + 1]):
                clab[c] = col[o + ci[c]]
                cgpos[c] = gpos[o + ci[c]]
                cmask[node] |= np.int64(1) << (col[o + ci[c]] & 63)
    return clab, cgpos, cmask, lgrp


@njit(cache=True, nogil=True, inline="always")
def _match_pt(i, X, j, Y, table, lgrpx, gm, mnode, mgrp):
    """As :func:`_match`, for PT: X_i's groups that Y_j shares are noted in ``gm`` (local group of
    X_i -> group of Y_j; all -1 on entry and on return), then X_i's nodes are read downwards, so
    the matching ones come out in decreasing order without a sort (every node is written, only
    the matching ones are counted: no branch in the source)."""
    offx, uoffx, ubegx, uendx = X[0], X[7], X[9], X[10]
    uoffy, ukeyy, ubegy, uendy = Y[7], Y[8], Y[9], Y[10]
    ux = uoffx[i]
    need = 0
    for g in range(uoffy[j], uoffy[j + 1]):
        r = table[ukeyy[g]]
        if r >= 0:
            gm[r] = g
            need += (uendx[ux + r] - ubegx[ux + r]) * (uendy[g] - ubegy[g])
    ox = offx[i]
    cnt = 0
    for node in range(offx[i + 1] - ox - 1, -1, -1):
        u = lgrpx[ox + node]
        g = gm[u] if u >= 0 else -1
        mnode[cnt] = node
        mgrp[cnt] = g
        cnt += g >= 0
    for g in range(uoffy[j], uoffy[j + 1]):
        r = table[ukeyy[g]]
        if r >= 0:
            gm[r] = -1
    return cnt, need


@njit(cache=True, nogil=True, inline="always")
def _children_dp(c1a, r0, nb1, c2a, c0, nb2, clabx, cix, base, claby, cgposy, memo, dp0, dp1, lam, f):
    """Sum over all child subsequence pairs (any length) of lam^{g1+g2} prod Delta, O(nb1 nb2),
    over the box of children rows r0.. of n1 and columns c0.. of n2 holding every matching pair."""
    prev = dp0
    cur = dp1
    for jj in range(nb2 + 1):
        prev[jj] = 0.0
    cur[0] = 0.0
    acc = 0.0
    for ii in range(r0, r0 + nb1):
        l1 = clabx[c1a + ii]
        row = base[cix[c1a + ii]]
        run = 0.0
        for jj in range(nb2):
            s = 0.0
            if l1 == claby[c2a + c0 + jj]:
                # prev[jj] = D[ii-1, jj-1]: all pairs ending strictly before (ii, jj)
                s = memo[row + cgposy[c2a + c0 + jj]] * (1.0 + f * prev[jj])
                acc += s
            run = s + lam * run
            cur[jj + 1] = run + lam * prev[jj + 1]
        prev, cur = cur, prev
    return acc


@njit(cache=True, nogil=True)
def _children_dp_limited(c1a, r0, nb1, c2a, c0, nb2, clabx, cix, base, claby, cgposy, memo, E, S, D, lam, f,
                         top):
    """As :func:`_children_dp` for subsequences of length <= top (one DP level per length,
    Moschitti's algorithm; SVM-Light-TK's MAX_CHILDREN = 5, KeLP's maxSubseqLeng)."""
    w = nb2 + 1
    acc = 0.0
    for ii in range(nb1):
        l1 = clabx[c1a + r0 + ii]
        row = base[cix[c1a + r0 + ii]]
        for jj in range(nb2):
            e = 0.0
            if l1 == claby[c2a + c0 + jj]:
                e = memo[row + cgposy[c2a + c0 + jj]]
            E[ii * nb2 + jj] = e
            S[ii * nb2 + jj] = e
            acc += e
    for jj in range(w):
        D[jj] = 0.0
    for ii in range(nb1 + 1):
        D[ii * w] = 0.0
    for _ in range(1, top):
        for ii in range(nb1):
            run = 0.0
            for jj in range(nb2):
                run = S[ii * nb2 + jj] + lam * run
                D[(ii + 1) * w + jj + 1] = run + lam * D[ii * w + jj + 1]
        level = 0.0
        for ii in range(nb1):
            for jj in range(nb2):
                v = E[ii * nb2 + jj] * f * D[ii * w + jj]
                S[ii * nb2 + jj] = v
                level += v
        acc += level
        if level == 0.0:
            break
    return acc


@njit(cache=True, nogil=True, inline="always")
def _sum_pt(i, X, j, Y, CX, CY, cnt, mnode, mgrp, base, memo, work, lam, mu, tf, f, maxlen):
    """Sum of PT Delta over the label-matching node pairs found by ``_match_pt``.

    ``CX``, ``CY``: :func:`_child_cols` of X and Y. The child pairs of equal labels of (n1, n2) are
    scanned first; the dynamic programme runs only for three or more of them among which two are
    in increasing order in both trees, and then only over their box (the module docstring says
    why each shortcut gives the programme's result bit for bit).
    """
    offx, cpx, cix = X[0], X[2], X[3]
    offy, cpy, soffy, snodey, ubegy, uendy = Y[0], Y[2], Y[5], Y[6], Y[9], Y[10]
    clabx, _, cmaskx, _ = CX
    claby, cgposy, cmasky, _ = CY
    dp0, dp1, E, S, D = work[3:]
    lam2 = lam * lam
    leafval = mu * lam2 * tf
    ox = offx[i]
    oy = offy[j]
    sy = soffy[j]
    pos = 0
    total = 0.0
    for t in range(cnt):
        n1 = mnode[t]
        g = mgrp[t]
        b0 = ubegy[g]
        m = uendy[g] - b0
        base[n1] = pos
        c1a = cpx[ox + n1]
        nc1 = cpx[ox + n1 + 1] - c1a
        if nc1 == 0:
            for k in range(m):
                memo[pos + k] = leafval
                total += leafval
            pos += m
            continue
        # label and memo row of the first child (a memo row is only read where the child has
        # a partner of its label in Y_j, hence was matched and, a larger index, has its row)
        l0 = clabx[c1a]
        row0 = base[cix[c1a]]
        for k in range(m):
            n2 = snodey[sy + b0 + k]
            c2a = cpy[oy + n2]
            nc2 = cpy[oy + n2 + 1] - c2a
            if nc2 == 0:
                d = leafval
            elif cmaskx[ox + n1] & cmasky[oy + n2] == 0:
                d = mu * lam2  # no child pair of equal labels: mu (lam^2 + 0), exactly
            elif nc1 == 1 and nc2 == 1:
                # unary nodes (pre-terminals, unary chains) are most pairs: no DP needed
                d = mu * lam2
                if l0 == claby[c2a]:
                    d += mu * memo[row0 + cgposy[c2a]]
            else:
                # scan the child pairs of equal labels (row-major, the DP's order): their
                # number, the first two (i, j, Delta), their box, the row-major sum of their
                # Delta, and whether one lies strictly below and right of another (chain)
                nm = 0
                chain = False
                minc = nc2  # smallest matching column in the rows scanned before
                c1 = 0
                r1 = 0
                i1 = j1 = i2 = j2 = nc1  # set at the first two pairs (a run-time int, not a literal
                # 0, which would give _children_dp_limited a second compiled signature)
                v1 = v2 = 0.0
                ssum = 0.0
                for ii in range(nc1):
                    l1 = clabx[c1a + ii]
                    first = nc2
                    for jj in range(nc2):
                        if claby[c2a + jj] == l1:
                            v = memo[base[cix[c1a + ii]] + cgposy[c2a + jj]]
                            ssum += v
                            if nm == 0:
                                i1, j1, v1 = ii, jj, v
                            elif nm == 1:
                                i2, j2, v2 = ii, jj, v
                            nm += 1
                            if jj > minc:
                                chain = True
                            if first == nc2:
                                first = jj
                            c1 = max(c1, jj)
                            r1 = ii
                    minc = min(minc, first)
                limited = maxlen > 0 and maxlen < min(nc1, nc2)
                if not chain:
                    acc = ssum
                elif nm == 2:
                    p = v1
                    for _ in range(i2 - i1 - 1 + j2 - j1 - 1):
                        p = lam * p
                    if limited:
                        acc = v1 + v2
                        if maxlen >= 2:
                            acc += v2 * f * p
                    else:
                        acc = v1 + v2 * (1.0 + f * p)
                elif limited:
                    acc = _children_dp_limited(c1a, i1, r1 - i1 + 1, c2a, minc, c1 - minc + 1, clabx, cix, base,
                                               claby, cgposy, memo, E, S, D, lam, f, min(maxlen, min(nc1, nc2)))
                else:
                    acc = _children_dp(c1a, i1, r1 - i1 + 1, c2a, minc, c1 - minc + 1, clabx, cix, base, claby,
                                       cgposy, memo, dp0, dp1, lam, f)
                d = mu * (lam2 + acc)
            memo[pos + k] = d
            total += d
        pos += m
    return total


@njit(cache=True, nogil=True)
def _scratch(X, Y):
    """Per-block scratch sized to the trees: key table, matched nodes and their memo rows, memo."""
    offx, colx, soffx = X[0], X[1], X[5]
    offy, coly = Y[0], Y[1]
    mx = 1
    sx = 1
    for i in range(offx.shape[0] - 1):
        mx = max(mx, offx[i + 1] - offx[i])
        sx = max(sx, soffx[i + 1] - soffx[i])
    my = 1
    for j in range(offy.shape[0] - 1):
        my = max(my, offy[j + 1] - offy[j])
    kmax = 0
    for g in range(colx.shape[0]):
        kmax = max(kmax, colx[g])
    for g in range(coly.shape[0]):
        kmax = max(kmax, coly[g])
    table = np.full(kmax + 1, -1, np.int64)
    mnode = np.empty(sx, np.int32)
    mgrp = np.empty(sx, np.int64)
    base = np.empty(mx, np.int64)
    slot = np.full(mx, -1, np.int64)
    memo = np.empty(max(1024, 4 * (mx + my)), np.float64)
    return table, (mnode, mgrp, base, slot), memo


@njit(cache=True, nogil=True)
def _scratch_pt(X, Y, maxlen):
    """PT's per-node child rows, dynamic-programme rows and, with a length limit, its tables,
    sized to the fan-outs."""
    offx, cpx, uoffx, cpy = X[0], X[2], X[7], Y[2]
    gx = 1
    nx = 1
    for i in range(offx.shape[0] - 1):
        gx = max(gx, uoffx[i + 1] - uoffx[i])
        nx = max(nx, offx[i + 1] - offx[i])
    gm = np.full(gx, -1, np.int64)
    mnode = np.empty(nx, np.int32)
    mgrp = np.empty(nx, np.int64)
    cx = 1
    for g in range(cpx.shape[0] - 1):
        cx = max(cx, cpx[g + 1] - cpx[g])
    cy = 1
    for g in range(cpy.shape[0] - 1):
        cy = max(cy, cpy[g + 1] - cpy[g])
    dp0 = np.empty(cy + 1, np.float64)
    dp1 = np.empty(cy + 1, np.float64)
    tab = cx * cy if maxlen > 0 else 1
    E = np.empty(tab, np.float64)
    S = np.empty(tab, np.float64)
    D = np.empty((cx + 1) * (cy + 1) if maxlen > 0 else 1, np.float64)
    return gm, mnode, mgrp, dp0, dp1, E, S, D


# ---- block cores --------------------------------------------------------------------------
# One compiled core per path: ``_block_sst`` (ST and SST, which differ by the runtime flag
# ``st`` only) and ``_block_pt``. Each serves full blocks, symmetric blocks and diagonals
# (``mode``), so a first tile (block + diagonals) compiles one core, not the PT dynamic
# programme with it nor a second copy of the same loops for the diagonal.

_FULL, _SYM, _DIAG, _PAIRED = 0, 1, 2, 3


@njit(cache=True, nogil=True)
def _block_sst(X, Y, LX, LY, mode, lam, leaves, st, typed):
    """ST (``st``) or SST block: ``K[i, j] = k(X_i, Y_j)``, shape (nx, ny); ``typed``: SST's
    productions tell leaf children from internal ones (``typed_leaves``).

    ``mode`` 0: every (i, j); 1 (Y is X): i <= j computed and mirrored; 2 (Y is X): the
    self-kernels k(X_i, X_i) only, returned as shape (nx, 1); 3 (Y as long as X): the paired
    values k(X_i, Y_i), shape (nx, 1).
    """
    nx = X[0].shape[0] - 1
    ny = Y[0].shape[0] - 1
    out = np.zeros((nx, 1 if mode >= _DIAG else ny), np.float64)
    table, work, memo = _scratch(X, Y)
    mnode, mgrp, base, slot = work
    for i in range(nx):
        _mark(i, X, table, True)
        j0 = 0 if mode == _FULL else i
        j1 = i + 1 if mode >= _DIAG else ny
        for j in range(j0, j1):
            cnt, need = _match(i, X, j, Y, table, mnode, mgrp, slot)
            v = 0.0
            if cnt > 0:
                if need > memo.shape[0]:
                    memo = np.empty(max(need, 2 * memo.shape[0]), np.float64)
                v = _sum_sst(i, X, j, Y, cnt, mnode, mgrp, base, memo, lam, st, typed)
            if leaves:
                v += lam * _leaf_pairs(i, LX, j, LY)
            if mode >= _DIAG:
                out[i, 0] = v
            else:
                out[i, j] = v
                if mode == _SYM:
                    out[j, i] = v
        _mark(i, X, table, False)
    return out


@njit(cache=True, nogil=True)
def _block_pt(X, Y, mode, lam, mu, tf, f, maxlen):
    """PT block, as :func:`_block_sst` (``mode`` 0 full, 1 symmetric, 2 diagonal as (nx, 1), 3
    paired k(X_i, Y_i) as (nx, 1))."""
    nx = X[0].shape[0] - 1
    ny = Y[0].shape[0] - 1
    out = np.zeros((nx, 1 if mode >= _DIAG else ny), np.float64)
    table, work, memo = _scratch(X, Y)
    ptwork = _scratch_pt(X, Y, maxlen)
    base = work[2]
    gm, mnode, mgrp = ptwork[0], ptwork[1], ptwork[2]
    CX = _child_cols(X)
    CY = CX if mode == _SYM or mode == _DIAG else _child_cols(Y)
    lgrpx = CX[3]
    for i in range(nx):
        _mark(i, X, table, True)
        j0 = 0 if mode == _FULL else i
        j1 = i + 1 if mode >= _DIAG else ny
        for j in range(j0, j1):
            cnt, need = _match_pt(i, X, j, Y, table, lgrpx, gm, mnode, mgrp)
            v = 0.0
            if cnt > 0:
                if need > memo.shape[0]:
                    memo = np.empty(max(need, 2 * memo.shape[0]), np.float64)
                v = _sum_pt(i, X, j, Y, CX, CY, cnt, mnode, mgrp, base, memo, ptwork, lam, mu, tf, f, maxlen)
            if mode >= _DIAG:
                out[i, 0] = v
            else:
                out[i, j] = v
                if mode == _SYM:
                    out[j, i] = v
        _mark(i, X, table, False)
    return out


# ---- specs ------------------------------------------------------------------------------

_NO_LEAVES = (np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.int32))


def _check_tree(spec, batch, which):
    if getattr(batch, "kind", None) != "tree":
        raise RepresentationError(
            f"kernel {spec.kind!r} reads ordered trees, but {which} is a {getattr(batch, 'kind', type(batch).__name__)!r} "
            f"batch; encode pipeline.structures.Tree values (representation {spec.rep_name!r})")


class _TreeKernel(BaseSpec):
    """Shared block/diag plumbing; subclasses set ``_key`` and ``_core(ix, iy, lx, ly, mode)``."""

    reads = "tree"
    _key = "prod"

    def _core(self, ix, iy, lx, ly, mode):
        raise NotImplementedError

    def _prep(self, batch, which):
        _check_tree(self, batch, which)
        lx = _leaf_index(batch) if self._leaves_used() else _NO_LEAVES
        return _index(batch, self._key), lx

    def _leaves_used(self):
        return False

    def block(self, X, Y=None) -> np.ndarray:
        """Dense float64 block ``K[i, j] = k(X_i, Y_j)``, shape (X.n, Y.n); ``Y=None`` means X.

        With ``Y=None`` only the upper triangle is evaluated and mirrored.
        """
        ix, lx = self._prep(X, "X")
        if Y is None:
            ix, = _compact_keys(ix)
            return self._core(ix, ix, lx, lx, _SYM)
        iy, ly = self._prep(Y, "Y")
        ix, iy = _compact_keys(ix, iy)
        return self._core(ix, iy, lx, ly, _FULL)

    def diag(self, X) -> np.ndarray:
        """Self-kernels ``k(X_i, X_i)``, shape (X.n,)."""
        ix, lx = self._prep(X, "X")
        ix, = _compact_keys(ix)
        return self._core(ix, ix, lx, lx, _DIAG)[:, 0].copy()

    def paired(self, X, Y) -> np.ndarray:
        """``k(X_i, Y_i)`` of two batches of one length, shape (X.n,), in one pass of the core."""
        if X.n != Y.n:
            raise ValueError(f"paired(): {X.n} and {Y.n} trees; give two batches of one length")
        ix, lx = self._prep(X, "X")
        iy, ly = self._prep(Y, "Y")
        ix, iy = _compact_keys(ix, iy)
        return self._core(ix, iy, lx, ly, _PAIRED)[:, 0].copy()


@register
@dataclass(frozen=True)
class SubtreeKernel(_TreeKernel):
    """Subtree kernel (ST): common complete subtrees, each weighted lam^(internal nodes).

    Parameters
    ----------
    lam : float in (0, 1]
        Decay per production node of a matched subtree.
    leaves : bool
        True: each pair of equal leaves adds lam as well (the paper convention of Aiolli et al.
        2009; SVM-Light-TK's ST, the default False, matches internal nodes only).
    rep : str
        Corpus representation read (an ordered-tree representation).
    """

    kind = "st"
    added_later = ("leaves",)
    lam: float = 0.4
    leaves: bool = False
    rep: str = "tree"

    def validate(self):
        self._number("lam", 0, 1, lo_open=True)
        self._flag("leaves")
        self._string("rep")

    def _leaves_used(self):
        return self.leaves

    def _core(self, ix, iy, lx, ly, mode):
        return _block_sst(ix, iy, lx, ly, mode, float(self.lam), bool(self.leaves), True, False)


@register
@dataclass(frozen=True)
class SubsetTreeKernel(_TreeKernel):
    """Subset tree kernel (SST, Collins & Duffy): common fragments whose nodes keep all or none
    of their children.

    Parameters
    ----------
    lam : float in (0, 1]
        Decay per production node of a matched fragment.
    leaves : bool
        True = "SST-bow": each pair of equal leaves adds lam (SVM-Light-TK ``-F 2``, KeLP).
    typed_leaves : bool
        False (the definition of Collins & Duffy and Aiolli et al. 2009): a production is a
        node's label and its children's labels, so ``(C A)`` with a leaf A shares the fragment
        ``(C A)`` with ``(C (A z))``. True: productions also tell leaf children from internal
        ones, so those two never match (gramtile before 2026-12; differs only where a label is a
        leaf in one tree and an internal node in another, as XML tags can be, never on PTB trees
        whose leaves are words). Always part of the spec hash.
    rep : str
        Corpus representation read (an ordered-tree representation).
    """

    kind = "sst"
    lam: float = 0.4
    leaves: bool = False
    typed_leaves: bool = False
    rep: str = "tree"

    def validate(self):
        self._number("lam", 0, 1, lo_open=True)
        self._flag("leaves")
        self._flag("typed_leaves")
        self._string("rep")

    def _leaves_used(self):
        return self.leaves

    def _core(self, ix, iy, lx, ly, mode):
        return _block_sst(ix, iy, lx, ly, mode, float(self.lam), bool(self.leaves), False,
                          bool(self.typed_leaves))


@register
@dataclass(frozen=True)
class PartialTreeKernel(_TreeKernel):
    """Partial tree kernel (PT, Moschitti 2006): common fragments keeping any ordered subset of
    each node's children.

    Parameters
    ----------
    lam : float in (0, 1]
        Decay per skipped child (``gap="gaps"``) or per unit of child span (``"span"``); each
        node also carries lam^2 for its own presence as a fragment end.
    mu : float in (0, 1]
        Decay per fragment node.
    gap : {"gaps", "span"}
        g(J) = children skipped inside the span (SVM-Light-TK) or J_last - J_first.
    terminal_factor : float > 0
        Multiplies Delta of a matched pair in which either node is childless (KeLP).
    max_length : int >= 1 or None
        Longest child subsequence considered (None: no limit). SVM-Light-TK fixes it at 5
        (``MAX_CHILDREN``, its published PT figures depend on it); KeLP calls it maxSubseqLeng.
    rep : str
        Corpus representation read (an ordered-tree representation).
    """

    kind = "pt"
    _key = "label"
    lam: float = 0.4
    mu: float = 0.4
    gap: str = "gaps"
    terminal_factor: float = 1.0
    max_length: int | None = None
    rep: str = "tree"

    def validate(self):
        self._number("lam", 0, 1, lo_open=True)
        self._number("mu", 0, 1, lo_open=True)
        self._choice("gap", ("gaps", "span"))
        self._number("terminal_factor", 0, None, lo_open=True)
        if self.max_length is not None:
            self._number("max_length", 1, None, integer=True)
        self._string("rep")

    def _core(self, ix, iy, lx, ly, mode):
        f = 1.0 if self.gap == "gaps" else self.lam * self.lam
        return _block_pt(ix, iy, mode, float(self.lam), float(self.mu), float(self.terminal_factor), float(f),
                         int(self.max_length or 0))
