"""Regression and ranking from the command line: `gramtile evaluate --model svr|krr|rank` on real
corpus and Gram stores (targets and groups from the corpus store or from files) against
selection.evaluate called directly; `gramtile train` + `gramtile predict` round trips whose
predictions equal an explicit fit of the same learner on the same Gram-store blocks and the model
evaluate fits on the same split; every refusal one line with exit 2. Synthetic trees with made-up
targets, relevance and groups (hermetic)."""
import contextlib
import io
import json

import numpy as np
import pytest
from conftest import corpus_store_of

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.learn import selection
from gramtile.pipeline.learn.folds import group_kfold, parse_split
from gramtile.pipeline.learn.learners.krr import RidgeRegressor
from gramtile.pipeline.learn.learners.rank import PairRanker
from gramtile.pipeline.learn.learners.registry import make
from gramtile.pipeline.learn.learners.svr import SVRegressor
from gramtile.pipeline.learn.metrics import ranking_report, regression_report
from gramtile.pipeline.learn.model_files import load_model
from gramtile.pipeline.learn.sources import open_gram_source
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.structures import Document
from gramtile.workflows.cli import main

SST = {"kind": "sst", "lam": 0.4}
N = 96
WORDS = ["gold", "silver", "iron", "wood", "stone", "glass", "paper", "salt", "milk", "rice"]


def _examples(seed=0):
    """Question-like trees: the target grows with the 'gold' and 'silver' leaves (plus noise); the
    relevance label is 1 when a tree has 'gold'; groups of 8, each with relevant and irrelevant ones."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(N):
        w = list(rng.choice(WORDS[2:], size=3))
        if i % 8 in (0, 3, 5):
            w[int(rng.integers(3))] = "gold"
        if i % 3 == 0:
            w[(w.index("gold") + 1) % 3 if "gold" in w else 0] = "silver"
        text = (f"(SBARQ (WHNP (WRB how) (JJ many)) (SQ (VBP {w[0]}) (NP (DT the) (NN {w[1]})) "
                f"(PP (IN of) (NP (NN {w[2]})))))")
        target = 2.0 * w.count("gold") + 1.0 * w.count("silver") + float(rng.normal(0, 0.2))
        out.append((f"x{i}", text, target, "1" if "gold" in w else "0", f"q{i // 8}"))
    return out


def _docs(examples, target=True, label=True, group=True):
    return [Document(id=i, label=lab if label else None, structures={"tree": parse_tree(t)},
                     target=y if target else None, group=g if group else None) for i, t, y, lab, g in examples]


def _cli(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Corpus and Gram stores: ``reg`` (targets, no labels, no groups), ``rank`` (0/1 labels and
    groups, no targets), ``both`` (targets, labels and groups), ``part`` (the first 64 examples of
    ``both``, for training)."""
    d = tmp_path_factory.mktemp("tasks")
    ex = _examples()
    out = {"dir": d, "examples": ex}
    for name, docs in (("reg", _docs(ex, label=False, group=False)), ("rank", _docs(ex, target=False)),
                       ("both", _docs(ex)), ("part", _docs(ex[:64]))):
        corpus_store_of(d / f"{name}.zarr", docs, 40)
        run_gram(d / f"{name}.zarr", json.dumps(SST), d / f"{name}-g.zarr", tile=32, cluster="sequential")
        out[name] = (d / f"{name}.zarr", d / f"{name}-g.zarr")
    return out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("model,grid", [("svr", ["--C", "0.1,1", "--epsilon", "0.1"]), ("krr", ["--alpha", "0.1,1"])])
