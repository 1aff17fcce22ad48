"""The shipped pair workflows (TREC QA answer selection, SICK relatedness and entailment, MSRP)
run by the pair recipe on a small sample of the shared data each: the first pairs of train and of
the test part, one field kernel, at most two values per grid parameter."""
import numpy as np
import pytest
import yaml

from gramtile.workflows.runner import find_workflow, load_workflow

SAMPLES = {"trec_qa_answer_selection": (120, 60), "sick_relatedness": (90, 40), "sick_entailment": (90, 40),
           "msrp_paraphrase": (90, 40)}


@pytest.mark.shared_data
@pytest.mark.timeout(150)
@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_shipped_pair_workflow_on_a_sample(name, tmp_path):
    raw = yaml.safe_load(find_workflow(name).read_text(encoding="utf-8"))
    n_train, n_test = SAMPLES[name]
    raw["data"]["limit"] = {"train": n_train, "test": n_test}
    raw["kernels"] = {"BOW": raw["kernels"]["BOW"]}  # one field kernel keeps the sample quick
    for g in raw["options"]["learners"].values():
        for k, v in list(g.items()):
            if isinstance(v, list):
                g[k] = v[:2]
    p = tmp_path / f"{name}.yaml"
    p.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    rows = load_workflow(p).run(tmp_path / "out", cluster="sequential")
    task = raw["options"]["task"]
    n_rows = len(raw["options"]["constructions"]) * len(raw["options"]["learners"]) + bool(raw["options"].get("overlap"))
    assert len(rows) == n_rows
    key = {"ranking": "map", "regression": "pearson", "classification": "accuracy"}[task]
    for r in rows:
        assert r["n_train"] == n_train and r["n_test"] == n_test
        assert np.isfinite(r[key]) and -1.0 <= r[key] <= 1.0
    assert (tmp_path / "out" / "results.md").read_text().count("|") > 10
