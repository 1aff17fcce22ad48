"""``gramtile verify --repair``: recompute the tiles that :func:`~gramtile.pipeline.stores.gram_store.verify` found bad.

The store only checks (it never imports the engine); repairing is a compute step: clear the
done bits of the bad tiles under the store's lock, then run the engine on the store, which
plans exactly the tiles no longer done.
"""
from __future__ import annotations

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.stores.gram_store import GramStore, VerifyReport, store_lock, verify
from gramtile.pipeline.stores.tiles import Tile


def repair(store, cluster: str = "sequential", cluster_file=None, progress: bool = False) -> VerifyReport:
    """Verify a Gram store and recompute its bad tiles.

    Parameters
    ----------
    store : GramStore, path or URL
        Needs the corpus store named in its provenance.
    cluster, cluster_file : executor settings of the repair run.
    progress : bool

    Returns
    -------
    VerifyReport
        As :func:`verify`, with ``repaired`` listing the recomputed tiles.
    """
    st = store if isinstance(store, GramStore) else GramStore.open(store, mode="r+")
    rep = verify(st)
    if rep.bad:
        canon = sorted({Tile(min(t), max(t)) if st.symmetric else t for t, _ in rep.bad})
        with store_lock(st.path):  # never clear bits under a running writer
            st.clear_done(canon)
        run_gram(st.meta["corpus_path"], st.spec, st.path, rows=st.rows(),
                 cols=None if st.symmetric else st.cols(), cluster=cluster, cluster_file=cluster_file,
                 progress=progress)
        rep.repaired = canon
    return rep
