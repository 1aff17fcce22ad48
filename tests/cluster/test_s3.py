"""Stores on a real S3-protocol server (moto's server mode on 127.0.0.1, tests/cluster/services/s3.sh)
reached by real s3fs, through the real CLI in subprocesses: prepare, gram, verify, evaluate and
export at s3:// URLs equal the same commands on local paths bit for bit; a driver SIGKILLed mid
gram leaves a store whose rerun finishes it bitwise; an unreachable endpoint, missing
credentials, a missing bucket, a chained URL and a bad --storage-options each end in one line
and exit 2; storage options given per cluster profile or with --storage-options reach the
driver and the Dask worker processes.

Every subprocess has a timeout and every test a hard timeout, so that a hang fails.
"""
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# the helpers of tests/conftest.py (shared data) and tests/cluster/conftest.py (services), by path:
# both files are named conftest, so neither can be imported by name beside the other
require_data = _load("gramtile_test_data_s3", HERE.parent / "conftest.py").require_data
service = _load("gramtile_test_services_s3", HERE / "conftest.py").service

GRAMTILE = [sys.executable, "-m", "gramtile"]
SST = '{"kind": "sst", "lam": 0.4}'
N = 240  # NUM trees: 4 shards of 60, 12 x 12 tiles of 20 (78 in the upper triangle)


def one_line_error(err: str, *names) -> bool:
    """stderr is one `gramtile CMD: error: ...` line naming every one of ``names``, no traceback."""
    lines = [x for x in err.strip().splitlines() if x.strip()]
    return ("Traceback" not in err and len(lines) == 1 and ": error: " in lines[0]
            and all(str(n) in lines[0] for n in names))


@pytest.fixture(scope="module")
def s3():
    """The server's settings, put into this process's environment for the module (the in-process
    reads of the stores), and a fresh bucket; the bucket is emptied and removed afterwards."""
    env = service("s3")
    old = {k: os.environ.get(k) for k in (*env, "AWS_EC2_METADATA_DISABLED")}
    os.environ.update(env)
    os.environ["AWS_EC2_METADATA_DISABLED"] = "true"  # never wait for a cloud metadata service
    import s3fs

    fs = s3fs.S3FileSystem(skip_instance_cache=True)
    bucket = f"gramtile-test-{uuid.uuid4().hex[:10]}"
    fs.mkdir(bucket)
    yield {"env": {**os.environ}, "bucket": bucket, "fs": fs, "endpoint": env["AWS_ENDPOINT_URL"]}
    try:
        fs.rm(bucket, recursive=True)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(argv, env, timeout=300, cwd=None):
    return subprocess.run(GRAMTILE + [str(a) for a in argv], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=cwd)


