"""The pair data sets of ../shared/data (trec_qa_wang, sick2014, msrp) through their readers and
`gramtile prepare`: counts against each data set's README, small samples prepared with real spaCy
and Zarr, and a prepare killed with SIGKILL that resumes to the store of an uninterrupted run."""
import contextlib
import csv
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from conftest import require_data

from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.workflows.cli import main


def _cli(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue()


def _head(src, dst, lines):
    """The first ``lines`` lines of ``src`` (header included) written to ``dst``, bytes as they are."""
    with open(src, "rb") as f:
        data = b"".join(f.readline() for _ in range(lines))
    dst.write_bytes(data)
    return dst


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name, pairs, groups, correct", [("train.csv", 4718, 93, 348), ("dev.csv", 1148, 81, 222)])
def test_trec_qa_wang_counts(name, pairs, groups, correct):
    path = require_data("trec_qa_wang") / name
    docs = list(read(path, "trec_qa_wang"))
    assert len(docs) == pairs and len({d.group for d in docs}) == groups
    assert Counter(d.label for d in docs)["1"] == correct
    assert all(d.group == d.fields["question"] for d in docs)
    # rows of one question are contiguous: each group is one run of rows
    runs = [g for i, g in enumerate(d.group for d in docs) if i == 0 or docs[i - 1].group != g]
    assert len(runs) == groups
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [(d.fields["question"], d.fields["answer"], d.label) for d in docs] == \
        [(r["qtext"].strip(), r["atext"].strip(), r["label"]) for r in rows]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name, counts", [
    ("SICK_train.txt", {"NEUTRAL": 2536, "ENTAILMENT": 1299, "CONTRADICTION": 665}),
    ("SICK_trial.txt", {"NEUTRAL": 282, "ENTAILMENT": 144, "CONTRADICTION": 74})])
def test_sick2014_counts(name, counts):
    path = require_data("sick2014") / name
    docs = list(read(path, "sick2014"))
    assert dict(Counter(d.label for d in docs)) == counts
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert [d.id for d in docs] == [r["pair_ID"] for r in rows]
    assert [d.target for d in docs] == [float(r["relatedness_score"]) for r in rows]
    assert all(1.0 <= d.target <= 5.0 for d in docs)
    assert [list(d.fields.values()) for d in docs] == [[r["sentence_A"].strip(), r["sentence_B"].strip()] for r in rows]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name, pairs, paraphrases", [("msr-para-train.tsv", 3576, 2407), ("msr-para-val.tsv", 500, 346)])
def test_msrp_counts(name, pairs, paraphrases):
    path = require_data("msrp") / name
    docs = list(read(path, "msrp"))
    assert len(docs) == pairs and Counter(d.label for d in docs)["1"] == paraphrases
    assert all(set(d.fields) == {"a", "b"} and "\r" not in d.fields["b"] for d in docs)
    assert sum('"' in d.fields["a"] + d.fields["b"] for d in docs) > 0  # quotes are text, not CSV quoting


@pytest.mark.timeout(600)
def test_samples_prepare_into_pair_stores(tmp_path):
    qa = _head(require_data("trec_qa_wang") / "dev.csv", tmp_path / "qa.csv", 41)
    sick = _head(require_data("sick2014") / "SICK_trial.txt", tmp_path / "sick.txt", 41)
    msrp = _head(require_data("msrp") / "msr-para-val.tsv", tmp_path / "msrp.tsv", 41)
    for path, fmt, fields in ((qa, "trec_qa_wang", ("question", "answer")), (sick, "sick2014", ("a", "b")),
                              (msrp, "msrp", ("a", "b"))):
        out = tmp_path / f"{fmt}.zarr"
        rc, text = _cli("prepare", "--input", path, "--format", fmt, "--out", out, "--shard-size", 16,
                        "--cluster", "sequential", "--no-progress")
        assert rc == 0, text
        store = CorpusStore.open(out)
        expected = list(read(path, fmt))
        assert store.n == 40 and store.fields == fields
        assert store.labels == [d.label for d in expected] and store.ids == [d.id for d in expected]
        docs = store.documents()
        assert [d.fields for d in docs] == [d.fields for d in expected]
        if fmt == "sick2014":
            assert store.targets.tolist() == [d.target for d in expected] and store.groups is None
        elif fmt == "trec_qa_wang":
            assert store.groups.tolist() == [d.group for d in expected] and store.targets is None
            # PTB-tokenised: parsed with its tokens as given
            assert store.manifest["parser"]["pretokenized"] is True
            assert all(list(d.structures["answer.dep"].words) == d.fields["answer"].split() for d in docs)
        else:
            assert store.targets is None and store.groups is None
        rc, text = _cli("inspect", out)
        assert f"fields: {fields[0]} (dep, ptree, rel_tree, seq, tree), {fields[1]} (dep, ptree, rel_tree, seq, tree)" in text


def _done_shards(out):
    try:
        m = json.loads((out / "zarr.json").read_text())["attributes"]["manifest"]
    except (OSError, ValueError, KeyError):
        return 0
    return sum(1 for s in m["shards"] if s["done"])


@pytest.mark.timeout(900)
def test_killed_pair_prepare_resumes_and_matches_an_uninterrupted_run(tmp_path):
    src = _head(require_data("msrp") / "msr-para-train.tsv", tmp_path / "msrp.tsv", 601)
    whole = tmp_path / "whole.zarr"
    prepare(src, "msrp", whole, shard_size=100, cluster="sequential")
    out = tmp_path / "killed.zarr"
    cmd = [sys.executable, "-m", "gramtile", "prepare", "--input", str(src), "--format", "msrp", "--out", str(out),
           "--shard-size", "100", "--cluster", "sequential", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None and _done_shards(out) < 2:
            time.sleep(0.02)
        assert proc.poll() is None, f"prepare ended before it could be killed: {proc.stderr.read()}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    m = json.loads((out / "zarr.json").read_text())["attributes"]["manifest"]
    done = [s["index"] for s in m["shards"] if s["done"]]
    assert not m["complete"] and 2 <= len(done) < 6 and m["fields"] == ["a", "b"]
    summary = prepare(src, "msrp", out, shard_size=100, cluster="sequential")
    assert summary.shards_reused == len(done) and summary.shards_parsed == list(range(len(done), 6))
    resumed = CorpusStore.open(out)
    assert resumed.complete and resumed.content_hash == CorpusStore.open(whole).content_hash
    assert resumed.documents(0, 5) == CorpusStore.open(whole).documents(0, 5)
