"""HDAG kernel (Suzuki, Hirao, Sasaki, Maeda 2003, "Hierarchical directed acyclic graph kernel:
methods for structured natural language data", ACL; Suzuki, Sasaki, Maeda 2003, NIPS), as
specified in docs/kernels.md, "HDAG kernel".

Features are attribute sequences read along directed sub-paths of any graph of the hierarchy
(chunk brackets kept, skipped nodes costing their skip cost D); lengths 1..p are summed::

    K(G1, G2) = sum_{m=1..p} sum_{s in G1, t in G2} ([m = 1] Gamma(s, t) + M_m(s, t))

Skip costs, per node inside the graph holding it (docs/kernels.md, "HDAG kernel: Skip costs")::

    D(v) = lam (terminated)  |  sum over complete inner paths of prod D (chunk)
    U(v) = 1 if pa(v) empty else sum_{u in pa(v)} U(u) D(u)
    B(v) = 1 if ch(v) empty else sum_{w in ch(v)} D(w) B(w),        c(v) = U(v) B(v)

Node-pair recursion (docs/kernels.md, "HDAG kernel: Recursion"), i, k = lengths 1..p::

    S_i(s,t)  = [i=1] Gamma(s,t) + [i>=2] sum_{s' in in(s), t' in in(t)} B(s') B(t') L_i(s',t')
    E_i(s,t)  = S_i(s,t) + sum_{t' in in(t)} c(t') E_i(s,t')
    H_i(s,t)  = E_i(s,t) + sum_{s' in in(s)} c(s') H_i(s',t)
    M_k(s,t)  = sum_{j=1}^{k-1} H_j(s,t) J_{k-j}(s,t)
    J_k(s,t)  = sum_{t' in pa(t)} [D(t') J_k(s,t') + J'_k(s,t')]
    J'_k(s,t) = sum_{s' in pa(s)} [D(s') J'_k(s',t) + A_k(s',t)],     A_k = H_k + M_k
    L_k, JL_k, JL'_k: the same with AL_k(s,t) = U(s) U(t) H_k(s,t) + L_k(s,t)   (inner pairs only)

Representation (batch kind ``"hdag"``, built by :mod:`gramtile.pipeline.representations.hdag`): a batch
column needs one entry per row, so each example's rows are its nodes, then its attributes, then
its edges, told apart by ``role``::

    role 0 (node)       a = containing chunk (-1 = top graph)   b = -1
    role 1 (attribute)  a = node                                b = attribute id
    role 2 (edge)       a = u                                   b = v       (u, v in one graph)

Node indices are the example's own numbering: node rows come first, node v being the example's
row v (any order of the attribute and edge rows after them is fine). Per block, :func:`_prepare`
renumbers each example into a *processing order* (docs/kernels.md, "HDAG kernel: Evaluation order and cost": a topological order of the
in-graph edges together with "inner node before its chunk", by Kahn's algorithm), sorts each
node's attribute ids, builds in-graph parent lists and inner-node lists in CSR form and computes
D, U, B, c; :func:`_paths` adds the in-graph path weights W (J and JL unrolled) and
:func:`_deep_attrs` each node's deep attribute list (its own attributes and those inside it).
Each example is prepared once per block, never once per pair.

The pair core visits only the *active* node pairs, the pairs whose deep attribute lists meet
(elsewhere H = M = L = 0 at every length): they come out of an attribute -> entries index of
graph 1, column by column in processing order. At each one it computes E, H, A = H + M (and L,
AL for pairs of inner nodes) into one table row, reading earlier rows through a dense
(N1, N2) position table, and J, JL as

    J_k(s, t) = sum over active (s0, t0) of W1(s0, s) W2(t0, t) A_k(s0, t0)

over the pairs of in-graph ancestors, which is J' and J of the recursion unrolled. Time
O(N_attr + R (p^2 + a1 a2)) per pair of examples, R the active pairs, a1 a2 the ancestor pairs
tried; memory O(p N1 N2) of scratch per block. All terms are non-negative sums of products: no
cancellation, and the result equals the dense recursion's (tests/reference/hdag_dense.py) to
rounding (bitwise at lam = 1/2 on the TREC questions).

Speed (``bench/trec_qc_hdag.py --compare``, spaCy HDAGs of TREC questions): 166 node pairs per
evaluation, 14.6 with Gamma > 0, 25 active (first 100 questions); the core runs one call per
block row (passing the ~40 prepared arrays per pair cost ~0.37 us alone), and for p >= 2 is
compiled once per p. See bench/hdag.py and BENCHMARKS.md.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import literally, njit

from gramtile.kernels.batches import register_batch_kind
from gramtile.kernels.errors import RepresentationError
from gramtile.kernels.spec import BaseSpec, register

#: Columns of an ``"hdag"`` batch (see the module docstring) and the row roles.
HDAG_COLUMNS = ("role", "a", "b")
ROLE_NODE, ROLE_ATTR, ROLE_EDGE = 0, 1, 2



def check_hdag_batch(batch) -> None:
    """Node rows first; chunk references, attribute nodes and edge ends inside the example; chunk
    containment and in-graph edges acyclic, edges inside one graph (the cores trust all of it)."""
    role, a, b, off = batch.columns["role"], batch.columns["a"], batch.columns["b"], batch.offsets
    if ((role < ROLE_NODE) | (role > ROLE_EDGE)).any():
        raise RepresentationError("malformed 'hdag' batch: a role outside 0 (node), 1 (attribute), 2 (edge)")
    for e in range(off.shape[0] - 1):
        r, x, y = role[off[e]:off[e + 1]], a[off[e]:off[e + 1]], b[off[e]:off[e + 1]]
        nn = int((r == ROLE_NODE).sum())
        where = f"malformed 'hdag' batch, example {e}"
        if nn == 0 or (r[:nn] != ROLE_NODE).any():
            raise RepresentationError(f"{where}: its node rows must come first (and it needs at least one)")
        chunk = x[:nn].astype(np.int64)
        if ((chunk < -1) | (chunk >= nn) | (chunk == np.arange(nn))).any():
            raise RepresentationError(f"{where}: a node's containing chunk is outside its {nn} nodes or itself")
        for v in range(nn):  # containment must end at the top graph
            seen, c = 0, chunk[v]
            while c >= 0:
                c, seen = chunk[c], seen + 1
                if seen > nn:
                    raise RepresentationError(f"{where}: chunk containment has a cycle at node {v}")
        att, edg = r == ROLE_ATTR, r == ROLE_EDGE
        if ((x[att] < 0) | (x[att] >= nn) | (y[att] < 0)).any():
            raise RepresentationError(f"{where}: an attribute row names a node outside its {nn} nodes")
        u, w = x[edg].astype(np.int64), y[edg].astype(np.int64)
        if ((u < 0) | (u >= nn) | (w < 0) | (w >= nn)).any() or (chunk[u] != chunk[w]).any() or (u == w).any():
            raise RepresentationError(f"{where}: an edge leaves its graph, loops, or names a node outside "
                                      f"its {nn} nodes")
        indeg = np.bincount(w, minlength=nn)
        ready, done = [v for v in range(nn) if indeg[v] == 0], 0
        succ = [[] for _ in range(nn)]
        for s_, t_ in zip(u.tolist(), w.tolist()):
            succ[s_].append(t_)
        while ready:
            v = ready.pop()
            done += 1
            for t_ in succ[v]:
                indeg[t_] -= 1
                if indeg[t_] == 0:
                    ready.append(t_)
        if done != nn:
            raise RepresentationError(f"{where}: its edges have a cycle (an HDAG's graphs are acyclic)")


register_batch_kind("hdag", HDAG_COLUMNS, validator=check_hdag_batch)


# ---- per-batch preparation ----------------------------------------------------------------

@njit(cache=True, nogil=True)
def _ranks(role, a, b, r0, r1, nn):
    """Processing rank of each node of one example (Kahn's algorithm on the in-graph edges
    plus "inner node -> its chunk"; ties in node order)."""
    uparent = np.empty(nn, dtype=np.int64)
    k = 0
    for r in range(r0, r1):
        if role[r] == ROLE_NODE:
            uparent[k] = a[r]
            k += 1
    indeg = np.zeros(nn, dtype=np.int64)
    succ_ptr = np.zeros(nn + 1, dtype=np.int64)
    for r in range(r0, r1):
        if role[r] == ROLE_EDGE:
            indeg[b[r]] += 1
            succ_ptr[a[r] + 1] += 1
    for v in range(nn):
        if uparent[v] >= 0:
            indeg[uparent[v]] += 1
            succ_ptr[v + 1] += 1
    for v in range(nn):
        succ_ptr[v + 1] += succ_ptr[v]
    succ = np.empty(succ_ptr[nn], dtype=np.int64)
    fill = succ_ptr[:-1].copy()
    for r in range(r0, r1):
        if role[r] == ROLE_EDGE:
            succ[fill[a[r]]] = b[r]
            fill[a[r]] += 1
    for v in range(nn):
        if uparent[v] >= 0:
            succ[fill[v]] = uparent[v]
            fill[v] += 1
    order = np.empty(nn, dtype=np.int64)
    head = 0
    tail = 0
    for v in range(nn):
        if indeg[v] == 0:
            order[tail] = v
            tail += 1
    while head < tail:
        u = order[head]
        head += 1
        for q in range(succ_ptr[u], succ_ptr[u + 1]):
            w = succ[q]
            indeg[w] -= 1
            if indeg[w] == 0:
                order[tail] = w
                tail += 1
    rank = np.empty(nn, dtype=np.int64)
    for q in range(nn):
        rank[order[q]] = q
    return rank


@njit(cache=True, nogil=True)
def _prepare(offsets, role, a, b, lam):
    """Renumber every example into processing order and derive the arrays the pair core reads.

    Returns
    -------
    nptr : int64 (n+1,)        example e owns nodes nptr[e]:nptr[e+1]; local index = position - nptr[e]
    par : int64 (N,)           containing chunk (local, processing order), -1 = top graph
    D, U, B, C : float64 (N,)  skip costs and c = U B
    aptr, aids : CSR           sorted own attribute ids per node
    pptr, pidx : CSR           in-graph parents (local), one entry per edge
    iptr, iidx : CSR           inner nodes of each chunk (local)
    rank : int64 (N,)          rank[nptr[e] + v] = processing index of the example's node v
    """
    n = offsets.shape[0] - 1
    nptr = np.zeros(n + 1, dtype=np.int64)
    n_attr = 0
    n_edge = 0
    for e in range(n):
        c = 0
        for r in range(offsets[e], offsets[e + 1]):
            if role[r] == ROLE_NODE:
                c += 1
            elif role[r] == ROLE_ATTR:
                n_attr += 1
            else:
                n_edge += 1
        nptr[e + 1] = nptr[e] + c
    total = nptr[n]
    rank = np.empty(total, dtype=np.int64)  # indexed by base + user node index
    par = np.full(total, -1, dtype=np.int64)
    aptr = np.zeros(total + 1, dtype=np.int64)
    pptr = np.zeros(total + 1, dtype=np.int64)
    iptr = np.zeros(total + 1, dtype=np.int64)
    has_child = np.zeros(total, dtype=np.bool_)
    for e in range(n):
        r0 = offsets[e]
        base = nptr[e]
        rk = _ranks(role, a, b, r0, offsets[e + 1], nptr[e + 1] - base)
        rank[base:nptr[e + 1]] = rk
        for r in range(r0, offsets[e + 1]):
            if role[r] == ROLE_NODE:
                v = r - r0  # node rows come first, in node order
                if a[r] >= 0:
                    par[base + rk[v]] = rk[a[r]]
                    iptr[base + rk[a[r]] + 1] += 1
            elif role[r] == ROLE_ATTR:
                aptr[base + rk[a[r]] + 1] += 1
            else:
                pptr[base + rk[b[r]] + 1] += 1
                has_child[base + rk[a[r]]] = True
    for g in range(total):
        aptr[g + 1] += aptr[g]
        pptr[g + 1] += pptr[g]
        iptr[g + 1] += iptr[g]
    aids = np.empty(n_attr, dtype=np.int64)
    pidx = np.empty(n_edge, dtype=np.int64)
    iidx = np.empty(iptr[total], dtype=np.int64)
    afill = aptr[:-1].copy()
    pfill = pptr[:-1].copy()
    ifill = iptr[:-1].copy()
    for e in range(n):
        r0 = offsets[e]
        base = nptr[e]
        for r in range(r0, offsets[e + 1]):
            if role[r] == ROLE_NODE:
                if a[r] >= 0:
                    g = base + rank[base + a[r]]
                    iidx[ifill[g]] = rank[base + r - r0]
                    ifill[g] += 1
            elif role[r] == ROLE_ATTR:
                g = base + rank[base + a[r]]
                aids[afill[g]] = b[r]
                afill[g] += 1
            else:
                g = base + rank[base + b[r]]
                pidx[pfill[g]] = rank[base + a[r]]
                pfill[g] += 1
    for g in range(total):
        aids[aptr[g]:aptr[g + 1]].sort()
    D = np.empty(total)
    U = np.empty(total)
    B = np.empty(total)
    C = np.empty(total)
    for e in range(n):
        base = nptr[e]
        nn = nptr[e + 1] - base
        # forward: a chunk's inner nodes and a node's in-graph parents come before it
        for v in range(nn):
            g = base + v
            if iptr[g] == iptr[g + 1]:
                D[g] = lam
            else:
                d = 0.0
                for q in range(iptr[g], iptr[g + 1]):
                    w = base + iidx[q]
                    if not has_child[w]:  # complete inner paths end at sinks
                        d += U[w] * D[w]
                D[g] = d
            if pptr[g] == pptr[g + 1]:
                U[g] = 1.0
            else:
                u = 0.0
                for q in range(pptr[g], pptr[g + 1]):
                    w = base + pidx[q]
                    u += U[w] * D[w]
                U[g] = u
        # backward: every child of v is final before v is reached
        bacc = np.zeros(nn)
        for v in range(nn - 1, -1, -1):
            g = base + v
            B[g] = bacc[v] if has_child[g] else 1.0
            for q in range(pptr[g], pptr[g + 1]):
                bacc[pidx[q]] += D[g] * B[g]
            C[g] = U[g] * B[g]
    return nptr, par, D, U, B, C, aptr, aids, pptr, pidx, iptr, iidx, rank


def skip_costs(X, lam):
    """D, U and B (docs/kernels.md, "HDAG kernel: Skip costs") of every node of an ``hdag`` batch, in the examples' own
    node numbering: entry ``nodes[e] + v`` belongs to node v of example e.

    Returns
    -------
    nodes : int64 (n+1,)
    D, U, B : float64 (total nodes,)
    """
    out = _prepare(X.offsets.astype(np.int64), X.columns["role"].astype(np.int64),
                   X.columns["a"].astype(np.int64), X.columns["b"].astype(np.int64), float(lam))
    nptr, rank = out[0], out[-1]
    ex = np.repeat(np.arange(X.n), np.diff(nptr))
    where = nptr[ex] + rank
    return nptr, out[2][where], out[3][where], out[4][where]


# ---- pair and block cores -----------------------------------------------------------------

@njit(cache=True, nogil=True)
def _path_matrix(base, nn, pptr, pidx, D):
    """W[v, s0] of :func:`_paths` for one example (dense), and R[v, s0] = there is such a path."""
    W = np.zeros((nn, nn))
    R = np.zeros((nn, nn), dtype=np.bool_)
    for v in range(nn):  # parents come before v in processing order
        for q in range(pptr[base + v], pptr[base + v + 1]):
            u = pidx[q]
            W[v, u] += 1.0
            R[v, u] = True
            d = D[base + u]
            for s0 in range(nn):
                if R[u, s0]:
                    W[v, s0] += d * W[u, s0]
                    R[v, s0] = True
    return W, R


@njit(cache=True, nogil=True)
def _paths(nptr, pptr, pidx, D):
    """In-graph path weights W(s0, v) = sum over paths s0 -> ... -> v of one or more edges of the
    product of D over the nodes strictly between, for every node v and every s0 with such a path.

    Unrolling J' over s's parents and J over t's parents (docs/kernels.md, "HDAG kernel:
    Recursion") gives J_k(s, t) = sum_{s0, t0} W1(s0, s) W2(t0, t) A_k(s0, t0), and the same for
    JL with AL; the pair core sums that over the few node pairs where A is non-zero.

    Returns
    -------
    wptr, widx, wval : CSR over the nodes of :func:`_prepare` (row = global node, entries = local
    ancestor s0 in increasing order and W(s0, v)).
    """
    n = nptr.shape[0] - 1
    total = nptr[n]
    wptr = np.zeros(total + 1, dtype=np.int64)
    for e in range(n):
        base = nptr[e]
        W, R = _path_matrix(base, nptr[e + 1] - base, pptr, pidx, D)
        for v in range(W.shape[0]):
            wptr[base + v + 1] = wptr[base + v] + R[v].sum()
    widx = np.empty(wptr[total], dtype=np.int64)
    wval = np.empty(wptr[total])
    for e in range(n):
        base = nptr[e]
        W, R = _path_matrix(base, nptr[e + 1] - base, pptr, pidx, D)
        for v in range(W.shape[0]):
            f = wptr[base + v]
            for s0 in range(W.shape[0]):
                if R[v, s0]:
                    widx[f] = s0
                    wval[f] = W[v, s0]
                    f += 1
    return wptr, widx, wval


@njit(cache=True, nogil=True)
def _deep_attrs(nptr, aptr, aids, iptr, iidx):
    """Every attribute at or inside each node: its own occurrences (flag 1), then each attribute
    of the nodes inside it (at any depth) that is not one of its own, once (flag 0).

    Two nodes' lists share an attribute exactly when the nodes are an active pair (see
    :func:`_active_pairs`); own-with-own shares are Gamma.

    Returns
    -------
    dptr, dend : int64 (N,)     node g's entries are dptr[g]:dend[g]
    dids, down : int64 (...)    attribute id and own flag of each entry
    """
    n = nptr.shape[0] - 1
    total = nptr[n]
    room = np.empty(total, dtype=np.int64)
    for e in range(n):  # room: own occurrences plus the room of the nodes inside
        base = nptr[e]
        for v in range(nptr[e + 1] - base):  # inner nodes come before their chunk
            g = base + v
            room[g] = aptr[g + 1] - aptr[g]
            for q in range(iptr[g], iptr[g + 1]):
                room[g] += room[base + iidx[q]]
    dptr = np.zeros(total + 1, dtype=np.int64)
    for g in range(total):
        dptr[g + 1] = dptr[g] + room[g]
    dids = np.zeros(dptr[total], dtype=np.int64)  # entries past dend[g] stay 0 (unused)
    down = np.zeros(dptr[total], dtype=np.int64)
    dend = np.empty(total, dtype=np.int64)
    for e in range(n):
        base = nptr[e]
        for v in range(nptr[e + 1] - base):
            g = base + v
            f = dptr[g]
            for q in range(aptr[g], aptr[g + 1]):
                dids[f] = aids[q]
                down[f] = 1
                f += 1
            c = f
            for q in range(iptr[g], iptr[g + 1]):
                w = base + iidx[q]
                for r in range(dptr[w], dend[w]):
                    dids[c] = dids[r]
                    c += 1
            dids[f:c].sort()
            k = f  # keep each inherited attribute once, and none of the own ones
            for r in range(f, c):
                x = dids[r]
                if r > f and x == dids[r - 1]:
                    continue
                mine = False
                for q in range(aptr[g], aptr[g + 1]):
                    if aids[q] == x:
                        mine = True
                        break
                if not mine:
                    dids[k] = x
                    down[k] = 0
                    k += 1
            dend[g] = k
    return dptr[:-1].copy(), dend, dids, down


@njit(cache=True, nogil=True)
def _index_attrs(head, nxt, own, flag, dptr1, dend1, dids1, down1, b1, n1, on, own_only):
    """Link (``on``) or unlink the deep attribute entries (:func:`_deep_attrs`; ``own_only``: the
    own ones only) of graph 1 into ``head``/``nxt``/``own``/``flag``: ``head[x]`` starts a linked
    list (``nxt``, -1 ends it) of graph 1's entries of attribute x, ``own`` naming each entry's
    node and ``flag`` its own flag."""
    base = dptr1[b1]
    for i in range(n1):
        for q in range(dptr1[b1 + i], dend1[b1 + i]):
            if own_only and not down1[q]:
                continue
            if on:
                own[q - base] = i
                flag[q - base] = down1[q]
                nxt[q - base] = head[dids1[q]]
                head[dids1[q]] = q - base
            else:
                head[dids1[q]] = -1


@njit(cache=True, nogil=True, inline="always")
def _active_pairs(b2, n2, dptr2, dend2, dids2, down2, head, nxt, own, flag, idx, si, sj, gam):
    """List the node pairs where H can be non-zero, in processing order; return their number.

    H_i(s, t) is non-zero only if s and t hold, at some depth inside them (or as themselves), two
    nodes sharing an attribute (S, E and H only add up Gamma of such pairs, L needs H): these are
    the *active* pairs, and M, A, L and AL are zero at all others. They are the pairs whose deep
    attribute lists (:func:`_deep_attrs`) share an entry: each entry of graph 2's node t walks
    graph 1's list of its attribute. Fills ``si``/``sj`` column by column (t in processing order,
    s sorted within a column: an order in which every table entry of the core depends on earlier
    ones only, since at a fixed t only H(s', t) with s' inside s is read), ``gam`` (Gamma: shared
    own attributes) and ``idx[s, t]`` = position in the list (-1 elsewhere: the caller resets it).
    """
    m = 0
    for j in range(n2):
        c0 = m
        for q in range(dptr2[b2 + j], dend2[b2 + j]):
            r = head[dids2[q]]
            oj = down2[q]
            while r >= 0:
                i = own[r]
                s = idx[i, j]
                if s < 0:
                    s = m
                    idx[i, j] = m
                    si[m] = i
                    sj[m] = j
                    gam[m] = 0.0
                    m += 1
                if oj and flag[r]:
                    gam[s] += 1.0
                r = nxt[r]
        if m - c0 > 1:  # sort the column by s (insertion: a column holds a few pairs)
            for s in range(c0 + 1, m):
                i, g = si[s], gam[s]
                f = s
                while f > c0 and si[f - 1] > i:
                    si[f], gam[f] = si[f - 1], gam[f - 1]
                    f -= 1
                si[f], gam[f] = i, g
            for s in range(c0, m):
                idx[si[s], j] = s
    return m


@njit(cache=True, nogil=True)
def _row(p, exact, row, b1, n1, nptr2, y0, y1, P1, P2, Q1, Q2, head, nxt, own, flag, T, out, col0, symmetric):
    """out[row, y - col0] = K(G1, G2_y) for y in y0..y1-1, graph 1 being nodes b1..b1+n1-1 and graph y
    nodes nptr2[y]..nptr2[y+1]-1 of the prepared arrays (also out[y, row] if ``symmetric``).

    ``P1``/``P2`` are the tuples returned by :func:`_prepare`, ``Q1``/``Q2`` the path weights and
    deep attribute lists of :func:`prepare`; graph 1's deep attribute entries are linked into
    head/nxt/own/flag (:func:`_index_attrs`; own entries only for p = 1); ``T`` is the
    scratch of :func:`_scratch`. Only the active pairs of :func:`_active_pairs` are visited, in
    processing order, with a row per pair of each table: E, H, A = H + M and, for pairs of inner
    nodes, L and AL. J and JL are not tabled: at each active pair they are the sums over the
    active pairs (s0, t0) of in-graph ancestors of W1 W2 A and W1 W2 AL (W of :func:`_paths`).
    Only M is needed up to length p: M_k reads H_q and J_{k-q} with q, k-q <= p-1, J reads A up
    to p-1, and S reads L at the length of the H it builds, so every other table stops at p-1.
    One call serves a whole row of the block: the arrays are unpacked once per row, not once per
    pair (passing ~40 arrays per pair cost ~0.37 us, as much as a third of an evaluation).
    """
    par1, D1, U1, B1, C1, aptr1, aids1, pptr1, pidx1, iptr1, iidx1 = P1
    par2, D2, U2, B2, C2, aptr2, aids2, pptr2, pidx2, iptr2, iidx2 = P2
    wptr1, widx1, wval1 = Q1[0], Q1[1], Q1[2]
    wptr2, widx2, wval2, dptr2, dend2, dids2, down2 = Q2
    idx, si, sj, gam, E, H, A, AL, L, Jv, JLv = T
    for y in range(y0, y1):
        b2, n2 = nptr2[y], nptr2[y + 1] - nptr2[y]
        K = 0.0
        if p == 1:  # one-node features only: the number of shared attribute occurrences
            for j in range(n2):
                for q in range(aptr2[b2 + j], aptr2[b2 + j + 1]):
                    r = head[aids2[q]]
                    while r >= 0:
                        K += 1.0
                        r = nxt[r]
            out[row, y - col0] = K
            if symmetric:
                out[y, row] = K
            continue
        m = _active_pairs(b2, n2, dptr2, dend2, dids2, down2, head, nxt, own, flag, idx, si, sj, gam)
        q1 = p - 1
        lead = q1 >= 2  # L and AL feed S at lengths >= 2 only
        for s in range(m):
            i, j = si[s], sj[s]
            g1, g2 = b1 + i, b2 + j
            g = gam[s]
            if not exact:
                K += g
            in_lo1, in_hi1 = iptr1[g1], iptr1[g1 + 1]
            in_lo2, in_hi2 = iptr2[g2], iptr2[g2 + 1]
            # item kernels: S (groups formed here), E (t hands an item up), H (s hands one up)
            E[s, 1] = g
            for k in range(2, q1 + 1):
                E[s, k] = 0.0
            if lead and in_lo1 < in_hi1 and in_lo2 < in_hi2:
                for qa in range(in_lo1, in_hi1):
                    xi = iidx1[qa]
                    bx = B1[b1 + xi]
                    for qb in range(in_lo2, in_hi2):
                        t = idx[xi, iidx2[qb]]
                        if t >= 0:
                            w = bx * B2[b2 + iidx2[qb]]
                            for k in range(2, q1 + 1):
                                E[s, k] += w * L[t, k]
            for qb in range(in_lo2, in_hi2):
                t = idx[i, iidx2[qb]]
                if t >= 0:
                    w = C2[b2 + iidx2[qb]]
                    for k in range(1, q1 + 1):
                        E[s, k] += w * E[t, k]
            for k in range(1, q1 + 1):
                H[s, k] = E[s, k]
            for qa in range(in_lo1, in_hi1):
                t = idx[iidx1[qa], j]
                if t >= 0:
                    w = C1[b1 + iidx1[qa]]
                    for k in range(1, q1 + 1):
                        H[s, k] += w * H[t, k]
            # sequence sums: J (and JL for a pair of inner nodes) from the active pairs of ancestors
            inner = lead and par1[g1] >= 0 and par2[g2] >= 0
            for k in range(1, q1 + 1):
                Jv[k] = 0.0
                JLv[k] = 0.0
            for a in range(wptr1[g1], wptr1[g1 + 1]):
                s0 = widx1[a]
                w1 = wval1[a]
                for c in range(wptr2[g2], wptr2[g2 + 1]):
                    t = idx[s0, widx2[c]]
                    if t >= 0:
                        w = w1 * wval2[c]
                        for k in range(1, q1 + 1):
                            Jv[k] += w * A[t, k]
                        if inner:
                            for k in range(1, q1):
                                JLv[k] += w * AL[t, k]
            A[s, 1] = H[s, 1]
            for k in range(2, p + 1):
                mk = 0.0
                for q in range(1, k):
                    mk += H[s, q] * Jv[k - q]
                if k <= q1:
                    A[s, k] = H[s, k] + mk
                if k == p or not exact:
                    K += mk
            if inner:  # lead mode: L = sum H JL, AL = U U H + L
                u = U1[g1] * U2[g2]
                AL[s, 1] = u * H[s, 1]
                L[s, 1] = 0.0
                for k in range(2, q1 + 1):
                    lk = 0.0
                    for q in range(1, k):
                        lk += H[s, q] * JLv[k - q]
                    L[s, k] = lk
                    AL[s, k] = u * H[s, k] + lk
        for s in range(m):
            idx[si[s], sj[s]] = -1
        out[row, y - col0] = K
        if symmetric:
            out[y, row] = K


@njit(cache=True, nogil=True)
def _scratch(m1, m2, p):
    """Scratch for graphs of up to m1 and m2 nodes: ``idx`` (-1: no active pair), the active-pair
    list with Gamma, the tables E, H, A, AL, L (one row per active pair) and the J, JL sums."""
    m1, m2 = max(m1, 1), max(m2, 1)
    cap = m1 * m2
    sh = (cap, p + 1)
    return (np.full((m1, m2), -1, dtype=np.int64), np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64),
            np.empty(cap), np.empty(sh), np.empty(sh), np.empty(sh), np.empty(sh), np.empty(sh), np.empty(p + 1),
            np.empty(p + 1))


@njit(cache=True, nogil=True)
def _max_size(nptr):
    m = 0
    for e in range(nptr.shape[0] - 1):
        m = max(m, nptr[e + 1] - nptr[e])
    return m


@njit(cache=True, nogil=True)
def _attr_index(dids1, dids2):
    """Scratch for :func:`_index_attrs`: ``head`` over every attribute id of both sides (-1 =
    empty list) and per-entry ``nxt``/``own``/``flag``, sized for all of side 1's entries."""
    top = 0
    for q in range(dids1.shape[0]):
        top = max(top, dids1[q] + 1)
    for q in range(dids2.shape[0]):
        top = max(top, dids2[q] + 1)
    m = max(dids1.shape[0], 1)
    return (np.full(top, -1, dtype=np.int64), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64),
            np.empty(m, dtype=np.int64))


