"""Workflow files and ``gramtile run`` (workflows/runner.py) end to end on small real data."""
import json
import textwrap

import pytest
from conftest import require_data

from gramtile.workflows.cli import main
from gramtile.workflows.errors import WorkflowError
from gramtile.workflows.runner import load_workflow, run_workflow

KELP = """\
name: tiny_kelp
data:
  train: ${SHARED}/trec_qc_kelp_trees/train_5500.coarse.klp.gz
  test: ${SHARED}/trec_qc_kelp_trees/TREC_10.coarse.klp.gz
  format: kelp
  representations: [grct, bow]
  limit: {train: 240, test: 80}
kernels:
  BOW: {kind: normalized, kernel: {kind: bow, rep: bow}}
  SST: {kind: normalized, kernel: {kind: sst, lam: 0.4, leaves: true, rep: grct}}
  SST+BOW:
    kind: sum
    kernels:
      - {weight: 1, kernel: {kind: normalized, kernel: {kind: sst, lam: 0.4, leaves: true, rep: grct}}}
      - {weight: 1, kernel: {kind: normalized, kernel: {kind: bow, rep: bow}}}
protocol:
  split: fixed
  model: [svm, perceptron]
  C: [1, 3]
  class_weight: balanced
  multiclass: ovr
report:
  title: tiny
"""


