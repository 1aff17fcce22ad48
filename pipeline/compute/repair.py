"""``gramtile verify --repair``: recompute the tiles that :func:`~gramtile.pipeline.stores.gram_verify.verify` found bad.

The store only checks (it never imports the engine); repairing is a compute step: clear the
done bits of the bad tiles under the store's lock, then run the engine on the store, which
plans exactly the tiles no longer done.
"""
from __future__ import annotations

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.stores.gram_store import GramStore, store_lock
from gramtile.pipeline.stores.gram_verify import VerifyReport, verify
from gramtile.pipeline.stores.integrity import attr_intact
from gramtile.pipeline.stores.tiles import Tile


def repair(store, cluster="sequential") -> VerifyReport:
    """Verify a Gram store and recompute its bad tiles.

    Parameters
    ----------
    store : GramStore, path or URL
        Needs the corpus store named in its provenance.
    cluster : str or Runtime
        Where the repair runs (:class:`~gramtile.pipeline.compute.runtime.Runtime`, whose
        ``progress`` shows a bar).

    Returns
    -------
    VerifyReport
        As :func:`verify`, with ``repaired`` listing the recomputed tiles that now verify,
        ``bad`` what is still bad after the recomputation, and ``rebuilt`` the tiles kept when
        a damaged done mask was rebuilt from the stored chunks.
    """
    st = store if isinstance(store, GramStore) else GramStore.open(store, mode="r+", check=False)
    rep = verify(st)
    if rep.metadata:
        return rep  # nothing a recomputation can fix: the message says what to do
    if attr_intact(st.meta) is None:  # a store made before its attributes had a checksum: record it
        with store_lock(st.path):
            st.touch()
    if rep.done_damaged:
        with store_lock(st.path):
            kept = st.rebuild_done()
        damaged = rep.done_damaged
        rep = verify(st)  # the tiles kept are checked like any other
        rep.done_damaged, rep.rebuilt = damaged, kept
    if rep.bad or rep.rebuilt is not None:
        canon = sorted({Tile(min(t), max(t)) if st.symmetric else t for t, _ in rep.bad})
        if canon:
            with store_lock(st.path):  # never clear bits under a running writer
                st.clear_done(canon)
        lm = st.landmarks  # a landmark store is resumed as one (its columns are drawn again, identically)
        sel = {"landmarks": lm["m"], "landmark_seed": lm["seed"]} if lm else \
            {"cols": None if st.symmetric else st.cols()}
        run_gram(st.meta["corpus_path"], st.spec, st.path, rows=st.rows(), cluster=cluster,
                 dtype=st.dtype, **sel)
        # a tile is repaired only if it verifies now (a kernel giving inf would give it again)
        after = verify(GramStore.open(st.path))
        still = {Tile(min(t), max(t)) if st.symmetric else t for t, _ in after.bad}
        rep.repaired = [t for t in canon if t not in still]
        rep.bad = after.bad
    return rep
