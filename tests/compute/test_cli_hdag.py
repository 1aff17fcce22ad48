"""`gramtile prepare --hdag` stores chunked HDAGs that `gramtile gram` can read."""
import numpy as np
from conftest import SHARED_DATA

import gramtile
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.cli import main


def test_prepare_hdag_flag_then_gram(tmp_path):
    src = tmp_path / "q.txt"
    src.write_bytes(b"".join((SHARED_DATA / "trec_qc" / "test.txt").read_bytes().splitlines(keepends=True)[:12]))
    corpus = tmp_path / "q.zarr"
    assert main(["prepare", "--input", str(src), "--format", "trec", "--out", str(corpus),
                 "--cluster", "sequential", "--hdag", "--no-progress"]) == 0
    cs = CorpusStore.open(corpus)
    assert cs.representations.get("hdag") == "hdag" and cs.n == 12
    out = tmp_path / "g.zarr"
    assert main(["gram", "--corpus", str(corpus), "--kernel", '{"kind": "hdag", "p": 3}', "--out", str(out),
                 "--cluster", "sequential", "--tile", "5", "--no-progress"]) == 0
    K = GramStore.open(out).view().block()
    docs = list(cs.documents())
    np.testing.assert_allclose(K, gramtile.gram({"kind": "hdag", "p": 3}, [d.structures["hdag"] for d in docs]),
                               rtol=1e-12)
    assert np.all(np.diag(K) > 0)


def test_prepare_without_hdag_flag_has_no_hdag(tmp_path):
    src = tmp_path / "q.txt"
    src.write_bytes(b"".join((SHARED_DATA / "trec_qc" / "test.txt").read_bytes().splitlines(keepends=True)[:3]))
    corpus = tmp_path / "q.zarr"
    assert main(["prepare", "--input", str(src), "--format", "trec", "--out", str(corpus),
                 "--cluster", "sequential", "--no-progress"]) == 0
    assert "hdag" not in CorpusStore.open(corpus).representations
