"""`gramtile prepare` / `gramtile inspect` on real data with real spaCy, Zarr and Dask.

The full TREC QC training set is prepared once on the ``local`` profile (2 worker processes);
the kill test interrupts a ``sequential`` run with SIGKILL, resumes it, and compares it with
that uninterrupted store.
"""
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import require_data

from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.parsing.formats import read
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreMismatchError
from gramtile.workflows.cli import main

TREC_COUNTS = {"ABBR": 86, "DESC": 1162, "ENTY": 1250, "HUM": 1223, "LOC": 835, "NUM": 896}
SHARD = 500  # 11 shards for 5,452 questions
DEMO = Path(__file__).resolve().parents[2] / "workflows" / "data" / "demo.tsv"


def _cli(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue()


@pytest.fixture(scope="module")
def trec_train():
    return require_data("trec_qc") / "train.txt"


@pytest.fixture(scope="module")
def trec_local(trec_train, tmp_path_factory):
    """TREC train prepared on the local profile (2 workers), uninterrupted."""
    out = tmp_path_factory.mktemp("local") / "trec.zarr"
    rc, text = _cli("prepare", "--input", trec_train, "--format", "trec", "--out", out,
                    "--shard-size", SHARD, "--cluster", "local", "--encoding", "latin-1", "--no-progress")
    assert rc == 0, text
    return out, text


def test_prepare_trec_on_local_cluster_and_inspect(trec_local):
    out, summary = trec_local
    assert f"corpus store {out}: 5452 examples in 11 shard(s)" in summary
    assert "11 shard(s) written (11 parsed)" in summary
    rc, text = _cli("inspect", out)
    assert rc == 0
    assert "5452 examples, complete" in text
    assert "shards: 11 done / 11" in text
    for label, count in TREC_COUNTS.items():
        assert f"| {label} | {count} | {100 * count / 5452:.1f}% |" in text
    rc, js = _cli("inspect", out, "--json")
    r = json.loads(js)
    assert r["examples"] == 5452
    assert {x["label"]: x["count"] for x in r["labels"]} == TREC_COUNTS
    assert set(r["representations"]) == {"dep", "seq", "tree", "ptree"}
    # the derived tree has 3 nodes per word
    assert r["representations"]["tree"]["mean_nodes"] == pytest.approx(3 * r["representations"]["dep"]["mean_nodes"])
    assert r["provenance"]["parser"]["model"].startswith("en_core_web_sm")
    store = CorpusStore.open(out)
    assert r["content_hash"] == store.content_hash and store.verify()
    assert Counter(store.labels) == TREC_COUNTS
    assert store.ids[:2] == ["train:1", "train:2"]
    # trec is parsed as given: one word per whitespace token
    first = store.documents(0, 1)[0]
    assert list(first.structures["dep"].words) == first.text.split()


def _manifest(out: Path) -> dict:
    return json.loads((out / "zarr.json").read_text())["attributes"]["manifest"]


def _done_shards(out: Path) -> int:
    """Done shards of a store being written by another process (0 before its manifest exists)."""
    try:
        m = json.loads((out / "zarr.json").read_text())["attributes"].get("manifest")
    except FileNotFoundError:
        return 0
    return sum(s["done"] for s in m["shards"]) if m else 0


def test_killed_prepare_resumes_and_matches_an_uninterrupted_run(trec_train, trec_local, tmp_path):
    out = tmp_path / "killed.zarr"
    cmd = [sys.executable, "-m", "gramtile", "prepare", "--input", str(trec_train), "--format", "trec",
           "--out", str(out), "--shard-size", str(SHARD), "--cluster", "sequential", "--encoding", "latin-1",
           "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            if _done_shards(out) >= 2:
                break
            time.sleep(0.02)
        assert proc.poll() is None, f"prepare ended before it could be killed: {proc.stderr.read()}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    m = _manifest(out)
    done_at_kill = [s["index"] for s in m["shards"] if s["done"]]
    assert not m["complete"] and m["content_hash"] is None
    assert 2 <= len(done_at_kill) < 11 and done_at_kill == list(range(len(done_at_kill)))
    assert (out / ".lock").exists()  # left by the killed process; the rerun takes it over
    rc, text = _cli("inspect", out)
    assert rc == 0 and f"{SHARD * len(done_at_kill)} examples, INCOMPLETE" in text
    assert f"shards: {len(done_at_kill)} done / 11 expected" in text

    summary = prepare(trec_train, "trec", out, shard_size=SHARD, cluster="sequential",
                      reader_options={"encoding": "latin-1"})
    m = _manifest(out)
    assert m["complete"]
    rerun = m["runs"][-1]
    assert len(m["runs"]) == 2
    assert rerun["parsed_shards"] == list(range(len(done_at_kill), 11))  # only the shards not done
    assert rerun["reused_shards"] == len(done_at_kill)
    assert [s["run"] for s in m["shards"]] == [1] * len(done_at_kill) + [2] * (11 - len(done_at_kill))
    assert summary.shards_parsed == rerun["parsed_shards"] and summary.shards_reused == len(done_at_kill)
    # same content as the uninterrupted local-cluster run (also: sequential == Dask)
    assert m["content_hash"] == CorpusStore.open(trec_local[0]).content_hash
    assert not (out / ".lock").exists()


def _tsv_with_bad_records(trec_train, path, n=30, empty_line=17, long_line=23):
    rows = []
    with open(trec_train, encoding="latin-1") as f:
        for i, line in enumerate(f, 1):
            tag, _, q = line.rstrip("\n").partition(" ")
            if i == empty_line:
                rows.append("")
            elif i == long_line:
                rows.append(f"{tag.split(':')[0]}\t" + " ".join(["very"] * 60) + " long ?")
            else:
                rows.append(f"{tag.split(':')[0]}\t{q}")
            if i == n:
                break
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_bad_record_raise_keeps_written_shards_then_skip_finishes(trec_train, tmp_path):
    tsv = _tsv_with_bad_records(trec_train, tmp_path / "q.tsv")
    out = tmp_path / "q.zarr"
    args = dict(shard_size=5, cluster="sequential", max_tokens=40)
    with pytest.raises(CorpusFormatError, match=r"q.tsv, line 17: empty sentence: the line is blank"):
        prepare(tsv, "tsv", out, **args)
    store = CorpusStore.open(out)
    assert not store.complete
    assert store.shard_ranges == [(0, 5), (5, 10), (10, 15)]  # lines 1-15 were complete shards
    assert store.ids == [f"q:{i}" for i in range(1, 16)]
    written = store.documents()

    # rerunning in raise mode stops at the same record and loses nothing
    with pytest.raises(CorpusFormatError, match="line 17"):
        prepare(tsv, "tsv", out, **args)
    assert CorpusStore.open(out).documents() == written
    assert _manifest(out)["runs"][1]["parsed_shards"] == []
    assert "line 17" in _manifest(out)["runs"][1]["error"]

    summary = prepare(tsv, "tsv", out, on_error="skip", **args)
    store = CorpusStore.open(out)
    assert store.complete and store.n == 28
    assert store.documents(0, 15) == written
    assert "line 17" not in " ".join(store.ids) and "q:17" not in store.ids and "q:23" not in store.ids
    skipped = store.manifest["skipped"]
    assert [s["source"] for s in skipped] == [f"{tsv}:17", f"{tsv}:23"]
    assert "more than max_tokens=40" in skipped[1]["error"]
    assert summary.shards_parsed == [3, 4, 5] and summary.shards_reused == 3
    assert "2 record(s) skipped" in summary.text() and "line 23" in summary.text()
    rc, text = _cli("inspect", out)
    assert "2 record(s) skipped" in text


def test_reopening_with_other_settings_is_refused(trec_train, tmp_path):
    tsv = _tsv_with_bad_records(trec_train, tmp_path / "q.tsv", n=12, empty_line=0, long_line=0)
    out = tmp_path / "q.zarr"
    prepare(tsv, "tsv", out, shard_size=5, cluster="sequential")
    with pytest.raises(StoreMismatchError, match=r"shard size 5 \(this run: 6\).*Fix: rerun with the store's input"):
        prepare(tsv, "tsv", out, shard_size=6, cluster="sequential")
    with pytest.raises(StoreMismatchError, match=r"format 'tsv' \(this run: 'text'\)"):
        prepare(tsv, "text", out, shard_size=5, cluster="sequential")
    again = prepare(tsv, "tsv", out, shard_size=5, cluster="sequential")
    assert again.already_complete and len(_manifest(out)["runs"]) == 1
    # an unknown format fails before any store is made
    with pytest.raises(CorpusFormatError, match="unknown format"):
        prepare(tsv, "xml", tmp_path / "never.zarr", cluster="sequential")
    assert not (tmp_path / "never.zarr").exists()


def test_changed_input_under_done_shards_is_detected(trec_train, tmp_path):
    tsv = _tsv_with_bad_records(trec_train, tmp_path / "q.tsv", n=12, empty_line=0, long_line=9)
    out = tmp_path / "q.zarr"
    with pytest.raises(CorpusFormatError):
        prepare(tsv, "tsv", out, shard_size=4, cluster="sequential", max_tokens=40)
    assert CorpusStore.open(out).shard_ranges == [(0, 4), (4, 8)]  # line 9 is in the third shard
    # skipping line 3 shifts every later example: the done shard no longer matches the input
    lines = tsv.read_text().splitlines()
    lines[2] = ""
    tsv.write_text("\n".join(lines) + "\n")
    with pytest.raises(StoreMismatchError, match=r"input changed since shard 0 .*'q:3'.*'q:4'"):
        prepare(tsv, "tsv", out, shard_size=4, cluster="sequential", max_tokens=40, on_error="skip")


def test_demo_corpus_prepares_and_emits_jsonl(tmp_path):
    docs = list(read(DEMO, "tsv"))  # raises on any malformed line
    counts = Counter(d.label for d in docs)
    assert 280 <= len(docs) <= 340 and 4 <= len(counts) <= 5
    assert min(counts.values()) >= 40
    texts = [d.text.lower() for d in docs]
    assert len(set(texts)) == len(texts), "duplicate demo sentences"
    out, jl = tmp_path / "demo.zarr", tmp_path / "demo.jsonl"
    rc, text = _cli("prepare", "--input", DEMO, "--format", "tsv", "--out", out, "--shard-size", 128,
                    "--cluster", "sequential", "--emit-jsonl", jl, "--no-progress")
    assert rc == 0 and f"JSON lines written to {jl}" in text
    store = CorpusStore.open(out)
    assert store.n == len(docs) and Counter(store.labels) == counts
    back = list(read(jl, "jsonl"))
    stored = store.documents()
    assert [d.id for d in back] == [d.id for d in stored]
    for b, s in zip(back, stored):
        assert b.label == s.label and b.text == s.text
        assert set(b.structures) == {"dep", "tree", "ptree"}  # seq is the dependency tree's columns
        assert all(b.structures[k] == s.structures[k] for k in b.structures)
    # gold structures need no parse: preparing the emitted JSON lines stores them unchanged
    summary = prepare(jl, "jsonl", tmp_path / "again.zarr", shard_size=128, cluster="sequential")
    assert summary.shards_parsed == [] and summary.parser is None
    again = CorpusStore.open(tmp_path / "again.zarr")
    assert [d.structures for d in again.documents()] == [d.structures for d in back]


def test_store_killed_during_creation_is_recreated_but_foreign_groups_are_not(trec_train, tmp_path):
    import zarr

    from gramtile.pipeline.stores.errors import StoreCorruptError

    tsv = _tsv_with_bad_records(trec_train, tmp_path / "q.tsv", n=6, empty_line=0, long_line=0)
    out = tmp_path / "q.zarr"
    g = zarr.open_group(str(out), mode="w")  # what a kill right after the group was made leaves
    g.create_array("ids", shape=(0,), dtype=str, chunks=(5,))
    summary = prepare(tsv, "tsv", out, shard_size=5, cluster="sequential")
    assert summary.n_examples == 6 and CorpusStore.open(out).complete
    # killed inside a metadata write: Zarr's temporary file is left beside the skeleton
    cut = tmp_path / "cut.zarr"
    g = zarr.open_group(str(cut), mode="w")
    g.create_array("ids", shape=(0,), dtype=str, chunks=(5,))
    g.create_group("reps")
    (cut / "zarr.0123abcd.partial").write_bytes(b'{"zarr_format": 3, "node_ty')
    (cut / "reps" / "zarr.4567ef01.partial").write_bytes(b"{")
    assert prepare(tsv, "tsv", cut, shard_size=5, cluster="sequential").n_examples == 6
    assert CorpusStore.open(cut).complete and not list(cut.glob("*.partial"))
    # killed before the group's own metadata landed: only the temporary file exists
    bare = tmp_path / "bare.zarr"
    bare.mkdir()
    (bare / "zarr.89abcdef.partial").write_bytes(b"")
    assert prepare(tsv, "tsv", bare, shard_size=5, cluster="sequential").n_examples == 6
    other = tmp_path / "other.zarr"
    zarr.open_group(str(other), mode="w").create_array("K", shape=(2, 2), dtype="f8")
    with pytest.raises(StoreCorruptError, match="not a corpus store"):
        prepare(tsv, "tsv", other, shard_size=5, cluster="sequential")
    assert (other / "K").exists()


def test_quiet_prepare_prints_its_result_line_only(tmp_path):
    tsv = tmp_path / "q.tsv"
    tsv.write_text("A\t(S (NN a))\nB\t(S (NN b))\n", encoding="utf-8")
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text('{"tree": "(S (NN a))"}\n{"tree": "(S (NN b)"}\n{"tree": "(S (NN c))"}\n', encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "gramtile", "-q", "prepare", "--input", str(jsonl), "--format", "jsonl",
                        "--out", str(tmp_path / "q.zarr"), "--on-error", "skip", "--no-progress"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"corpus store {tmp_path / 'q.zarr'}: 2 examples in 1 shard(s)"]
    assert "1 record(s) skipped" in r.stderr and "q.jsonl, line 2" in r.stderr  # the skipped one is a warning
    r = subprocess.run([sys.executable, "-m", "gramtile", "prepare", "--input", str(jsonl), "--format", "jsonl",
                        "--out", str(tmp_path / "v.zarr"), "--on-error", "skip", "--no-progress"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and len(r.stdout.splitlines()) >= 5 and "content hash" in r.stdout
