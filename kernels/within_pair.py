"""The within-pair similarity kernel: how alike the two texts of one example are, compared
across examples.

An example made of two texts (fields ``a`` and ``b``: a question and an answer sentence, two
sentences whose relatedness or paraphrase is asked) has a within-pair similarity
``s(p) = K(p.a, p.b)`` under a base kernel ``K``; with ``normalized`` (the default) the cosine
form ``K(a, b) / sqrt(K(a, a) K(b, b))`` (0 when either self-kernel is 0), in [0, 1] for the
counting kernels. The kernel over pairs is

    k(p, q) = s(p) s(q),

the "similarity of within-pair similarities": a linear kernel on one feature, so positive
semi-definite (its Gram matrix is the outer product s s^T). It says nothing of *what* the texts
are about, only how much they share, which is what relatedness, paraphrase and answer selection
turn on; it is meant to be added to kernels that compare the fields across examples
(``{"kind": "sum", "kernels": [...]}``), and a sum of several within-pair kernels is the linear
kernel on the vector of their similarities (a ``polynomial`` over that sum, its polynomial).
Normalising ``k`` itself would give s(p) s(q) / (|s(p)| |s(q)|) = +-1: normalise ``K`` instead.

The base kernel reads representation ``rep`` (its own default when not given) of both fields,
``<a>.<rep>`` and ``<b>.<rep>``, over the corpus store's one vocabulary, so a word of one field
matches the same word of the other.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.spec import BaseSpec, KernelSpec, register, spec_from_dict


@register
@dataclass(frozen=True)
class WithinPair(BaseSpec):
    """k(p, q) = s(p) s(q), s(p) = K(p.a, p.b) (cosine-normalised with ``normalized``)."""

    kind = "within_pair"
    kernel: KernelSpec = None
    fields: tuple = ("a", "b")
    normalized: bool = True

    def validate(self):
        if self.kernel is None:
            raise KernelSpecError("kernel 'within_pair' needs a 'kernel': the base kernel that compares the two "
                                  "texts of a pair, e.g. {\"kind\": \"sst\", \"lam\": 0.4}")
        try:
            inner = spec_from_dict(self.kernel)
        except KernelSpecError as e:
            raise KernelSpecError(f"in 'kernel' of 'within_pair': {e}") from None
        if not isinstance(inner, BaseSpec) or isinstance(inner, WithinPair):
            raise KernelSpecError(f"the 'kernel' of 'within_pair' must be a base kernel (tree, sequence, bag ...), "
                                  f"got {inner.kind!r}; put composites around within_pair kernels instead")
        if getattr(inner, "resources", None) is not None and inner.resources():
            raise KernelSpecError(f"the 'kernel' of 'within_pair' reads corpus resources {list(inner.resources())}, "
                                  "which within_pair does not pass on; use the kernel without soft matching")
        if "." in inner.rep_name:
            raise KernelSpecError(f"the 'kernel' of 'within_pair' names rep {inner.rep_name!r}, with a field: give "
                                  f"the representation alone (e.g. {inner.rep_name.rpartition('.')[2]!r}); "
                                  "'fields' names the two fields it compares")
        object.__setattr__(self, "kernel", inner)
        f = self.fields
        if (not isinstance(f, (list, tuple)) or len(f) != 2 or not all(isinstance(x, str) and x for x in f)
                or f[0] == f[1]):
            raise KernelSpecError(f"parameter 'fields' of kernel 'within_pair' must be the names of two different "
                                  f"fields, e.g. [\"question\", \"answer\"], got {f!r}")
        object.__setattr__(self, "fields", tuple(f))
        self._flag("normalized")

    @property
    def reads(self) -> str:  # the base kernel's batch kind
        return self.kernel.reads

    @property
    def rep_names(self) -> tuple:
        return tuple(f"{f}.{self.kernel.rep_name}" for f in self.fields)

    @property
    def rep_name(self) -> str:
        return self.rep_names[0]

    def similarities(self, data) -> np.ndarray:
        """s(p) of every example of ``data`` (a mapping holding the batches of both fields,
        ``rep_names``), shape (n,)."""
        xa, xb = (data[r] for r in self.rep_names)
        k = self.kernel
        s = np.asarray(k.paired(xa, xb), dtype=np.float64)
        if self.normalized:
            da, db = np.asarray(k.diag(xa), dtype=np.float64), np.asarray(k.diag(xb), dtype=np.float64)
            ok = (da > 0) & (db > 0)
            s = np.where(ok, s / np.sqrt(np.where(ok, da * db, 1.0)), 0.0)
        return s

    def block(self, X, Y=None) -> np.ndarray:
        """K[i, j] = s(X_i) s(Y_j); X and Y map ``rep_names`` to batches (Y=None: Y = X)."""
        sx = self.similarities(X)
        return np.multiply.outer(sx, sx if Y is None else self.similarities(Y))

    def diag(self, X) -> np.ndarray:
        return self.similarities(X) ** 2
