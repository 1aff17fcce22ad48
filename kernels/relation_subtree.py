"""Relation-example subtree kernels: contiguous and sparse (Zelenko, Aone & Richardella 2003).

Zelenko, Aone, Richardella (2003), "Kernel methods for relation extraction", JMLR 3,
sections 5.1, 5.2 and Appendix B; docs/kernels.md, "Relation subtree kernels". For relation examples P1, P2
(shallow-parse trees whose nodes have Type, Role and Text)::

    K(P1, P2) = 0                                   if t(P1.p, P2.p) = 0
              = k(P1.p, P2.p) + Kc(P1.c, P2.c)      otherwise
    sparse:     Kc = sum_{i, j, l(i) = l(j) >= 1} lam^{d(i)} lam^{d(j)} sum_s K(P1[i_s], P2[j_s]) prod_s t(P1[i_s].p, P2[j_s].p)
    contiguous: Kc = the same sum over contiguous i, j only, weighted lam^{l(i)}

with i, j strictly increasing child index sequences and d(i) = i_last - i_first + 1.

Node functions (the paper's section 6.2 defaults): ``t`` = 1 iff Class(Type) and Role are
equal, ``k`` = 1 iff both nodes have a Text and it is equal. ``type_weight`` (beta, default 0 =
the paper) adds the agreement of Class(Type) and Role to the node similarity,
``k = [Text equal] + beta t``, as section 5 allows ("the similarity function on nodes is computed
in terms of the nodes' attributes"); a sum of equality kernels with non-negative weights is a
kernel. Why: with the paper's k, two examples whose matching nodes share no head text have
K = 0 however alike their shapes, so the kernel cannot see e.g. a location name right before an
organisation name ("U.S. Congress") unless both names are the same words, while Appendix C's
Type,Role features can; with beta > 0 every matched chain of nodes counts. The attribute tests
of t and k are equality tests on integer keys, computed once per batch by :func:`node_keys` from the batch columns; an equality test on
any key is a kernel, so swapping the attribute comparison means writing another key function
(and, later, a spec parameter selecting it) without touching the cores. Class() itself is
applied by the encoder (pipeline/representations/relation.py), which stores it as the ``class`` column.

Algorithms, per node pair (u, v) with t = 1, given K of all child pairs (children have larger
preorder indices, so walking both trees backwards makes every child pair final first; a
top-down pass first marks the node pairs reachable from the root pair through t-matching
pairs, and only those are computed). With m, n children, T[a, b] = t and Kab = K of child pair
(a, b):

* contiguous: the paper's recurrences (4)-(6),
  ``L(a, b) = T (1 + L(a+1, b+1))``,
  ``C(a, b) = T (g(L(a, b)) Kab + lam C(a+1, b+1))`` with g(L) = lam + ... + lam^L (the closed form
  lam (1 - lam^L) / (1 - lam) is 0/0 at lam = 1), ``Kc = sum C``; O(mn).
* sparse: a forward-backward form, O(mn) instead of the O(mn^3) of Appendix B. Split each
  chain pair's weight at any of its matched positions (a, b):
  lam^{d(i) + d(j)} = lam^2 lam^{(a - i_1) + (b - j_1)} lam^{(i_q - a) + (j_q - b)}, so
  ``Kc = lam^2 sum_{a,b} Kab F(a, b) G(a, b)`` where F sums the prefix weights of the chains
  ending at (a, b) and G the suffix weights of those starting there:
  ``F(a, b) = T (1 + lam^2 D(a-1, b-1))``, ``D(a, b) = sum_{a' <= a, b' <= b} lam^{(a-a') + (b-b')} F(a', b')``
  (and G, E mirrored). D is built as a row recurrence plus a column recurrence, so every step
  adds non-negative terms (no cancellation). tests/reference/relation_subtree.py checks it
  against the explicit sum of the definition and against Appendix B with docs/kernels.md's two
  corrections (``C'_q`` recurses over (i-1, j); ``K_{c,q}`` has no leading lam), plus the same
  (i-1, j) correction in ``C'_{q,r}``, which is misprinted like ``C'_q``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from gramtile.kernels.batches import register_batch_kind
from gramtile.kernels.csr import max_run
from gramtile.kernels.errors import RepresentationError
from gramtile.kernels.spec import BaseSpec, register

#: Node columns of a ``relation`` batch (preorder; ids of the ``sym`` vocabulary; text -1 when
#: absent; ``class`` = Class(Type), see pipeline/representations/relation.py).
RELATION_COLUMNS = ("type", "class", "role", "text", "parent")
register_batch_kind("relation", RELATION_COLUMNS)

_CONTIGUOUS, _SPARSE = 0, 1


def node_keys(batch, name_text: bool = True):
    """The node functions as integer keys: t(p1, p2) = [tkey equal], k(p1, p2) = [kkey equal and
    >= 0] (+ type_weight t in the cores).

    Parameters
    ----------
    batch : Batch of kind ``"relation"``
    name_text : bool
        False: name chunks (nodes whose ``class`` differs from their ``type``, i.e. Types that
        Class() maps to an entity class: PNP, ONP, LNP) get no Text key, so k ignores their head
        text and they contribute only ``type_weight * t``.

    Returns
    -------
    tkey : int64 (total_nodes,)   (Class(Type), Role) packed into one integer
    kkey : int64 (total_nodes,)   Text id, -1 when the node has no Text (matches nothing)
    """
    cls = batch.columns["class"].astype(np.int64)
    role = batch.columns["role"].astype(np.int64)
    tkey = (cls << 32) | role
    kkey = batch.columns["text"].astype(np.int64)
    if not name_text:
        # a name's head lemma ("smith", "corporation") rarely recurs across relation examples:
        # matching it mostly adds noise, the name's class and role (t) carry the information
        kkey = np.where(batch.columns["class"] != batch.columns["type"], -1, kkey)
    return np.ascontiguousarray(tkey), np.ascontiguousarray(kkey)


# ---- children kernels ----------------------------------------------------------------------

@njit(cache=True, nogil=True)
def _kc_contiguous(m, n, T, Kch, L, C, geo, lam):
    """Kc over contiguous child subsequences, recurrences (4)-(6); arrays are (m+1, n+1)."""
    for a in range(m + 1):
        L[a, n] = 0
        C[a, n] = 0.0
    for b in range(n + 1):
        L[m, b] = 0
        C[m, b] = 0.0
    s = 0.0
    for a in range(m - 1, -1, -1):
        for b in range(n - 1, -1, -1):
            if T[a, b]:
                run = L[a + 1, b + 1] + 1
                L[a, b] = run
                c = geo[run] * Kch[a, b] + lam * C[a + 1, b + 1]
                C[a, b] = c
                s += c
            else:
                L[a, b] = 0
                C[a, b] = 0.0
    return s


@njit(cache=True, nogil=True)
def _kc_sparse(m, n, T, Kch, F, R, D, lam):
    """Kc over all child subsequences by the forward-backward form; arrays are (m+2, n+2).

    Index shift: child a lives at row a+1, so rows/columns 0 and m+1/n+1 are zero borders.
    """
    lam2 = lam * lam
    for a in range(m + 2):
        for b in range(n + 2):
            R[a, b] = 0.0
            D[a, b] = 0.0
    # forward: F(a, b) = T (1 + lam^2 D(a-1, b-1)), D = lam-discounted 2-D prefix sum of F
    for a in range(1, m + 1):
        for b in range(1, n + 1):
            f = 0.0
            if T[a - 1, b - 1]:
                f = 1.0 + lam2 * D[a - 1, b - 1]
            F[a, b] = f
            R[a, b] = f + lam * R[a, b - 1]
            D[a, b] = R[a, b] + lam * D[a - 1, b]
    # backward: G mirrored, reusing R and D as the suffix sums
    for a in range(m + 2):
        for b in range(n + 2):
            R[a, b] = 0.0
            D[a, b] = 0.0
    s = 0.0
    for a in range(m, 0, -1):
        for b in range(n, 0, -1):
            g = 0.0
            if T[a - 1, b - 1]:
                g = 1.0 + lam2 * D[a + 1, b + 1]
                s += Kch[a - 1, b - 1] * F[a, b] * g
            R[a, b] = g + lam * R[a, b + 1]
            D[a, b] = R[a, b] + lam * D[a + 1, b]
    return lam2 * s


# ---- pair and block cores -----------------------------------------------------------------

@njit(cache=True, nogil=True)
def _pair(i, X, j, Y, mode, lam, beta, geo, need, ktab, T, Kch, L, C, F, R, D):
    """K(X_i, Y_j) for relation examples ``X``/``Y`` = ``(offsets, tkey, kkey, cptr, cidx)``;
    ``beta`` = type_weight, added to k of every computed (so t-matching) node pair."""
    offx, tkx, kkx, cpx, cix = X
    offy, tky, kky, cpy, ciy = Y
    ox = offx[i]
    nx = offx[i + 1] - ox
    oy = offy[j]
    ny = offy[j + 1] - oy
    if tkx[ox] != tky[oy]:
        return 0.0
    # top-down: mark the node pairs reachable from the root pair through t-matching child pairs;
    # K is a sum of k over such pairs times positive weights, so without a k match it is 0
    for q in range(nx * ny):
        need[q] = 0
    need[0] = 1
    # with beta > 0 every t-matching pair has k >= beta: the root pair alone makes K positive
    similar = beta > 0.0 or (kkx[ox] >= 0 and kkx[ox] == kky[oy])
    for u in range(nx):
        for v in range(ny):
            if need[u * ny + v] == 0:
                continue
            for c in range(cpx[ox + u], cpx[ox + u + 1]):
                c1 = cix[c]
                t1 = tkx[ox + c1]
                k1 = kkx[ox + c1]
                for d in range(cpy[oy + v], cpy[oy + v + 1]):
                    c2 = ciy[d]
                    if tky[oy + c2] == t1:
                        need[c1 * ny + c2] = 1
                        if k1 >= 0 and k1 == kky[oy + c2]:
                            similar = True
    if not similar:
        return 0.0
    # bottom-up: children have larger preorder indices than their parents
    for u in range(nx - 1, -1, -1):
        for v in range(ny - 1, -1, -1):
            if need[u * ny + v] == 0:
                continue
            kk = beta
            if kkx[ox + u] >= 0 and kkx[ox + u] == kky[oy + v]:
                kk += 1.0
            c0 = cpx[ox + u]
            m = cpx[ox + u + 1] - c0
            d0 = cpy[oy + v]
            n = cpy[oy + v + 1] - d0
            kc = 0.0
            if m > 0 and n > 0:
                # Kc weights each matching chain by the K of its child pairs: all zero, Kc = 0
                positive = False
                for a in range(m):
                    c1 = cix[c0 + a]
                    t1 = tkx[ox + c1]
                    for b in range(n):
                        c2 = ciy[d0 + b]
                        if tky[oy + c2] == t1:
                            T[a, b] = True
                            kab = ktab[c1 * ny + c2]
                            Kch[a, b] = kab
                            if kab > 0.0:
                                positive = True
                        else:
                            T[a, b] = False
                            Kch[a, b] = 0.0
                if positive:
                    if mode == 0:
                        kc = _kc_contiguous(m, n, T, Kch, L, C, geo, lam)
                    else:
                        kc = _kc_sparse(m, n, T, Kch, F, R, D, lam)
            ktab[u * ny + v] = kk + kc
    return ktab[0]


@njit(cache=True, nogil=True)
def _scratch(X, Y, lam):
    """Scratch sized to the largest examples and child counts of X and Y."""
    mx, my = max_run(X[0]), max_run(Y[0])
    dx, dy = max_run(X[3]), max_run(Y[3])
    dm = max(dx, dy)
    # geo[L] = lam + lam^2 + ... + lam^L, the contiguous run weight of recurrence (5)
    geo = np.zeros(dm + 1, np.float64)
    p = 1.0
    for r in range(1, dm + 1):
        p *= lam
        geo[r] = geo[r - 1] + p
    need = np.empty(mx * my, np.uint8)
    ktab = np.empty(mx * my, np.float64)
    T = np.zeros((dx, dy), np.bool_)
    Kch = np.zeros((dx, dy), np.float64)
    L = np.zeros((dx + 1, dy + 1), np.int64)
    C = np.zeros((dx + 1, dy + 1), np.float64)
    F = np.zeros((dx + 2, dy + 2), np.float64)
    R = np.zeros((dx + 2, dy + 2), np.float64)
    D = np.zeros((dx + 2, dy + 2), np.float64)
    return geo, need, ktab, T, Kch, L, C, F, R, D


@njit(cache=True, nogil=True)
def _block(X, Y, sym, mode, lam, beta):
    """Dense block K[i, j] = k(X_i, Y_j), shape (nx, ny); with ``sym`` (Y is X) only i <= j
    is computed and mirrored."""
    nx = X[0].shape[0] - 1
    ny = Y[0].shape[0] - 1
    out = np.zeros((nx, ny), np.float64)
    geo, need, ktab, T, Kch, L, C, F, R, D = _scratch(X, Y, lam)
    for i in range(nx):
        j0 = i if sym else 0
        for j in range(j0, ny):
            v = _pair(i, X, j, Y, mode, lam, beta, geo, need, ktab, T, Kch, L, C, F, R, D)
            out[i, j] = v
            if sym:
                out[j, i] = v
    return out


@njit(cache=True, nogil=True)
def _diag(X, mode, lam, beta):
    """Self-kernels k(X_i, X_i), shape (nx,)."""
    nx = X[0].shape[0] - 1
    out = np.zeros(nx, np.float64)
    geo, need, ktab, T, Kch, L, C, F, R, D = _scratch(X, X, lam)
    for i in range(nx):
        out[i] = _pair(i, X, i, X, mode, lam, beta, geo, need, ktab, T, Kch, L, C, F, R, D)
    return out


# ---- spec -----------------------------------------------------------------------------------

@register
@dataclass(frozen=True)
class RelationSubtreeKernel(BaseSpec):
    """Contiguous or sparse subtree kernel over relation examples (Zelenko et al. 2003).

    Parameters
    ----------
    mode : {"contiguous", "sparse"}
        Which child subsequences are compared: contiguous runs (weight lam^length) or any
        increasing subsequences (weight lam^{span1 + span2}).
    lam : float in (0, 1]
        Decay of longer (contiguous) or more spread-out (sparse) child subsequences.
    type_weight : float >= 0
        beta in the node similarity ``k = [Text equal] + beta [Class(Type) and Role equal]``;
        0 is the paper's k (module docstring).
    name_text : bool
        True (the paper's k): Text is compared on every node. False: not on name chunks (Types
        that Class() maps to an entity class, PNP / ONP / LNP), whose head words rarely recur
        across examples; they then count through ``type_weight`` only (:func:`node_keys`).
    rep : str
        Corpus representation read (a relation-example representation).
    """

    kind = "relation_subtree"
    added_later = ("type_weight", "name_text")
    reads = "relation"
    mode: str = "sparse"
    lam: float = 0.5
    type_weight: float = 0.0
    name_text: bool = True
    rep: str = "relation"

    def validate(self):
        self._choice("mode", ("contiguous", "sparse"))
        self._number("lam", 0, 1, lo_open=True)
        self._number("type_weight", 0, None)
        self._flag("name_text")
        self._string("rep")

    @property
    def _mode(self) -> int:
        return _CONTIGUOUS if self.mode == "contiguous" else _SPARSE

    def _prep(self, batch, which):
        """``(offsets, tkey, kkey, cptr, cidx)`` of a relation batch, preorder checked."""
        if getattr(batch, "kind", None) != "relation":
            raise RepresentationError(
                f"kernel {self.kind!r} reads relation examples, but {which} is a "
                f"{getattr(batch, 'kind', type(batch).__name__)!r} batch; encode pipeline.relation.RelationExample "
                f"values (representation {self.rep_name!r})")
        off = np.ascontiguousarray(batch.offsets, dtype=np.int64)
        parent = np.asarray(batch.columns["parent"], dtype=np.int64)
        local = np.arange(parent.shape[0]) - np.repeat(off[:-1], np.diff(off))
        is_root = local == 0
        # the cores walk preorder backwards to see children before parents: check that order
        bad = np.nonzero((is_root & (parent != -1)) | (~is_root & ((parent < 0) | (parent >= local))))[0]
        if bad.size:
            e = int(np.searchsorted(off, bad[0], side="right") - 1)
            raise RepresentationError(
                f"relation example {e} of {which}: node {int(local[bad[0]])} has parent {int(parent[bad[0]])}; "
                f"nodes must be in preorder (root first, every parent before its children); encode "
                f"RelationExample values with pipeline.encode")
        tkey, kkey = node_keys(batch, self.name_text)
        cp = np.ascontiguousarray(batch.child_ptr, dtype=np.int64)
        ci = np.ascontiguousarray(batch.child_idx, dtype=np.int32)
        return (off, tkey, kkey, cp, ci)

    def block(self, X, Y=None) -> np.ndarray:
        """Dense float64 block ``K[i, j] = k(X_i, Y_j)``, shape (X.n, Y.n); ``Y=None`` means X."""
        px = self._prep(X, "X")
        if Y is None:
            return _block(px, px, True, self._mode, self.lam, self.type_weight)
        return _block(px, self._prep(Y, "Y"), False, self._mode, self.lam, self.type_weight)

    def diag(self, X) -> np.ndarray:
        """Self-kernels ``k(X_i, X_i)``, shape (X.n,)."""
        return _diag(self._prep(X, "X"), self._mode, self.lam, self.type_weight)
