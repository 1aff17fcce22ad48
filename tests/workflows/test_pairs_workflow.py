"""The pair-task recipe (workflows/recipes/pairs.py): a tiny synthetic pair corpus (real spaCy, real
Zarr) run end to end for ranking, regression and classification; a rerun reuses every Gram store
without computing a tile; the composed pair kernels equal the sum / product of the normalised field
Grams computed in memory; pair kernels on random pair inputs are symmetric and PSD; and each
shipped pair workflow on a small sample of the shared data."""
import json
import random

import numpy as np
import pytest
import yaml
from instances_within_pair import rand_seq, rand_tree

import gramtile
from gramtile.kernels.composite import Normalized
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.gram_compose import ComposedView
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.workflows.errors import WorkflowError
from gramtile.workflows.recipes.pairs import field_spec, overlap_scores, pair_spec
from gramtile.workflows.runner import load_workflow

Q = ["Who wrote Hamlet ?", "What is the capital of France ?", "When did the war end ?",
     "Where do penguins live ?", "How tall is the tower ?", "Who invented the telephone ?"]
CANDS = [
    ("Shakespeare wrote Hamlet around 1600 .", "The play is often staged in London .", "Hamlet is a prince of Denmark ."),
    ("Paris is the capital of France .", "France borders Spain .", "The capital city hosts many museums ."),
    ("The war ended in 1945 .", "Many soldiers returned home .", "The treaty was signed in a hall ."),
    ("Penguins live in Antarctica .", "Birds can fly south .", "The zoo has a new enclosure ."),
    ("The tower is 300 metres tall .", "Tourists visit the tower daily .", "It was built of iron ."),
    ("Bell invented the telephone in 1876 .", "Phones are everywhere now .", "He was born in Scotland ."),
]


