"""Smoothed partial tree kernel (SPTK): PT whose node labels match softly.

Croce, Moschitti & Basili 2011, "Structured lexical similarity via convolution kernels on
dependency trees" (EMNLP). PT (:mod:`gramtile.kernels.tree_kernels`) with label equality replaced
by a similarity sigma(n1, n2) in [0, 1] (docs/kernels.md, "Smoothed partial tree kernel")::

      K(T1, T2) = sum_{n1 in T1, n2 in T2} Delta(n1, n2)
      Delta(n1, n2) = sigma(n1, n2) mu lam^2 t                                  if n1 or n2 is childless
                    = sigma(n1, n2) mu (lam^2 + sum_{J1, J2, |J1| = |J2| >= 1} lam^{g(J1) + g(J2)}
                                        prod_i Delta(ch_{J1_i}(n1), ch_{J2_i}(n2)))   otherwise,

      sigma(n1, n2) = 1                       if label(n1) = label(n2)
                    = s(label(n1), label(n2)) if both nodes are lexical and s >= threshold
                    = 0                       otherwise.

``s`` is a table over the corpus symbol ids (a corpus resource: a sparse matrix holding the
pairs of lexical symbols whose similarity reaches the threshold; built once per corpus by
:mod:`gramtile.pipeline.resources.lexical`). Which nodes are lexical: with ``lexical="leaves"``
the childless nodes (the core checks both nodes of an off-diagonal pair are childless); with
``lexical="prefix"`` the nodes whose label starts with ``prefix`` (KeLP's ``LEX##``), which the
table itself encodes (it holds only such symbols). Parameters lam, mu, gap, terminal factor t
and max_length are PT's. With s = 0 off the diagonal (sigma = label equality) K is PT's K, bit
for bit: the core visits node pairs, child pairs and dynamic-programme cells in PT's order and
reuses its exact shortcuts.

Algorithm. For a row example X_i, every off-diagonal table entry (u, v, s) with u one of X_i's
labels is linked under v once (``head[v]``); for each Y_j the pairs (group of X_i, group of
Y_j, sigma) are then the equal-label groups (sigma 1, listed first) and the linked entries of
Y_j's labels. X_i's nodes are read downwards (children before parents, as in PT); a node with
partners gets a memo row over all nodes of Y_j, zeroed, so the Delta of any child pair is a
single read (0 where the children do not match). A child pair "matches" where its Delta is not
0; from there PT's per-node shortcuts (unary nodes; no two matches in increasing order; two
matches; otherwise the dynamic programme over the box of the matches) give PT's exact
expressions. The mask shortcut of PT (children's labels share no bit) does not hold for similar
labels and is not used; its value, mu lam^2, is what the scan gives when nothing matches.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from numba import njit

from gramtile.kernels.errors import KernelSpecError, RepresentationError
from gramtile.kernels.spec import BaseSpec, register
from gramtile.kernels.tree_kernels import check_tree, label_index

_FULL, _SYM, _DIAG = 0, 1, 2

#: Similarity sources of the lexical table (pipeline/resources/lexical.py builds each).
SOURCES = ("vectors", "wordnet", "lsa")
#: Vector builders of ``vectors: "corpus:BUILDER"`` (pipeline/resources/vectors.py, BUILDERS).
CORPUS_BUILDERS = ("ppmi", "word2vec")


@njit(cache=True, nogil=True, inline="always")
def _child_delta(base, memo, c1, c2):
    b = base[c1]
    if b < 0:
        return 0.0
    return memo[b + c2]


@njit(cache=True, nogil=True)
def _dp(c1a, r0, nb1, c2a, c0, nb2, cix, ciy, base, memo, dp0, dp1, lam, f):
    """PT's child-sequence programme (``tree_kernels._children_dp``) over the box of rows r0..
    and columns c0.., with a child pair's Delta read from the dense memo rows (a pair matches
    where it is not 0)."""
    prev = dp0
    cur = dp1
    for jj in range(nb2 + 1):
        prev[jj] = 0.0
    cur[0] = 0.0
    acc = 0.0
    for ii in range(r0, r0 + nb1):
        b = base[cix[c1a + ii]]
        run = 0.0
        for jj in range(nb2):
            s = 0.0
            if b >= 0:
                v = memo[b + ciy[c2a + c0 + jj]]
                if v != 0.0:
                    s = v * (1.0 + f * prev[jj])
                    acc += s
            run = s + lam * run
            cur[jj + 1] = run + lam * prev[jj + 1]
        prev, cur = cur, prev
    return acc


@njit(cache=True, nogil=True)
def _dp_limited(c1a, r0, nb1, c2a, c0, nb2, cix, ciy, base, memo, E, S, D, lam, f, top):
    """PT's length-limited programme (``tree_kernels._children_dp_limited``), Delta from the memo."""
    w = nb2 + 1
    acc = 0.0
    for ii in range(nb1):
        b = base[cix[c1a + r0 + ii]]
        for jj in range(nb2):
            e = 0.0
            if b >= 0:
                e = memo[b + ciy[c2a + c0 + jj]]
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
def _delta(n1, n2, ox, oy, cpx, cix, cpy, ciy, base, memo, dp0, dp1, E, S, D, lam, lam2, mu, leafval, f,
           maxlen):
    """PT's Delta(n1, n2) without sigma, children's Delta read from the memo (PT's expressions)."""
    c1a = cpx[ox + n1]
    nc1 = cpx[ox + n1 + 1] - c1a
    c2a = cpy[oy + n2]
    nc2 = cpy[oy + n2 + 1] - c2a
    if nc1 == 0 or nc2 == 0:
        return leafval
    if nc1 == 1 and nc2 == 1:
        d = mu * lam2
        v = _child_delta(base, memo, cix[c1a], ciy[c2a])
        if v != 0.0:
            d += mu * v
        return d
    nm = 0
    chain = False
    minc = nc2
    c1 = 0
    r1 = 0
    i1 = j1 = i2 = j2 = nc1
    v1 = v2 = 0.0
    ssum = 0.0
    for ii in range(nc1):
        b = base[cix[c1a + ii]]
        if b < 0:
            continue
        first = nc2
        for jj in range(nc2):
            v = memo[b + ciy[c2a + jj]]
            if v != 0.0:
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
        acc = _dp_limited(c1a, i1, r1 - i1 + 1, c2a, minc, c1 - minc + 1, cix, ciy, base, memo, E, S, D, lam, f,
                          min(maxlen, min(nc1, nc2)))
    else:
        acc = _dp(c1a, i1, r1 - i1 + 1, c2a, minc, c1 - minc + 1, cix, ciy, base, memo, dp0, dp1, lam, f)
    return mu * (lam2 + acc)


