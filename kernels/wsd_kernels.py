"""Syntagmatic and domain kernels for word sense disambiguation (Giuliano, Gliozzo, Strapparava
2006; Gliozzo et al. 2005). docs/kernels.md, "Gap-weighted subsequence kernel and soft matching".

An example is a target word in its sentence (a ``wsd`` batch: lemma, pos, word, target flag).
With W(x) the window of positions target-w .. target+w of x, cut at the sentence edges (no
padding; the example is taken to be one sentence), and K_l the gap-weighted subsequence kernel
of exact length l (:mod:`gramtile.kernels.subsequence`)::

    K^l_Coll(x, y) = K_l(lemmas of W(x), lemmas of W(y))   (soft: K^A_l with a PSD matrix A)
    K^l_PoS(x, y)  = K_l(tags of W(x), tags of W(y))
    K_Synt(x, y)   = sum_{l=1..n} ( norm K^l_Coll(x, y) + norm K^l_PoS(x, y) )

with norm K(x, y) = K(x, y) / sqrt(K(x, x) K(y, y)) and 0 when either self-kernel is 0 (a
window shorter than l). Every component is PSD, so their sum is. ``components`` keeps only the
collocation kernel K_Coll = sum_l norm K^l_Coll or only the PoS kernel. Soft matching (WordNet
synonymy or LSA domain proximity) applies to lemmas only; PoS tags always match exactly.

The domain kernel maps a context's bag of words into the LSA domain space and takes the cosine
(Giuliano et al. 2006, section 5)::

    t'(x) = t(x) I^IDF D,    K_D(x, y) = <t'(x), t'(y)> / (|t'(x)| |t'(y)|)

with t(x) the term-frequency row vector of the context, I^IDF the diagonal IDF matrix and D the
term-by-domain matrix of the corpus. I^IDF D is one dense factor F (n_symbols x k), a corpus
resource built by :func:`gramtile.pipeline.resources.domain.domain_space`; a context whose words all have
zero rows in F has K_D = 0 with everything, itself included.

The subsequence cores are reused as they are: windows become a token-sequence batch and each
component is one :class:`~gramtile.kernels.subsequence.SubsequenceKernel` block.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from gramtile.kernels.batches import Batch
from gramtile.kernels.composite import normalize_block
from gramtile.kernels.errors import KernelSpecError, RepresentationError
from gramtile.kernels.spec import BaseSpec, register
from gramtile.kernels.subsequence import SubsequenceKernel, check_space_rep

#: Components of the syntagmatic kernel kept for each ``components`` value.
_COMPONENTS = {"both": ("lemmas", "pos"), "coll": ("lemmas",), "pos": ("pos",)}


def windows(X: Batch, width: int) -> Batch:
    """Token-sequence batch of the windows target-width .. target+width of a ``wsd`` batch.

    Parameters
    ----------
    X : Batch of kind "wsd"
        Columns ``lemma``, ``pos`` and ``target`` (1 at exactly one position per example).
    width : int >= 0

    Returns
    -------
    Batch of kind "seq"
        Per example its window cut at the example's edges; columns ``token`` and ``lemma``
        hold the lemmas, ``pos`` the tags.
    """
    off = np.asarray(X.offsets, dtype=np.int64)
    tpos = np.flatnonzero(np.asarray(X.columns["target"]) == 1)
    ex = np.searchsorted(off, tpos, side="right") - 1
    if tpos.size != X.n or not np.array_equal(ex, np.arange(X.n)):
        raise RepresentationError("a WSD batch needs exactly one target position per example (column 'target'); "
                                  "encode WSDInstance values, whose 'target' is one index into the sentence")
    a = np.maximum(off[:-1], tpos - width)
    b = np.minimum(off[1:], tpos + width + 1)
    lens = b - a
    new_off = np.zeros(X.n + 1, dtype=np.int64)
    np.cumsum(lens, out=new_off[1:])
    idx = np.repeat(a - new_off[:-1], lens) + np.arange(int(new_off[-1]), dtype=np.int64)
    lem = np.ascontiguousarray(X.columns["lemma"][idx], dtype=np.int32)
    pos = np.ascontiguousarray(X.columns["pos"][idx], dtype=np.int32)
    return Batch("seq", new_off, {"token": lem, "lemma": lem, "pos": pos})


@register
@dataclass(frozen=True)
class SyntagmaticKernel(BaseSpec):
    """Syntagmatic kernel K_Synt: normalised gap-weighted collocation and PoS kernels on windows.

    Parameters
    ----------
    n : int >= 1
        Largest subsequence length; lengths 1..n each contribute one normalised kernel.
    lam : float in (0, 1]
        Gap decay of the subsequence kernels.
    window : int >= 0
        Window half-width w (positions target-w .. target+w, cut at the sentence edges).
    similarity : {None, "wordnet", "lsa"}
        Soft matching of lemmas (resource names as for ``subsequence`` on lemmas).
    components : {"both", "coll", "pos"}
        K_Synt, the collocation kernel K_Coll only, or the PoS kernel K_PoS only.
    rep : str
        Corpus representation read (a ``wsd`` batch).
    space_rep : str or None
        Representation whose examples build the LSA lemma space of ``similarity: lsa``, e.g.
        ``seq`` for the whole contexts (Giuliano et al. build their spaces from documents, not
        sentences). None: ``rep`` itself.
    """

    kind = "syntagmatic"
    reads = "wsd"
    # space_rep came after stores of syntagmatic kernels existed: at None it stays out of the hash
    added_later: ClassVar[tuple] = ("space_rep",)
    n: int = 2
    lam: float = 0.5
    window: int = 3
    similarity: str | None = None
    components: str = "both"
    rep: str = "wsd"
    space_rep: str | None = None

    def validate(self):
        self._number("n", lo=1, integer=True)
        self._number("lam", lo=0, hi=1, lo_open=True)
        self._number("window", lo=0, integer=True)
        self._choice("similarity", (None, "wordnet", "lsa"))
        self._choice("components", tuple(_COMPONENTS))
        self._string("rep")
        if self.similarity is not None and self.components == "pos":
            raise KernelSpecError(f"parameter 'similarity' of kernel 'syntagmatic' softens lemma matches, but "
                                  f"components='pos' compares PoS tags only; got similarity={self.similarity!r}: "
                                  f"set similarity to null or components to 'both' or 'coll'")
        check_space_rep(self, self.similarity == "lsa",
                        "only the LSA space of similarity='lsa' is built from examples (WordNet synonymy "
                        "depends on the vocabulary alone, exact matching needs no space)")

    def _parts(self):
        """The subsequence specs of the components, in order."""
        out = []
        for on in _COMPONENTS[self.components]:
            sim = self.similarity if on == "lemmas" else None
            for length in range(1, self.n + 1):
                out.append(SubsequenceKernel(n=length, lam=self.lam, cumulative=False, on=on, similarity=sim))
        return out

    def resources(self) -> tuple:
        """Corpus resources needed: the lemma similarity matrix of soft matching, else none."""
        if self.similarity is None:
            return ()
        return SubsequenceKernel(on="lemmas", similarity=self.similarity).resources()

    def block(self, X, Y=None, resources=None) -> np.ndarray:
        """K_Synt[a, b] of row examples X and column examples Y (Y=None: Y = X), shape (X.n, Y.n)."""
        wx = windows(X, self.window)
        wy = None if Y is None else windows(Y, self.window)
        out = np.zeros((X.n, X.n if Y is None else Y.n))
        for part in self._parts():
            K = part.block(wx, wy, resources=resources)
            dx = part.diag(wx, resources=resources)
            dy = dx if wy is None else part.diag(wy, resources=resources)
            out += normalize_block(K, dx, dy)
        if Y is None:
            # each component's normalised self-kernel is 1 (or 0): make the diagonal exact, as diag() says
            np.fill_diagonal(out, self.diag(X, resources))
        return out

    def diag(self, X, resources=None) -> np.ndarray:
        """K_Synt(x, x): the number of components whose self-kernel is positive, shape (X.n,)."""
        wx = windows(X, self.window)
        out = np.zeros(X.n)
        for part in self._parts():
            out += part.diag(wx, resources=resources) > 0
        return out


#: Batch column holding a context's words, per batch kind read by the domain kernel.
_WORDS = {"seq": "token", "wsd": "word"}


@register
@dataclass(frozen=True)
class DomainKernel(BaseSpec):
    """Domain kernel: cosine of IDF-weighted bags of words mapped into the LSA domain space.

    Parameters
    ----------
    dims : int >= 1
        Number of LSA domain dimensions k of the domain space (the resource ``domain/lsa/<dims>``).
    rep : str
        Corpus representation read: a token sequence (its tokens) or a WSD instance (its words).
    space_rep : str or None
        Representation whose examples build the domain space (e.g. ``seq``, the whole contexts,
        for a kernel reading target sentences). None: ``rep`` itself.
    """

    kind = "domain"
    reads = "seq"
    # space_rep came after stores of domain kernels existed: at None it stays out of the hash
    added_later: ClassVar[tuple] = ("space_rep",)
    dims: int = 100
    rep: str = "seq"
    space_rep: str | None = None

    def validate(self):
        self._number("dims", lo=1, integer=True)
        self._string("rep")
        check_space_rep(self, True, "")

    def resources(self) -> tuple:
        """``("domain/lsa/<dims>",)``: the factor F = I^IDF D over the corpus symbols."""
        return (f"domain/lsa/{self.dims}",)

    def _vectors(self, X, resources):
        name = self.resources()[0]
        if not resources or name not in resources:
            raise KernelSpecError(f"kernel 'domain' needs the resource {name!r} (the IDF-weighted LSA domain "
                                  f"space of the corpus); build it with gramtile.pipeline.resources.domain.domain_space, "
                                  f"or use gramtile.gram(), which builds it")
        F = np.asarray(resources[name], dtype=np.float64)
        col = X.columns.get(_WORDS.get(X.kind, ""))
        if col is None:
            raise RepresentationError(f"kernel 'domain' reads token sequences or WSD instances, got a {X.kind!r} batch")
        if X.kind == "wsd" and col.size and int(col.min()) < 0:
            col = X.columns["lemma"]  # WSD instances without surface words: their lemmas
        col = np.asarray(col, dtype=np.int64)
        if F.ndim != 2 or (col.size and int(col.max()) >= F.shape[0]):
            raise KernelSpecError(f"resource {name!r} has shape {F.shape} but the examples use symbol id "
                                  f"{int(col.max(initial=-1))}; rebuild it from the vocabulary the examples "
                                  f"were encoded with")
        ex = np.repeat(np.arange(X.n), np.diff(X.offsets))
        V = np.zeros((X.n, F.shape[1]))
        np.add.at(V, ex, F[col])
        norm = np.sqrt(np.einsum("ij,ij->i", V, V))
        nz = norm > 0
        V[nz] /= norm[nz, None]
        return V, nz.astype(np.float64)

    def block(self, X, Y=None, resources=None) -> np.ndarray:
        """Cosines of the domain vectors, shape (X.n, Y.n); Y=None means Y = X."""
        vx, dx = self._vectors(X, resources)
        if Y is None:
            K = vx @ vx.T
            K = (K + K.T) / 2  # exactly symmetric whatever order BLAS summed in
            np.fill_diagonal(K, dx)
            return K
        vy, _ = self._vectors(Y, resources)
        return vx @ vy.T

    def diag(self, X, resources=None) -> np.ndarray:
        """1 for a context with a non-zero domain vector, else 0; shape (X.n,)."""
        return self._vectors(X, resources)[1]
