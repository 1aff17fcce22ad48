"""Gap-weighted subsequence kernel with optional soft matching (Lodhi et al. 2002; Cancedda et al.
2003; Giuliano, Gliozzo, Strapparava 2006). docs/kernels.md, "Gap-weighted subsequence kernel and soft matching".

With l(i) = i_p - i_1 + 1 the span of an increasing index tuple i of length p::

    K_p(s, t)   = sum_{i, j, |i| = |j| = p} lam^{l(i) + l(j)} prod_k A[s_{i_k}, t_{j_k}]
    K_<=n(s, t) = sum_{p=1..n} K_p(s, t)

with A the identity (exact matching) or a positive semidefinite symbol-similarity matrix
(soft matching, applied at every position). Computed by the K'/K'' dynamic programme in
O(n |s| |t|): with S_p(i, j) the weight of the pairs of length-p tuples ending exactly at
(i, j) and P_p(i, j) = sum_{i' <= i, j' <= j} lam^{(i - i') + (j - j')} S_p(i', j'),

    S_1(i, j)     = lam^2 A[s_i, t_j]
    S_{p+1}(i, j) = lam^2 A[s_i, t_j] P_p(i - 1, j - 1)
    K_p           = sum_{i, j} S_p(i, j)

P is accumulated row by row as K''(i, j) = lam K''(i, j - 1) + S(i, j), P(i, j) =
lam P(i - 1, j) + K''(i, j): no inclusion-exclusion subtraction, so with a non-negative A every
term has one sign and values are accurate to rounding. All levels advance together while a row
of s is read, so the programme keeps O(n |t|) values, not O(n |s| |t|).

Soft matching reads the similarity as a *resource* (see :meth:`SubsequenceKernel.resources`):
either a CSR matrix over the corpus symbol ids (``indptr``; ``indices`` sorted and distinct per
row; ``data``; used as given, diagonal included; WordNet synonymy is very sparse) or a dense
factor D of shape (n_symbols, k) with A = D D^T off the diagonal and A[u, u] = 1 (LSA, or the
unit word vectors of ``similarity: vectors``; rows of D are unit or zero, so this only adds a
non-negative diagonal and keeps A PSD). Word vectors give the plain cosine, negative values
included: clipping it at 0, as the SPTK's table does, would not keep A positive semidefinite.

Per pair of sequences the |s| x |t| match matrix is filled first, then the programme runs on
it (skipped when the matrix is all zero). Filling is one load per entry: exact and CSR blocks
scatter each row example's similarity rows once into a table over the block's column symbols;
factor blocks take one BLAS product over the block's distinct symbols. Blocks too large for
these tables (over ``_MAX_SCATTER`` entries) fall back to a binary search or a dot product per
position pair.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numba import njit

from gramtile.kernels.csr import max_run
from gramtile.kernels.errors import KernelSpecError, RepresentationError
from gramtile.kernels.spec import BaseSpec, register

#: Batch column read for each ``on`` value.
_COLUMN = {"tokens": "token", "lemmas": "lemma", "pos": "pos"}
#: The resource of ``similarity: vectors``: this prefix and the vector source (the unit word
#: vectors of the corpus symbols, a factor D as LSA's)
VECTORS_PREFIX = "similarity/vectors:"

# Match modes of the cores.
_EXACT, _CSR, _FACTOR = 0, 1, 2


@njit(cache=True, nogil=True)
def _csr_lookup(aptr, aidx, aval, u, v):
    """A[u, v] from a CSR matrix with sorted column indices per row (binary search)."""
    lo = aptr[u]
    hi = aptr[u + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        c = aidx[mid]
        if c < v:
            lo = mid + 1
        elif c > v:
            hi = mid
        else:
            return aval[mid]
    return 0.0


@njit(cache=True, nogil=True)
def _match(s, t, mode, aptr, aidx, aval, fac, M):
    """Fill M[:len(s), :len(t)] with A[s_i, t_j]; return whether any entry is non-zero."""
    ls = s.shape[0]
    lt = t.shape[0]
    k = fac.shape[1]
    any_nz = False
    for i in range(ls):
        u = s[i]
        for j in range(lt):
            v = t[j]
            if mode == _CSR:
                m = _csr_lookup(aptr, aidx, aval, u, v)
            elif u == v:
                m = 1.0
            elif mode == _FACTOR:
                m = 0.0
                for c in range(k):
                    m += fac[u, c] * fac[v, c]
            else:
                m = 0.0
            M[i, j] = m
            if m != 0.0:
                any_nz = True
    return any_nz


@njit(cache=True, nogil=True)
def _dp(M, ls, lt, n, lam, cumulative, P, acc):
    """Kernel value from the match matrix M (ls x lt) by the row-wise K'/K'' programme.

    Runs on S'_p = S_p / lam^(2p) (the lam^2 per matched position is factored out of the
    recursion and applied per level at the end). P (>= n, >= lt) and acc (>= n) are scratch:
    acc[p] sums S'_{p+1}; P[p] holds P'_{p+1}(i - 1, :) between rows and is updated in place,
    which is safe because level p reads only P[p - 1] of row i - 1 (levels run high to low
    within a row).
    """
    top = min(n, ls, lt)
    if top < n and not cumulative:
        return 0.0
    for p in range(top - 1):
        for j in range(lt):
            P[p, j] = 0.0
    for p in range(top):
        acc[p] = 0.0
    for i in range(ls):
        nz = False
        for j in range(lt):
            if M[i, j] != 0.0:
                nz = True
                break
        if not nz:
            # no match in this row: every S is 0 and each stored P row just decays by lam
            for p in range(top - 1):
                for j in range(lt):
                    P[p, j] *= lam
            continue
        for p in range(top - 1, -1, -1):
            a = 0.0
            if p == 0:
                if top == 1:
                    for j in range(lt):
                        a += M[i, j]
                else:
                    run = 0.0
                    for j in range(lt):
                        sv = M[i, j]
                        a += sv
                        run = lam * run + sv
                        P[0, j] = lam * P[0, j] + run
            elif p == top - 1:  # nobody reads the top level's P
                for j in range(1, lt):
                    a += M[i, j] * P[p - 1, j - 1]
            else:
                run = 0.0
                diag = 0.0  # P[p - 1, j - 1] of row i - 1
                for j in range(lt):
                    sv = M[i, j] * diag
                    diag = P[p - 1, j]
                    a += sv
                    run = lam * run + sv
                    P[p, j] = lam * P[p, j] + run
            acc[p] += a
    lam2 = lam * lam
    total = 0.0
    w = 1.0
    for p in range(top):
        w *= lam2
        if cumulative or p == n - 1:
            total += w * acc[p]
    return total


#: Largest scattered-row table (entries) the block core allocates; beyond it, per-pair matching.
_MAX_SCATTER = 1 << 23


@njit(cache=True, nogil=True)
def _block(offa, cola, offb, colb, symmetric, n, lam, cumulative, max_scatter, mode, aptr, aidx, aval, fac):
    na = offa.shape[0] - 1
    nb = offb.shape[0] - 1
    maxa, maxb = max_run(offa), max_run(offb)
    M = np.empty((maxa, maxb))
    P = np.empty((n, maxb))
    acc = np.empty(n)
    out = np.empty((na, nb))
    if mode != _FACTOR:
        # Column symbols get local ids 0..L-1; per row example a, R[c, i] = A[s_i, c] is
        # scattered once (from the CSR rows, or the identity), so each match entry of every
        # pair is one load, not a search.
        nsym = aptr.shape[0] - 1
        if mode == _EXACT:
            nsym = 0
            for k in range(cola.shape[0]):
                nsym = max(nsym, cola[k] + 1)
            for k in range(colb.shape[0]):
                nsym = max(nsym, colb[k] + 1)
        loc = np.full(nsym, -1, dtype=np.int32)
        locb = np.empty(colb.shape[0], dtype=np.int32)
        L = 0
        for k in range(colb.shape[0]):
            u = colb[k]
            if loc[u] < 0:
                loc[u] = L
                L += 1
            locb[k] = loc[u]
        if L * maxa <= max_scatter:
            R = np.zeros((L, maxa))
            for a in range(na):
                s = cola[offa[a]:offa[a + 1]]
                ls = s.shape[0]
                for i in range(ls):
                    if mode == _EXACT:
                        c = loc[s[i]]
                        if c >= 0:
                            R[c, i] = 1.0
                        continue
                    for k in range(aptr[s[i]], aptr[s[i] + 1]):
                        c = loc[aidx[k]]
                        if c >= 0:
                            R[c, i] = aval[k]
                start = a if symmetric else 0
                for b in range(start, nb):
                    t = locb[offb[b]:offb[b + 1]]
                    lt = t.shape[0]
                    any_nz = False
                    for j in range(lt):
                        for i in range(ls):
                            m = R[t[j], i]
                            M[i, j] = m
                            if m != 0.0:
                                any_nz = True
                    v = 0.0
                    if any_nz:
                        v = _dp(M, ls, lt, n, lam, cumulative, P, acc)
                    out[a, b] = v
                    if symmetric:
                        out[b, a] = v
                for i in range(ls):
                    if mode == _EXACT:
                        c = loc[s[i]]
                        if c >= 0:
                            R[c, i] = 0.0
                        continue
                    for k in range(aptr[s[i]], aptr[s[i] + 1]):
                        c = loc[aidx[k]]
                        if c >= 0:
                            R[c, i] = 0.0
            return out
    for a in range(na):
        s = cola[offa[a]:offa[a + 1]]
        start = a if symmetric else 0
        for b in range(start, nb):
            t = colb[offb[b]:offb[b + 1]]
            v = 0.0
            if _match(s, t, mode, aptr, aidx, aval, fac, M):
                v = _dp(M, s.shape[0], t.shape[0], n, lam, cumulative, P, acc)
            out[a, b] = v
            if symmetric:
                out[b, a] = v
    return out


@njit(cache=True, nogil=True)
def _block_table(offa, loca, offb, locb, symmetric, n, lam, cumulative, G):
    """Block from a dense similarity table G between the block's row and column symbols
    (``loca``/``locb`` are the tokens' row/column indices into G)."""
    na = offa.shape[0] - 1
    nb = offb.shape[0] - 1
    maxa, maxb = max_run(offa), max_run(offb)
    M = np.empty((maxa, maxb))
    P = np.empty((n, maxb))
    acc = np.empty(n)
    out = np.empty((na, nb))
    for a in range(na):
        s = loca[offa[a]:offa[a + 1]]
        ls = s.shape[0]
        start = a if symmetric else 0
        for b in range(start, nb):
            t = locb[offb[b]:offb[b + 1]]
            lt = t.shape[0]
            any_nz = False
            for i in range(ls):
                for j in range(lt):
                    m = G[s[i], t[j]]
                    M[i, j] = m
                    if m != 0.0:
                        any_nz = True
            v = 0.0
            if any_nz:
                v = _dp(M, ls, lt, n, lam, cumulative, P, acc)
            out[a, b] = v
            if symmetric:
                out[b, a] = v
    return out


@njit(cache=True, nogil=True)
def _diag(off, col, n, lam, cumulative, mode, aptr, aidx, aval, fac):
    ne = off.shape[0] - 1
    maxl = 1
    for e in range(ne):
        maxl = max(maxl, off[e + 1] - off[e])
    M = np.empty((maxl, maxl))
    P = np.empty((n, maxl))
    acc = np.empty(n)
    out = np.zeros(ne)
    for e in range(ne):
        s = col[off[e]:off[e + 1]]
        if _match(s, s, mode, aptr, aidx, aval, fac, M):
            out[e] = _dp(M, s.shape[0], s.shape[0], n, lam, cumulative, P, acc)
    return out


def _unused():
    """Typed placeholders for the similarity arrays a match mode does not read."""
    return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0), np.zeros((0, 1))


