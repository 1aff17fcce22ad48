"""A composite kernel read from stored base Gram matrices (:class:`ComposedView`): the base
stores' blocks combined by the spec, without recomputing any pair.
"""
from __future__ import annotations

import numpy as np

from gramtile.kernels.composite import normalize_block
from gramtile.pipeline.stores.errors import StoreMismatchError
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_view import GramView


class ComposedView:
    """A composite kernel read from stored base matrices, without recomputing any pair.

    Parameters
    ----------
    spec : KernelSpec
        The composite (or base) spec.
    stores : mapping base spec_hash -> GramStore, or a sequence of GramStores / paths / URLs
        One store per distinct base spec of ``spec``, all over the same corpus and selections.
        A sequence is matched to the base kernels by each store's kernel hash (extra stores
        are ignored).

    Raises
    ------
    StoreMismatchError
        A base kernel has no store among those given (the message lists what each holds), the
        stores cover different corpora or selections, or they hold different dtypes (a float32
        store mixed with a float64 one: the composite would silently be float32-accurate).
    """

    def __init__(self, spec, stores):
        self.spec = spec
        bases = spec.base_specs()
        if not isinstance(stores, dict):
            given = [st if isinstance(st, GramStore) else GramStore.open(st) for st in stores]
            stores = {st.kernel_hash: st for st in given}
        missing = [b for b in bases if b.spec_hash not in stores]
        if missing:
            held = "; ".join(f"{st.path} holds {st.meta['kernel_json']} (hash {h[:12]})"
                             for h, st in stores.items()) or "no store was given"
            raise StoreMismatchError(
                f"no stored Gram matrix for base kernel {missing[0].to_json()} (hash {missing[0].spec_hash[:12]}) "
                f"among the stores given ({held}); pass its store too, or compute it with "
                f"`gramtile gram --kernel '{missing[0].to_json()}'`")
        self.views = {}
        ref = None
        for b in bases:
            st = stores[b.spec_hash]
            if st.kernel_hash != b.spec_hash:
                raise StoreMismatchError(f"store {st.path} holds kernel hash {st.kernel_hash}, "
                                         f"not {b.spec_hash} ({b.to_json()}); pass the right store for it")
            key = (st.corpus_hash, st.meta["rows_sha256"], st.meta["cols_sha256"])
            if ref is None:
                ref = (key, st.path)
            elif key != ref[0]:
                raise StoreMismatchError(f"stores {ref[1]} and {st.path} cover different corpora or selections "
                                         f"(corpus hashes {ref[0][0]} vs {key[0]}); compute both over the same "
                                         f"--corpus/--rows/--cols")
            self.views[b.spec_hash] = GramView(st)
        dtypes = {v.store.dtype: v.store.path for v in self.views.values()}
        if len(dtypes) > 1:
            raise StoreMismatchError(
                f"a composite kernel mixes Gram stores of different dtypes ({dtypes['float32']} holds float32, "
                f"{dtypes['float64']} float64); recompute {dtypes['float32']} with --dtype float64 (or "
                f"{dtypes['float64']} with --dtype float32) so every base kernel has the same precision")
        self.dtype = next(iter(dtypes), "float64")

    @property
    def shape(self):
        return next(iter(self.views.values())).shape

    @property
    def chunk_reads(self) -> int:
        return sum(v.chunk_reads for v in self.views.values())

    def block(self, rows=None, cols=None, normalized: bool = False) -> np.ndarray:
        base = {}
        for h, v in self.views.items():
            dr, dc = v.diag(rows, cols)
            base[h] = (v.block(rows, cols), dr, dc)
        K, dr, dc = self.spec.combine(base)
        K = np.asarray(K, dtype=self.dtype)
        return (normalize_block(K, dr, dc) if normalized else K).astype(self.dtype, copy=False)