def test_evaluate_regression_from_the_cli_equals_the_loop(stores, tmp_path, model, grid):
    _, gram = stores["reg"]
    out = tmp_path / model
    rc, text = _cli("evaluate", "--gram", gram, "--model", model, "--folds", "3", *grid, "--out", out)
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    y = np.array([e[2] for e in stores["examples"]])
    splits = group_kfold(np.arange(N), 3, 0)
    values = {grid[k].lstrip("-"): [float(v) for v in grid[k + 1].split(",")] for k in range(0, len(grid), 2)}
    ev = selection.evaluate(make(model), open_gram_source(gram), y, splits, values, select="nested",
                            task="regression", kernel=res["rows"][0]["kernel"])
    assert res["task"] == "regression" and res["targets"].startswith("the targets of corpus store")
    row, want = res["rows"][0], ev.rows[0]
    for col in ("pearson", "spearman", "mse", "pearson_std", "n_test"):
        assert row[col] == pytest.approx(want[col], rel=1e-12, abs=1e-12)
    (key, (idx, pred)), = ev.predictions.items()
    assert res["predictions"][key]["predicted"] == pytest.approx(pred.tolist(), rel=1e-12, abs=1e-12)
    assert res["predictions"][key]["gold"] == y[idx].tolist()
    # the table shows the regression's columns and no classification column
    header = next(line for line in text.splitlines() if line.startswith("| kernel"))
    assert all(c in header for c in ("pearson", "spearman", "mse")) and "accuracy" not in header
    assert f"{want['pearson']:.4f}" in text and row["pearson"] > 0.3  # the targets are learnable
    per_split = (out / "results.md").read_text().split("## Per split")[1]
    assert "| split | n_train | n_test | pearson | spearman | mse |" in per_split and "fold-2" in per_split


@pytest.mark.timeout(300)
def test_evaluate_ranking_from_the_cli_equals_the_loop_over_group_folds(stores, tmp_path):
    _, gram = stores["rank"]
    rc, text = _cli("evaluate", "--gram", gram, "--model", "rank", "--folds", "4", "--C", "0.1,1", "--out", tmp_path)
    assert rc == 0
    res = json.loads((tmp_path / "results.json").read_text())
    ex = stores["examples"]
    rel = np.array([float(e[3]) for e in ex])  # no targets: the 0/1 labels are the relevance
    groups = np.array([e[4] for e in ex], dtype=object)
    splits = group_kfold(groups, 4, 0)
    for sp in splits:  # every group whole in one fold
        assert not set(groups[sp.train]) & set(groups[sp.test])
    ev = selection.evaluate(make("rank"), open_gram_source(gram), rel, splits, {"C": [0.1, 1.0]}, select="nested",
                            task="ranking", groups=groups, kernel=res["rows"][0]["kernel"])
    row, want = res["rows"][0], ev.rows[0]
    for col in ("map", "mrr", "p_at_1", "ndcg", "n_groups", "map_std"):
        assert row[col] == pytest.approx(want[col], rel=1e-12, abs=1e-12)
    assert row["n_groups"] == 12 and row["map"] > 0.8  # 'gold' is learnable
    (key, (idx, pred)), = ev.predictions.items()
    got = res["predictions"][key]
    assert got["predicted"] == pytest.approx(pred.tolist(), rel=1e-12, abs=1e-12)
    assert got["group"] == groups[idx].tolist() and got["gold"] == rel[idx].tolist()
    assert "labels of corpus store" in res["targets"] and "by group" in res["splits"]
    assert res["groups"] == f"the groups of corpus store {stores['rank'][0]}"
    header = next(line for line in text.splitlines() if line.startswith("| kernel"))
    assert all(c in header for c in ("map", "mrr", "p_at_1", "ndcg", "n_groups")) and "accuracy" not in header
    assert not list(stores["dir"].glob("folds-*.json"))  # no stratified fold files for a ranking