def _similarity_table(fac, ux, uy):
    """G[a, b] = A[ux[a], uy[b]] for the factor form: D D^T off the diagonal, 1 on it."""
    G = fac[ux] @ fac[uy].T
    _, ix, iy = np.intersect1d(ux, uy, assume_unique=True, return_indices=True)
    G[ix, iy] = 1.0
    return np.ascontiguousarray(G)


def check_space_rep(spec, uses_examples: bool, why: str):
    """Validate ``spec.space_rep``, the representation a kernel's corpus resource is built from.

    A value equal to ``spec.rep`` is stored as None: it names today's behaviour, which must keep
    one spec hash (and one Gram store) rather than two.

    Raises
    ------
    KernelSpecError
        The value is not None or a non-empty string, or the kernel's resource (if any) is not
        built from examples (``uses_examples`` false; ``why`` says so).
    """
    v = spec.space_rep
    if v is None:
        return
    if not isinstance(v, str) or not v:
        raise KernelSpecError(f"parameter 'space_rep' of kernel {spec.kind!r} must be null or the name of a corpus "
                              f"representation (e.g. 'seq'), got {v!r}")
    if not uses_examples:
        raise KernelSpecError(f"parameter 'space_rep' of kernel {spec.kind!r} names the representation whose "
                              f"examples build the kernel's LSA space, but {why}; got space_rep={v!r}: drop "
                              f"space_rep or set similarity to 'lsa'")
    if v == spec.rep:
        object.__setattr__(spec, "space_rep", None)


