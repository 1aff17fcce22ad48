"""Slow, obviously correct relation-example subtree kernels (Zelenko et al. 2003; docs/kernels.md, "Relation subtree kernels").

Exact with ``fractions.Fraction`` lam. :func:`kernel` applies definition (1) recursively; the
children sum Kc is either the explicit sum of definition (2) over all pairs of child index
sequences (:func:`kc_explicit`, sparse or contiguous) or the paper's Appendix B dynamic
programme (:func:`kc_appendix_b`), written with docs/kernels.md's corrections or, leaving any out of ``fixes``,
as printed: ``"cq_prime"``: ``C'_q(i, j)`` recurses over (i-1, j), not (i, j-1);
``"cqr_prime"``: the same misprint in ``C'_{q,r}(i, j)``, which docs/kernels.md does not list but which
its definition in Appendix B (a sum over the last index in P1) requires just the same;
``"kcq"``: ``K_{c,q}(i, j) = K_{c,q}(i, j-1) + ...`` has no leading lam.
"""
from __future__ import annotations

from fractions import Fraction
from itertools import combinations

from gramtile.pipeline.representations.relation import node_class


def t(p1, p2) -> int:
    """Node matching: Class(Type) and Role equal (section 6.2)."""
    return int(node_class(p1.type) == node_class(p2.type) and p1.role == p2.role)


def is_name(p) -> bool:
    """A name chunk: a Type that Class() maps to an entity class (PNP, ONP, LNP)."""
    return node_class(p.type) != p.type


def k(p1, p2, type_weight=0, name_text=True):
    """Node similarity: both nodes have a Text and it is equal (with ``name_text=False``, never on
    name chunks), plus ``type_weight`` times t."""
    texts = p1.text is not None and p1.text == p2.text and (name_text or not (is_name(p1) or is_name(p2)))
    return int(texts) + type_weight * t(p1, p2)


def kc_explicit(T, K, lam, mode="sparse"):
    """Kc from definition (2) (sparse) or (3) (contiguous) by enumerating index sequences.

    Parameters
    ----------
    T : m x n list of 0/1   t of child pairs
    K : m x n list          K of child pairs
    """
    lam = Fraction(lam)
    m = len(T)
    n = len(T[0]) if m else 0
    total = Fraction(0)
    for q in range(1, min(m, n) + 1):
        if mode == "sparse":
            pairs = ((I, J) for I in combinations(range(m), q) for J in combinations(range(n), q))
        else:
            pairs = ((tuple(range(a, a + q)), tuple(range(b, b + q))) for a in range(m - q + 1) for b in range(n - q + 1))
        for I, J in pairs:
            if all(T[a][b] for a, b in zip(I, J)):
                w = lam ** ((I[-1] - I[0] + 1) + (J[-1] - J[0] + 1)) if mode == "sparse" else lam ** q
                total += w * sum(K[a][b] for a, b in zip(I, J))
    return total


FIXES = ("cq_prime", "cqr_prime", "kcq")


def kc_appendix_b(T, K, lam, fixes=FIXES):
    """Sparse Kc by the Appendix B recurrences (1-based indices, as in the paper).

    ``fixes`` lists the corrections applied (module docstring); ``()`` is the printed form.
    """
    lam = Fraction(lam)
    fix_cp = "cq_prime" in fixes
    fix_cpr = "cqr_prime" in fixes
    fix_kc = "kcq" in fixes
    m = len(T)
    n = len(T[0]) if m else 0
    Q = min(m, n)

    def tt(i, j):
        return T[i - 1][j - 1]

    def kk(i, j):
        return K[i - 1][j - 1]

    # C[q][i][j], Cp[q][i][j] (C'_q), Cr[q][r][i][j], Crp[q][r][i][j] (C'_{q,r}), i in 0..m, j in 0..n
    zero = lambda: [[Fraction(0)] * (n + 1) for _ in range(m + 1)]  # noqa: E731
    C = [[[Fraction(1)] * (n + 1) for _ in range(m + 1)]] + [zero() for _ in range(Q)]
    Cp = [zero() for _ in range(Q + 1)]
    Cr = [[zero() for _ in range(Q + 1)] for _ in range(Q + 1)]
    Crp = [[zero() for _ in range(Q + 1)] for _ in range(Q + 1)]
    for q in range(1, Q + 1):
        for i in range(q, m + 1):
            for j in range(q, n + 1):
                prev_p = (Cp[q][i - 1][j] if i - 1 >= q else 0) if fix_cp else (Cp[q][i][j - 1] if j - 1 >= q else 0)
                Cp[q][i][j] = tt(i, j) * lam ** 2 * C[q - 1][i - 1][j - 1] + lam * prev_p
                C[q][i][j] = lam * (C[q][i][j - 1] if j - 1 >= q else 0) + Cp[q][i][j]
                for r in range(1, q + 1):
                    if fix_cpr:
                        prev = Crp[q][r][i - 1][j] if i - 1 >= q else 0
                    else:
                        prev = Crp[q][r][i][j - 1] if j - 1 >= q else 0
                    if r < q:
                        new = tt(i, j) * lam ** 2 * Cr[q - 1][r][i - 1][j - 1]
                    else:
                        new = tt(i, j) * lam ** 2 * kk(i, j) * C[q - 1][i - 1][j - 1]
                    Crp[q][r][i][j] = new + lam * prev
                    Cr[q][r][i][j] = lam * (Cr[q][r][i][j - 1] if j - 1 >= q else 0) + Crp[q][r][i][j]

    def c_a(q, i, j, a):
        """C_q(i, j, a) = a C_q(i, j) + sum_r C_{q,r}(i, j); C_0(i, j, a) = a."""
        if q == 0:
            return a
        if q > min(i, j):
            return Fraction(0)
        return a * C[q][i][j] + sum(Cr[q][r][i][j] for r in range(1, q + 1))

    total = Fraction(0)
    for q in range(1, Q + 1):
        # K_{c,q}(m, j) for j = q..n
        kcq = Fraction(0)
        for j in range(q, n + 1):
            step = sum((tt(s, j) * lam ** 2 * c_a(q - 1, s - 1, j - 1, kk(s, j)) for s in range(1, m + 1)),
                       Fraction(0))
            kcq = (kcq if fix_kc else lam * kcq) + step
        total += kcq
    return total


def kernel(p1, p2, lam, mode="sparse", kc=None, type_weight=0, name_text=True):
    """K(P1, P2) by definition (1), recursively; ``kc(T, K, lam)`` defaults to the explicit sum;
    ``type_weight`` is the kernel's beta in k (exact when given as a Fraction); ``name_text`` as
    in :func:`k`."""
    lam = Fraction(lam)
    type_weight = Fraction(type_weight)
    if not t(p1, p2):
        return Fraction(0)
    ch1, ch2 = p1.children, p2.children
    T = [[t(a, b) for b in ch2] for a in ch1]
    K = [[kernel(a, b, lam, mode, kc, type_weight, name_text) if T[x][y] else Fraction(0) for y, b in enumerate(ch2)]
         for x, a in enumerate(ch1)]
    children = Fraction(0)
    if ch1 and ch2:
        children = kc(T, K, lam) if kc is not None else kc_explicit(T, K, lam, mode)
    return k(p1, p2, type_weight, name_text) + children
