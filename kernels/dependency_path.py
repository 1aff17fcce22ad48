"""Dependency-based word subsequence kernel: common paths of two dependency trees.

Kate (2008), "A dependency-based word subsequence kernel", EMNLP 2008. docs/kernels.md, "Dependency path kernel"::

    K(T1, T2)   = sum_{n1 in T1, n2 in T2, w(n1) = w(n2)} (1 + CPP(n1, n2))
    CDP(n1, n2) = sum_{c1 in C(n1), c2 in C(n2), w(c1) = w(c2)} alpha (1 + CDP(c1, c2))
    CPP(n1, n2) = CDP(n1, n2)
                  + sum_{unordered {(c1, c2), (c1', c2')}: matched child pairs, c1 != c1', c2 != c2'}
                        alpha^2 (1 + CDP(c1, c2)) (1 + CDP(c1', c2'))

(CDP = CPP = 0 when w(n1) != w(n2)). A path is the simple path between two distinct nodes,
read as words with arrows from child to parent; it rises to a unique peak and descends, and a
common path of l edges weighs alpha^l. CDP counts common downward paths starting at (n1, n2),
CPP the common paths peaking there, and the 1 in K counts the common words. The paper prints
the two-arm terms as ``alpha * CDP``; docs/kernels.md fixes them to alpha^2 (1 + CDP)(1 + CDP') so
every path weighs alpha^(edges). A path with two identical arms (x -> w <- x) is counted once
per alignment, as the recursion does. ``w`` is the word id, or the lemma id (``match="lemma"``).

Algorithm. Once per batch each tree gets its nodes sorted by word id and a children-first
order (reversed preorder). A pair of trees merge-joins the two sorted lists, giving for every
node of T1 the range of equal-word nodes in T2 (nothing else is ever visited), then walks T1
children-first: for each matching pair it collects the matching child pairs, whose CDP values
are already memoised because children precede parents, and adds ``1 + CPP``. Cost
O(|T1| + |T2| + sum over matching pairs of deg(n1) deg(n2) + pairs of matching child pairs).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from gramtile.kernels.csr import max_run
from gramtile.kernels.errors import KernelSpecError, RepresentationError
from gramtile.kernels.spec import BaseSpec, register

#: Node column compared by each ``match`` value.
_COLUMN = {"word": "word", "lemma": "lemma"}


# ---- per-batch preparation ---------------------------------------------------------------

@njit(cache=True, nogil=True)
def _orders(offsets, key, head, cptr, cidx):
    """Per example: nodes sorted by key, and a children-first node order.

    Parameters
    ----------
    offsets : int64 (n+1,)
    key : int32 (total,)          word (or lemma) id per node
    head : int32 (total,)         local parent index, -1 for the root
    cptr : int64 (total+1,)       child CSR pointers (global node index)
    cidx : int32 (cptr[-1],)      local child indices

    Returns
    -------
    srt : int32 (total,)          local node indices sorted by key, per example
    skey : int32 (total,)         their keys (so the merge-join reads keys contiguously)
    post : int32 (total,)         local node indices, every child before its parent
    bad : int                     first example whose nodes are not one tree under its root
                                  (several roots, a cycle, a head outside it), else -1
    """
    total = key.shape[0]
    srt = np.empty(total, np.int32)
    skey = np.empty(total, np.int32)
    post = np.empty(total, np.int32)
    maxn = 1
    for e in range(offsets.shape[0] - 1):
        maxn = max(maxn, offsets[e + 1] - offsets[e])
    stack = np.empty(maxn, np.int32)
    bad = -1
    for e in range(offsets.shape[0] - 1):
        a = offsets[e]
        n = offsets[e + 1] - a
        if n == 0:
            continue
        order = np.argsort(key[a:a + n], kind="mergesort")
        for k in range(n):
            srt[a + k] = order[k]
            skey[a + k] = key[a + order[k]]
        root = -1
        for u in range(n):
            if head[a + u] < 0:
                root = u
                break
        if root < 0:
            bad = e
            break
        # preorder by an explicit stack, then reversed: descendants end up before ancestors
        sp = 0
        stack[0] = root
        k = 0
        while sp >= 0 and k < n:
            u = stack[sp]
            sp -= 1
            post[a + k] = u
            k += 1
            for c in range(cptr[a + u], cptr[a + u + 1]):
                if sp + 1 >= n:
                    break
                sp += 1
                stack[sp] = cidx[c]
        if k != n or sp >= 0:
            # the pair core reads every node once through ``post``: a forest or a cycle would
            # leave slots unset, so such a batch is refused here
            bad = e
            break
        for q in range(k // 2):
            t = post[a + q]
            post[a + q] = post[a + k - 1 - q]
            post[a + k - 1 - q] = t
    return srt, skey, post, bad


# ---- pair and block cores ----------------------------------------------------------------

@njit(cache=True, nogil=True)
def _pair(i, X, j, Y, alpha, lo, hi, memo, pv, p1, p2):
    """K(X_i, Y_j) by the CDP/CPP recursion over matching node pairs only.

    ``X``/``Y`` are ``(offsets, key, cptr, cidx, srt, skey, post)``; ``lo``/``hi`` (per node of
    X_i), ``memo`` (nx * ny CDP table) and ``pv``/``p1``/``p2`` (matched child pairs of one
    node pair) are scratch owned by the caller.
    """
    offx, keyx, cpx, cix, srtx, skx, postx = X
    offy, keyy, cpy, ciy, srty, sky, posty = Y
    ox = offx[i]
    nx = offx[i + 1] - ox
    oy = offy[j]
    ny = offy[j + 1] - oy
    # merge-join: Y_j's sorted positions [lo[u], hi[u]) hold the nodes with X_i's word at u
    for u in range(nx):
        lo[u] = 0
        hi[u] = 0
    p = 0
    q = 0
    matched = False
    while p < nx and q < ny:
        kp = skx[ox + p]
        kq = sky[oy + q]
        if kp < kq:
            p += 1
        elif kp > kq:
            q += 1
        else:
            qe = q + 1
            while qe < ny and sky[oy + qe] == kq:
                qe += 1
            while p < nx and skx[ox + p] == kp:
                u = srtx[ox + p]
                lo[u] = q
                hi[u] = qe
                p += 1
            q = qe
            matched = True
    if not matched:
        return 0.0
    a2 = alpha * alpha
    total = 0.0
    for t in range(nx):
        u = postx[ox + t]
        if hi[u] == lo[u]:
            continue
        cu0 = cpx[ox + u]
        cu1 = cpx[ox + u + 1]
        for s in range(lo[u], hi[u]):
            v = srty[oy + s]
            cv0 = cpy[oy + v]
            cv1 = cpy[oy + v + 1]
            npair = 0
            sdown = 0.0
            if cu1 > cu0 and cv1 > cv0:
                for c in range(cu0, cu1):
                    c1 = cix[c]
                    if hi[c1] == lo[c1]:
                        continue
                    k1 = keyx[ox + c1]
                    for d in range(cv0, cv1):
                        c2 = ciy[d]
                        if keyy[oy + c2] == k1:
                            w = 1.0 + memo[c1 * ny + c2]
                            pv[npair] = w
                            p1[npair] = c1
                            p2[npair] = c2
                            npair += 1
                            sdown += w
            cdp = alpha * sdown
            memo[u * ny + v] = cdp
            two = 0.0
            for a in range(npair):
                for b in range(a + 1, npair):
                    if p1[a] != p1[b] and p2[a] != p2[b]:
                        two += pv[a] * pv[b]
            total += 1.0 + cdp + a2 * two
    return total


@njit(cache=True, nogil=True)
def _scratch(X, Y):
    """Scratch sized to the largest trees and node degrees of X and Y."""
    mx, my = max_run(X[0]), max_run(Y[0])
    dx, dy = max_run(X[2]), max_run(Y[2])
    lo = np.empty(mx, np.int64)
    hi = np.empty(mx, np.int64)
    memo = np.empty(mx * my, np.float64)
    pv = np.empty(dx * dy, np.float64)
    p1 = np.empty(dx * dy, np.int64)
    p2 = np.empty(dx * dy, np.int64)
    return lo, hi, memo, pv, p1, p2


@njit(cache=True, nogil=True)
def _block(X, Y, sym, alpha):
    """Dense block K[i, j] = k(X_i, Y_j), shape (nx, ny); with ``sym`` (Y is X) only i <= j
    is computed and mirrored."""
    nx = X[0].shape[0] - 1
    ny = Y[0].shape[0] - 1
    out = np.zeros((nx, ny), np.float64)
    lo, hi, memo, pv, p1, p2 = _scratch(X, Y)
    for i in range(nx):
        j0 = i if sym else 0
        for j in range(j0, ny):
            v = _pair(i, X, j, Y, alpha, lo, hi, memo, pv, p1, p2)
            out[i, j] = v
            if sym:
                out[j, i] = v
    return out


@njit(cache=True, nogil=True)
def _diag(X, alpha):
    """Self-kernels k(X_i, X_i), shape (nx,)."""
    nx = X[0].shape[0] - 1
    out = np.zeros(nx, np.float64)
    lo, hi, memo, pv, p1, p2 = _scratch(X, X)
    for i in range(nx):
        out[i] = _pair(i, X, i, X, alpha, lo, hi, memo, pv, p1, p2)
    return out


# ---- spec -------------------------------------------------------------------------------

@register
@dataclass(frozen=True)
class DependencyPathKernel(BaseSpec):
    """Dependency-based word subsequence kernel (Kate 2008): weighted count of common paths.

    Parameters
    ----------
    alpha : float in (0, 1]
        Weight per edge: a common path of l edges adds alpha^l (a common word adds 1).
    match : {"word", "lemma"}
        Node attribute compared for equality.
    rep : str
        Corpus representation read (a dependency-tree representation).
    """

    kind = "dependency_path"
    reads = "dep"
    alpha: float = 0.25
    match: str = "word"
    rep: str = "dep"

    def validate(self):
        self._number("alpha", 0, 1, lo_open=True)
        self._choice("match", tuple(_COLUMN))
        self._string("rep")

    def _prep(self, batch, which):
        """``(offsets, key, cptr, cidx, srt, skey, post)`` of a dependency batch."""
        if getattr(batch, "kind", None) != "dep":
            raise RepresentationError(
                f"kernel {self.kind!r} reads dependency trees, but {which} is a "
                f"{getattr(batch, 'kind', type(batch).__name__)!r} batch; encode pipeline.structures.DepTree "
                f"values (representation {self.rep_name!r})")
        off = np.ascontiguousarray(batch.offsets, dtype=np.int64)
        key = np.ascontiguousarray(batch.columns[_COLUMN[self.match]], dtype=np.int32)
        if key.size and key.min() < 0:
            raise KernelSpecError(
                f"parameter 'match' of kernel {self.kind!r} is {self.match!r}, but some examples of {which} have no "
                f"{self.match}s (id -1); give {self.match}s for every word or set match to 'word'")
        head = np.ascontiguousarray(batch.columns["head"], dtype=np.int32)
        sizes = np.repeat(np.diff(off), np.diff(off))
        outside = np.nonzero((head < -1) | (head >= sizes))[0]
        if outside.size:
            e = int(np.searchsorted(off, outside[0], side="right") - 1)
            raise RepresentationError(
                f"dependency example {e} of {which}: word {int(outside[0] - off[e])} has head {int(head[outside[0]])}, "
                f"outside [-1, {int(sizes[outside[0]]) - 1}]; heads are 0-based word indices within the example, "
                f"-1 for the root")
        cp = np.ascontiguousarray(batch.child_ptr, dtype=np.int64)
        ci = np.ascontiguousarray(batch.child_idx, dtype=np.int32)
        srt, skey, post, bad = _orders(off, key, head, cp, ci)
        if bad >= 0:
            raise RepresentationError(
                f"dependency example {bad} of {which} is not a tree (heads "
                f"{head[off[bad]:off[bad + 1]].tolist()[:20]}): it needs exactly one root (head -1) and every word "
                f"must reach it; build batches from pipeline.structures.DepTree values, which check this")
        return (off, key, cp, ci, srt, skey, post)

    def block(self, X, Y=None) -> np.ndarray:
        """Dense float64 block ``K[i, j] = k(X_i, Y_j)``, shape (X.n, Y.n); ``Y=None`` means X."""
        px = self._prep(X, "X")
        if Y is None:
            return _block(px, px, True, self.alpha)
        return _block(px, self._prep(Y, "Y"), False, self.alpha)

    def diag(self, X) -> np.ndarray:
        """Self-kernels ``k(X_i, X_i)``, shape (X.n,)."""
        return _diag(self._prep(X, "X"), self.alpha)