@register
@dataclass(frozen=True)
class SubsequenceKernel(BaseSpec):
    """Gap-weighted subsequence kernel over tokens, lemmas or PoS, exact or soft-matched.

    Parameters
    ----------
    n : int >= 1
        Subsequence length (the largest one when ``cumulative``).
    lam : float in (0, 1]
        Gap decay; a tuple pair spanning l(i) + l(j) positions weighs lam^(l(i) + l(j)).
    cumulative : bool
        True: K_1 + ... + K_n; false: K_n only.
    on : {"tokens", "lemmas", "pos"}
        Sequence column compared.
    similarity : {None, "wordnet", "lsa", "vectors"}
        Soft matching matrix A, read from the resource named by :meth:`resources`: WordNet
        synonymy, the cosine in the corpus's LSA space, or the cosine of word vectors.
    rep : str
        Corpus representation read (a token-sequence batch).
    space_rep : str or None
        Representation whose examples build the LSA space of ``similarity: lsa`` (e.g. ``seq``,
        the whole contexts, while ``rep`` names the target sentences). None: ``rep`` itself.
    vectors : str or None
        With ``similarity="vectors"``: the vector source, as the SPTK's (a word-vector file,
        ``spacy:NAME`` or ``corpus:BUILDER``); a symbol without a vector matches only itself.
    """

    kind = "subsequence"
    reads = "seq"
    # space_rep came after stores of soft subsequence kernels existed: at None it stays out of the hash
    added_later: ClassVar[tuple] = ("space_rep", "vectors")
    n: int = 3
    lam: float = 0.5
    cumulative: bool = True
    on: str = "tokens"
    similarity: str | None = None
    rep: str = "seq"
    space_rep: str | None = None
    vectors: str | None = None

    def validate(self):
        self._number("n", lo=1, integer=True)
        self._number("lam", lo=0, hi=1, lo_open=True)
        self._flag("cumulative")
        self._choice("on", tuple(_COLUMN))
        self._choice("similarity", (None, "wordnet", "lsa", "vectors"))
        self._string("rep")
        if self.similarity == "vectors":
            if not isinstance(self.vectors, str) or not self.vectors:
                raise KernelSpecError("kernel 'subsequence' with similarity='vectors' needs parameter 'vectors': the "
                                      f"path of a word-vector file, 'spacy:NAME' or 'corpus:BUILDER', got "
                                      f"{self.vectors!r}")
        elif self.vectors is not None:
            raise KernelSpecError(f"parameter 'vectors' of kernel 'subsequence' is read only with "
                                  f"similarity='vectors' (similarity is {self.similarity!r}); drop it")
        check_space_rep(self, self.similarity == "lsa",
                        "only the LSA space of similarity='lsa' is built from examples (WordNet synonymy "
                        "depends on the vocabulary alone, exact matching needs no space)")

    def resources(self) -> tuple:
        """Names of the corpus resources :meth:`block` needs besides the batches.

        ``()`` for exact matching; ``("similarity/wordnet",)`` (a function of the symbol
        strings only) or ``("similarity/lsa/<on>",)`` (built from the corpus's ``on`` column).
        The evaluator looks each name up in the same mapping as the batches and passes
        ``resources={name: value}`` to :meth:`block` and :meth:`diag`.
        """
        if self.similarity is None:
            return ()
        if self.similarity == "lsa":
            return (f"similarity/lsa/{self.on}",)
        if self.similarity == "vectors":
            return (VECTORS_PREFIX + self.vectors,)
        return (f"similarity/{self.similarity}",)

    # -- inputs for the cores -----------------------------------------------------------
    def _column(self, X):
        name = _COLUMN[self.on]
        col = X.columns.get(name)
        if col is None or (col.size and int(col.min()) < 0):
            raise RepresentationError(
                f"kernel 'subsequence' with on={self.on!r} reads the {name!r} column, which these "
                f"examples lack; give every sequence its {self.on} or set 'on' to 'tokens'")
        return np.ascontiguousarray(X.offsets, dtype=np.int64), np.ascontiguousarray(col, dtype=np.int32)

    def _matcher(self, resources, max_id):
        """(mode, aptr, aidx, aval, fac) for the cores, from the similarity resource."""
        no_ptr, no_idx, no_val, no_fac = _unused()
        if self.similarity is None:
            return _EXACT, no_ptr, no_idx, no_val, no_fac
        name = self.resources()[0]
        if not resources or name not in resources:
            raise KernelSpecError(
                f"kernel 'subsequence' with similarity={self.similarity!r} needs the resource {name!r} "
                f"(the similarity matrix over the corpus symbols); pass it with the batches, or use "
                f"gramtile.gram(), which builds it")
        A = resources[name]
        if hasattr(A, "indptr"):
            size = int(A.shape[0])
            mode, arrays = _CSR, (np.ascontiguousarray(A.indptr, dtype=np.int64),
                                  np.ascontiguousarray(A.indices, dtype=np.int32),
                                  np.ascontiguousarray(A.data, dtype=np.float64), no_fac)
        else:
            fac = np.ascontiguousarray(A, dtype=np.float64)
            if fac.ndim != 2:
                raise KernelSpecError(f"resource {name!r} must be a CSR matrix or a 2-D factor, got shape {fac.shape}")
            size = fac.shape[0]
            mode, arrays = _FACTOR, (no_ptr, no_idx, no_val, fac)
        if max_id >= size:
            raise KernelSpecError(
                f"resource {name!r} covers {size} symbols but the examples use symbol id {max_id}; "
                f"rebuild the similarity matrix from the vocabulary the examples were encoded with")
        return (mode,) + arrays

    def block(self, X, Y=None, resources=None) -> np.ndarray:
        """K[a, b] = k(X_a, Y_b), float64 of shape (X.n, Y.n); Y=None means Y = X."""
        offa, cola = self._column(X)
        offb, colb = (offa, cola) if Y is None else self._column(Y)
        max_id = max(int(cola.max(initial=-1)), int(colb.max(initial=-1)))
        m = self._matcher(resources, max_id)
        if m[0] == _FACTOR:
            return self._factor_block(offa, cola, offb, colb, Y is None, m[4])
        return _block(offa, cola, offb, colb, Y is None, self.n, self.lam, self.cumulative, _MAX_SCATTER, *m)

    def _factor_block(self, offa, cola, offb, colb, symmetric, fac):
        """Factor (LSA) similarity: one BLAS product G = D[row symbols] D[column symbols]^T per
        group of columns, sized so G stays under ``_MAX_SCATTER`` entries, replaces a
        k-dimensional dot product per position pair."""
        ux, loca = np.unique(cola, return_inverse=True)
        loca = loca.astype(np.int32)
        nb = offb.shape[0] - 1
        if symmetric and ux.size * ux.size <= _MAX_SCATTER:
            return _block_table(offa, loca, offa, loca, True, self.n, self.lam, self.cumulative,
                                _similarity_table(fac, ux, ux))
        out = np.empty((offa.shape[0] - 1, nb))
        # columns per group: the table has at most (column tokens) x (row symbols) entries
        tokens = np.diff(offb)
        budget = max(_MAX_SCATTER // max(ux.size, 1), 1)
        b0 = 0
        while b0 < nb:
            b1, used = b0 + 1, int(tokens[b0])
            while b1 < nb and used + tokens[b1] <= budget:
                used += int(tokens[b1])
                b1 += 1
            part = colb[offb[b0]:offb[b1]]
            uy, locb = np.unique(part, return_inverse=True)
            offp = offb[b0:b1 + 1] - offb[b0]
            if ux.size * uy.size <= _MAX_SCATTER:
                out[:, b0:b1] = _block_table(offa, loca, offp, locb.astype(np.int32), False, self.n, self.lam,
                                             self.cumulative, _similarity_table(fac, ux, uy))
            else:  # one column example with more symbols than the budget: per-pair products
                no_ptr, no_idx, no_val, _ = _unused()
                out[:, b0:b1] = _block(offa, cola, offp, np.ascontiguousarray(part), False, self.n, self.lam,
                                       self.cumulative, _MAX_SCATTER, _FACTOR, no_ptr, no_idx, no_val, fac)
            b0 = b1
        if symmetric:
            # the halves came from different tables: mirror the upper one so K is exactly symmetric
            low = np.tril_indices(out.shape[0], -1)
            out[low] = out.T[low]
        return out

    def diag(self, X, resources=None) -> np.ndarray:
        """Self-kernels k(X_a, X_a), shape (X.n,)."""
        off, col = self._column(X)
        m = self._matcher(resources, int(col.max(initial=-1)))
        return _diag(off, col, self.n, self.lam, self.cumulative, *m)
