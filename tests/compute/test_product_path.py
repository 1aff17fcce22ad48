"""The engine's product path (pipeline/compute/product.py): feature sets stored in the corpus
store, tiles as matrix products, the per-tile choice recorded in the log, and the same K as the
pairwise cores on every path and executor."""
import numpy as np
import pytest
import zarr
from conftest import corpus_store_of, num_trees

from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.cache import Cache
from gramtile.pipeline.compute import feature_sets, product
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.representations.structures import Document, TokenSeq
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError
from gramtile.workflows.cli import main

ST = '{"kind": "st", "lam": 0.4}'


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return corpus_store_of(tmp_path_factory.mktemp("corpus") / "num500.zarr", num_trees(500), 150)


def gram(corpus, spec, out, path, **kw):
    st = run_gram(corpus, spec, out, tile=kw.pop("tile", 128), cluster=kw.pop("cluster", "sequential"), path=path, **kw)
    return st, st.view().to_numpy()


def tiles_logged(st):
    return [r for r in st.read_log() if r.get("event") == "tile"]


def max_rel(A, B):
    scale = np.maximum(np.abs(A), np.abs(B))
    return float(np.max(np.where(scale > 0, np.abs(A - B) / np.where(scale > 0, scale, 1), 0.0)))


@pytest.mark.parametrize("spec", [ST, '{"kind": "st", "lam": 0.7, "leaves": true}',
                                  '{"kind": "normalized", "kernel": {"kind": "st", "lam": 0.4}}',
                                  '{"kind": "sum", "kernels": [{"weight": 1, "kernel": {"kind": "st"}}, '
                                  '{"weight": 0.5, "kernel": {"kind": "sst"}}]}'])
def test_product_and_pairwise_paths_give_the_same_K(corpus, tmp_path, spec):
    _, K0 = gram(corpus, spec, tmp_path / "pair.zarr", "pairwise")
    sp, K1 = gram(corpus, spec, tmp_path / "prod.zarr", "product" if "sst" not in spec else "auto")
    assert max_rel(K1, K0) <= 1e-12
    # base kernels are exactly symmetric on both paths; the normalised composite divides by the
    # row and then the column root, on either path, which is symmetric to round-off only
    assert np.array_equal(K1, K1.T) if "normalized" not in spec else max_rel(K1, K1.T) <= 1e-15
    for rec in tiles_logged(sp):
        st_paths = [p for p in rec["paths"] if p["kernel"] == "st"]
        assert len(st_paths) == 1 and {"product", "pairwise"} == set(st_paths[0]["estimate_ns"])
    pair_log = tiles_logged(run_gram(corpus, spec, tmp_path / "pair.zarr", cluster="sequential"))
    assert all("paths" not in r for r in pair_log)  # the pairwise run recorded no product choice


def test_auto_records_the_cheaper_estimate_and_the_forced_path(corpus, tmp_path):
    st, K = gram(corpus, ST, tmp_path / "auto.zarr", "auto")
    recs = tiles_logged(st)
    assert recs
    for rec in recs:
        (p,) = rec["paths"]
        est = p["estimate_ns"]
        assert p["path"] == ("product" if est["product"] < est["pairwise"] else "pairwise")
    start = [r for r in st.read_log() if r.get("event") == "start"][-1]
    assert start["path"] == "auto" and start["feature_sets"]
    st2, K2 = gram(corpus, ST, tmp_path / "forced.zarr", "product")
    assert all(r["paths"][0]["path"] == "product" for r in tiles_logged(st2))
    assert max_rel(K2, K) <= 1e-12


def test_rectangular_selection_and_threads(corpus, tmp_path):
    kw = {"rows": "0:130", "cols": "200:500"}
    _, K0 = gram(corpus, ST, tmp_path / "a.zarr", "pairwise", **kw)
    _, K1 = gram(corpus, ST, tmp_path / "b.zarr", "product", cluster="threads", **kw)
    assert K1.shape == (130, 300) and max_rel(K1, K0) <= 1e-12


def test_feature_set_built_once_and_shared_by_lam(corpus, tmp_path):
    gram(corpus, ST, tmp_path / "one.zarr", "product")
    with Cache().active() as c:
        gram(corpus, '{"kind": "st", "lam": 0.9}', tmp_path / "two.zarr", "product")  # lam changes weights only
    assert c.counts("feature-meta").get("built", 0) == 0 and c.counts("feature-meta")["loads"] >= 1
    (base,) = product.bases_with_map(as_spec(ST))
    meta = feature_sets.info(corpus, base)
    assert meta["n_examples"] == 500 and meta["n_features"] > 0
    assert sum(s["stop"] - s["start"] for s in meta["shards"]) == 500