@pytest.mark.timeout(300)
def test_targets_and_groups_files_replace_the_stores(stores, tmp_path):
    _, gram = stores["rank"]  # a store without targets: --targets gives them
    ex = stores["examples"]
    y = np.array([e[2] for e in ex])
    (tmp_path / "t.txt").write_text("".join(f"{float(v)!r}\n" for v in y))
    assert _cli("evaluate", "--gram", gram, "--model", "krr", "--split", "train:0:64,test:64:96",
                "--targets", tmp_path / "t.txt", "--out", tmp_path / "r")[0] == 0
    res = json.loads((tmp_path / "r" / "results.json").read_text())
    ev = selection.evaluate(make("krr"), open_gram_source(gram), y, [parse_split("train:0:64,test:64:96", N)],
                            task="regression")
    assert res["rows"][0]["pearson"] == pytest.approx(ev.rows[0]["pearson"], rel=1e-12)
    assert res["targets"] == f"targets file {tmp_path / 't.txt'}"
    # a store without groups: --groups gives them (pairs of examples form a group here)
    _, gram = stores["reg"]
    pairs = [f"p{i // 2}" for i in range(N)]
    (tmp_path / "g.txt").write_text("\n".join(pairs) + "\n")
    assert _cli("evaluate", "--gram", gram, "--model", "rank", "--folds", "3", "--groups", tmp_path / "g.txt",
                "--out", tmp_path / "k")[0] == 0
    res = json.loads((tmp_path / "k" / "results.json").read_text())
    ev = selection.evaluate(make("rank"), open_gram_source(gram), y, group_kfold(np.array(pairs), 3, 0),
                            task="ranking", groups=np.array(pairs))
    assert res["rows"][0]["map"] == pytest.approx(ev.rows[0]["map"], rel=1e-12)
    assert res["groups"] == f"groups file {tmp_path / 'g.txt'}"
    # a ranking without targets reads --labels as relevance (here: the stored relevance reversed)
    _, gram = stores["rank"]
    flipped = np.array([1.0 - float(e[3]) for e in ex])
    (tmp_path / "l.txt").write_text("".join(f"{int(v)}\n" for v in flipped))
    assert _cli("evaluate", "--gram", gram, "--model", "rank", "--folds", "3", "--labels", tmp_path / "l.txt",
                "--out", tmp_path / "l")[0] == 0
    res = json.loads((tmp_path / "l" / "results.json").read_text())
    groups = np.array([e[4] for e in ex], dtype=object)
    ev = selection.evaluate(make("rank"), open_gram_source(gram), flipped, group_kfold(groups, 3, 0),
                            task="ranking", groups=groups)
    assert res["rows"][0]["map"] == pytest.approx(ev.rows[0]["map"], rel=1e-12)
    assert res["targets"] == f"labels file {tmp_path / 'l.txt'} (as relevance)"
    (pred,) = res["predictions"].values()
    assert pred["gold"] == flipped[pred["row"]].tolist()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("model,C", [("svr", "1"), ("krr", None), ("rank", "1")])
