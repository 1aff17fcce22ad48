"""Slow, obviously correct gap-weighted subsequence kernel (docs/kernels.md, "Gap-weighted subsequence kernel and soft matching").

Enumerates every pair of increasing index tuples of length p explicitly and sums
lam^(l(i) + l(j)) prod_k A(s[i_k], t[j_k]); exact with ``fractions.Fraction`` inputs.
"""
from fractions import Fraction
from itertools import combinations


def exact_match(a, b):
    return 1 if a == b else 0


def subsequence_kernel_p(s, t, p, lam, sim=exact_match):
    """K_p(s, t): sum over index tuples i of s and j of t of length p."""
    total = Fraction(0) if isinstance(lam, Fraction) else 0.0
    for i in combinations(range(len(s)), p):
        for j in combinations(range(len(t)), p):
            w = 1
            for a, b in zip(i, j):
                w *= sim(s[a], t[b])
                if w == 0:
                    break
            if w:
                total += lam ** ((i[-1] - i[0] + 1) + (j[-1] - j[0] + 1)) * w
    return total


def subsequence_kernel(s, t, n, lam, cumulative=True, sim=exact_match):
    """K_n (``cumulative`` false) or K_1 + ... + K_n."""
    if not cumulative:
        return subsequence_kernel_p(s, t, n, lam, sim)
    return sum((subsequence_kernel_p(s, t, p, lam, sim) for p in range(1, n + 1)),
               Fraction(0) if isinstance(lam, Fraction) else 0.0)
