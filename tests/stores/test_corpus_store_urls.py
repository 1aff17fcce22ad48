"""Corpus stores written at fsspec URLs: ``prepare``, resume, lock, resources, ``gram --input``.

``file://`` URLs go through fsspec (not the local-path code) and are seen by other processes,
so they carry the killed-subprocess and CLI cases; ``memory://`` URLs the in-process ones and,
with the memory filesystem treated as an object store (no exclusive create, no append), the
manifest and lock path of ``s3://``. Every store is compared with the same input prepared at a
local path: equal content hash, equal documents.
"""
import contextlib
import io
import itertools
import json
import subprocess
import sys
import uuid

import fsspec
import numpy as np
import pytest
from conftest import require_data

from gramtile.pipeline.compute.prepare import prepare
from gramtile.pipeline.compute.runtime import Runtime
from gramtile.pipeline.readers.base import DEFAULT_MAX_TOKENS
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.stores import storage
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.pipeline.stores.errors import StoreError, StoreLockedError
from gramtile.pipeline.stores.storage import FsspecLocation, location
from gramtile.workflows.cli import main

N = 130  # NUM trees: 4 shards of 40 (the last one short)
SHARD = 40
SST = '{"kind": "sst", "lam": 0.4}'
BAD = "1 |BT| (S (NP |ET|\n"  # unbalanced brackets: a malformed svmlighttk record


def _num_lines(n):
    with open(require_data("trec_qc_num_constituency") / "NUM_train.dat", encoding="utf-8") as f:
        return list(itertools.islice(f, n))


@pytest.fixture
def num(tmp_path):
    """The first N NUM training trees, as an SVM-Light-TK file under tmp_path."""
    p = tmp_path / "num.dat"
    p.write_text("".join(_num_lines(N)))
    return p


@pytest.fixture(scope="module")
def local_store(tmp_path_factory):
    """The same N trees prepared at a local path: what every URL store must equal."""
    d = tmp_path_factory.mktemp("local")
    (d / "num.dat").write_text("".join(_num_lines(N)))
    prepare(d / "num.dat", "svmlighttk", d / "num.zarr", shard_size=SHARD, cluster="sequential")
    return d / "num.zarr"


@pytest.fixture
def mem():
    """A fresh memory:// prefix; removed afterwards."""
    root = f"/fsx2-{uuid.uuid4().hex[:8]}"
    yield f"memory://{root}"
    fs = fsspec.filesystem("memory")
    if fs.exists(root):
        fs.rm(root, recursive=True)


@pytest.fixture
def object_store(monkeypatch):
    """Treat memory:// as an object store: no exclusive create, no append (the s3:// code path)."""
    monkeypatch.setattr(storage, "LOCAL_LIKE_PROTOCOLS", {"file", "local"})


#: CorpusStore.create's arguments as prepare(num, "svmlighttk", shard_size=SHARD) gives them
MADE_BY_KW = {"input_format": "svmlighttk", "shard_size": SHARD,
              "options": {"on_error": "raise", "max_tokens": DEFAULT_MAX_TOKENS, "reader_options": {}}}
MADE_BY = ", ".join(f"{k}={v!r}" for k, v in MADE_BY_KW.items())


def _cli(*argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(a) for a in argv])
    return rc, out.getvalue()


def _same_store(url, local):
    a, b = CorpusStore.open(url), CorpusStore.open(local)
    assert a.complete and a.content_hash == b.content_hash and a.verify()
    assert a.ids == b.ids and a.labels == b.labels and a.vocabs.to_dict() == b.vocabs.to_dict()
    assert [d.structures for d in a.documents()] == [d.structures for d in b.documents()]


def _done(url):
    return [s["index"] for s in CorpusStore.open(url).manifest["shards"] if s["done"]]


# ---- prepare at a URL ------------------------------------------------------------------------------

@pytest.mark.parametrize("scheme", ["file", "memory"])
def test_prepare_at_a_url_hashes_as_at_a_path(scheme, num, local_store, mem, tmp_path):
    url = f"file://{tmp_path}/num.zarr" if scheme == "file" else f"{mem}/num.zarr"
    s = prepare(num, "svmlighttk", url, shard_size=SHARD, cluster="sequential")
    assert s.out == url and s.n_examples == N and s.shards_written == [0, 1, 2, 3]
    assert s.content_hash == CorpusStore.open(local_store).content_hash
    _same_store(url, local_store)
    cs = CorpusStore.open(url)
    assert cs.path == url and cs.manifest["source"] == str(num)
    assert not location(url).exists(".lock")  # released
    if scheme == "file":
        # the bytes are where the URL points, and atomic writes left no temporary objects behind
        files = [p for p in (tmp_path / "num.zarr").rglob("*") if p.is_file()]
        assert (tmp_path / "num.zarr" / "reps" / "tree" / "3" / "offsets" / "zarr.json").is_file()
        assert not [p for p in files if p.name.endswith(".partial")]
    # a rerun finds it complete and writes nothing
    again = prepare(num, "svmlighttk", url, shard_size=SHARD, cluster="sequential")
    assert again.already_complete and again.shards_written == []


