"""Stores made before label-only SST productions (issue 19) are refused, never reinterpreted.

A corpus store of format version 1 holds leaf-typed production ids in its ``prod`` column; read
as they are, the SST core would silently compute the old kernel. Real stores under tmp_path.
"""
import json

import pytest
import zarr

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.stores.corpus_store import FORMAT_VERSION, CorpusStore
from gramtile.pipeline.stores.errors import StoreMismatchError

TREES = ["(C A)", "(C (A z))", "(S (C A) (D d))", "(S (C (A z)) (D d))"]


def _corpus(tmp_path):
    (tmp_path / "t.dat").write_text("".join(f"{lab} |BT| {t} |ET|\n" for lab, t in zip(["+1", "-1"] * 2, TREES)))
    prepare(tmp_path / "t.dat", "svmlighttk", tmp_path / "c.zarr", cluster="sequential")
    return tmp_path / "c.zarr"


def test_a_version_1_corpus_store_is_refused_with_the_fix(tmp_path):
    path = _corpus(tmp_path)
    assert FORMAT_VERSION == 2
    g = zarr.open_group(str(path), mode="r+")
    m = json.loads(json.dumps(g.attrs["manifest"]))
    m["format_version"] = 1  # as a store prepared before issue 19 says
    g.attrs["manifest"] = m
    with pytest.raises(StoreMismatchError) as e:
        CorpusStore.open(path)
    msg = str(e.value)
    assert "format version 1" in msg and "labels only" in msg and "prepare the corpus again" in msg
    with pytest.raises(StoreMismatchError):
        run_gram(path, {"kind": "sst"}, tmp_path / "g.zarr", cluster="sequential")
    assert not (tmp_path / "g.zarr").exists()


def test_a_new_corpus_store_gives_the_label_only_sst(tmp_path):
    path = _corpus(tmp_path)
    K = run_gram(path, {"kind": "sst", "lam": 0.5}, tmp_path / "g.zarr", cluster="sequential").view().to_numpy()
    assert K[0, 1] == 0.5  # (C A) and (C (A z)) share the fragment (C A)
    T = run_gram(path, {"kind": "sst", "lam": 0.5, "typed_leaves": True}, tmp_path / "t.zarr",
                 cluster="sequential").view().to_numpy()
    assert T[0, 1] == 0.0