@njit(cache=True, nogil=True)
def _block(p, exact, nptr1, P1, Q1, nptr2, P2, Q2, symmetric):
    na = nptr1.shape[0] - 1
    nb = nptr2.shape[0] - 1
    T = _scratch(_max_size(nptr1), _max_size(nptr2), p)
    head, nxt, own, flag = _attr_index(Q1[5], Q2[5])
    dptr1, dend1, dids1, down1 = Q1[3], Q1[4], Q1[5], Q1[6]
    out = np.empty((na, nb))
    for x in range(na):
        b1, n1 = nptr1[x], nptr1[x + 1] - nptr1[x]
        _index_attrs(head, nxt, own, flag, dptr1, dend1, dids1, down1, b1, n1, True, p == 1)
        _row(p, exact, x, b1, n1, nptr2, x if symmetric else 0, nb, P1, P2, Q1, Q2, head, nxt, own, flag, T, out, 0,
             symmetric)
        _index_attrs(head, nxt, own, flag, dptr1, dend1, dids1, down1, b1, n1, False, p == 1)
    return out


@njit(cache=True, nogil=True)
def _diag(p, exact, nptr, P, Q):
    n = nptr.shape[0] - 1
    m = _max_size(nptr)
    T = _scratch(m, m, p)
    head, nxt, own, flag = _attr_index(Q[5], Q[5])
    dptr, dend, dids, down = Q[3], Q[4], Q[5], Q[6]
    out = np.empty((n, 1))
    for x in range(n):
        b, size = nptr[x], nptr[x + 1] - nptr[x]
        _index_attrs(head, nxt, own, flag, dptr, dend, dids, down, b, size, True, p == 1)
        _row(p, exact, x, b, size, nptr, x, x + 1, P, P, Q, Q, head, nxt, own, flag, T, out, x, False)
        _index_attrs(head, nxt, own, flag, dptr, dend, dids, down, b, size, False, p == 1)
    return out[:, 0]