def _write_pairs(path, questions, cands):
    rows = []
    for qi, (q, cs) in enumerate(zip(questions, cands)):
        for ci, a in enumerate(cs):
            rel = 1 if ci == 0 else 0
            score = 4.5 - 1.5 * ci + 0.1 * qi
            label = ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"][ci]
            rows.append(f"q{qi}c{ci}\t{q}\t{a}\t{score}\tq{qi}\t{label}\t{rel}")
    path.write_text("id\tsa\tsb\tscore\tgroup\tlabel\trel\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def _workflow(d, task, learners, constructions, overlap=False, target=None, label_col="label"):
    train = _write_pairs(d / "train.tsv", Q[:4], CANDS[:4])
    test = _write_pairs(d / "test.tsv", Q[4:], CANDS[4:])
    raw = {"name": f"pairs_{task}", "recipe": "gramtile.workflows.recipes.pairs:run",
           "data": {"train": str(train), "test": str(test), "format": "tsv",
                    "reader_options": {"fields": "question=sa,answer=sb", "target_col": "score",
                                       "group_col": "group", "label_col": label_col, "id_col": "id"}},
           "kernels": {"SST": {"kind": "sst", "rep": "tree", "lam": 0.4}, "BOW": {"kind": "bow", "on": "tokens"}},
           "protocol": {"class_weight": "none"},
           "options": {"task": task, "constructions": constructions, "learners": learners, "inner_folds": 2,
                       "overlap": overlap, "published": [{"system": "someone", "map": 0.5}]}}
    if target:
        raw["options"]["target"] = target
    p = d / f"{task}.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return p


def _tile_events(out):
    return {p.name: sum(1 for e in GramStore.open(p).read_log() if e.get("event") == "tile")
            for p in sorted(out.glob("gram-*.zarr"))}


@pytest.fixture(scope="module")
def ranking_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("pairs_rank")
    wf = load_workflow(_workflow(d, "ranking", {"rank": {"C": [0.1, 1.0]}, "svm": {"C": [1.0], "metric": "f1"}},
                                 ["sum", "product", "answer", "product+within"], overlap=True, label_col="rel"))
    rows = wf.run(d / "out", cluster="sequential")
    return d, wf, rows


@pytest.mark.timeout(300)
def test_ranking_end_to_end(ranking_run):
    d, wf, rows = ranking_run
    out = d / "out"
    assert [(r["kernel"], r["construction"], r["learner"]) for r in rows] == \
        [(k, c, m) for k in ("SST", "BOW") for c in ("sum", "product", "answer", "product+within")
         for m in ("rank", "svm")] + \
        [("word overlap", "-", "none")]
    for r in rows:
        assert r["n_train"] == 12 and r["n_test"] == 6 and r["n_groups"] == 2
        assert 0.0 < r["map"] <= 1.0 and 0.0 < r["mrr"] <= 1.0
    assert rows[0]["pair_kernel"] == "K(question1,question2) + K(answer1,answer2)"
    assert rows[0]["chosen"]["C"] in (0.1, 1.0)
    assert rows[6]["pair_kernel"] == ("K(question1,question2) * K(answer1,answer2) + s(p1) s(p2), "
                                      "s(p) = K(question,answer)")
    # four field Gram stores (2 kernels x 2 fields), shared by every construction, and one
    # within-pair store per kernel
    assert len(list(out.glob("gram-*.zarr"))) == 6
    res = json.loads((out / "results.json").read_text())
    assert len(res["rows"]) == len(rows)
    assert {s["field"] for s in res["gram_stores"]} == {"question", "answer", "within"}
    md = (out / "results.md").read_text()
    assert "word overlap" in md and "someone" in md
    # the overlap baseline: the shared content words of question and candidate
    store = CorpusStore.open(out / "corpus.zarr")
    s = overlap_scores(store.documents(12, 18), "question", "answer")
    assert s.tolist() == [2.0, 1.0, 0.0, 2.0, 0.0, 0.0]  # tower, tall | tower | - | invented, telephone | ...


@pytest.mark.timeout(300)
def test_rerun_reuses_gram_stores(ranking_run):
    d, wf, rows = ranking_run
    out = d / "out"
    before = _tile_events(out)
    assert all(v > 0 for v in before.values())
    again = wf.run(out, cluster="sequential")
    assert _tile_events(out) == before  # no tile computed again
    assert [(r["map"], r["mrr"], r["chosen"]) for r in again] == [(r["map"], r["mrr"], r["chosen"]) for r in rows]


@pytest.mark.timeout(300)
def test_composed_pair_kernel_is_the_sum_of_field_grams(ranking_run):
    d, wf, _ = ranking_run
    out = d / "out"
    store = CorpusStore.open(out / "corpus.zarr")
    docs = store.documents()
    stores = {GramStore.open(p).kernel_hash: GramStore.open(p) for p in out.glob("gram-*.zarr")}
    n = store.n
    idx = np.arange(n)
    for name, d in wf.raw["kernels"].items():
        spec = spec_from_dict(d)
        fields = {}
        for f in ("question", "answer"):
            bs = field_spec(spec, f)
            reps = {bs.rep_name: [doc.structures[bs.rep_name] for doc in docs]}
            fields[f] = gramtile.gram(Normalized(kernel=bs), reps)
        assert not np.allclose(fields["question"], fields["answer"])
        within = gramtile.gram({"kind": "within_pair", "kernel": spec.to_dict(), "fields": ["question", "answer"]},
                               docs)
        assert within.any() and not np.allclose(within, fields["answer"])
        for cons, expect in (("sum", fields["question"] + fields["answer"]),
                             ("product", fields["question"] * fields["answer"]), ("answer", fields["answer"]),
                             ("product+within", fields["question"] * fields["answer"] + within)):
            K = ComposedView(pair_spec(spec, ("question", "answer"), cons), stores).block(idx, idx)
            np.testing.assert_allclose(K, expect, rtol=1e-10, atol=1e-12)


@pytest.mark.timeout(300)
def test_regression_and_classification(tmp_path):
    wf = load_workflow(_workflow(tmp_path, "regression", {"svr": {"C": [1.0, 10.0], "epsilon": [0.1]}}, ["sum"],
                                 target="target"))
    rows = wf.run(tmp_path / "reg", cluster="sequential")
    assert [(r["kernel"], r["learner"]) for r in rows] == [("SST", "svr"), ("BOW", "svr")]
    for r in rows:
        assert -1.0 <= r["pearson"] <= 1.0 and r["mse"] > 0 and r["chosen"]["C"] in (1.0, 10.0)
    wf = load_workflow(_workflow(tmp_path, "classification", {"svm": {"C": [1.0]}}, ["product"]))
    rows = wf.run(tmp_path / "cls", cluster="sequential")
    assert len(rows) == 2 and all(0.0 <= r["accuracy"] <= 1.0 and "macro_f1" in r for r in rows)
    # the corpus store of the regression run (same data) is not the classification run's: each out has its own
    assert (tmp_path / "cls" / "corpus.zarr").exists()


@pytest.mark.timeout(120)
def test_bad_options_are_refused(tmp_path):
    p = _workflow(tmp_path, "regression", {"svm": {"C": [1.0]}}, ["sum"])
    with pytest.raises(WorkflowError, match="svm learns"):
        load_workflow(p).run(tmp_path / "o", cluster="sequential")
    p = _workflow(tmp_path, "ranking", {"rank": {"gamma": [1.0]}}, ["sum"])
    with pytest.raises(WorkflowError, match="no parameter 'gamma'"):
        load_workflow(p).run(tmp_path / "o", cluster="sequential")
    p = _workflow(tmp_path, "ranking", {"svm": {"C": [1.0], "metric": "map"}}, ["sum"])
    with pytest.raises(WorkflowError, match="maximises one of"):
        load_workflow(p).run(tmp_path / "o", cluster="sequential")
    p = _workflow(tmp_path, "classification", {"svm": {"C": [1.0]}}, ["sum"], overlap=True)
    with pytest.raises(WorkflowError, match="overlap"):
        load_workflow(p).run(tmp_path / "o", cluster="sequential")


# ---- pair kernels are positive semi-definite ------------------------------------------------



@pytest.mark.timeout(300)
@pytest.mark.parametrize("seed", range(6))
def test_pair_kernels_symmetric_psd(seed):
    rng = random.Random(seed)
    n = 30
    X = {f"{f}.{r}": [(rand_tree if r == "tree" else rand_seq)(rng) for _ in range(n)]
         for f in ("a", "b") for r in ("tree", "seq")}
    for base in ({"kind": "sst", "rep": "tree", "lam": 0.4}, {"kind": "pt", "rep": "tree", "lam": 0.4, "mu": 0.4},
                 {"kind": "bow", "on": "tokens"}):
        spec = spec_from_dict(base)
        for cons in ("sum", "product"):
            K = gramtile.gram(pair_spec(spec, ("a", "b"), cons), X)
            assert K.shape == (n, n) and np.isfinite(K).all()
            np.testing.assert_allclose(K, K.T, rtol=0, atol=1e-12)
            ev = np.linalg.eigvalsh((K + K.T) / 2)
            assert ev[-1] > 0 and ev[0] >= -1e-9 * ev[-1], (base, cons, ev[0], ev[-1])


def test_psd_check_fails_on_an_indefinite_pair_kernel():
    """The PSD assertion above can fail: a difference of the field kernels is indefinite."""
    rng = random.Random(0)
    X = {f"{f}.tree": [rand_tree(rng) for _ in range(30)] for f in ("a", "b")}
    spec = spec_from_dict({"kind": "sst", "rep": "tree", "lam": 0.4})
    Ka = gramtile.gram(Normalized(kernel=field_spec(spec, "a")), X)
    Kb = gramtile.gram(Normalized(kernel=field_spec(spec, "b")), X)
    ev = np.linalg.eigvalsh(Ka - Kb)
    assert ev[0] < -1e-9 * ev[-1]