def test_corrupt_feature_shard_is_reported(tmp_path):
    c = corpus_store_of(tmp_path / "c.zarr", num_trees(60), 30)
    gram(c, ST, tmp_path / "g.zarr", "product")
    base = as_spec(ST)
    g = zarr.open_group(str(c), mode="r+")[feature_sets.group_name(base)]["phi"]["1"]
    data = g["data"][...]
    data[0] += 1.0
    g["data"][...] = data  # a valid chunk with the wrong numbers: the recorded sha256 catches it
    with pytest.raises(StoreCorruptError, match="sha256"):
        feature_sets.load(c, base).rows(np.arange(30, 60))


def test_product_path_for_a_kernel_without_a_map_is_refused(corpus, tmp_path, capsys):
    with pytest.raises(KernelSpecError, match="no explicit feature map"):
        run_gram(corpus, '{"kind": "sst"}', tmp_path / "x.zarr", path="product")
    assert not (tmp_path / "x.zarr").exists()
    assert main(["-q", "gram", "--corpus", str(corpus), "--kernel", '{"kind": "pt"}', "--out",
                 str(tmp_path / "y.zarr"), "--path", "product", "--cluster", "sequential"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no explicit feature map" in err[0]


def test_cli_gram_path_option(corpus, tmp_path):
    for path in ("pairwise", "product"):
        assert main(["-q", "gram", "--corpus", str(corpus), "--kernel", ST, "--out", str(tmp_path / f"{path}.zarr"),
                     "--path", path, "--cluster", "sequential", "--rows", "0:200"]) == 0
    from gramtile.pipeline.stores.gram_store import GramStore
    K0 = GramStore.open(tmp_path / "pairwise.zarr").view().to_numpy()
    K1 = GramStore.open(tmp_path / "product.zarr").view().to_numpy()
    assert max_rel(K1, K0) <= 1e-12


def test_auto_takes_the_pairwise_path_where_the_corpus_store_cannot_hold_features(tmp_path):
    """The feature set is built into the corpus store; where that write fails (here a file sits
    where the features group goes, as a write-protected store fails it), auto falls back."""
    c = corpus_store_of(tmp_path / "c.zarr", num_trees(40), 20)
    (c / "features").write_text("not a group")
    st, K = gram(c, ST, tmp_path / "g.zarr", "auto")
    assert all("paths" not in r for r in tiles_logged(st))
    _, K0 = gram(c, ST, tmp_path / "p.zarr", "pairwise")
    assert np.array_equal(K, K0)
    with pytest.raises(StoreError, match="--path product"):
        gram(c, ST, tmp_path / "h.zarr", "product")


def test_a_subsequence_vocabulary_that_cannot_fit_is_refused_before_anything_is_built(tmp_path, capsys):
    """A corpus of long sequences: 3,000 tokens give C(3000, 3) = 4.5e9 occurrences of length 3,
    a vocabulary of at least 258 GB at the assumed distinct share: the build is refused with the
    figures and the fix; nothing is written into the corpus store; auto keeps the pairwise path."""
    rng = np.random.default_rng(0)
    docs = [Document(id=str(i), label=i % 2, structures={"seq": TokenSeq(tuple(f"w{t}" for t in rng.integers(0, 50, L)))})
            for i, L in enumerate([3000, 5, 7, 4])]
    c = corpus_store_of(tmp_path / "long.zarr", docs, 2)
    spec = '{"kind": "subsequence", "n": 3, "lam": 0.5}'
    with pytest.raises(StoreError, match=r"enumerates 4,500,002,602 subsequence occurrences.*Fix: use the pairwise path"):
        gram(c, spec, tmp_path / "prod.zarr", "product")
    assert not (c / "features").exists() or not any((c / "features").iterdir())
    # the CLI's features command gives the same reason on one line
    assert main(["-q", "features", "--corpus", str(c), "--kernel", spec, "--out", str(tmp_path / "f.zarr")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vocabulary would take at least" in err[0] and str(c) in err[0]
    assert "--path" not in err[0] and "gramtile gram" in err[0]  # `features` takes no --path
    # a short corpus of the same kernel is built (the check is not a blanket refusal)
    short = corpus_store_of(tmp_path / "short.zarr", docs[1:], 2)
    _, K1 = gram(short, spec, tmp_path / "sp.zarr", "product")
    _, K0 = gram(short, spec, tmp_path / "sq.zarr", "pairwise")
    assert max_rel(K1, K0) <= 1e-12
    # auto on the long corpus: every tile pairwise, no feature set attempted
    st, K = gram(c, spec, tmp_path / "auto.zarr", "auto")
    assert all("paths" not in r for r in tiles_logged(st))
    assert feature_sets.too_large(c, as_spec(spec), CorpusStore.open(c))
    assert feature_sets.too_large(short, as_spec(spec), CorpusStore.open(short)) is None
