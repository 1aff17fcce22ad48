"""Regression on SICK relatedness and answer ranking on TREC QA (Wang et al.) from the command line,
on small samples of ../shared/data parsed by real spaCy: `gramtile evaluate` against
selection.evaluate called directly, and `gramtile train` on a part of the pairs (raw text, K in
memory) + `gramtile predict` on the rest, whose values equal those of the model evaluate fits on the
same split of the prepared store, with Pearson / MAP printed against the input's gold."""
import contextlib
import io
import json

import numpy as np
import pytest
from conftest import require_data

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.folds import group_kfold
from gramtile.pipeline.learn.learners.registry import make
from gramtile.pipeline.learn.metrics import pearson, ranking_report, spearman
from gramtile.pipeline.learn.sources import open_gram_source
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.workflows.cli import main

pytestmark = pytest.mark.shared_data


def _cli(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue()


def _lines(src, dst, first, stop):
    """The header of ``src`` and its data lines ``first..stop-1`` (0-based after the header), written to ``dst``."""
    with open(src, "rb") as f:
        data = f.read().split(b"\n")
    dst.write_bytes(b"\n".join([data[0], *data[1 + first:1 + stop]]) + b"\n")
    return dst


def _sample(tmp_path, data, name, fmt, n, cut, spec):
    """The first ``n`` pairs of a data file, prepared and with a Gram store of ``spec``; the training
    (pairs 0..cut-1) and test (cut..n-1) files."""
    src = require_data(data) / name
    whole = _lines(src, tmp_path / f"all{src.suffix}", 0, n)
    train = _lines(src, tmp_path / f"train{src.suffix}", 0, cut)
    rest = _lines(src, tmp_path / f"rest{src.suffix}", cut, n)
    docs = list(read(whole, fmt))
    assert len(docs) == n and [d.fields for d in read(train, fmt)] + [d.fields for d in read(rest, fmt)] == \
        [d.fields for d in docs]
    prepare(whole, fmt, tmp_path / "c.zarr", shard_size=50, cluster="sequential")
    run_gram(tmp_path / "c.zarr", json.dumps(spec), tmp_path / "g.zarr", tile=50, cluster="sequential")
    return docs, train, rest


@pytest.mark.timeout(900)
def test_sick_relatedness_regression_evaluate_train_and_predict(tmp_path, capsys):
    spec = {"kind": "sst", "lam": 0.4, "rep": "b.tree"}
    n, cut = 100, 70
    docs, train, rest = _sample(tmp_path, "sick2014", "SICK_trial.txt", "sick2014", n, cut, spec)
    gram = tmp_path / "g.zarr"
    y = CorpusStore.open(tmp_path / "c.zarr").targets
    assert y.tolist() == [d.target for d in docs]
    rc, text = _cli("evaluate", "--gram", gram, "--model", "svr", "--folds", "4", "--C", "0.1,1", "--normalized",
                    "--out", tmp_path / "ev")
    assert rc == 0
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    ev = selection.evaluate(make("svr"), open_gram_source(gram, normalized=True), y, group_kfold(np.arange(n), 4, 0),
                            {"C": [0.1, 1.0]}, select="nested", task="regression")
    for col in ("pearson", "spearman", "mse"):
        assert res["rows"][0][col] == pytest.approx(ev.rows[0][col], rel=1e-12)
    assert f"| {ev.rows[0]['pearson']:.4f} |" in text
    # train on the first 70 pairs (raw text, parsed here), predict the other 30
    model = tmp_path / "m"
    assert main(["train", "--input", str(train), "--format", "sick2014", "--kernel",
                 json.dumps({"kind": "normalized", "kernel": spec}), "--model", "svr", "--out", str(model)]) == 0
    capsys.readouterr()
    rc, text = _cli("predict", "--model-dir", model, "--input", rest, "--format", "sick2014")
    log = capsys.readouterr().err
    assert rc == 0
    lines = [ln.split("\t") for ln in text.strip().splitlines()]
    assert [ln[0] for ln in lines] == [d.id for d in docs[cut:]]
    got = np.array([float(ln[1]) for ln in lines])
    assert main(["evaluate", "--gram", str(gram), "--model", "svr", "--normalized", "--split",
                 f"train:0:{cut},test:{cut}:{n}", "--out", str(tmp_path / "split")]) == 0
    (pred,) = json.loads((tmp_path / "split" / "results.json").read_text())["predictions"].values()
    assert np.allclose(pred["predicted"], got, rtol=1e-9, atol=1e-9)
    gold = y[cut:]
    assert f"Pearson {pearson(gold, got):.4f}, Spearman {spearman(gold, got):.4f}" in log


@pytest.mark.timeout(900)
def test_trec_qa_answer_ranking_evaluate_train_and_predict(tmp_path, capsys):
    spec = {"kind": "sst", "lam": 0.4, "rep": "answer.tree"}
    src = require_data("trec_qa_wang") / "dev.csv"
    groups_all = [d.group for d in read(_lines(src, tmp_path / "head.csv", 0, 150), "trec_qa_wang")]
    n = max(i for i in range(1, 151) if i == 150 or groups_all[i] != groups_all[i - 1])  # whole questions
    cut = next(i for i in range(n // 2, n) if groups_all[i] != groups_all[i - 1])
    docs, train, rest = _sample(tmp_path, "trec_qa_wang", "dev.csv", "trec_qa_wang", n, cut, spec)
    gram = tmp_path / "g.zarr"
    store = CorpusStore.open(tmp_path / "c.zarr")
    groups = store.groups
    rel = np.array([float(d.label) for d in docs])
    assert store.targets is None and groups.tolist() == [d.group for d in docs]
    rc, text = _cli("evaluate", "--gram", gram, "--model", "rank", "--normalized", "--folds", "3",
                    "--out", tmp_path / "ev")
    assert rc == 0
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    ev = selection.evaluate(make("rank"), open_gram_source(gram, normalized=True), rel, group_kfold(groups, 3, 0),
                            task="ranking", groups=groups)
    for col in ("map", "mrr", "p_at_1", "ndcg", "n_groups"):
        assert res["rows"][0][col] == pytest.approx(ev.rows[0][col], rel=1e-12)
    assert res["rows"][0]["n_groups"] >= 3 and f"| {ev.rows[0]['map']:.4f} |" in text
    # train on the first questions (raw text, parsed here), rank the candidates of the others
    model = tmp_path / "m"
    assert main(["train", "--input", str(train), "--format", "trec_qa_wang", "--kernel",
                 json.dumps({"kind": "normalized", "kernel": spec}), "--model", "rank", "--out", str(model)]) == 0
    capsys.readouterr()
    rc, text = _cli("predict", "--model-dir", model, "--input", rest, "--format", "trec_qa_wang")
    log = capsys.readouterr().err
    assert rc == 0
    lines = [ln.split("\t") for ln in text.strip().splitlines()]
    test_docs = docs[cut:]
    pos = {d.id: k for k, d in enumerate(list(read(rest, "trec_qa_wang")))}
    assert sorted(pos[ln[0]] for ln in lines) == list(range(len(test_docs)))
    # grouped: each group's lines together, in order of first appearance, highest score first, ranks 1..
    seen = list(dict.fromkeys(ln[1] for ln in lines))
    assert seen == list(dict.fromkeys(d.group for d in test_docs))
    for g in seen:
        mine = [ln for ln in lines if ln[1] == g]
        assert [int(ln[3]) for ln in mine] == list(range(1, len(mine) + 1))
        assert all(float(a[2]) >= float(b[2]) for a, b in zip(mine, mine[1:]))
    assert all(test_docs[pos[ln[0]]].group == ln[1] for ln in lines)
    scores = np.empty(len(test_docs))
    for ln in lines:
        scores[pos[ln[0]]] = float(ln[2])
    assert main(["evaluate", "--gram", str(gram), "--model", "rank", "--normalized", "--split",
                 f"train:0:{cut},test:{cut}:{n}", "--out", str(tmp_path / "split")]) == 0
    (pred,) = json.loads((tmp_path / "split" / "results.json").read_text())["predictions"].values()
    assert np.allclose(pred["predicted"], scores, rtol=1e-9, atol=1e-9)
    rep = ranking_report(rel[cut:], scores, groups[cut:])
    assert f"MAP {rep['map']:.4f}, MRR {rep['mrr']:.4f} over {rep['n_groups']} groups" in log