def _write(tmp_path, text, name="wf.yaml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_fixed_split_workflow_end_to_end_and_resume(tmp_path, capsys):
    require_data("trec_qc_kelp_trees")
    wf = _write(tmp_path, KELP)
    out = tmp_path / "out"
    assert main(["run", str(wf), "--out", str(out), "--cluster", "sequential", "--no-progress"]) == 0
    rows = json.loads((out / "results.json").read_text())
    # 3 kernels x (svm at 2 C values + perceptron)
    assert [(r["kernel"], r["model"], r["C"]) for r in rows] == [
        (k, m, c) for k in ("BOW", "SST", "SST+BOW") for m, c in (("svm", 1.0), ("svm", 3.0), ("perceptron", None))]
    for r in rows:
        for key in ("accuracy", "precision", "recall", "f1", "macro_f1"):
            assert 0.0 <= r[key] <= 1.0
        assert r["n_train"] == 240 and r["n_test"] == 80
    svm = {r["kernel"]: r["accuracy"] for r in rows if r["model"] == "svm" and r["C"] == 3.0}
    assert min(svm.values()) > 0.5  # six classes: chance is below 0.3
    md = (out / "results.md").read_text()
    assert "| SST+BOW | svm | 3 |" in md and (out / "results.png").stat().st_size > 1000
    # two base stores only: the sum is derived from them
    assert sorted(p.name.split("-")[1] for p in out.glob("gram-*.zarr")) == ["bow", "sst"]

    # a rerun reuses the corpus and every tile: no tile is computed again, same numbers
    logs = {p: len((p / "log" / "records.jsonl").read_text().splitlines()) for p in out.glob("gram-*.zarr")}
    rows2 = run_workflow(load_workflow(wf), out, cluster="sequential")
    for p, n in logs.items():
        new = [json.loads(ln) for ln in (p / "log" / "records.jsonl").read_text().splitlines()[n:]]
        assert [e["tiles_computed"] for e in new if e["event"] == "end"] == [0]
    assert [r["accuracy"] for r in rows2] == [r["accuracy"] for r in rows]


def test_kfold_workflow_binary(tmp_path):
    wf = _write(tmp_path, """\
        data:
          input: ${SHARED}/trec_qc_kelp_trees/TREC_10.coarse.klp.gz
          format: kelp
          representations: [bow]
          limit: 150
        kernels:
          BOW: {kind: normalized, kernel: {kind: bow, rep: bow}}
        protocol:
          split: kfold
          folds: 3
          C: svmlight
          model: [svm, nystroem]
          landmarks: 100
        report: {plot: false}
        """)
    rows = run_workflow(wf, tmp_path / "o", cluster="sequential")
    assert [r["model"] for r in rows] == ["svm", "nystroem"]
    assert rows[0]["C"] == pytest.approx(1.0)  # 1 / mean K(x, x) of a normalised kernel
    assert rows[0]["splits"] == 3 and rows[0]["n_test"] == 150
    # every training example (100 of 150) is a landmark: close to the exact SVM
    assert rows[1]["m"] == 100 and abs(rows[1]["accuracy"] - rows[0]["accuracy"]) <= 0.03
    assert len(list((tmp_path / "o").glob("folds-k3-seed0-labels*.json"))) == 1
    assert not (tmp_path / "o" / "results.png").exists()


BAD = [
    ("protocol:\n  C: -1\n", "protocol.C"),
    ("protocol:\n  colour: red\n", "protocol.colour"),
    ("protocol:\n  multiclass: all\n", "protocol.multiclass"),
    ("protocol:\n  model: tree\n", "protocol.model"),
    ("report:\n  plots: true\n", "report.plots"),
]


@pytest.mark.parametrize("extra,key", BAD)
def test_bad_protocol_names_the_key(tmp_path, extra, key):
    base = "data:\n  input: ${SHARED}/trec_qc_num_constituency/NUM_test.dat\n  format: svmlighttk\n" \
           "kernels:\n  ST: {kind: st}\n"
    with pytest.raises(WorkflowError, match=f"'{key}'") as e:
        load_workflow(_write(tmp_path, base + extra))
    assert str(tmp_path / "wf.yaml") in str(e.value)


def test_bad_data_and_kernels(tmp_path):
    cases = [
        ("data:\n  input: nowhere.dat\n  format: svmlighttk\nkernels:\n  ST: {kind: st}\n", "data.input"),
        ("data:\n  input: ${SHARED}/trec_qc_num_constituency/NUM_test.dat\n  format: conll\n"
         "kernels:\n  ST: {kind: st}\n", "data.format"),
        ("data:\n  input: ${SHARED}/trec_qc_num_constituency/NUM_test.dat\n  format: svmlighttk\n"
         "kernels:\n  ST: {kind: subtree}\n", "kernels.ST"),
        ("data:\n  input: ${SHARED}/trec_qc_num_constituency/NUM_test.dat\n  format: svmlighttk\n"
         "  representations: [tree]\nkernels:\n  B: {kind: bow, rep: bow}\n", "kernels.B"),
        ("data:\n  input: ${SHARED}/trec_qc_num_constituency/NUM_test.dat\n  format: svmlighttk\n"
         "kernels:\n  ST: {kind: st}\nprotocol:\n  split: fixed\n", "protocol.split"),
        ("kernels:\n  ST: {kind: st}\n", "data"),
        ("data: [1, 2\n", "not valid YAML"),
    ]
    for text, key in cases:
        with pytest.raises(WorkflowError, match=key):
            load_workflow(_write(tmp_path, text))


def test_shipped_workflows_validate():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "workflows"
    num = load_workflow(root / "num_qc.yaml")
    assert list(num.kernels) == ["ST", "SST", "PT"] and num.fixed and num.protocol["C"] == "svmlight"
    kelp = load_workflow(root / "trec_qc_kelp.yaml")
    assert list(kelp.kernels) == ["BOW", "SST", "PT"]
    assert kelp.protocol["C"] == [3.0] and kelp.protocol["class_weight"] == "balanced"
    assert kelp.kernels["PT"].to_dict()["kernel"]["terminal_factor"] == 5


def test_C_selected_inside_the_training_part(tmp_path):
    """select_C picks C by k-fold on the training examples only; the test part is never read for it."""
    import numpy as np

    from gramtile.pipeline.learn.crossval import select_C
    from gramtile.pipeline.learn.sources import ArrayKernelSource

    wf = _write(tmp_path, KELP.replace("  C: [1, 3]\n", "  C: [0.01, 1, 100]\n  select_C: {folds: 3}\n")
                .replace("model: [svm, perceptron]", "model: svm")
                .replace("  BOW: {kind: normalized, kernel: {kind: bow, rep: bow}}\n", "")
                .replace("  SST: {kind: normalized, kernel: {kind: sst, lam: 0.4, leaves: true, rep: grct}}\n", ""))
    rows = run_workflow(wf, tmp_path / "o", cluster="sequential")
    assert len(rows) == 1 and rows[0]["C"] in (0.01, 1.0, 100.0) and rows[0]["C_grid"] == [0.01, 1.0, 100.0]
    # the same choice from the inner folds directly, on the training block only
    from gramtile.pipeline.stores.corpus_store import CorpusStore
    from gramtile.pipeline.stores.gram_compose import ComposedView
    from gramtile.pipeline.stores.gram_store import GramStore

    w = load_workflow(wf)
    stores = {GramStore.open(q).kernel_hash: GramStore.open(q) for q in (tmp_path / "o").glob("gram-*.zarr")}
    view = ComposedView(w.kernels["SST+BOW"], stores)
    labels = CorpusStore.open(tmp_path / "o" / "corpus.zarr").labels
    K = view.block(np.arange(320), np.arange(320))
    poisoned = K.copy()
    poisoned[240:, :] = np.nan  # test rows: a selection that read them would fail
    poisoned[:, 240:] = np.nan
    c, inner = select_C(ArrayKernelSource(poisoned), labels, np.arange(240), [0.01, 1.0, 100.0],
                        folds=3, class_weight="balanced")
    assert c == rows[0]["C"] and len(inner) == 3
    assert inner[0]["accuracy"] < max(r["accuracy"] for r in inner)  # C = 0.01 underfits
    with pytest.raises(WorkflowError, match="protocol.select_C"):
        load_workflow(_write(tmp_path, KELP.replace("  C: [1, 3]\n", "  C: 3\n  select_C: {folds: 3}\n"), "b.yaml"))