@pytest.mark.parametrize("where", ["file", "memory", "object store"])
def test_a_prepare_stopped_by_a_bad_record_resumes_writing_only_the_shards_not_done(
        where, num, local_store, mem, tmp_path, monkeypatch):
    if where == "object store":
        monkeypatch.setattr(storage, "LOCAL_LIKE_PROTOCOLS", {"file", "local"})
    url = f"file://{tmp_path}/num.zarr" if where == "file" else f"{mem}/num.zarr"
    assert location(url).exclusive is (where != "object store")
    lines = num.read_text().splitlines(keepends=True)
    good = lines[95]
    lines[95] = BAD  # record 96 sits in shard 2: shards 0 and 1 are complete before it
    num.write_text("".join(lines))
    with pytest.raises(CorpusFormatError, match=r"num\.dat, line 96: malformed tree"):
        prepare(num, "svmlighttk", url, shard_size=SHARD, cluster="sequential")
    assert _done(url) == [0, 1]
    m = CorpusStore.open(url).manifest
    assert not m["complete"] and "line 96" in m["runs"][0]["error"]
    assert not location(url).exists(".lock")
    lines[95] = good
    num.write_text("".join(lines))
    s = prepare(num, "svmlighttk", url, shard_size=SHARD, cluster="sequential")
    assert s.shards_written == [2, 3] and s.shards_reused == 2
    m = CorpusStore.open(url).manifest
    assert [r["reused_shards"] for r in m["runs"]] == [0, 2]
    assert [sh["run"] for sh in m["shards"]] == [1, 1, 2, 2]
    _same_store(url, local_store)


KILLER = """
import os, signal, sys
from gramtile.pipeline.stores.corpus_store import CorpusStore
from gramtile.workflows.cli import main

save = CorpusStore._save_manifest

def killed_before_shard_2_is_done(self):
    # shard 2's arrays, texts and vocabulary strings are written: die before its done flag is
    if any(s["index"] == 2 and s["done"] for s in self._manifest["shards"]):
        os.kill(os.getpid(), signal.SIGKILL)
    save(self)

CorpusStore._save_manifest = killed_before_shard_2_is_done
sys.exit(main(sys.argv[1:]))
"""