@njit(cache=True, nogil=True)
def _block_sptk(X, Y, mode, tptr, tidx, tval, threshold, leaves_only, lam, mu, tf, f, maxlen):
    """SPTK block ``K[i, j] = k(X_i, Y_j)`` (``mode`` 0 full, 1 symmetric, 2 diagonal as (nx, 1)).

    ``X``, ``Y``: :func:`gramtile.kernels.tree_kernels.label_index` of the batches. ``tptr``,
    ``tidx``, ``tval``: the similarity table (CSR over symbol ids; the diagonal is ignored, equal
    labels have sigma 1); entries below ``threshold`` are ignored. ``leaves_only``: an
    off-diagonal entry applies only to two childless nodes.
    """
    offx, colx, cpx, cix, uoffx, ukeyx = X[0], X[1], X[2], X[3], X[7], X[8]
    soffx, snodex, ubegx, uendx = X[5], X[6], X[9], X[10]
    offy, cpy, ciy, soffy, snodey, uoffy, ukeyy, ubegy, uendy = Y[0], Y[2], Y[3], Y[5], Y[6], Y[7], Y[8], Y[9], Y[10]
    nx = offx.shape[0] - 1
    ny = offy.shape[0] - 1
    out = np.zeros((nx, 1 if mode == _DIAG else ny), np.float64)
    nsym = tptr.shape[0] - 1
    # scratch sized to the batches
    mx = 1
    gx = 1
    ex = 1
    for i in range(nx):
        mx = max(mx, offx[i + 1] - offx[i])
        gx = max(gx, uoffx[i + 1] - uoffx[i])
        e = 0
        for u in range(uoffx[i], uoffx[i + 1]):
            e += tptr[ukeyx[u] + 1] - tptr[ukeyx[u]]
        ex = max(ex, e)
    my = 1
    gy = 1
    for j in range(ny):
        my = max(my, offy[j + 1] - offy[j])
        gy = max(gy, uoffy[j + 1] - uoffy[j])
    cx = 1
    for g in range(cpx.shape[0] - 1):
        cx = max(cx, cpx[g + 1] - cpx[g])
    cy = 1
    for g in range(cpy.shape[0] - 1):
        cy = max(cy, cpy[g + 1] - cpy[g])
    head = np.full(nsym, -1, np.int64)        # symbol -> first linked entry of X_i's table rows
    eu = np.empty(ex, np.int64)               # entry: X_i's local group
    es = np.empty(ex, np.float64)             # entry: sigma
    enext = np.empty(ex, np.int64)
    table = np.full(nsym, -1, np.int64)       # symbol -> X_i's local group of that label
    phead = np.full(gx, -1, np.int64)         # X_i's local group -> first partner (Y_j group, sigma)
    cap = gx * gy + gy
    pg = np.empty(cap, np.int64)
    ps = np.empty(cap, np.float64)
    pn = np.empty(cap, np.int64)
    lgrp = np.empty(mx, np.int64)
    base = np.full(mx, -1, np.int64)
    memo = np.empty(mx * my, np.float64)
    dp0 = np.empty(cy + 1, np.float64)
    dp1 = np.empty(cy + 1, np.float64)
    tab = cx * cy if maxlen > 0 else 1
    E = np.empty(tab, np.float64)
    S = np.empty(tab, np.float64)
    D = np.empty((cx + 1) * (cy + 1) if maxlen > 0 else 1, np.float64)
    lam2 = lam * lam
    leafval = mu * lam2 * tf
    for i in range(nx):
        ox = offx[i]
        nxi = offx[i + 1] - ox
        sx = soffx[i]
        ux = uoffx[i]
        ng = uoffx[i + 1] - ux
        ne = 0
        for r in range(ng):
            lab = ukeyx[ux + r]
            table[lab] = r
            for s in range(ubegx[ux + r], uendx[ux + r]):
                lgrp[snodex[sx + s]] = r
            for p in range(tptr[lab], tptr[lab + 1]):
                v = tidx[p]
                if v == lab or tval[p] < threshold or tval[p] <= 0.0:
                    continue
                eu[ne] = r
                es[ne] = tval[p]
                enext[ne] = head[v]
                head[v] = ne
                ne += 1
        j0 = 0 if mode == _FULL else i
        j1 = i + 1 if mode == _DIAG else ny
        for j in range(j0, j1):
            oy = offy[j]
            nyj = offy[j + 1] - oy
            sy = soffy[j]
            npair = 0
            # similar labels first (prepended, so they come after the equal label)
            for g in range(uoffy[j], uoffy[j + 1]):
                e = head[ukeyy[g]]
                while e >= 0:
                    r = eu[e]
                    pg[npair] = g
                    ps[npair] = es[e]
                    pn[npair] = phead[r]
                    phead[r] = npair
                    npair += 1
                    e = enext[e]
            for g in range(uoffy[j], uoffy[j + 1]):
                r = table[ukeyy[g]]
                if r >= 0:
                    pg[npair] = g
                    ps[npair] = 1.0
                    pn[npair] = phead[r]
                    phead[r] = npair
                    npair += 1
            v_total = 0.0
            if npair > 0:
                pos = 0
                for n1 in range(nxi - 1, -1, -1):
                    p = phead[lgrp[n1]]
                    if p < 0:
                        continue
                    base[n1] = pos
                    for k in range(nyj):
                        memo[pos + k] = 0.0
                    leaf1 = cpx[ox + n1 + 1] == cpx[ox + n1]
                    while p >= 0:
                        g = pg[p]
                        sig = ps[p]
                        same = ukeyy[g] == colx[ox + n1]
                        for b in range(ubegy[g], uendy[g]):
                            n2 = snodey[sy + b]
                            if not same and leaves_only and not (leaf1 and cpy[oy + n2 + 1] == cpy[oy + n2]):
                                continue
                            d = sig * _delta(n1, n2, ox, oy, cpx, cix, cpy, ciy, base, memo, dp0, dp1, E, S, D,
                                             lam, lam2, mu, leafval, f, maxlen)
                            memo[pos + n2] = d
                            v_total += d
                        p = pn[p]
                    pos += nyj
                for n1 in range(nxi):
                    base[n1] = -1
                for r in range(ng):
                    phead[r] = -1
            if mode == _DIAG:
                out[i, 0] = v_total
            else:
                out[i, j] = v_total
                if mode == _SYM:
                    out[j, i] = v_total
        for r in range(ng):
            lab = ukeyx[ux + r]
            table[lab] = -1
            for p in range(tptr[lab], tptr[lab + 1]):
                head[tidx[p]] = -1
    return out


