"""Corpus resources stored in the corpus store (pipeline/resources/build.py): built by `gramtile prepare
--resources` or by the Gram driver on first use, loaded (never built) by Dask workers, equal to
the in-memory build, recorded in Gram-store provenance, and corrupt or missing ones reported."""
import json

import numpy as np
import pytest
import zarr
from conftest import require_data, senseval_head

import gramtile
from gramtile.kernels.errors import KernelSpecError
from gramtile.kernels.registry import as_spec
from gramtile.pipeline.cache import PLUGIN, Cache
from gramtile.pipeline.compute import resource_builds, tile_task
from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.readers.senseval import read_senseval
from gramtile.pipeline.resources import build as rbuild
from gramtile.pipeline.resources import keys as rkeys
from gramtile.pipeline.stores import resource_store
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreCorruptError, StoreError, StoreMismatchError
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.cli import main

N = 40
SOFT = {"kind": "syntagmatic", "similarity": "wordnet"}
LSA = {"kind": "syntagmatic", "similarity": "lsa"}
DOMAIN = {"kind": "domain", "dims": 10}


@pytest.fixture(scope="module")
def serve(tmp_path_factory):
    src = require_data("senseval_hard_line_serve") / "serve.pos"
    return senseval_head(src, tmp_path_factory.mktemp("src") / "serve40.pos", N)


@pytest.fixture(scope="module")
def docs(serve):
    return list(read_senseval(serve))


def _corpus(serve, path):
    prepare(serve, "senseval", path, shard_size=15, cluster="sequential")
    return path