@njit(cache=True, nogil=True)
def _block_fixed_p(p, exact, nptr1, P1, Q1, nptr2, P2, Q2, symmetric):
    """:func:`_block` compiled for one value of p (a compile-time constant: the length loops get
    fixed trip counts; measured 11 % faster at p = 3, but twice slower at p = 1, which stays on
    :func:`_block`). Each p compiles once, then loads from the Numba cache."""
    literally(p)
    return _block(p, exact, nptr1, P1, Q1, nptr2, P2, Q2, symmetric)


@njit(cache=True, nogil=True)
def _diag_fixed_p(p, exact, nptr, P, Q):
    """:func:`_diag` compiled for one value of p (see :func:`_block_fixed_p`)."""
    literally(p)
    return _diag(p, exact, nptr, P, Q)


def prepare(X, lam):
    """The per-batch arrays of the pair core for an ``hdag`` batch: ``(nptr, P, Q)`` with ``nptr``
    and ``P`` from :func:`_prepare` (without ``rank``) and ``Q`` the path weights of
    :func:`_paths` followed by the deep attribute lists of :func:`_deep_attrs`. Each example is
    prepared once per block, not once per pair."""
    out = _prepare(X.offsets.astype(np.int64), X.columns["role"].astype(np.int64),
                   X.columns["a"].astype(np.int64), X.columns["b"].astype(np.int64), float(lam))
    nptr, P = out[0], out[1:-1]
    return nptr, P, _paths(nptr, P[7], P[8], P[1]) + _deep_attrs(nptr, P[5], P[6], P[9], P[10])