def ok(r):
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """N NUM training trees as an SVM-Light-TK file: the first N/2 of each class, alternating."""
    src = require_data("trec_qc_num_constituency") / "NUM_train.dat"
    d = tmp_path_factory.mktemp("s3data")
    lines = src.read_text(encoding="utf-8").splitlines(keepends=True)
    neg = [x for x in lines if x.startswith("-1")][:N // 2]
    pos = [x for x in lines if not x.startswith("-1")][:N // 2]
    (d / "num.dat").write_text("".join(x for pair in zip(pos, neg) for x in pair), encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def local(data, s3):
    """prepare, gram, evaluate and export of the data on local paths: the reference."""
    d = data
    env = s3["env"]
    ok(run(["prepare", "--input", d / "num.dat", "--format", "svmlighttk", "--shard-size", 60, "--out",
            d / "c.zarr", "-q"], env))
    ok(run(["gram", "--corpus", d / "c.zarr", "--kernel", SST, "--out", d / "g.zarr", "--tile", 20,
            "--cluster", "sequential", "--no-progress", "-q"], env))
    ok(run(["evaluate", "--gram", d / "g.zarr", "--folds", 3, "--out", d / "ev", "-q"], env))
    ok(run(["export", d / "g.zarr", "--out", d / "K.npy"], env))
    return d


def _results(path):
    doc = json.loads(path.read_text())
    return {k: doc[k] for k in ("kernel", "rows", "fold_rows")}


@pytest.mark.timeout(900)
def test_prepare_gram_verify_evaluate_export_at_s3_urls_equal_local_runs(local, s3, tmp_path):
    from gramtile.pipeline.stores.corpus_store import CorpusStore
    from gramtile.pipeline.stores.gram_store import GramStore

    env, b = s3["env"], s3["bucket"]
    corpus, gram = f"s3://{b}/full/c.zarr", f"s3://{b}/full/g.zarr"
    ok(run(["prepare", "--input", local / "num.dat", "--format", "svmlighttk", "--shard-size", 60, "--out", corpus,
            "-q"], env, cwd=tmp_path))
    assert CorpusStore.open(corpus).content_hash == CorpusStore.open(local / "c.zarr").content_hash
    # Dask worker processes (the local profile) open both URLs themselves
    ok(run(["gram", "--corpus", corpus, "--kernel", SST, "--out", gram, "--tile", 20, "--cluster", "local",
            "--no-progress", "-q"], env, cwd=tmp_path))
    st = GramStore.open(gram)
    assert st.complete
    assert np.array_equal(st.view().block(), GramStore.open(local / "g.zarr").view().block())
    assert {r["executor"] for r in st.read_log() if r["event"] == "start"} == {"dask"}
    r = ok(run(["verify", gram], env, cwd=tmp_path))
    assert f"{gram}: 78 done tile(s) checked, 0 bad" in r.stdout, r.stdout
    ok(run(["evaluate", "--gram", gram, "--folds", 3, "--folds-dir", tmp_path / "folds", "--out", tmp_path / "ev",
            "-q"], env, cwd=tmp_path))
    assert _results(tmp_path / "ev" / "results.json") == _results(local / "ev" / "results.json")
    ok(run(["export", gram, "--out", tmp_path / "K.npy"], env, cwd=tmp_path))
    assert np.load(tmp_path / "K.npy").tobytes() == np.load(local / "K.npy").tobytes()
    # every object went to the bucket: nothing was written as a local path under the working folder
    assert sorted(p.name for p in tmp_path.iterdir()) == ["K.npy", "K.npy.rows.tsv", "ev", "folds"]


def _chunks(fs, url) -> int:
    try:
        return len(fs.find(url.split("://", 1)[1] + "/K/c"))
    except FileNotFoundError:
        return 0


@pytest.mark.timeout(900)
def test_a_sigkilled_driver_leaves_a_store_its_rerun_finishes_bitwise(local, s3, tmp_path):
    from gramtile.pipeline.stores.gram_store import GramStore
    from gramtile.pipeline.stores.gram_verify import verify as verify_store

    env, b, fs = s3["env"], s3["bucket"], s3["fs"]
    corpus, gram = f"s3://{b}/kill/c.zarr", f"s3://{b}/kill/g.zarr"
    ok(run(["prepare", "--input", local / "num.dat", "--format", "svmlighttk", "--shard-size", 60, "--out", corpus,
            "-q"], env))
    argv = GRAMTILE + ["gram", "--corpus", corpus, "--kernel", SST, "--out", gram, "--tile", "20",
                       "--cluster", "sequential", "--no-progress", "-q"]
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        while p.poll() is None and time.monotonic() - t0 < 300 and _chunks(fs, gram) < 5:
            time.sleep(0.2)
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode == 0:
        pytest.fail("the run finished before SIGKILL reached it: the test did not exercise the kill")
    assert p.returncode == -signal.SIGKILL
    fs.invalidate_cache()
    st = GramStore.open(gram)
    done, total = st.tiles_done()
    assert 0 < done < total and not st.complete
    assert fs.exists(f"{b}/kill/g.zarr/gramtile.lock")  # the killed driver's lock is left behind ...
    assert verify_store(gram).ok  # ... and every tile marked done is whole
    # the rerun takes the dead driver's lock over and computes only what is missing
    ok(subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600))
    st = GramStore.open(gram)
    assert st.complete
    assert np.array_equal(st.view().block(), GramStore.open(local / "g.zarr").view().block())
    ends = [r for r in st.read_log() if r["event"] == "end"]
    assert sum(e["tiles_computed"] for e in ends) + done >= total and ends[-1]["tiles_computed"] <= total - done


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(300)
def test_an_unreachable_endpoint_is_one_line_exit_2(local, s3, tmp_path):
    dead = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    env = {**s3["env"], "AWS_ENDPOINT_URL": dead}
    url = f"s3://{s3['bucket']}/x/c.zarr"
    for argv in (["prepare", "--input", local / "num.dat", "--format", "svmlighttk", "--out", url],
                 ["status", url], ["gram", "--corpus", url, "--kernel", SST, "--out", f"{url}.g.zarr"]):
        t0 = time.monotonic()
        r = run(argv, env, timeout=120, cwd=tmp_path)
        assert r.returncode == 2 and one_line_error(r.stderr, url, dead, "cannot reach", "Fix:"), r.stderr
        assert time.monotonic() - t0 < 60
    assert not any(tmp_path.iterdir())


@pytest.mark.timeout(300)
def test_missing_credentials_and_a_missing_bucket_are_one_line_exit_2(local, s3, tmp_path):
    env = {k: v for k, v in s3["env"].items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                           "AWS_PROFILE", "AWS_SESSION_TOKEN")}
    env.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"))
    url = f"s3://{s3['bucket']}/nocreds/c.zarr"
    r = run(["prepare", "--input", local / "num.dat", "--format", "svmlighttk", "--out", url], env, timeout=120,
            cwd=tmp_path)
    assert r.returncode == 2 and one_line_error(r.stderr, url, "no credentials", "AWS_ACCESS_KEY_ID"), r.stderr
    missing = f"no-such-bucket-{uuid.uuid4().hex[:8]}"
    url = f"s3://{missing}/c.zarr"
    r = run(["prepare", "--input", local / "num.dat", "--format", "svmlighttk", "--out", url], s3["env"],
            timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and one_line_error(r.stderr, url, f"bucket '{missing}' does not exist",
                                                f"s3://{missing}", "Fix:"), r.stderr
    assert not s3["fs"].exists(missing)  # gramtile does not create buckets
    assert not any(tmp_path.iterdir())


@pytest.mark.timeout(300)
def test_a_chained_url_is_refused_and_makes_no_local_folder(local, s3, tmp_path):
    inner = f"s3://{s3['bucket']}/chain/c.zarr"
    for argv in (["prepare", "--input", local / "num.dat", "--format", "svmlighttk", "--out", f"simplecache::{inner}"],
                 ["gram", "--corpus", f"simplecache::{inner}", "--kernel", SST, "--out", f"{inner}.g.zarr"],
                 ["export", local / "g.zarr", "--out", f"simplecache::{inner}.npy"]):
        r = run(argv, s3["env"], timeout=120, cwd=tmp_path)
        assert r.returncode == 2 and one_line_error(r.stderr, "simplecache::", "Fix:"), r.stderr
    assert not any(tmp_path.iterdir())  # in particular no folder named simplecache::s3:
    assert not s3["fs"].exists(f"{s3['bucket']}/chain")


@pytest.mark.timeout(900)
def test_storage_options_per_profile_and_on_the_command_line_reach_the_workers(local, s3, tmp_path):
    from gramtile.pipeline.stores.gram_store import GramStore

    ep = s3["endpoint"]
    # the endpoint only in the options: without them s3fs would go to AWS
    env = {k: v for k, v in s3["env"].items() if not k.startswith("AWS_ENDPOINT_URL")}
    b = s3["bucket"]
    corpus, gram = f"s3://{b}/opts/c.zarr", f"s3://{b}/opts/g.zarr"
    ok(run(["prepare", "--input", local / "num.dat", "--format", "svmlighttk", "--shard-size", 60, "--out", corpus,
            "--storage-options", json.dumps({"endpoint_url": ep}), "-q"], env))
    cfile = tmp_path / "cluster.yaml"
    cfile.write_text("profiles:\n"
                     f"  s3workers: {{type: local, n_workers: 2, threads_per_worker: 1, memory_limit: 1GiB,\n"
                     f"              storage_options: {{endpoint_url: '{ep}'}}}}\n")
    ok(run(["gram", "--corpus", corpus, "--kernel", SST, "--out", gram, "--tile", 20, "--cluster", "s3workers",
            "--cluster-file", cfile, "--no-progress", "-q"], env))
    os.environ["GRAMTILE_STORAGE_OPTIONS"] = json.dumps({"endpoint_url": ep})
    try:
        st = GramStore.open(gram)
        assert np.array_equal(st.view().block(), GramStore.open(local / "g.zarr").view().block())
        assert {r["executor"] for r in st.read_log() if r["event"] == "start"} == {"dask"}
    finally:
        os.environ.pop("GRAMTILE_STORAGE_OPTIONS")
    # --storage-options overrides the profile's keys: a wrong endpoint there wins, and is named
    dead = f"http://127.0.0.1:{_free_port()}"
    r = run(["status", gram, "--storage-options", json.dumps({"endpoint_url": dead})], env, timeout=120)
    assert r.returncode == 2 and one_line_error(r.stderr, gram, dead, "cannot reach"), r.stderr
    for bad, says in (("{endpoint_url: x}", "not valid JSON"), ('["a"]', "not an object")):
        r = run(["status", gram, "--storage-options", bad], env, timeout=120)
        assert r.returncode == 2 and one_line_error(r.stderr, "--storage-options", says, "Fix:"), r.stderr


@pytest.mark.timeout(300)
def test_denied_access_is_one_line_exit_2(local, s3, tmp_path):
    """A second moto server that enforces its (empty) IAM after its first request: the bucket is
    made, then every request of the unknown access key is refused (403)."""
    port = _free_port()
    env = {**s3["env"], "INITIAL_NO_AUTH_ACTION_COUNT": "1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    log = open(tmp_path / "moto.log", "w")
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        code = ("import sys, time, urllib.request\nfor _ in range(300):\n    try:\n"
                f"        urllib.request.urlopen('http://127.0.0.1:{port}/moto-api/', timeout=1); sys.exit(0)\n"
                "    except Exception:\n        time.sleep(0.1)\nsys.exit(1)\n")
        assert subprocess.run([sys.executable, "-c", code], timeout=60).returncode == 0
        subprocess.run([sys.executable, "-c", "import boto3; boto3.client('s3').create_bucket(Bucket='locked')"],
                       env=env, check=True, timeout=60)
        url = "s3://locked/c.zarr"
        r = run(["prepare", "--input", local / "num.dat", "--format", "svmlighttk", "--out", url], env, timeout=120,
                cwd=tmp_path)
        assert r.returncode == 2 and one_line_error(r.stderr, url, "access denied", "Fix:"), r.stderr
    finally:
        server.kill()
        server.wait()
        log.close()