def test_train_on_a_part_and_predict_the_rest_equals_the_explicit_fit(stores, tmp_path, model, C):
    corpus, gram = stores["part"]
    task = "ranking" if model == "rank" else "regression"
    out = tmp_path / "m"
    assert main(["train", "--corpus", str(corpus), "--gram", str(gram), "--kernel", json.dumps(SST),
                 "--model", model, *(["--C", C] if C else []), "--out", str(out)]) == 0
    meta = json.loads((out / "model.json").read_text())
    assert meta["task"] == task and meta["scheme"] == "single" and meta["classes"] == []
    m = load_model(out)
    ex = stores["examples"]
    test_docs = _docs(ex[64:])
    got = m.predictions(test_docs).scores
    # the explicit fit of the same learner on the blocks of the Gram store over all 96 examples
    src = open_gram_source(stores["both"][1])
    tr, te = np.arange(64), np.arange(64, N)
    y = np.array([e[2] for e in ex])
    groups = np.array([e[4] for e in ex], dtype=object)
    est = {"svr": lambda: SVRegressor(1.0, 0.1), "krr": lambda: RidgeRegressor(1.0),
           "rank": lambda: PairRanker(1.0)}[model]()
    if model == "rank":
        est.fit(src.block(tr, tr), y[tr], groups=groups[tr])
    else:
        est.fit(src.block(tr, tr), y[tr])
    want = est.predict(src.block(te, tr))
    assert np.allclose(got, want, rtol=1e-9, atol=1e-9) and np.std(want) > 0
    # and what evaluate's fitted model gives on the same split
    assert _cli("evaluate", "--gram", stores["both"][1], "--model", model, *(["--C", C] if C else []),
                "--split", "train:0:64,test:64:96", "--out", tmp_path / "ev")[0] == 0
    res = json.loads((tmp_path / "ev" / "results.json").read_text())
    (pred,) = res["predictions"].values()
    assert pred["row"] == te.tolist() and np.allclose(pred["predicted"], got, rtol=1e-9, atol=1e-9)
    # predict from the command line: one line per input, real values (a ranking: one list, highest first)
    dat = tmp_path / "rest.dat"
    dat.write_text("".join(f"{lab} |BT| {t} |ET|\n" for _, t, _, lab, _ in ex[64:]))
    rc, text = _cli("predict", "--model-dir", out, "--input", dat, "--format", "svmlighttk")
    assert rc == 0
    lines = [ln.split("\t") for ln in text.strip().splitlines()]
    ids = [d.id for d in read(dat, "svmlighttk")]
    if task == "regression":
        assert [ln[0] for ln in lines] == ids and np.allclose([float(ln[1]) for ln in lines], got, rtol=1e-12)
    else:
        order = [ids.index(ln[0]) for ln in lines]
        assert [float(ln[1]) for ln in lines] == pytest.approx(got[order].tolist(), rel=1e-12)
        assert [int(ln[2]) for ln in lines] == list(range(1, len(ids) + 1))
        assert all(a >= b for a, b in zip(got[order], got[order][1:]))


@pytest.mark.timeout(300)
def test_train_with_a_grid_selects_by_the_task_metric_and_records_it(stores, tmp_path):
    corpus, gram = stores["part"]
    out = tmp_path / "m"
    assert main(["train", "--corpus", str(corpus), "--gram", str(gram), "--kernel", json.dumps(SST),
                 "--model", "rank", "--C", "0.01,1", "--out", str(out)]) == 0
    sel = json.loads((out / "model.json").read_text())["params"]["selection"]
    ex = stores["examples"][:64]
    rel = np.array([e[2] for e in ex])
    groups = np.array([e[4] for e in ex], dtype=object)
    point, ev = selection.choose(make("rank"), open_gram_source(gram), rel, {"C": [0.01, 1.0]}, task="ranking",
                                 groups=groups)
    assert sel["chosen"] == {"C": point["C"]} and "group cross-validation" in sel["method"]
    assert [r["map"] for r in sel["inner_map"]] == pytest.approx([r["map"] for r in ev.rows], rel=1e-12)


@pytest.mark.timeout(300)
def test_predict_prints_pearson_or_map_against_gold_in_the_input(stores, tmp_path, caplog):
    corpus, gram = stores["part"]
    for model in ("krr", "rank"):
        assert main(["train", "--corpus", str(corpus), "--gram", str(gram), "--kernel", json.dumps(SST),
                     "--model", model, "--out", str(tmp_path / model)]) == 0
    ex = stores["examples"][64:]
    dat = tmp_path / "rest.dat"
    dat.write_text("".join(f"{lab} |BT| {t} |ET|\n" for _, t, _, lab, _ in ex))
    m = load_model(tmp_path / "rank")
    scores = m.predictions(list(read(dat, "svmlighttk"))).scores
    rel = np.array([float(e[3]) for e in ex])
    with caplog.at_level("INFO", logger="gramtile"):
        assert _cli("predict", "--model-dir", tmp_path / "rank", "--input", dat, "--format", "svmlighttk",
                    "--out", tmp_path / "r.json")[0] == 0
    want = ranking_report(rel, scores, np.zeros(rel.size))  # no groups: one ranking of all inputs
    assert f"MAP {want['map']:.4f}, MRR {want['mrr']:.4f} over 1 groups" in caplog.text
    objs = json.loads((tmp_path / "r.json").read_text())
    assert [o["rank"] for o in objs] == list(range(1, len(ex) + 1)) and {o["gold"] for o in objs} == {0.0, 1.0}
    assert regression_report(rel, scores)["pearson"] > 0  # sanity of the scores against relevance