def table_arrays(A):
    """``(indptr int64, indices int32, data float64)`` of a similarity table (anything with CSR
    ``indptr``/``indices``/``data``, e.g. a scipy CSR matrix), checked: square, values in [0, 1]."""
    try:
        ptr = np.ascontiguousarray(A.indptr, dtype=np.int64)
        idx = np.ascontiguousarray(A.indices, dtype=np.int32)
        val = np.ascontiguousarray(A.data, dtype=np.float64)
        shape = tuple(A.shape)
    except AttributeError:
        raise KernelSpecError(f"the similarity table of kernel 'sptk' must be a CSR matrix over the symbol ids, "
                              f"got {type(A).__name__}") from None
    n = ptr.shape[0] - 1
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] != n or idx.shape != val.shape or \
            (n >= 0 and ptr[-1] != idx.shape[0]):
        raise KernelSpecError(f"the similarity table of kernel 'sptk' must be a square CSR matrix, got shape {shape} "
                              f"with {ptr.shape[0]} row pointers and {idx.shape[0]} entries")
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
        raise KernelSpecError("the similarity table of kernel 'sptk' has a column index outside its symbols")
    if val.size and not (np.all(np.isfinite(val)) and float(val.min()) >= 0.0 and float(val.max()) <= 1.0):
        raise KernelSpecError("the similarity table of kernel 'sptk' must hold values in [0, 1] "
                              f"(got min {float(val.min())!r}, max {float(val.max())!r})")
    return ptr, idx, val


