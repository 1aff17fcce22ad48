"""The WSD workflow (workflows/wsd.yaml) on a CI-sized subsample of the real data: runs through
``gramtile run``'s recipe hook, computes its base kernels into Gram stores over a corpus store
(equal to the former in-memory path), agrees with a direct computation, computes no tile on a
rerun, and rejects bad settings with WorkflowError."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import require_data, senseval_head

import gramtile
from gramtile.pipeline.learn.crossval import evaluate
from gramtile.pipeline.learn.folds import stratified_kfold
from gramtile.pipeline.learn.sources import ArrayKernelSource
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.errors import WorkflowError
from gramtile.workflows.recipes.wsd import _config, load_word
from gramtile.workflows.runner import RecipeWorkflow, load_workflow, run_workflow

REPO = Path(__file__).resolve().parents[2]

SMALL = {
    "name": "wsd_ci",
    "recipe": "gramtile.workflows.recipes.wsd:run",
    "data": "${SHARED}/senseval_hard_line_serve",
    "words": ["line"],
    "subsample": 150,
    "kernels": {
        "BOW": {"kind": "normalized", "kernel": {"kind": "bow", "rep": "seq", "on": "tokens"}},
        "K_Synt_LSA": {"kind": "normalized", "kernel": {"kind": "syntagmatic", "similarity": "lsa"}},
        "K_Domain": {"kind": "domain", "dims": 20},
        "K_Combined": {"kind": "normalized", "kernel": {"kind": "sum", "kernels": [
            {"weight": 1, "kernel": {"kind": "normalized", "kernel": {"kind": "syntagmatic"}}},
            {"weight": 1, "kernel": {"kind": "domain", "dims": 20}},
            {"weight": 1, "kernel": {"kind": "normalized", "kernel": {"kind": "bow", "rep": "seq", "on": "tokens"}}}]}},
        "K_Select": {"select": [{"kind": "domain", "dims": 20},
                                {"kind": "normalized", "kernel": {"kind": "bow", "rep": "seq", "on": "tokens"}}]},
    },
    "protocol": {"folds": 3, "seed": 0, "C": 1},
    "baselines": {"line": 53.5},
}


def _write(tmp_path, raw):
    p = tmp_path / "wsd_ci.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False))
    return p


def test_workflow_file_is_valid():
    wf = load_workflow(REPO / "workflows" / "wsd.yaml")
    assert isinstance(wf, RecipeWorkflow)
    cfg = _config(wf.raw, wf.path)
    assert cfg["words"] == ["hard", "line", "serve"] and cfg["protocol"]["folds"] == 10
    assert set(cfg["kernels"]) == {"BOW", "K_Coll", "K_PoS", "K_Synt", "K_Synt_WordNet", "K_Synt_LSA", "K_Domain",
                                   "K_Combined", "K_Combined_groups"}
    # the WSD system is one selection over four alternatives, all holding domain and BOW kernels
    alts = cfg["select"]["K_Combined"]
    assert len(alts) == 4 and cfg["protocol"]["inner_splits"] == 1
    assert all({"domain", "bow"} <= {b.kind for b in a.base_specs()} for a in alts)


def test_small_run_agrees_with_direct_computation_and_reuses_grams(tmp_path):
    require_data("senseval_hard_line_serve")
    out = tmp_path / "run"
    rows = run_workflow(_write(tmp_path, SMALL), out)
    assert [r["kernel"] for r in rows] == list(SMALL["kernels"])
    assert all(r["word"] == "line" and r["n"] == 150 and r["n_test"] == 150 for r in rows)
    saved = json.loads((out / "results.json").read_text())
    assert [r["accuracy"] for r in saved] == [r["accuracy"] for r in rows]
    md = (out / "results.md").read_text()
    assert "| K_Combined |" in md and "53.5" in md

    # the BOW row equals a direct evaluation of the same examples and folds
    docs = load_word(require_data("senseval_hard_line_serve") / "line.pos", subsample=150)
    labels = [d.label for d in docs]
    K = gramtile.gram(SMALL["kernels"]["BOW"], [d.structures["seq"] for d in docs])
    ev = evaluate(ArrayKernelSource(K), labels, stratified_kfold(labels, 3, 0), C=(1.0,))
    assert rows[0]["accuracy"] == ev.rows[0]["accuracy"]
    majority = max(labels.count(x) for x in set(labels)) / len(labels)
    combined = rows[-2]
    assert combined["kernel"] == "K_Combined" and combined["majority"] == majority
    assert combined["accuracy"] > majority  # the combined kernel learns something
    sel = rows[-1]
    assert len(sel["alternative"]) == 3 and set(sel["alternative"]) <= {0, 1} and len(sel["spec"]) == 2
    assert "| K_Select |" in md

    # one Gram store per distinct base kernel, over the word's corpus store
    stores = sorted((out / "line" / "gram").glob("*.zarr"))
    assert len(stores) == 4  # bow, syntagmatic exact, syntagmatic lsa, domain
    assert (out / "line" / "corpus.zarr" / "zarr.json").is_file()
    assert all(r["tiles_computed"] > 0 for r in rows)
    # a rerun reuses the corpus store and computes no tile (the stores' logs say so) and gives equal rows
    corpus_stamp = (out / "line" / "corpus.zarr" / "zarr.json").stat().st_mtime_ns
    again = run_workflow(_write(tmp_path, SMALL), out)
    assert [r["accuracy"] for r in again] == [r["accuracy"] for r in rows]
    for st in stores:
        ends = [r["tiles_computed"] for r in GramStore.open(st).read_log() if r["event"] == "end"]
        assert len(ends) == 2 and ends[0] > 0 and ends[1] == 0, (st, ends)
    assert all(r["tiles_computed"] == 0 for r in again)
    assert (out / "line" / "corpus.zarr" / "zarr.json").stat().st_mtime_ns == corpus_stamp


def _in_memory_bases(docs, specs) -> dict:
    """The former path of the workflow: every base kernel's full K and diagonal from in-memory
    batches and resources (LSA and domain spaces from the whole contexts)."""
    from gramtile.pipeline.compute.inmemory import base_block
    from gramtile.workflows.recipes.wsd import corpus_data

    data = corpus_data(docs, specs)
    return {b.spec_hash: base_block(b, data)[:2] for spec in specs for b in spec.base_specs()}


def test_stored_base_kernels_equal_the_in_memory_path(tmp_path):
    """Every base kernel of workflows/wsd.yaml, computed by the engine into Gram stores over the
    workflow's corpus store (resources built into it), equals the in-memory computation."""
    from gramtile.workflows.recipes.wsd import gram_stores, stored_bases, word_corpus

    cfg = _config(load_workflow(REPO / "workflows" / "wsd.yaml").raw, REPO / "workflows" / "wsd.yaml")
    specs = [s for alts in cfg["select"].values() for s in alts]
    src = require_data("senseval_hard_line_serve") / "serve.pos"
    docs = load_word(src, subsample=90)
    corpus = word_corpus(docs, tmp_path / "corpus.zarr", src, "wordnet", 90)
    assert corpus.ids == [d.id for d in docs]
    stores, _, tiles = gram_stores(specs, corpus, tmp_path / "gram", cluster="threads", tile=32)
    got = stored_bases(stores)
    want = _in_memory_bases(docs, specs)
    assert set(got) == set(want) and len(want) == 8
    kinds = {b.spec_hash: b for s in specs for b in s.base_specs()}
    assert any(getattr(b, "space_rep", None) == "seq" for b in kinds.values())
    for h, (K, d) in want.items():
        Ks, ds, _ = got[h]
        assert tiles[h] == 6  # 90 examples, tile 32: 3 x 4 / 2 tiles
        np.testing.assert_allclose(Ks, K, rtol=1e-10, atol=1e-10 * np.abs(K).max(), err_msg=kinds[h].to_json())
        np.testing.assert_allclose(ds, d, rtol=1e-10, atol=1e-12)
    # the composites, derived from the stores, equal the in-memory composites
    for spec in specs:
        np.testing.assert_allclose(spec.combine(got)[0], spec.combine({h: (K, d, d) for h, (K, d) in want.items()})[0],
                                   rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("change,key", [
    ({"words": ["bank"]}, "words"),
    ({"subsample": 1}, "subsample"),
    ({"colour": 1}, "colour"),
    ({"protocol": {"C": [0.1, -1]}}, "protocol.C"),
    ({"protocol": {"inner_folds": 1}}, "protocol.inner_folds"),
    ({"protocol": {"folds": 1}}, "protocol.folds"),
    ({"kernels": {"X": {"kind": "syntagmatic", "window": -2}}}, "kernels.X"),
    ({"lemmas": "porter"}, "lemmas"),
    ({"protocol": {"inner_splits": 4}}, "protocol.inner_splits"),
    ({"kernels": {"X": {"select": []}}}, "kernels.X.select"),
    ({"kernels": {"X": {"select": [{"kind": "bow"}, {"kind": "syntagmatic", "n": 0}]}}}, "kernels.X.select[1]"),
])
def test_bad_settings_raise_workflow_errors(tmp_path, change, key):
    raw = {**SMALL, **change}
    p = _write(tmp_path, raw)
    with pytest.raises(WorkflowError) as e:
        run_workflow(p, tmp_path / "out")
    assert str(p) in str(e.value) and f"'{key}'" in str(e.value)


def test_C_is_chosen_on_training_folds_only(tmp_path):
    from gramtile.workflows.recipes.wsd import choose_C, nested_evaluate

    docs = load_word(require_data("senseval_hard_line_serve") / "serve.pos", subsample=120)
    labels = [d.label for d in docs]
    K = gramtile.gram({"kind": "normalized", "kernel": {"kind": "syntagmatic"}}, [d.structures["wsd"] for d in docs])
    src = ArrayKernelSource(K)
    splits = stratified_kfold(labels, 3, 0)
    p = {"C": [0.01, 1.0, 100.0], "inner_folds": 3, "seed": 0, "class_weight": None, "multiclass": "ovr"}
    sp = splits[0]
    C = choose_C(src, labels, sp.train, p)
    # scrambling the labels of the test fold cannot change the choice
    scrambled = list(labels)
    for i in sp.test:
        scrambled[i] = "SCRAMBLED"
    assert choose_C(src, scrambled, sp.train, p) == C
    row = nested_evaluate(src, labels, splits, p, "K_Synt")
    assert len(row["C"]) == 3 and set(row["C"]) <= set(p["C"]) and row["n_test"] == 120
    # with a one-value grid the nested result is the plain pooled k-fold accuracy
    one = nested_evaluate(src, labels, splits, {**p, "C": [1.0]}, "K_Synt")
    assert one["accuracy"] == evaluate(src, labels, splits, C=(1.0,)).rows[0]["accuracy"]




def test_engine_builds_corpus_resources_for_soft_and_domain_kernels(tmp_path):
    """`gramtile gram` path: tiles of soft syntagmatic and domain kernels from a corpus store equal
    an in-memory evaluation with resources built from the same (whole) corpus."""
    from gramtile.kernels.registry import as_spec
    from gramtile.pipeline.compute.engine import run_gram
    from gramtile.pipeline.compute.inmemory import add_resources, evaluate_block
    from gramtile.pipeline.compute.prepare import prepare
    from gramtile.pipeline.learn.sources import open_gram_source
    from gramtile.pipeline.readers.senseval import read_senseval
    from gramtile.pipeline.representations.encode import encode
    from gramtile.pipeline.representations.vocab import Vocabularies

    src = senseval_head(require_data("senseval_hard_line_serve") / "serve.pos", tmp_path / "serve40.pos", 40)
    corpus = tmp_path / "c.zarr"
    prepare(src, "senseval", corpus, shard_size=15, cluster="sequential")
    docs = list(read_senseval(src))
    for spec in ({"kind": "syntagmatic", "similarity": "wordnet"}, {"kind": "syntagmatic", "similarity": "lsa"},
                 {"kind": "domain", "dims": 10}):
        out = tmp_path / f"g-{spec['kind']}-{spec.get('similarity')}.zarr"
        run_gram(corpus, spec, out, tile=16, cluster="sequential")
        K = open_gram_source(out).block(np.arange(40), np.arange(40))
        v = Vocabularies()
        s = as_spec(spec)
        rep = s.base_specs()[0].rep_name
        data = {rep: encode([d.structures[rep] for d in docs], v)}
        add_resources(s, data, v, [{rep: [d.structures[rep] for d in docs]}])
        R, _, _ = evaluate_block(s, data)
        np.testing.assert_allclose(K, R, rtol=1e-10, atol=1e-12)


def test_alternatives_are_chosen_on_training_folds_only():
    """A `select` system: per outer fold, the alternative and C come from the training part alone;
    duplicated alternatives tie and the earlier one wins; the row records the choices."""
    from gramtile.workflows.recipes.wsd import choose, nested_evaluate

    docs = load_word(require_data("senseval_hard_line_serve") / "serve.pos", subsample=120)
    labels = [d.label for d in docs]
    wsd = [d.structures["wsd"] for d in docs]
    good = ArrayKernelSource(gramtile.gram({"kind": "normalized", "kernel": {"kind": "syntagmatic"}}, wsd))
    noise = np.random.default_rng(0).normal(size=(120, 5))
    bad = ArrayKernelSource(noise @ noise.T)  # knows nothing of the senses
    splits = stratified_kfold(labels, 3, 0)
    p = {"C": [1.0, 10.0], "inner_folds": 3, "inner_splits": 2, "seed": 0, "class_weight": None,
         "multiclass": "ovr"}
    sp = splits[1]
    a, C = choose([bad, good], labels, sp.train, p)
    assert a == 1
    scrambled = list(labels)
    for i in sp.test:
        scrambled[i] = "SCRAMBLED"
    assert choose([bad, good], scrambled, sp.train, p) == (a, C)
    assert choose([good, good], labels, sp.train, p)[0] == 0
    row = nested_evaluate([bad, good], labels, splits, p, "sel")
    assert row["alternative"] == [1, 1, 1] and len(row["C"]) == 3
    assert row["accuracy"] == nested_evaluate(good, labels, splits, p, "sel")["accuracy"]