def test_prepare_resources_flag_builds_them_without_changing_the_corpus_hash(serve, docs, tmp_path, capsys):
    out = tmp_path / "c.zarr"
    assert main(["prepare", "--input", str(serve), "--format", "senseval", "--out", str(out), "--shard-size", "15",
                 "--cluster", "sequential", "--no-progress", "--resources", "wordnet,lsa:100,domain:10@seq"]) == 0
    printed = capsys.readouterr().out
    assert printed.count(": built (resources/") == 4  # wordnet; lsa on wsd and seq; domain on seq
    cs = CorpusStore.open(out)
    assert cs.verify()  # the recorded content hash still describes the store
    plain = _corpus(serve, tmp_path / "plain.zarr")
    assert CorpusStore.open(plain).content_hash == cs.content_hash
    names = sorted((r["name"], r["rep"]) for r in resource_store.stored(out))
    assert names == [("domain/lsa/10", "seq"), ("similarity/lsa/lemmas", "seq"), ("similarity/lsa/lemmas", "wsd"),
                     ("similarity/wordnet", None)]
    assert main(["inspect", str(out)]) == 0  # inspect lists them, one line each
    shown = capsys.readouterr().out
    assert "resources: 4" in shown and "  similarity/wordnet, content hash" in shown
    assert "  domain/lsa/10 (from seq)" in shown and "  similarity/lsa/lemmas (from wsd)" in shown
    wn = next(r for r in resource_store.stored(out) if r["name"] == "similarity/wordnet")
    assert wn["provenance"]["corpus_content_hash"] == cs.content_hash
    assert set(wn["provenance"]["wordnet"]["sha256"]) >= {"index.noun", "index.verb", "index.adj", "index.adv"}
    assert wn["provenance"]["scikit_learn"] and wn["params"]["format"] == rkeys.FORMAT_VERSION

    # a second prepare finds them stored; the Gram driver builds nothing and K equals the in-memory result
    assert main(["prepare", "--input", str(serve), "--format", "senseval", "--out", str(out), "--shard-size", "15",
                 "--cluster", "sequential", "--no-progress", "--resources", "wordnet"]) == 0
    assert "resource similarity/wordnet: already stored" in capsys.readouterr().out
    for spec in (SOFT, LSA, DOMAIN | {"rep": "seq"}):
        with Cache().active() as c:  # a fresh cache, as a new worker has
            st = run_gram(out, spec, tmp_path / f"g{len(list(tmp_path.iterdir()))}.zarr", tile=16,
                          cluster="sequential")
        assert c.counts("resources").get("built", 0) == 0 and c.counts("resources")["loads"] >= 1
        np.testing.assert_allclose(st.view().block(), gramtile.gram(spec, docs), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("bad, says", [
    ("", "empty"), ("wordnet,bogus", "unknown resource 'bogus'"), ("lsa:50", "100-dimensional"),
    ("domain:x", "not an integer"), ("domain:0", "not an integer >= 1"), ("wordnet:3", "no dimensions"),
    ("domain@", "'@' must be followed"), ("wordnet@seq", "no '@REP'"),
])
def test_bad_resources_value_names_parameter_and_valid_values(bad, says):
    with pytest.raises(KernelSpecError) as e:
        rkeys.parse_option(bad)
    assert says in str(e.value) and "--resources" in str(e.value) and "valid items" in str(e.value)


def test_bad_resources_value_fails_the_command_before_parsing(serve, tmp_path, capsys):
    out = tmp_path / "never.zarr"
    assert main(["prepare", "--input", str(serve), "--format", "senseval", "--out", str(out),
                 "--cluster", "sequential", "--no-progress", "--resources", "wordnet,lsa:7"]) == 2
    assert "--resources" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(KernelSpecError, match="representation 'trees' is not in the store"):
        rkeys.keys_for_option("domain@trees", {"wsd": "wsd", "seq": "seq"})


def test_first_use_driver_builds_and_dask_workers_only_load(serve, docs, tmp_path):
    corpus = _corpus(serve, tmp_path / "c.zarr")
    assert resource_store.stored(corpus) == []
    cf = tmp_path / "cluster.yaml"
    cf.write_text("profiles:\n  local: {n_workers: 2, threads_per_worker: 1, memory_limit: 1GiB, "
                  "dashboard_address: ':0'}\n")
    spec = {"kind": "sum", "kernels": [{"kernel": SOFT}, {"kernel": DOMAIN | {"rep": "wsd"}}]}
    with Cache().active() as driver, Runtime("local", cf) as rt, rt.session() as ex:
        client = ex.client
        st = run_gram(corpus, spec, tmp_path / "g.zarr", tile=10, cluster=rt)
        worker_stats = client.run(lambda dask_worker: dask_worker.plugins[PLUGIN].cache.counts("resources"))
    assert driver.counts("resources")["built"] == 2  # the driver built both, once
    assert len(worker_stats) == 2
    assert all(s.get("built", 0) == 0 for s in worker_stats.values())  # workers never build ...
    assert sum(s["loads"] for s in worker_stats.values()) >= 2  # ... they load, into the run's worker caches
    assert {r["name"] for r in resource_store.stored(corpus)} == {"similarity/wordnet", "domain/lsa/10"}
    np.testing.assert_allclose(st.view().block(), gramtile.gram(spec, docs), rtol=1e-10, atol=1e-12)
    # the Gram store's provenance names the resources and their content hashes
    recorded = st.meta["resources"]
    assert recorded == {r["group"]: r["content_hash"] for r in resource_store.stored(corpus)}


def _rewrite(corpus, group, change, rehash: bool):
    """Change a stored resource's value; ``rehash`` also records the new content hash (a rebuild)."""
    g = zarr.open_group(str(corpus), mode="r+")[group]
    meta = dict(g.attrs[resource_store.ATTR])
    name = "data" if meta["kind"] == "csr" else "value"
    a = g[name][...]
    change(a)
    g[name][...] = a
    if rehash:
        arrays = {n: g[n][...] for n in (("indptr", "indices", "data") if meta["kind"] == "csr" else ("value",))}
        meta["content_hash"] = rbuild.content_hash(meta["kind"], meta["shape"], arrays)
        g.attrs[resource_store.ATTR] = meta


def test_changed_resource_makes_the_gram_store_mismatch(serve, tmp_path):
    corpus = _corpus(serve, tmp_path / "c.zarr")
    out = tmp_path / "g.zarr"
    run_gram(corpus, DOMAIN, out, tile=16, cluster="sequential")
    (group,) = GramStore.open(out).meta["resources"]
    # same resource: the rerun resumes (nothing to do)
    run_gram(corpus, DOMAIN, out, tile=16, cluster="sequential")

    def scale(a):
        a *= 2.0

    _rewrite(corpus, group, scale, rehash=True)
    with pytest.raises(StoreMismatchError, match="corpus resource content"):
        run_gram(corpus, DOMAIN, out, tile=16, cluster="sequential")


def test_corrupt_and_missing_resources_are_reported(serve, tmp_path):
    corpus = _corpus(serve, tmp_path / "c.zarr")
    (key,) = rkeys.keys_of(SOFT)
    resource_builds.ensure(corpus, [key])
    assert resource_store.load(corpus, key).nnz > N  # loads cleanly first

    def flip(a):
        a[0] += 0.5

    _rewrite(corpus, key.group, flip, rehash=False)
    with pytest.raises(StoreCorruptError, match="does not match its recorded content hash"):
        resource_store.load(corpus, key)
    # a tile task meets it too, as a typed error naming the group
    with pytest.raises(StoreCorruptError, match=key.group):
        run_gram(corpus, SOFT, tmp_path / "g.zarr", tile=16, cluster="sequential")

    # missing on the worker side: an error that says how to build it, never a silent rebuild
    zarr.open_group(str(corpus), mode="r+")[rkeys.GROUP].__delitem__(key.group.split("/", 1)[1])
    cs = CorpusStore.open(corpus)
    with pytest.raises(StoreError, match="prepare --resources"):
        tile_task.corpus_resources(str(corpus), cs.content_hash, as_spec(SOFT), ("wsd",))
    assert resource_store.info(corpus, key) is None
    # an interrupted build (arrays without the finishing attribute) counts as missing and is rebuilt
    g = zarr.open_group(str(corpus), mode="r+")[rkeys.GROUP].require_group(key.group.split("/", 1)[1])
    g.create_array("data", data=np.zeros(3))
    assert resource_store.info(corpus, key) is None
    assert resource_builds.ensure(corpus, [key])[key.group]["built"]
    assert resource_store.load(corpus, key).nnz > N
    assert json.loads(json.dumps(resource_store.stored(corpus)))[0]["name"] == "similarity/wordnet"


# ---- space_rep: the representation a kernel's space is built from --------------------------------

LSA_SEQ = LSA | {"space_rep": "seq"}


def test_space_rep_default_keeps_the_spec_hash_of_stored_matrices():
    """Gram stores computed before ``space_rep`` existed stay valid: at its default (None, or the
    kernel's own rep) it is left out of the spec; another representation is another kernel."""
    import hashlib

    old = json.dumps({"kind": "syntagmatic", "n": 2, "lam": 0.5, "window": 3, "similarity": "lsa",
                      "components": "both", "rep": "wsd"}, sort_keys=True, separators=(",", ":"))
    assert as_spec(LSA).spec_hash == hashlib.sha256(old.encode()).hexdigest()
    assert as_spec(LSA | {"space_rep": "wsd"}).spec_hash == as_spec(LSA).spec_hash  # its own rep: the same kernel
    old = json.dumps({"kind": "domain", "dims": 10, "rep": "seq"}, sort_keys=True, separators=(",", ":"))
    assert as_spec(DOMAIN | {"space_rep": "seq"}).spec_hash == hashlib.sha256(old.encode()).hexdigest()
    assert as_spec(LSA_SEQ).spec_hash != as_spec(LSA).spec_hash
    assert as_spec(LSA_SEQ).to_dict()["space_rep"] == "seq"
    import pickle

    ctx = as_spec(LSA_SEQ)  # the key survives the spec's JSON and pickling (stores and Dask tasks)
    assert as_spec(ctx.to_json()) == ctx and as_spec(ctx.to_json()).spec_hash == ctx.spec_hash
    assert pickle.loads(pickle.dumps(ctx)).base_specs()[0].space_rep == "seq"


def test_space_rep_names_the_resource_and_agrees_with_the_resources_option():
    (own,) = rkeys.keys_of(LSA)
    (ctx,) = rkeys.keys_of(LSA_SEQ)
    assert (own.name, own.rep) == ("similarity/lsa/lemmas", "wsd")
    assert (ctx.name, ctx.rep) == ("similarity/lsa/lemmas", "seq")
    assert ctx.param_hash != own.param_hash and ctx.group != own.group
    # `prepare --resources lsa@seq` builds exactly the group such a kernel reads
    assert rkeys.keys_for_option("lsa@seq", {"wsd": "wsd", "seq": "seq"}) == [ctx]
    sub = {"kind": "subsequence", "on": "lemmas", "similarity": "lsa", "rep": "seq"}
    assert rkeys.keys_of(sub) == [ctx]  # a kernel reading seq itself shares the stored space
    dom = DOMAIN | {"rep": "wsd", "space_rep": "seq"}
    assert rkeys.keys_of(dom) == [rkeys.ResourceKey("domain/lsa/10", "seq")]


def test_space_rep_store_equals_in_memory_gram_and_changes_the_kernel(serve, docs, tmp_path):
    corpus = _corpus(serve, tmp_path / "c.zarr")
    stores = {}
    for name, spec in (("own", LSA), ("ctx", LSA_SEQ), ("dom", DOMAIN | {"rep": "wsd", "space_rep": "seq"})):
        stores[name] = run_gram(corpus, spec, tmp_path / f"{name}.zarr", tile=16, cluster="sequential").view().block()
        np.testing.assert_allclose(stores[name], gramtile.gram(spec, docs), rtol=1e-10, atol=1e-12)
    assert {r["rep"] for r in resource_store.stored(corpus) if r["name"] == "similarity/lsa/lemmas"} == {"wsd", "seq"}
    # the contexts' space is another space: the soft-matched kernel moves
    assert np.abs(stores["ctx"] - stores["own"]).max() > 1e-3


@pytest.mark.parametrize("spec, says", [
    (LSA | {"space_rep": 3}, "must be null or the name of a corpus representation"),
    (LSA | {"space_rep": ""}, "must be null or the name"),
    (SOFT | {"space_rep": "seq"}, "WordNet synonymy depends on the vocabulary alone"),
    ({"kind": "syntagmatic", "space_rep": "seq"}, "drop space_rep"),
    ({"kind": "subsequence", "space_rep": "wsd"}, "parameter 'space_rep' of kernel 'subsequence'"),
    (DOMAIN | {"space_rep": ["seq"]}, "parameter 'space_rep' of kernel 'domain'"),
])
def test_bad_space_rep_is_a_spec_error_naming_parameter_and_value(spec, says):
    with pytest.raises(KernelSpecError, match=says) as e:
        as_spec(spec)
    assert repr(spec["space_rep"]) in str(e.value)


def test_space_rep_missing_or_conflicting_is_reported(serve, docs, tmp_path):
    corpus = _corpus(serve, tmp_path / "c.zarr")
    with pytest.raises(KernelSpecError, match="representation 'tree'.*does not hold"):
        run_gram(corpus, LSA | {"space_rep": "tree"}, tmp_path / "g.zarr", tile=16, cluster="sequential")
    only_wsd = {"wsd": [d.structures["wsd"] for d in docs]}
    with pytest.raises(KernelSpecError, match="built from representation 'seq'.*lack"):
        gramtile.gram(LSA_SEQ, only_wsd)
    both = {"kind": "sum", "kernels": [{"kernel": LSA}, {"kernel": LSA_SEQ}]}
    with pytest.raises(KernelSpecError, match="from representation 'wsd' and from 'seq'"):
        rkeys.keys_of(both)
    with pytest.raises(KernelSpecError, match="same space_rep"):
        gramtile.gram(both, docs)