@register
@dataclass(frozen=True)
class SmoothedPartialTreeKernel(BaseSpec):
    """Smoothed partial tree kernel (SPTK, Croce, Moschitti & Basili 2011): PT where two lexical
    nodes match with the similarity of their words.

    Parameters
    ----------
    lam, mu, gap, terminal_factor, max_length :
        As in PT (:class:`gramtile.kernels.tree_kernels.PartialTreeKernel`).
    similarity : {"vectors", "wordnet", "lsa"}
        Lexical similarity: cosine of word vectors (clipped at 0), WordNet synonymy, or cosine in
        the corpus's LSA space.
    vectors : str or None
        With ``similarity="vectors"``: the vector source, a word-vector file (word2vec / GloVe /
        fastText text, word2vec binary ``.bin``, or ``.npy`` with a ``.vocab`` file beside it),
        ``spacy:NAME`` (the static vectors of a spaCy pipeline) or ``corpus:BUILDER`` (vectors
        trained on the examples of ``rep``: ``corpus:ppmi``, the default builder, or
        ``corpus:word2vec``). The source is part of the spec; in a corpus store its vectors are a
        stored resource (``gramtile prepare --vectors``), and the table built from them a corpus
        resource whose content hash every Gram store records.
    threshold : float in [0, 1]
        Similarities below it count as 0 (and are left out of the sparse table).
    lexical : {"leaves", "prefix"}
        Which nodes are lexical: childless nodes (dependency-derived trees, GRCT, bracket trees)
        or nodes whose label starts with ``prefix`` (KeLP's LCT / LOCT / GRCT labels ``LEX##``).
    prefix : str
        The lexical label prefix: with ``lexical="prefix"`` it marks the lexical nodes; in both
        modes it is removed from a label before the word is looked up (GRCT leaves carry it).
    same_pos : bool
        Labels ``word::p`` (KeLP) are similar only with the same coarse PoS ``p``.
    rep : str
        Corpus representation read (an ordered-tree representation).
    """

    kind = "sptk"
    reads = "tree"
    lam: float = 0.4
    mu: float = 0.4
    gap: str = "gaps"
    terminal_factor: float = 1.0
    max_length: int | None = None
    similarity: str = "vectors"
    vectors: str | None = None
    threshold: float = 0.5
    lexical: str = "leaves"
    prefix: str = "LEX##"
    same_pos: bool = True
    rep: str = "tree"

    def validate(self):
        self._number("lam", 0, 1, lo_open=True)
        self._number("mu", 0, 1, lo_open=True)
        self._choice("gap", ("gaps", "span"))
        self._number("terminal_factor", 0, None, lo_open=True)
        if self.max_length is not None:
            self._number("max_length", 1, None, integer=True)
        self._choice("similarity", SOURCES)
        if self.similarity == "vectors":
            if not isinstance(self.vectors, str) or not self.vectors:
                raise KernelSpecError("kernel 'sptk' with similarity='vectors' needs parameter 'vectors': the path "
                                      f"of a word-vector file, 'spacy:NAME' or 'corpus:BUILDER', got {self.vectors!r}")
            if self.vectors.startswith("corpus:") and self.vectors[len("corpus:"):] not in ("",) + CORPUS_BUILDERS:
                raise KernelSpecError(f"parameter 'vectors' of kernel 'sptk' = {self.vectors!r}: unknown builder; "
                                      f"known: {', '.join('corpus:' + b for b in CORPUS_BUILDERS)}")
        elif self.vectors is not None:
            raise KernelSpecError(f"parameter 'vectors' of kernel 'sptk' is read only with similarity='vectors' "
                                  f"(got similarity={self.similarity!r}); drop it")
        self._number("threshold", 0, 1)
        self._choice("lexical", ("leaves", "prefix"))
        self._string("prefix")
        self._flag("same_pos")
        self._string("rep")

    def table_params(self) -> dict:
        """What fixes the similarity table (the resource's name is built from it)."""
        return {"source": self.similarity, "vectors": self.vectors, "threshold": self.threshold,
                "lexical": self.lexical, "prefix": self.prefix,
                "same_pos": self.same_pos}

    def resources(self) -> tuple:
        """The lexical similarity table, ``sptk:{...}`` (its parameters as canonical JSON)."""
        return ("sptk:" + json.dumps(self.table_params(), sort_keys=True, separators=(",", ":")),)

    def _table(self, resources, X, Y):
        name = self.resources()[0]
        if not resources or name not in resources:
            raise KernelSpecError(f"kernel 'sptk' needs the resource {name!r} (the lexical similarity table over "
                                  f"the corpus symbols); pass it with the batches, or use gramtile.gram(), which "
                                  f"builds it")
        ptr, idx, val = table_arrays(resources[name])
        top = max(int(X.columns["label"].max(initial=-1)), -1 if Y is None else int(Y.columns["label"].max(initial=-1)))
        if top >= ptr.shape[0] - 1:
            raise KernelSpecError(f"resource {name!r} covers {ptr.shape[0] - 1} symbols but the examples use symbol "
                                  f"id {top}; rebuild it from the vocabulary the examples were encoded with")
        return ptr, idx, val

    def _core(self, ix, iy, mode, table):
        f = 1.0 if self.gap == "gaps" else self.lam * self.lam
        return _block_sptk(ix, iy, mode, *table, float(self.threshold), self.lexical == "leaves", float(self.lam),
                           float(self.mu), float(self.terminal_factor), float(f), int(self.max_length or 0))

    def _prep(self, batch, which):
        check_tree(self, batch, which)
        if batch.columns["label"].size and int(batch.columns["label"].min()) < 0:
            raise RepresentationError(f"kernel 'sptk': {which} has a node without label")
        return label_index(batch)

    def block(self, X, Y=None, resources=None) -> np.ndarray:
        """Dense float64 block ``K[i, j] = k(X_i, Y_j)``; ``Y=None`` means X (upper triangle mirrored)."""
        ix = self._prep(X, "X")
        table = self._table(resources, X, Y)
        if Y is None:
            return self._core(ix, ix, _SYM, table)
        return self._core(ix, self._prep(Y, "Y"), _FULL, table)

    def diag(self, X, resources=None) -> np.ndarray:
        """Self-kernels ``k(X_i, X_i)``, shape (X.n,)."""
        ix = self._prep(X, "X")
        return self._core(ix, ix, _DIAG, self._table(resources, X, None))[:, 0].copy()
