"""CLI cases that used to end in a traceback or do something silently wrong (issue 19, item 1):
unwritable, existing and folder-less --out for every command that takes one, bad numbers for
every numeric option, a full disk, damaged zarr.json files, Ctrl-C under sequential and threads,
a 100,000-node tree, and a Dask scheduler lost mid-run. Each ends with exit 2 (130 for Ctrl-C)
and one line naming the file or option and the fix; stores stay consistent and a rerun resumes
bitwise equal. Real stores, real subprocesses, a real ``dask scheduler``."""
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_store_of, num_trees

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_verify import verify as verify_store
from gramtile.workflows.cli import main

GRAMTILE = [sys.executable, "-m", "gramtile"]
DASK = str(Path(sys.executable).with_name("dask"))
SST = '{"kind": "sst", "lam": 0.4}'
TREES = ["(S (NP (D the) (N dog)) (VP (V barks)))", "(S (VP (V go) (NP (N home))))",
         "(S (NP (N it)) (VP (V runs)))", "(S (VP (V see) (NP (D a) (N cat))))"]


def one_line_error(err: str, *names) -> bool:
    """stderr is one `gramtile CMD: error: ...` line (argparse: usage + that line) naming ``names``."""
    lines = [x for x in err.strip().splitlines() if not x.startswith("usage:") and not x.startswith("  ")]
    return ("Traceback" not in err and len(lines) == 1 and ": error: " in lines[0]
            and all(str(n) in lines[0] for n in names))


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 40-example corpus store, its complete SST Gram store and a trained model."""
    d = tmp_path_factory.mktemp("small")
    src = d / "d.jsonl"
    src.write_text("".join(json.dumps({"id": f"s{i}", "label": "AB"[i % 2], "tree": TREES[i % 4]}) + "\n"
                           for i in range(40)))
    assert main(["prepare", "--input", str(src), "--format", "jsonl", "--out", str(d / "c.zarr"),
                 "--cluster", "sequential", "--no-progress", "-q"]) == 0
    assert main(["gram", "--corpus", str(d / "c.zarr"), "--kernel", SST, "--out", str(d / "g.zarr"),
                 "--cluster", "sequential", "--tile", "10", "--no-progress", "-q"]) == 0
    assert main(["train", "--corpus", str(d / "c.zarr"), "--gram", str(d / "g.zarr"), "--kernel", SST,
                 "--out", str(d / "model")]) == 0
    return d


def run_main(argv, capsys):
    """``main(argv)`` in-process: (exit code, stderr); argparse errors exit through SystemExit."""
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr().err


def commands(d: Path, out):
    """Every command taking --out, pointed at ``out``."""
    return {
        "gram": ["gram", "--corpus", d / "c.zarr", "--kernel", SST, "--out", out, "--cluster", "sequential",
                 "--no-progress"],
        "prepare": ["prepare", "--input", d / "d.jsonl", "--format", "jsonl", "--out", out, "--cluster",
                    "sequential", "--no-progress"],
        "export": ["export", d / "g.zarr", "--out", out],
        "train": ["train", "--corpus", d / "c.zarr", "--gram", d / "g.zarr", "--kernel", SST, "--out", out],
        "evaluate": ["evaluate", "--gram", d / "g.zarr", "--folds", "2", "--out", out],
        "predict": ["predict", "--model-dir", d / "model", "--input", d / "d.jsonl", "--out", out],
    }


@pytest.mark.parametrize("cmd", ["gram", "prepare", "export", "train", "evaluate", "predict"])
def test_an_out_under_a_file_or_a_missing_folder_is_one_line_naming_it(small, tmp_path, cmd, capsys):
    under_file = commands(small, small / "d.jsonl" / "x")[cmd]
    rc, err = run_main(under_file, capsys)
    assert rc == 2 and one_line_error(err, "d.jsonl"), err
    if cmd not in ("gram", "prepare"):  # stores create their folder's parents like `mkdir -p`
        rc, err = run_main(commands(small, tmp_path / "nofolder" / "x")[cmd], capsys)
        assert rc == 2 and one_line_error(err, "nofolder", "mkdir -p"), err
    assert not (tmp_path / "nofolder").exists()


@pytest.mark.parametrize("cmd", ["gram", "prepare", "export", "train", "evaluate", "predict"])
def test_an_existing_out_is_refused_with_the_fix_or_resumed(small, tmp_path, cmd, capsys):
    """Policy: train/export/predict/evaluate refuse an existing output unless --overwrite (nothing is
    replaced by a typo); gram/prepare resume a store of their own kind and refuse anything else."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me\n")
    target = {"export": tmp_path / "k.npy", "predict": tmp_path / "p.tsv"}.get(cmd, other)
    if cmd in ("export", "predict"):
        target.write_text("keep me\n")
    if cmd in ("train", "evaluate"):
        (other / {"train": "model.json", "evaluate": "results.json"}[cmd]).write_text("{}")
    argv = commands(small, target)[cmd]
    rc, err = run_main(argv, capsys)
    assert rc == 2 and one_line_error(err, target), err
    assert (other / "notes.txt").read_text() == "keep me\n"
    if cmd in ("export", "predict"):
        assert target.read_text() == "keep me\n"
        assert "--overwrite" in err
        rc, err = run_main(argv + ["--overwrite"], capsys)
        assert rc == 0 and target.read_bytes() != b"keep me\n", err
    if cmd == "evaluate":
        rc, _ = run_main(argv + ["--overwrite"], capsys)
        assert rc == 0 and json.loads((other / "results.json").read_text())["rows"]
    if cmd == "train":  # a folder that is not a model directory is never written into
        (other / "model.json").unlink()
        rc, err = run_main(argv + ["--overwrite"], capsys)
        assert rc == 2 and "not a model directory" in err and sorted(os.listdir(other)) == ["notes.txt"]
        rc, err = run_main(commands(small, small / "model")[cmd] + ["--overwrite"], capsys)
        assert rc == 0 and sorted(os.listdir(small)).count("model") == 1
        assert not [p for p in os.listdir(small) if ".partial" in p or ".old" in p]
    if cmd in ("gram", "prepare"):  # a file is refused too, and the same command on its own store resumes
        rc, err = run_main(commands(small, small / "d.jsonl")[cmd], capsys)
        assert rc == 2 and one_line_error(err, "d.jsonl", "is a file"), err
        own = small / ("g.zarr" if cmd == "gram" else "c.zarr")
        rc, err = run_main(commands(small, own)[cmd] + (["--tile", "10"] if cmd == "gram" else []), capsys)
        assert rc == 0, err