def _refused(capsys, *argv):
    """The exit code and the error lines (the log's progress lines left out)."""
    rc = main([str(a) for a in argv])
    err = "\n".join(ln for ln in capsys.readouterr().err.splitlines() if "error" in ln)
    return rc, err


@pytest.mark.timeout(300)
def test_every_refusal_is_one_line_with_exit_2(stores, tmp_path, capsys):
    reg, reg_g = stores["reg"]
    rank, rank_g = stores["rank"]
    (tmp_path / "bad.txt").write_text("1.5\nabc\n" + "1\n" * (N - 2))
    cases = [
        (["evaluate", "--gram", rank_g, "--model", "svr"], "no targets in corpus store"),
        (["evaluate", "--gram", reg_g, "--model", "rank"], "no group ids in corpus store"),
        (["evaluate", "--gram", reg_g, "--model", "svm"], "holds real targets and no class labels"),
        (["evaluate", "--gram", reg_g, "--model", "svm", "--task", "regression"],
         "--model svm learns classification only, not regression; for --task regression use --model svr or krr"),
        (["evaluate", "--gram", rank_g, "--model", "svm", "--targets", tmp_path / "bad.txt"],
         "--targets is read by a regression or ranking"),
        (["evaluate", "--gram", reg_g, "--model", "krr", "--groups", tmp_path / "bad.txt"],
         "--groups is read by a ranking"),
        (["evaluate", "--gram", reg_g, "--model", "krr", "--curve", "0.5,1"], "--curve belongs to a classification"),
        (["evaluate", "--gram", reg_g, "--model", "svr", "--report"], "--report belongs to a classification"),
        (["evaluate", "--gram", reg_g, "--model", "svr", "--multiclass", "ovo"], "--multiclass ovo belongs to a"),
        (["evaluate", "--gram", reg_g, "--model", "svr", "--class-weight", "balanced"],
         "--class-weight belongs to a classification"),
        (["evaluate", "--gram", rank_g, "--model", "krr", "--targets", tmp_path / "bad.txt"],
         "target 'abc' is not a finite number"),
        (["evaluate", "--gram", rank_g, "--model", "rank", "--split", "train:0:60,test:60:96"],
         "divides group 'q7' between the training and the test part"),
        (["train", "--corpus", rank, "--gram", rank_g, "--kernel", json.dumps(SST), "--model", "krr",
          "--out", tmp_path / "m1"], "no targets in the training examples, and a regression learns"),
        (["train", "--corpus", reg, "--gram", reg_g, "--kernel", json.dumps(SST), "--model", "rank",
          "--out", tmp_path / "m2"], "no group ids in the training examples"),
        (["train", "--corpus", reg, "--gram", reg_g, "--kernel", json.dumps(SST), "--model", "svm",
          "--out", tmp_path / "m3"], "carry real targets and no class labels, and --model svm learns classification"),
        (["train", "--corpus", reg, "--gram", reg_g, "--kernel", json.dumps(SST), "--model", "svr",
          "--target-col", "score", "--out", tmp_path / "m4"], "read --input; a corpus store already holds"),
        (["train", "--corpus", reg, "--gram", reg_g, "--kernel", json.dumps(SST), "--model", "svr",
          "--class-weight", "balanced", "--out", tmp_path / "m5"], "--class-weight belongs to a classification"),
    ]
    for argv, msg in cases:
        rc, err = _refused(capsys, *argv)
        assert rc == 2, (argv, err)
        assert msg in err and len(err.splitlines()) == 1, (argv, err)
    assert not any((tmp_path / f"m{k}").exists() for k in (1, 2, 3, 4, 5))