def test_a_sigkilled_prepare_at_a_file_url_resumes_at_the_first_unfinished_shard(num, local_store, tmp_path):
    url = f"file://{tmp_path}/num.zarr"
    argv = ["prepare", "--input", str(num), "--format", "svmlighttk", "--out", url, "--shard-size", str(SHARD),
            "--cluster", "sequential", "--no-progress"]
    r = subprocess.run([sys.executable, "-c", KILLER] + argv, capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == -9, r.stderr
    m = CorpusStore.open(url).manifest
    assert [(s["index"], s["done"]) for s in m["shards"]] == [(0, True), (1, True), (2, False)]
    assert (tmp_path / "num.zarr" / ".lock").is_file()  # left by the killed process: taken over below
    rc, text = _cli("inspect", url)
    assert rc == 0 and f"corpus store {url}: 80 examples, INCOMPLETE" in text
    rc, text = _cli(*argv)
    assert rc == 0 and "2 shard(s) written (0 parsed), 2 already done" in text
    m = CorpusStore.open(url).manifest
    assert [sh["run"] for sh in m["shards"]] == [1, 1, 2, 2]
    _same_store(url, local_store)
    assert not (tmp_path / "num.zarr" / ".lock").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["num.dat", "num.zarr"]  # nothing at a relative "file:"


def test_at_a_url_done_flags_ride_with_the_next_manifest_write_and_arrays_grow_ahead(num, local_store, mem,
                                                                                      object_store):
    """Fewer requests at a URL: a shard's done flag is written with the next manifest write (here
    the writer's close) and the text arrays grow ahead of the shards; the store cut to its length
    on completion equals the one prepared at a path."""
    from gramtile.pipeline.parsing.formats import read
    from gramtile.pipeline.stores.corpus_store import GROW_CHUNKS, _grown

    url = f"{mem}/num.zarr"
    docs = list(read(num, "svmlighttk"))
    cs = CorpusStore.create(url, **MADE_BY_KW, source=str(num))
    for k in range(3):
        cs.write_shard(k, docs[k * SHARD:(k + 1) * SHARD])
    assert cs._unsaved  # shard 2's flag waits for the next manifest write
    cs.close()
    assert _done(url) == [0, 1, 2]  # ... which the close made
    ids = CorpusStore.open(url)._g["ids"]
    grown = _grown(_grown(_grown(0, SHARD, SHARD), 2 * SHARD, SHARD), 3 * SHARD, SHARD)
    assert ids.shape == (grown,) and grown == 4 * SHARD > 3 * SHARD and GROW_CHUNKS * SHARD >= grown
    assert CorpusStore.open(url).ids == [d.id for d in docs[:3 * SHARD]]  # the room ahead is not read
    s = prepare(num, "svmlighttk", url, shard_size=SHARD, cluster="sequential")
    assert s.shards_written == [3] and s.shards_reused == 3
    done = CorpusStore.open(url)
    assert done._g["ids"].shape == (N,) and done._g["vocab"]["sym"].shape == (len(done.vocabs["sym"]),)
    _same_store(url, local_store)


# ---- one writer ------------------------------------------------------------------------------------

def test_a_second_writer_at_a_url_is_refused(num, mem, tmp_path):
    url = f"file://{tmp_path}/num.zarr"
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import time\nfrom gramtile.pipeline.stores.corpus_store import CorpusStore\n"
         f"cs = CorpusStore.create({url!r}, {MADE_BY}, source={str(num)!r})\nprint('held', flush=True)\n"
         "time.sleep(60)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreLockedError, match=rf"corpus store {url} is locked by process {holder.pid}"):
            prepare(num, "svmlighttk", url, shard_size=SHARD, cluster="sequential")
        with pytest.raises(StoreLockedError, match=f"delete {url}/.lock"):
            CorpusStore.open(url, "r+")
    finally:
        holder.kill()
        holder.wait()
    # its holder is dead: the lock is stale and the next writer takes it over
    assert prepare(num, "svmlighttk", url, shard_size=SHARD, cluster="sequential").n_examples == N


def test_on_an_object_store_the_corpus_lock_is_written_if_absent_and_read_back(object_store, num, local_store,
                                                                               mem):
    url = f"{mem}/num.zarr"
    loc = location(url)
    assert not loc.exclusive and not loc.appendable
    cs = CorpusStore.create(url, **MADE_BY_KW, source=str(num))
    assert json.loads(loc.read_bytes(".lock"))["token"] == cs._lock.me["token"]
    with pytest.raises(StoreLockedError, match=f"corpus store {url} is locked"):
        CorpusStore.open(url, "r+")
    cs.close()
    assert not loc.exists(".lock")
    # the store created under that lock is resumed by prepare (its manifest is there, no shard done)
    s = prepare(num, "svmlighttk", url, shard_size=SHARD, cluster="sequential")
    assert s.shards_written == [0, 1, 2, 3]
    _same_store(url, local_store)


def test_a_corpus_store_at_a_url_that_is_not_there_says_how_to_make_it(mem):
    with pytest.raises(StoreError, match=rf"no corpus store at {mem}/absent\.zarr\. Fix: create it with "
                                         rf"`gramtile prepare --out {mem}/absent\.zarr`"):
        CorpusStore.open(f"{mem}/absent.zarr")
    assert not location(f"{mem}/absent.zarr").exists()


# ---- resources, --emit-jsonl, inspect ------------------------------------------------------------

def test_prepare_resources_and_emit_jsonl_at_a_url_match_a_path(num, local_store, tmp_path):
    from gramtile.pipeline.stores import resource_store

    url, path = f"file://{tmp_path}/num.zarr", tmp_path / "path.zarr"
    outs = {}
    for out in (url, path):
        rc, text = _cli("prepare", "--input", num, "--format", "svmlighttk", "--out", out, "--shard-size", SHARD,
                        "--cluster", "sequential", "--no-progress", "--resources", "wordnet",
                        "--emit-jsonl", tmp_path / f"{len(outs)}.jsonl")
        assert rc == 0 and "resource similarity/wordnet: built" in text, text
        outs[str(out)] = text
    _same_store(url, local_store)
    at_url, at_path = resource_store.stored(url), resource_store.stored(path)
    assert [r["group"] for r in at_url] == [r["group"] for r in at_path] == [at_url[0]["group"]]
    assert at_url[0]["content_hash"] == at_path[0]["content_hash"]
    assert (tmp_path / "num.zarr" / at_url[0]["group"] / "zarr.json").is_file()
    assert (tmp_path / "0.jsonl").read_text() == (tmp_path / "1.jsonl").read_text() != ""
    # inspect reads the URL store and reports what the path store holds
    reports = []
    for out in (url, path):
        rc, text = _cli("inspect", out, "--json")
        assert rc == 0
        reports.append({k: v for k, v in json.loads(text).items() if k not in ("path", "provenance")})
    assert reports[0] == reports[1] and reports[0]["examples"] == N
    # rerun: complete, resource already stored
    rc, text = _cli("prepare", "--input", num, "--format", "svmlighttk", "--out", url, "--shard-size", SHARD,
                    "--cluster", "sequential", "--no-progress", "--resources", "wordnet")
    assert rc == 0 and "already complete" in text and "similarity/wordnet: already stored" in text


# ---- gram --input --out URL ----------------------------------------------------------------------

def test_gram_input_out_url_prepares_its_corpus_store_beside_the_url(num, tmp_path, monkeypatch):
    from gramtile.pipeline.parsing.formats import read
    from gramtile.pipeline.readers.jsonl import write_jsonl
    from gramtile.pipeline.stores.gram_store import GramStore

    monkeypatch.chdir(tmp_path)  # a URL taken as a relative path would create "file:" here
    src = tmp_path / "in.jsonl"
    write_jsonl(list(read(num, "svmlighttk"))[:60], src)
    K = []
    for out in (f"file://{tmp_path}/url/g.zarr", str(tmp_path / "path" / "g.zarr")):
        rc, text = _cli("gram", "--input", src, "--kernel", SST, "--out", out, "--tile", 25,
                        "--cluster", "sequential", "--no-progress")
        assert rc == 0 and f"{out}: 6/6 tiles done, K 60 x 60" in text, text
        st = GramStore.open(out)
        K.append(st.view().block())
        assert st.meta["corpus_path"] in (f"{out}.corpus.zarr", str(tmp_path / "path" / "g.zarr.corpus.zarr"))
    assert isinstance(location(f"file://{tmp_path}/url/g.zarr.corpus.zarr"), FsspecLocation)
    assert (tmp_path / "url" / "g.zarr.corpus.zarr" / "zarr.json").is_file()
    assert CorpusStore.open(f"file://{tmp_path}/url/g.zarr.corpus.zarr").content_hash == \
        CorpusStore.open(tmp_path / "path" / "g.zarr.corpus.zarr").content_hash
    assert np.array_equal(K[0], K[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "num.dat", "path", "url"]


# ---- memory:// with worker processes -----------------------------------------------------------

def test_memory_url_prepare_parses_on_worker_processes_and_the_driver_writes(mem, tmp_path, monkeypatch):
    from gramtile.pipeline.parsing import parse

    """The parse tasks get texts, never the store: a memory:// store works with --cluster local."""
    lines = (require_data("trec_qc") / "test.txt").read_text(encoding="latin-1").splitlines(keepends=True)[:24]
    src = tmp_path / "q.txt"
    src.write_text("".join(lines), encoding="latin-1")
    cluster_file = tmp_path / "cluster.yaml"
    cluster_file.write_text("profiles:\n  local: {n_workers: 1, threads_per_worker: 1, processes: true, "
                            "memory_limit: 2GiB, dashboard_address: ':0'}\n")
    url = f"{mem}/q.zarr"

    def not_here(*a, **k):
        raise AssertionError("parsed in the driver process")

    with monkeypatch.context() as mp:
        mp.setattr(parse, "parse_shard", not_here)  # the workers import their own, unpatched
        s = prepare(src, "trec", url, shard_size=10, cluster=Runtime("local", cluster_file),
                    reader_options={"encoding": "latin-1"})
    assert s.shards_parsed == [0, 1, 2] and s.n_examples == 24
    m = CorpusStore.open(url).manifest
    assert m["runs"][0]["cluster"] == "local" and m["parser"]["model"]
    ref = prepare(src, "trec", tmp_path / "q.zarr", shard_size=10, cluster="sequential",
                  reader_options={"encoding": "latin-1"})
    assert s.content_hash == ref.content_hash


def test_zarr_writes_at_file_urls_replace_objects_atomically(tmp_path):
    """A write that fails midway (as a killed one would) leaves the old object whole."""
    store = location(f"file://{tmp_path}/s.zarr").zarr_store()
    fs = store.fs.sync_fs
    p = f"{tmp_path}/s.zarr/zarr.json"
    fs.pipe_file(p, b'{"old": true}')
    with pytest.raises(TypeError):
        fs.pipe_file(p, [b"not", b"bytes"])  # open() succeeds, write() fails
    assert (tmp_path / "s.zarr" / "zarr.json").read_bytes() == b'{"old": true}'
    assert sorted(x.name for x in (tmp_path / "s.zarr").iterdir()) == ["zarr.json"]