@register
@dataclass(frozen=True)
class HDAGKernel(BaseSpec):
    """HDAG kernel over hierarchical DAGs of attribute sets (docs/kernels.md (HDAG kernel)).

    Parameters
    ----------
    lam : float in (0, 1]
        Cost of skipping one terminated node (1 = no decay).
    p : int >= 1
        Largest number of attributes in a feature; lengths 1..p are summed.
    exact : bool
        docs/kernels.md's HDAG ``exact`` variant: only features of exactly p attributes (shorter lengths are
        still computed, as the longer ones are built from them, but not summed).
    rep : str
        Corpus representation read (an ``hdag`` batch).
    """

    kind = "hdag"
    added_later = ("exact",)
    reads = "hdag"
    lam: float = 0.5
    p: int = 3
    exact: bool = False
    rep: str = "hdag"

    def validate(self):
        self._number("lam", lo=0, hi=1, lo_open=True)
        self._number("p", lo=1, integer=True)
        self._flag("exact")
        self._string("rep")


    def block(self, X, Y=None):
        core = _block if self.p == 1 else _block_fixed_p
        n1, P1, Q1 = prepare(X, self.lam)
        if Y is None:
            return core(self.p, self.exact, n1, P1, Q1, n1, P1, Q1, True)
        n2, P2, Q2 = prepare(Y, self.lam)
        return core(self.p, self.exact, n1, P1, Q1, n2, P2, Q2, False)

    def diag(self, X):
        n1, P1, Q1 = prepare(X, self.lam)
        return (_diag if self.p == 1 else _diag_fixed_p)(self.p, self.exact, n1, P1, Q1)
