"""Composite kernels: normalisation, polynomial, weighted sum, product.

Each composite is computed from its parts' blocks and diagonals only (never from pairs), so
it can be derived from stored base Gram matrices:

- normalized:  K(x,y) / sqrt(K(x,x) K(y,y)), and 0 when either self-kernel is 0;
- polynomial:  (K + offset)^degree;
- sum:         sum_i w_i K_i;
- product:     prod_i K_i.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gramtile.kernels.errors import GramtileError, KernelSpecError
from gramtile.kernels.spec import KernelSpec, register, spec_from_dict


def normalize_block(K, dr, dc):
    """Cosine normalisation of a block given row and column self-kernels (0 where either is 0).

    Raises
    ------
    GramtileError
        A self-kernel is NaN or infinite (a lost or damaged diagonal): normalising with it would
        give silently wrong values.
    """
    dr = np.asarray(dr, dtype=np.float64)
    dc = np.asarray(dc, dtype=np.float64)
    if not (np.isfinite(dr).all() and np.isfinite(dc).all()):
        bad = int(np.count_nonzero(~np.isfinite(dr)) + np.count_nonzero(~np.isfinite(dc)))
        raise GramtileError(f"{bad} self-kernel(s) K(x, x) are NaN or infinite, so the block cannot be normalised "
                            f"(a diagonal chunk of the store is missing or damaged). Fix: run `gramtile verify "
                            f"--repair` on the Gram store")
    sr = np.sqrt(np.where(dr > 0, dr, 1.0))
    sc = np.sqrt(np.where(dc > 0, dc, 1.0))
    out = K / sr[:, None] / sc[None, :]
    out[dr <= 0, :] = 0.0
    out[:, dc <= 0] = 0.0
    return out


def _sub(value, where):
    try:
        return spec_from_dict(value)
    except KernelSpecError as e:
        raise KernelSpecError(f"in {where}: {e}") from None


@register
@dataclass(frozen=True)
class Normalized(KernelSpec):
    """K(x,y)/sqrt(K(x,x)K(y,y)); 0 when either self-kernel is 0."""

    kind = "normalized"
    kernel: KernelSpec = None

    def validate(self):
        if self.kernel is None:
            raise KernelSpecError("kernel 'normalized' needs a 'kernel' (the spec to normalise)")
        object.__setattr__(self, "kernel", _sub(self.kernel, "'kernel' of 'normalized'"))

    def parts(self):
        return (self.kernel,)

    def combine(self, base):
        K, dr, dc = self.kernel.combine(base)
        return normalize_block(K, dr, dc), (dr > 0).astype(np.float64), (dc > 0).astype(np.float64)


@register
@dataclass(frozen=True)
class Polynomial(KernelSpec):
    """(K + offset)^degree."""

    kind = "polynomial"
    kernel: KernelSpec = None
    degree: int = 2
    offset: float = 0.0

    def validate(self):
        if self.kernel is None:
            raise KernelSpecError("kernel 'polynomial' needs a 'kernel'")
        object.__setattr__(self, "kernel", _sub(self.kernel, "'kernel' of 'polynomial'"))
        self._number("degree", 1, None, integer=True)
        self._number("offset", 0, None)

    def parts(self):
        return (self.kernel,)

    def combine(self, base):
        K, dr, dc = self.kernel.combine(base)
        d, e = self.degree, self.offset
        return (K + e) ** d, (dr + e) ** d, (dc + e) ** d


@register
@dataclass(frozen=True)
class Sum(KernelSpec):
    """sum_i w_i K_i over ``kernels = [{"weight": w, "kernel": SPEC}, ...]``."""

    kind = "sum"
    kernels: tuple = ()

    def validate(self):
        items = []
        if not isinstance(self.kernels, (list, tuple)) or not self.kernels:
            raise KernelSpecError("kernel 'sum' needs 'kernels': a non-empty list of {\"weight\": w, \"kernel\": SPEC}")
        for i, it in enumerate(self.kernels):
            if isinstance(it, dict):
                extra = set(it) - {"weight", "kernel"}
                if extra or "kernel" not in it:
                    raise KernelSpecError(f"item {i} of 'sum' must be {{\"weight\": w, \"kernel\": SPEC}}, got keys {sorted(it)}")
                w, k = it.get("weight", 1.0), it["kernel"]
            else:
                w, k = it
            if not isinstance(w, (int, float)) or isinstance(w, bool) or w < 0:
                raise KernelSpecError(f"weight of item {i} of 'sum' must be a number >= 0 (keeps the sum PSD), got {w!r}")
            items.append((float(w), _sub(k, f"item {i} of 'sum'")))
        object.__setattr__(self, "kernels", tuple(items))

    def to_dict(self):
        return {"kind": self.kind, "kernels": [{"weight": w, "kernel": k.to_dict()} for w, k in self.kernels]}

    def parts(self):
        return tuple(k for _, k in self.kernels)

    def combine(self, base):
        out = None
        for w, k in self.kernels:
            K, dr, dc = k.combine(base)
            if out is None:
                out = [w * K, w * dr, w * dc]
            else:
                out[0] = out[0] + w * K
                out[1] = out[1] + w * dr
                out[2] = out[2] + w * dc
        return tuple(out)


@register
@dataclass(frozen=True)
class Product(KernelSpec):
    """prod_i K_i over ``kernels = [SPEC, ...]``."""

    kind = "product"
    kernels: tuple = ()

    def validate(self):
        if not isinstance(self.kernels, (list, tuple)) or len(self.kernels) < 1:
            raise KernelSpecError("kernel 'product' needs 'kernels': a non-empty list of specs")
        object.__setattr__(self, "kernels", tuple(_sub(k, f"item {i} of 'product'") for i, k in enumerate(self.kernels)))

    def parts(self):
        return self.kernels

    def combine(self, base):
        out = None
        for k in self.kernels:
            K, dr, dc = k.combine(base)
            out = [K, dr, dc] if out is None else [out[0] * K, out[1] * dr, out[2] * dc]
        return tuple(out)