def test_a_store_of_the_other_kind_as_out_is_named_without_a_misleading_fix(small, capsys):
    rc, err = run_main(commands(small, small / "c.zarr")["gram"], capsys)
    assert rc == 2 and one_line_error(err, "c.zarr", "not a gramtile Gram store", "another --out"), err
    assert "create it with `gramtile gram --out" not in err


@pytest.mark.parametrize("cmd,option,value", [
    (cmd, opt, v)
    for cmd, opt in [("train", "--C"), ("train", "--epochs"), ("train", "--perceptron-seed"),
                     ("evaluate", "--folds"), ("evaluate", "--inner-folds"), ("evaluate", "--epochs"),
                     ("evaluate", "--fold-seed"), ("evaluate", "--C"), ("evaluate", "--curve"),
                     ("prepare", "--max-tokens"), ("prepare", "--shard-size"), ("gram", "--tile")]
    for v in ("-5", "0", "nan", "abc")
    if not (opt in ("--perceptron-seed", "--fold-seed") and v == "0")
])
def test_a_bad_number_for_any_numeric_option_is_one_line_naming_it(small, tmp_path, cmd, option, value, capsys):
    argv = commands(small, tmp_path / "out")[cmd]
    if option == "--curve":
        argv = argv[:-2]
    rc, err = run_main(argv + [option, value], capsys)
    assert rc == 2 and one_line_error(err, option.lstrip("-").split("-")[0]), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("spec", ['{"kind": "sst", "lam": -5}', '{"kind": "sst", "lam": 0}',
                                  '{"kind": "sst", "lam": NaN}', '{"kind": "sst", "lam": "abc"}',
                                  '{"kind": "pt", "lam": 0.4, "mu": 0}', '{"kind": "pt", "lam": 0.4, "mu": -1}'])
def test_a_bad_kernel_parameter_is_one_line_naming_it(small, tmp_path, spec, capsys):
    argv = commands(small, tmp_path / "g.zarr")["gram"]
    argv[argv.index(SST)] = spec
    rc, err = run_main(argv, capsys)
    assert rc == 2 and one_line_error(err, "parameter", "lam" if "mu" not in spec else "mu"), err
    assert not (tmp_path / "g.zarr").exists()


@pytest.mark.parametrize("node", ["zarr.json", "K/zarr.json", "done/zarr.json", "diag_rows/zarr.json"])
def test_a_damaged_zarr_json_of_a_gram_store_is_named_with_the_fix(small, tmp_path, node, capsys):
    g = tmp_path / "g.zarr"
    shutil.copytree(small / "g.zarr", g)
    (g / node).write_text('{"zarr_format": 3, "node_type": "gr')
    for argv in (["status", g], ["verify", g], ["export", g, "--out", tmp_path / "k.npy"],
                 commands(small, g)["gram"]):
        rc, err = run_main(argv, capsys)
        assert rc == 2 and one_line_error(err, g / node, "Fix:"), err
    assert not (tmp_path / "k.npy").exists()
    if node != "zarr.json":  # the fix it names works: remove the array, rerun, same matrix
        shutil.rmtree(g / node.split("/")[0])
        assert run_main(commands(small, g)["gram"], capsys)[0] == 0
        assert np.array_equal(GramStore.open(g).view().block(), GramStore.open(small / "g.zarr").view().block())


@pytest.mark.parametrize("node", ["zarr.json", "reps/tree/0/parent/zarr.json", "labels/zarr.json"])
def test_a_damaged_zarr_json_of_a_corpus_store_is_named_with_the_fix(small, tmp_path, node, capsys):
    c = tmp_path / "c.zarr"
    shutil.copytree(small / "c.zarr", c)
    (c / node).write_text("[")
    for argv in (["inspect", c], ["gram", "--corpus", c, "--kernel", SST, "--out", tmp_path / "g.zarr",
                                  "--cluster", "sequential"]):
        rc, err = run_main(argv, capsys)
        assert rc == 2 and one_line_error(err, c / node, "Fix:"), err
    assert not (tmp_path / "g.zarr").exists()


# ---- processes: disk full, Ctrl-C, huge trees, lost scheduler -------------------------------------

@pytest.fixture(scope="module")
def num(tmp_path_factory):
    """300 NUM trees in a corpus store and their SST matrix (tile 20) computed in-process."""
    d = tmp_path_factory.mktemp("num")
    corpus = corpus_store_of(d / "num.zarr", num_trees(300), 150)
    ref = run_gram(corpus, SST, d / "ref.zarr", tile=20, cluster="sequential").view().block()
    return corpus, ref


def gram_argv(corpus, out, cluster="sequential", *extra):
    return GRAMTILE + ["gram", "--corpus", str(corpus), "--kernel", SST, "--out", str(out), "--tile", "20",
                       "--cluster", cluster, "--no-progress", *extra]


def wait_for_tiles(out: Path, proc, at_least=1, timeout=120):
    """Block until the running ``gram`` has stored ``at_least`` K chunks (or it ended)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout and proc.poll() is None:
        chunks = out / "K" / "c"
        if chunks.is_dir() and sum(len(f) for _, _, f in os.walk(chunks)) >= at_least:
            return
        time.sleep(0.1)


def finish_and_compare(corpus, out, ref, *extra):
    st = verify_store(out)
    assert st.ok, st.bad
    r = subprocess.run(gram_argv(corpus, out, "sequential", "-q", *extra), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(GramStore.open(out).view().block(), ref)


def test_a_full_disk_is_one_line_naming_the_disk_and_the_store_survives(num, tmp_path):
    corpus, ref = num
    if os.geteuid() == 0:  # a real full filesystem: a 400 KB tmpfs (K needs 720 KB)
        mnt = tmp_path / "small-disk"
        mnt.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mnt)], check=True)
        limit = None
    else:  # no mount without root: a file-size limit, EFBIG on the first chunk above it
        mnt, limit = tmp_path, 200_000
    out = mnt / "g.zarr"

    def small_files():
        if limit:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        r = subprocess.run(gram_argv(corpus, out), capture_output=True, text=True, timeout=300,
                           preexec_fn=small_files)
        assert r.returncode == 2 and one_line_error(r.stderr, "g.zarr", "full", "rerun the same command"), r.stderr
        if not limit:
            assert str(mnt) in r.stderr  # the disk is named
        done_before = GramStore.open(out).tiles_done()[0]
        assert verify_store(out).ok
        if not limit:
            subprocess.run(["mount", "-o", "remount,size=20m", str(mnt)], check=True)
        r = subprocess.run(gram_argv(corpus, out, "sequential", "-q"), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        st = GramStore.open(out)
        assert st.complete and np.array_equal(st.view().block(), ref)
        assert done_before < st.tiles_done()[1]
    finally:
        if not limit:
            subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.parametrize("cluster", ["sequential", "threads"])
def test_ctrl_c_exits_130_with_one_line_and_the_rerun_resumes_bitwise(num, tmp_path, cluster):
    corpus, ref = num
    out = tmp_path / "g.zarr"
    # tiles of 4: 2,850 tiles, several seconds under either executor, so the run cannot end between
    # its third tile and the signal however long this process waits to be scheduled
    p = subprocess.Popen(gram_argv(corpus, out, cluster, "--tile", "4"), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    wait_for_tiles(out, p, at_least=3)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    if p.returncode == 0:
        pytest.fail("the run finished before Ctrl-C reached it: the test did not exercise the interrupt")
    assert p.returncode == 130, err
    assert err.strip() == "gramtile gram: interrupted; rerun the same command to resume"
    assert not GramStore.open(out).complete
    finish_and_compare(corpus, out, ref, "--tile", "4")  # equal to the tile-20 reference, bit for bit


@pytest.mark.parametrize("shape", ["deep", "wide"])
def test_a_100000_node_tree_is_a_clear_error_not_a_traceback(tmp_path, shape):
    n = 100_000
    tree = "(a " * n + "x" + ")" * n if shape == "deep" else "(S " + " ".join(["(a x)"] * (n // 2)) + ")"
    src = tmp_path / "big.jsonl"
    src.write_text(json.dumps({"id": "big", "label": "A", "tree": tree}) + "\n"
                   + json.dumps({"id": "small", "label": "B", "tree": "(S (a x))"}) + "\n")
    prep = GRAMTILE + ["prepare", "--input", str(src), "--format", "jsonl", "--out", str(tmp_path / "c.zarr"),
                       "--cluster", "sequential", "--no-progress", "--max-tokens", "100000"]
    r = subprocess.run(prep, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr

    def bounded_memory():  # the DP table of the big tree against itself is 80 GB: fail fast, not by swapping
        resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))
    out = tmp_path / "g.zarr"
    r = subprocess.run(GRAMTILE + ["gram", "--corpus", str(tmp_path / "c.zarr"), "--kernel", SST, "--out", str(out),
                                   "--cluster", "sequential", "--no-progress"],
                       capture_output=True, text=True, timeout=300, preexec_fn=bounded_memory)
    assert r.returncode == 2 and one_line_error(r.stderr, "out of memory", "Fix:"), r.stderr
    assert verify_store(out).ok and not GramStore.open(out).complete


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_lost_scheduler_is_one_line_exit_2_and_the_rerun_resumes_bitwise(num, tmp_path):
    corpus, ref = num
    addr = f"tcp://127.0.0.1:{_free_port()}"
    log = open(tmp_path / "dask.log", "w")
    sched = subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", addr.rsplit(":", 1)[1],
                              "--no-dashboard"], stdout=log, stderr=subprocess.STDOUT)
    worker = subprocess.Popen([DASK, "worker", addr, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host",
                               "127.0.0.1"], stdout=log, stderr=subprocess.STDOUT)
    cfile = tmp_path / "cluster.yaml"
    cfile.write_text(f"profiles:\n  shared: {{type: scheduler, address: '{addr}', timeout: 10}}\n")
    out = tmp_path / "g.zarr"
    try:
        p = subprocess.Popen(gram_argv(corpus, out, "shared", "--cluster-file", str(cfile), "--tile", "4"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # a long run, as above
        wait_for_tiles(out, p, at_least=3, timeout=180)
        sched.kill()
        sched.wait()
        _, err = p.communicate(timeout=120)
    finally:
        for proc in (sched, worker):
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        log.close()
    if p.returncode == 0:
        pytest.fail("the run finished before the scheduler was killed: the test did not exercise the loss")
    assert p.returncode == 2 and one_line_error(err, "lost the Dask scheduler", addr, "rerun"), err
    finish_and_compare(corpus, out, ref, "--tile", "4")


# ---- cluster profiles in the repository root -------------------------------------------------------

def test_profiles_in_the_repository_root_does_not_call_the_built_in_file_a_user_file(capsys, monkeypatch):
    from gramtile.pipeline.compute.cluster import packaged_cluster_file
    monkeypatch.chdir(packaged_cluster_file().resolve().parent)  # where ./cluster.yaml is the built-in file
    capsys.readouterr()
    rc = main(["profiles"])
    first = capsys.readouterr().out.splitlines()[0]
    assert rc == 0 and "user file: none" in first and "is the built-in file" in first


def test_raw_text_prepare_checks_the_spacy_model_before_starting_a_cluster(tmp_path, capsys):
    src = tmp_path / "q.txt"
    src.write_text("How many dogs bark ?\nWhat is it ?\n")
    far = tmp_path / "far.yaml"  # a scheduler nobody listens at: opening the cluster first would fail on it
    far.write_text("profiles:\n  far: {type: scheduler, address: 'tcp://127.0.0.1:9', timeout: 2}\n")
    rc, err = run_main(["prepare", "--input", src, "--format", "text", "--out", tmp_path / "c.zarr",
                        "--spacy-model", "no_such_spacy_model", "--cluster", "far", "--cluster-file", far], capsys)
    assert rc == 2 and one_line_error(err, "no_such_spacy_model", "--spacy-model") and "scheduler" not in err, err
    assert not (tmp_path / "c.zarr").exists()


def test_predict_has_the_spacy_model_flag_its_message_names(capsys):
    from gramtile.pipeline.parsing.parse import MODEL_FIX
    p = [a for a in build_parser_actions("predict") if "--spacy-model" in a.option_strings]
    assert p and "--spacy-model" in MODEL_FIX


def build_parser_actions(cmd):
    from gramtile.workflows.cli import build_parser
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return sub.choices[cmd]._actions
