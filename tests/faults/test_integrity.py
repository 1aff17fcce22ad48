"""Every byte that shapes a number is checked (docs/reliability.md, "Integrity"): model directories
carry a manifest of sha256 per file, feature stores a sha256 per array and of their attribute,
Gram and landmark stores check their indices, ids and landmark positions; a mismatch is one line,
exit 2, naming the file and the fix, never a traceback or a number. Outputs are published by a
rename that never replaces what another run wrote meanwhile. Real stores, real processes."""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gramtile.pipeline.learn.linear_models import LinearModel
from gramtile.pipeline.learn.models import SavedModel
from gramtile.pipeline.representations.errors import CorpusFormatError
from gramtile.pipeline.stores.errors import StoreError
from gramtile.pipeline.stores.integrity import MANIFEST
from gramtile.workflows.cli import main

GRAMTILE = [sys.executable, "-m", "gramtile"]
BASE = '{"kind": "st", "lam": 0.4}'
ST = '{"kind": "normalized", "kernel": {"kind": "st", "lam": 0.4}}'
WORDS = ["dog", "cat", "home", "tree", "car", "sun", "rain", "book"]


def tree(rng, label: str) -> str:
    """A small random tree; class A trees hold a determiner phrase, class B ones a verb chain."""
    w = rng.choice(WORDS, 3)
    if label == "A":
        return f"(S (NP (D the) (N {w[0]})) (VP (V {w[1]}) (NP (N {w[2]}))))"
    return f"(S (VP (V {w[0]}) (VP (V {w[1]}) (NP (N {w[2]})))))"


def write_examples(path: Path, n: int, seed: int, prefix: str = "s"):
    rng = np.random.default_rng(seed)
    labels = ["AB"[int(v)] for v in rng.integers(0, 2, n)]
    path.write_text("".join(json.dumps({"id": f"{prefix}{i}", "label": y, "tree": tree(rng, y)}) + "\n"
                            for i, y in enumerate(labels)), encoding="utf-8")
    return path


def run_cli(argv, capsys):
    """``main(argv)`` in-process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    got = capsys.readouterr()
    return rc, got.out, got.err


def one_line(err: str, *names) -> bool:
    lines = [x for x in err.strip().splitlines() if x.strip()]
    return "Traceback" not in err and len(lines) == 1 and all(str(n) in lines[0] for n in names)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A 60-example corpus store, its Gram store, a landmark store, a feature store, held-out
    examples, and one model directory of each kind (svm, perceptron, nystroem, linear)."""
    d = tmp_path_factory.mktemp("integrity")
    write_examples(d / "d.jsonl", 60, 0)
    write_examples(d / "test.jsonl", 30, 1, prefix="t")
    c, q = str(d / "c.zarr"), ["--cluster", "sequential", "--no-progress", "-q"]
    assert main(["prepare", "--input", str(d / "d.jsonl"), "--format", "jsonl", "--out", c, *q]) == 0
    assert main(["gram", "--corpus", c, "--kernel", BASE, "--out", str(d / "g.zarr"), "--tile", "16", *q]) == 0
    assert main(["gram", "--corpus", c, "--kernel", BASE, "--out", str(d / "lm.zarr"), "--tile", "16",
                 "--landmarks", "12", *q]) == 0
    assert main(["features", "--corpus", c, "--kernel", ST, "--out", str(d / "f.zarr")]) == 0
    models = {}
    for kind, extra in (("svm", ["--gram", d / "g.zarr"]), ("perceptron", ["--gram", d / "g.zarr"]),
                        ("nystroem", ["--gram", d / "lm.zarr"])):
        models[kind] = d / f"m-{kind}"
        assert main([str(a) for a in ["train", "--corpus", c, *extra, "--kernel", ST, "--model", kind,
                                      "--out", models[kind], "-q"]]) == 0
    models["linear"] = d / "m-linear"
    assert main(["train", "--features", str(d / "f.zarr"), "--model", "linear", "--out", str(models["linear"]),
                 "-q"]) == 0
    return {"dir": d, "corpus": c, "models": models}


def predictions(model: Path, inp: Path, capsys):
    rc, out, err = run_cli(["predict", "--model-dir", model, "--input", inp, "-q"], capsys)
    return rc, out, err


# ---- model directories ------------------------------------------------------------------------

KINDS = ("svm", "perceptron", "nystroem", "linear")


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_directory_carries_a_manifest_of_every_file(work, kind):
    m = work["models"][kind]
    listed = json.loads((m / MANIFEST).read_text())["files"]
    on_disk = sorted(p.name for p in m.iterdir() if p.name != MANIFEST)
    assert sorted(listed) == on_disk and len(on_disk) >= 2


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "delete"])
def test_every_damaged_model_file_is_one_line_exit_2_naming_it(work, kind, damage, tmp_path, capsys):
    """Each file of each kind of model directory, damaged: predict refuses with one line naming the
    file and the fix (before: a changed prediction with exit 0, or a traceback)."""
    src = work["models"][kind]
    for f in sorted(p.name for p in src.iterdir() if p.name != MANIFEST):
        m = tmp_path / f"{kind}-{damage}-{f}"
        shutil.copytree(src, m)
        p = m / f
        data = bytearray(p.read_bytes())
        if damage == "flip":  # one bit of a digit or letter in the middle of the file
            k = len(data) // 2
            while not chr(data[k]).isalnum() and k < len(data) - 1:
                k += 1
            data[k] ^= 0x01
            p.write_bytes(bytes(data))
        elif damage == "truncate":
            p.write_bytes(bytes(data[:len(data) // 2]))
        elif damage == "empty":
            p.write_bytes(b"")
        else:
            p.unlink()
        rc, out, err = predictions(m, work["dir"] / "test.jsonl", capsys)
        assert rc == 2 and out == "" and one_line(err, f, "Fix:"), (f, damage, rc, err)


@pytest.mark.parametrize("kind", KINDS)
def test_a_model_without_manifest_is_refused_until_verify_repair_records_it(work, kind, tmp_path, capsys):
    m = tmp_path / kind
    shutil.copytree(work["models"][kind], m)
    rc, want, _ = predictions(m, work["dir"] / "test.jsonl", capsys)
    assert rc == 0 and want
    (m / MANIFEST).unlink()
    rc, out, err = predictions(m, work["dir"] / "test.jsonl", capsys)
    assert rc == 2 and out == "" and one_line(err, MANIFEST, "gramtile verify --repair"), err
    rc, out, _ = run_cli(["verify", m], capsys)
    assert rc == 2
    rc, out, _ = run_cli(["verify", m, "--repair"], capsys)
    assert rc == 0 and "recorded the checksums" in out
    assert predictions(m, work["dir"] / "test.jsonl", capsys)[1] == want
    rc, out, _ = run_cli(["verify", m], capsys)
    assert rc == 0 and "intact" in out


def test_save_without_overwrite_never_replaces_a_model_that_appeared(work, tmp_path):
    """The rename is the check: a model published between the command's check and its end is kept."""
    a, b = SavedModel.load(work["models"]["svm"]), SavedModel.load(work["models"]["perceptron"])
    out = tmp_path / "m"
    a.save(out, overwrite=False)
    first = (out / "model.json").read_bytes()
    with pytest.raises(StoreError, match="--overwrite"):
        b.save(out, overwrite=False)
    assert (out / "model.json").read_bytes() == first
    assert [p.name for p in tmp_path.iterdir()] == ["m"]  # no temporary folder left
    b.save(out, overwrite=True)
    assert SavedModel.load(out).learner == "perceptron"
    lin = LinearModel.load(work["models"]["linear"])
    with pytest.raises(StoreError):
        lin.save(out, overwrite=False)
    assert SavedModel.load(out).learner == "perceptron"


def test_two_concurrent_trains_into_one_out_never_both_write(work, tmp_path):
    """Two `train` runs into the same --out without --overwrite: exactly one writes the model, the
    other ends with one line naming --overwrite (before: both printed "model written", one model
    silently replaced the other)."""
    out = tmp_path / "m"
    argv = GRAMTILE + ["train", "--corpus", work["corpus"], "--gram", str(work["dir"] / "g.zarr"), "--kernel", ST,
                       "--out", str(out), "-q"]
    procs = [subprocess.Popen(argv + ["--model", kind], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for kind in ("svm", "perceptron")]
    res = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    codes = sorted(rc for rc, _ in res)
    assert codes == [0, 2], res
    err = next(e for rc, e in res if rc == 2)
    assert one_line(err, "--overwrite"), err
    assert SavedModel.load(out).learner in ("svm", "perceptron")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


def test_temporary_folders_of_killed_runs_are_removed_by_the_next_run(work, tmp_path, capsys):
    out = tmp_path / "m"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = __import__("socket").gethostname().replace("-", "_")
    stale = tmp_path / f".m.tmp-{host}-{dead.pid}-0123abcd"
    stale.mkdir()
    (stale / "model.json").write_text("{}")
    running = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        live = tmp_path / f".m.tmp-{host}-{running.pid}-0123abcd"
        live.mkdir()
        rc, _, err = run_cli(["train", "--corpus", work["corpus"], "--gram", work["dir"] / "g.zarr", "--kernel", ST,
                              "--out", out, "-q"], capsys)
        assert rc == 0, err
        assert not stale.exists() and live.exists()
    finally:
        running.kill()
        running.wait()


# ---- feature stores ---------------------------------------------------------------------------

def copy_store(work, tmp_path, name="f.zarr") -> Path:
    f = tmp_path / name
    shutil.copytree(work["dir"] / name, f)
    return f


def attrs_of(store: Path) -> dict:
    return json.loads((store / "zarr.json").read_text())


def set_attrs(store: Path, doc: dict):
    (store / "zarr.json").write_text(json.dumps(doc))


def train_linear(f: Path, out: Path, capsys):
    return run_cli(["train", "--features", f, "--model", "linear", "--out", out, "--overwrite", "-q"], capsys)


CHUNKS = ["vocab/key_ptr/c/0", "vocab/key_items/c/0", "vocab/order/c/0", "strings/sym/c/0", "strings/prod/c/0",
          "labels/c/0", "ids/c/0", "rows/0/data/c/0", "rows/0/indices/c/0"]


@pytest.mark.parametrize("chunk", CHUNKS)
def test_a_lost_feature_store_chunk_is_one_line_exit_2_naming_its_array(work, chunk, tmp_path, capsys):
    """A deleted chunk reads as Zarr's fill value: before, a vocab or strings chunk lost gave a
    model predicting other labels with exit 0 (vocab_sha256 was recorded and never checked)."""
    f = copy_store(work, tmp_path)
    (f / chunk).unlink()
    rc, out, err = train_linear(f, tmp_path / "m", capsys)
    array = chunk.split("/")[0] if chunk.startswith(("vocab", "rows")) else chunk.split("/c/")[0]
    assert rc == 2 and one_line(err, array, "Fix:"), err
    assert not (tmp_path / "m").exists()


def test_labels_replaced_by_a_valid_chunk_of_another_build_are_refused(work, tmp_path, capsys):
    """A crc-valid labels chunk of a build with other labels (the same examples, labels swapped)."""
    d = tmp_path / "other"
    d.mkdir()
    lines = (work["dir"] / "d.jsonl").read_text().splitlines()
    swapped = [json.dumps({**json.loads(x), "label": "B" if json.loads(x)["label"] == "A" else "A"}) for x in lines]
    (d / "d.jsonl").write_text("\n".join(swapped) + "\n")
    assert main(["prepare", "--input", str(d / "d.jsonl"), "--format", "jsonl", "--out", str(d / "c.zarr"),
                 "--cluster", "sequential", "--no-progress", "-q"]) == 0
    assert main(["features", "--corpus", str(d / "c.zarr"), "--kernel", ST, "--out", str(d / "f.zarr")]) == 0
    f = copy_store(work, tmp_path)
    shutil.copy(d / "f.zarr" / "labels" / "c" / "0", f / "labels" / "c" / "0")
    rc, out, err = run_cli(["evaluate", "--features", f, "--model", "linear", "--folds", "2", "-q"], capsys)
    assert rc == 2 and one_line(err, "labels", "Fix:"), err


@pytest.mark.parametrize("edit", ["n_features", "shard", "vocab_sha256"])
def test_an_edited_feature_store_attribute_is_refused(work, edit, tmp_path, capsys):
    f = copy_store(work, tmp_path)
    doc = attrs_of(f)
    a = doc["attributes"]["gramtile_feature_store"]
    if edit == "n_features":
        a["n_features"] += 1
    elif edit == "shard":
        a["shards"][0]["stop"] -= 1
    else:
        a["vocab_sha256"] = "0" * 64
    set_attrs(f, doc)
    rc, out, err = train_linear(f, tmp_path / "m", capsys)
    assert rc == 2 and one_line(err, "zarr.json", "Fix:"), err


def test_a_feature_store_without_checksums_is_refused_until_verify_repair(work, tmp_path, capsys):
    f = copy_store(work, tmp_path)
    rc, _, err = train_linear(f, tmp_path / "want", capsys)
    assert rc == 0, err
    doc = attrs_of(f)
    a = doc["attributes"]["gramtile_feature_store"]
    del a["attr_sha256"], a["strings_sha256"]  # as written before they existed
    set_attrs(f, doc)
    rc, _, err = train_linear(f, tmp_path / "m", capsys)
    assert rc == 2 and one_line(err, "gramtile verify --repair"), err
    (f / "vocab" / "order" / "c" / "0").rename(tmp_path / "order")  # a legacy store with a damaged vocabulary
    rc, out, err = run_cli(["verify", f, "--repair"], capsys)
    assert rc == 2 and one_line(err, "vocab"), err
    (tmp_path / "order").rename(f / "vocab" / "order" / "c" / "0")
    rc, out, err = run_cli(["verify", f, "--repair"], capsys)
    assert rc == 0 and "recorded the checksums" in out, err
    rc, out, err = run_cli(["verify", f], capsys)
    assert rc == 0 and "intact" in out
    rc, _, err = train_linear(f, tmp_path / "m", capsys)
    assert rc == 0, err
    a, b = LinearModel.load(tmp_path / "want"), LinearModel.load(tmp_path / "m")
    assert np.array_equal(a.coef, b.coef) and a.strings == b.strings


def test_features_into_an_existing_out_names_the_fix(work, tmp_path, capsys):
    f = copy_store(work, tmp_path)
    rc, _, err = run_cli(["features", "--corpus", work["corpus"], "--kernel", ST, "--out", f], capsys)
    assert rc == 2 and one_line(err, str(f), "Fix:"), err


def test_stale_temporary_feature_stores_of_killed_runs_are_removed(work, tmp_path, capsys):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = __import__("socket").gethostname().replace("-", "_")
    stale = tmp_path / f".f.zarr.tmp-{host}-{dead.pid}-0123abcd"
    stale.mkdir()
    rc, _, err = run_cli(["features", "--corpus", work["corpus"], "--kernel", ST, "--out", tmp_path / "f.zarr"],
                         capsys)
    assert rc == 0, err
    assert not stale.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["f.zarr"]


# ---- Gram and landmark stores -----------------------------------------------------------------

def nystroem_train(work, lm: Path, out: Path, capsys):
    return run_cli(["train", "--corpus", work["corpus"], "--gram", lm, "--kernel", ST, "--model", "nystroem",
                    "--out", out, "--overwrite", "-q"], capsys)


def test_a_permuted_row_index_is_refused_by_evaluate_and_reported_by_verify(work, tmp_path, capsys):
    """40 rows of row_index swapped (crc-valid chunk): before, evaluate gave another accuracy with
    exit 0 while verify called the store inconsistent and "0 bad" in the same breath."""
    import zarr

    g = copy_store(work, tmp_path, "g.zarr")
    ri = zarr.open_array(str(g / "row_index"), mode="r+")
    v = ri[:]
    v[:40] = v[:40][::-1]
    ri[:] = v
    rc, out, err = run_cli(["evaluate", "--gram", g, "--kernel", ST, "--folds", "2", "-q"], capsys)
    assert rc == 2 and out == "" and one_line(err, "row_index", "Fix:"), err
    rc, out, err = run_cli(["verify", g], capsys)
    assert rc == 1 and "row_index" in out and "0 bad" not in out, out


def test_a_flipped_landmark_row_index_byte_is_refused(work, tmp_path, capsys):
    g = copy_store(work, tmp_path, "lm.zarr")
    p = g / "row_index" / "c" / "0"
    b = bytearray(p.read_bytes())
    b[8] ^= 0x01
    p.write_bytes(bytes(b))
    rc, out, err = nystroem_train(work, g, tmp_path / "m", capsys)
    assert rc == 2 and one_line(err, "row_index", "Fix:"), err
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("reseal", [False, True])
def test_shifted_landmark_positions_are_refused(work, tmp_path, reseal, capsys):
    """Every row_positions entry shifted by one: refused by the attributes' sha256, and, when the
    edit also recomputed it, by the identity col_index = row_index[row_positions] (before: verify
    said "0 bad" and Nystroem gave another accuracy with exit 0)."""
    from gramtile.pipeline.stores.integrity import sealed

    g = copy_store(work, tmp_path, "lm.zarr")
    doc = attrs_of(g)
    a = doc["attributes"]["gramtile"]
    a["landmarks"]["row_positions"] = [p + 1 for p in a["landmarks"]["row_positions"]]
    if reseal:
        doc["attributes"]["gramtile"] = sealed(a)
    set_attrs(g, doc)
    rc, out, err = nystroem_train(work, g, tmp_path / "m", capsys)
    assert rc == 2 and one_line(err, "landmark" if reseal else "zarr.json", "Fix:"), err
    rc, out, err = run_cli(["verify", g], capsys)
    assert rc == 1 and ("row_positions" in out if reseal else "sha256" in out), out


def test_a_flipped_diag_cols_chunk_under_nystroem_is_one_line(work, tmp_path, capsys):
    g = copy_store(work, tmp_path, "lm.zarr")
    p = g / "diag_cols" / "c" / "0"
    b = bytearray(p.read_bytes())
    b[5] ^= 0x01
    p.write_bytes(bytes(b))
    rc, out, err = nystroem_train(work, g, tmp_path / "m", capsys)
    assert rc == 2 and one_line(err, "diag_cols", "verify"), err


def test_a_gram_store_without_attribute_checksum_gets_it_from_verify_repair(work, tmp_path, capsys):
    g = copy_store(work, tmp_path, "g.zarr")
    doc = attrs_of(g)
    del doc["attributes"]["gramtile"]["attr_sha256"]  # as written before it existed: still read
    set_attrs(g, doc)
    rc, out, err = run_cli(["verify", g, "--repair"], capsys)
    assert rc == 0, out + err
    assert "attr_sha256" in attrs_of(g)["attributes"]["gramtile"]
    doc = attrs_of(g)
    doc["attributes"]["gramtile"]["n_cols"] = 61
    set_attrs(g, doc)
    rc, out, err = run_cli(["evaluate", "--gram", g, "--kernel", ST, "--folds", "2", "-q"], capsys)
    assert rc == 2 and one_line(err, "zarr.json", "Fix:"), err


# ---- exports --------------------------------------------------------------------------------

@pytest.mark.parametrize("selection", [[], ["--rows", "0:50"]])
def test_export_npy_onto_a_full_disk_is_one_line_and_leaves_nothing(work, tmp_path, selection):
    """Before: the memory-mapped write died with SIGBUS (exit 135, no message) and left the
    .partial file filling the disk."""
    if os.geteuid() != 0:
        pytest.skip("needs a tmpfs mount (root)")
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mnt)], check=True)
    try:
        r = subprocess.run(GRAMTILE + ["export", str(work["dir"] / "g.zarr"), "--out", str(mnt / "k.npy"),
                                       *selection], capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and one_line(r.stderr, "k.npy"), (r.returncode, r.stderr)
        assert list(mnt.iterdir()) == []
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_export_npy_writes_the_matrix_without_a_memory_map(work, tmp_path, capsys):
    from gramtile.pipeline.stores.gram_store import GramStore

    want = GramStore.open(work["dir"] / "g.zarr").view().block()
    rc, _, err = run_cli(["export", work["dir"] / "g.zarr", "--out", tmp_path / "k.npy"], capsys)
    assert rc == 0, err
    assert np.array_equal(np.load(tmp_path / "k.npy"), want)
    rc, _, err = run_cli(["export", work["dir"] / "g.zarr", "--out", tmp_path / "n.npy", "--rows", "5:40"], capsys)
    assert rc == 0, err
    assert np.array_equal(np.load(tmp_path / "n.npy"), want[5:40][:, 5:40])


# ---- learners: input they cannot represent, labels, fold files -------------------------------------

CONLLU = ("# sent_id = t0\n1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_\n"
          "3\thome\thome\tVERB\tVB\t_\t0\troot\t_\t_\n\n# sent_id = t1\n1\tcat\tcat\tNOUN\tNN\t_\t2\tnsubj\t_\t_\n"
          "2\train\train\tVERB\tVB\t_\t0\troot\t_\t_\n\n")


@pytest.mark.parametrize("kind", KINDS)
def test_every_learner_refuses_input_it_cannot_represent(work, kind, tmp_path, capsys):
    """CoNLL-U given to a constituency-tree model: before, the linear model predicted its intercept
    for every example with exit 0 ("0 known non-zeros") where the kernel models refused it."""
    (tmp_path / "t.conllu").write_text(CONLLU)
    rc, out, err = run_cli(["predict", "--model-dir", work["models"][kind], "--input", tmp_path / "t.conllu",
                            "--format", "conllu", "-q"], capsys)
    assert rc == 2 and out == "" and one_line(err, "tree"), err


def test_evaluate_features_refuses_labels_it_would_ignore(work, tmp_path, capsys):
    (tmp_path / "labels.txt").write_text("".join("AB"[i % 2] + "\n" for i in range(60)))
    rc, out, err = run_cli(["evaluate", "--features", work["dir"] / "f.zarr", "--model", "linear", "--folds", "2",
                            "--labels", tmp_path / "labels.txt", "-q"], capsys)
    assert rc == 2 and out == "" and one_line(err, "--labels", "Fix:"), err


def test_concurrent_fold_writers_never_share_a_temporary_name(tmp_path):
    """Two evaluations sharing --folds-dir raced on a fixed `.tmp` name ("No such file")."""
    from concurrent.futures import ThreadPoolExecutor

    from gramtile.pipeline.learn.folds import load_folds, save_folds, stratified_kfold

    labels = ["AB"[i % 2] for i in range(40)]
    splits = stratified_kfold(labels, 2, 0)
    path = tmp_path / "folds.json"
    with ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda _: save_folds(path, splits, labels, 2, 0), range(400)))
    assert [s.to_dict() for s in load_folds(path, labels)] == [s.to_dict() for s in splits]
    assert [p.name for p in tmp_path.iterdir()] == ["folds.json"]


# ---- errors name the real cause -------------------------------------------------------------------

def _small_files(limit):
    def apply():
        import resource
        import signal

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG, as a full disk gives ENOSPC
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_an_smo_row_file_that_cannot_be_written_names_scratch_not_out(work, tmp_path):
    """The kernel row file of 60 examples is 32,896 bytes; under a 20,000-byte file-size limit
    its write fails with EFBIG (a full scratch disk fails the same way). Before: "cannot write
    ...: File too large ... Fix: ... choose another --out"."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    r = subprocess.run(GRAMTILE + ["train", "--corpus", work["corpus"], "--gram", str(work["dir"] / "g.zarr"),
                                   "--kernel", ST, "--solver", "smo", "--cache-mb", "0.001", "--scratch", str(scratch),
                                   "--out", str(tmp_path / "m"), "-q"],
                       capture_output=True, text=True, timeout=300, preexec_fn=_small_files(20_000))
    assert r.returncode == 2 and one_line(r.stderr, "--scratch", str(scratch)), r.stderr
    assert "--out" not in r.stderr, r.stderr
    assert list(scratch.iterdir()) == [] and not (tmp_path / "m").exists()


def test_a_feature_store_published_meanwhile_is_kept_and_the_refusal_names_a_fix_features_has(work, tmp_path):
    """Another run publishes --out while this `features` run works (here: a finished store renamed
    into place as soon as this run's temporary folder appears): the store is kept, and the refusal
    is one line with a fix that `features` has (before: "Directory not empty" with no fix, then a
    fix naming --overwrite, which `features` does not take)."""
    from gramtile.pipeline.stores.feature_store import FeatureStore

    out = tmp_path / "f.zarr"
    argv = GRAMTILE + ["features", "--corpus", work["corpus"], "--kernel", ST, "--out", str(out)]
    for _ in range(5):  # a round is lost when the run finishes before the rename lands
        ready = tmp_path / "ready"
        shutil.copytree(work["dir"] / "f.zarr", ready)
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 240
        while p.poll() is None and time.monotonic() < deadline:
            if any(n.startswith(".f.zarr.tmp-") for n in os.listdir(tmp_path)):
                try:
                    os.rename(ready, out)
                except OSError:
                    pass
                break
            time.sleep(0.0005)
        _, err = p.communicate(timeout=240)
        if not ready.exists() and p.returncode == 2:
            break
        shutil.rmtree(out, ignore_errors=True)
        shutil.rmtree(ready, ignore_errors=True)
    else:
        pytest.fail("the store never appeared while the run worked: the test did not exercise the race")
    assert one_line(err, str(out), "Fix:") and "--overwrite" not in err and "Directory not empty" not in err, err
    assert FeatureStore(out).uid == FeatureStore(work["dir"] / "f.zarr").uid  # the one published first is kept
    assert sorted(x.name for x in tmp_path.iterdir()) == ["f.zarr"]


def test_a_full_disk_under_the_corpus_store_during_features_names_that_storage(work, tmp_path):
    """`features` first builds the corpus's feature set inside the corpus store; with that disk
    full, the error names the corpus store and its storage (before: "cannot write F.zarr ... the
    disk / ... is full. Fix: ... choose another --out", the wrong disk and the wrong fix)."""
    if os.geteuid() != 0:
        pytest.skip("needs a tmpfs mount (root)")
    mnt = tmp_path / "small-disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mnt)], check=True)
    try:
        shutil.copytree(work["corpus"], mnt / "c.zarr", ignore=shutil.ignore_patterns("features"))
        free = shutil.disk_usage(mnt).free
        (mnt / "filler").write_bytes(b"x" * (free - 8192))
        out = tmp_path / "f.zarr"
        r = subprocess.run(GRAMTILE + ["features", "--corpus", str(mnt / "c.zarr"), "--kernel", ST, "--out", str(out)],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 2 and one_line(r.stderr, f"corpus store {mnt / 'c.zarr'}", str(mnt), "Fix:"), r.stderr
        assert "--out" not in r.stderr and not out.exists(), r.stderr
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


# ---- inputs: unencodable text, texts beyond the parser, TSV fields ------------------------------------

@pytest.mark.parametrize("field", ["id", "label", "token", "text-col"])
def test_a_lone_surrogate_is_refused_with_the_file_and_line(field, tmp_path, capsys):
    """A \\ud800 escape without its other half decodes to text no encoding can write: before, a
    UnicodeEncodeError traceback from the store writer; now the record is refused (not altered)."""
    rows = [{"id": "a", "label": "A", "tree": "(S (N dog))"}, {"id": "b", "label": "B", "tree": "(S (N cat))"}]
    extra = []
    if field == "id":
        rows[1]["id"] = "b\ud800"
    elif field == "label":
        rows[1]["label"] = "B\udc00"
    elif field == "token":
        rows[1]["tree"] = "(S (N c\ud800at))"
    else:
        rows = [{"body": "the dog runs", "y": "A"}, {"body": "a c\ud800at", "y": "B"}]
        extra = ["--text-col", "body", "--label-col", "y"]
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="ascii")  # \uXXXX escapes
    rc, out, err = run_cli(["prepare", "--input", src, "--format", "jsonl", *extra, "--out", tmp_path / "c.zarr",
                            "--cluster", "sequential", "--no-progress", "-q"], capsys)
    assert rc == 2 and one_line(err, f"{src}, line 2", "surrogate", "Fix:"), err
    assert not (tmp_path / "c.zarr").exists()


@pytest.mark.parametrize("how", ["frame-text", "frame-label", "frame-id", "dicts", "raw", "pairs"])
def test_a_lone_surrogate_in_python_input_is_refused_naming_the_row_and_column(how):
    """Tables, dicts and raw strings given in Python: a lone surrogate is one CorpusFormatError
    naming the row and column (or the example), never spaCy's or the store's UnicodeEncodeError."""
    import pandas as pd

    import gramtile

    bad = "a c\ud800at"
    if how.startswith("frame"):
        cols = {"text": ["the dog runs", "a cat"], "label": ["A", "B"], "id": ["x", "y"]}
        col = how.split("-")[1]
        cols[col][1] = bad if col == "text" else cols[col][1] + "\udc00"
        df = pd.DataFrame({k: pd.Series(v, dtype=object) for k, v in cols.items()})
        call, where = (lambda: gramtile.parse(df, text="text", label="label", id="id")), f"row 1, column '{col}'"
    elif how == "dicts":
        call, where = (lambda: gramtile.parse([{"text": "fine"}, {"text": bad}])), "row 1, column 'text'"
    elif how == "raw":
        call, where = (lambda: gramtile.parse(["fine", bad])), "example 1"
    else:
        call, where = (lambda: gramtile.parse([("a dog", "fine"), ("cats", bad)], fields=["q", "a"])), "example 1"
    with pytest.raises(CorpusFormatError, match="surrogate") as e:
        call()
    assert where in str(e.value) and "Fix:" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("max_tokens", [None, 2_000_000])
def test_a_text_beyond_the_parsers_limit_is_refused_before_parsing_without_advice_beyond_it(max_tokens, tmp_path,
                                                                                             capsys):
    """A 600,000-token line (1.8 million characters): spaCy parses at most nlp.max_length
    (1,000,000) characters. Before: with the default limit the error advised raising
    --max-tokens, and with --max-tokens 2000000 spaCy's E088 ended the run in a traceback."""
    src = tmp_path / "t.txt"
    src.write_text("a short line\n" + " ".join(["ab"] * 600_000) + "\n")
    extra = [] if max_tokens is None else ["--max-tokens", str(max_tokens)]
    rc, out, err = run_cli(["prepare", "--input", src, "--format", "text", *extra, "--out", tmp_path / "c.zarr",
                            "--cluster", "sequential", "--no-progress", "-q"], capsys)
    assert rc == 2 and one_line(err, f"{src}, line 2", "nlp.max_length", "split it"), err
    assert "raise --max-tokens" not in err


def test_the_parser_limit_of_the_loaded_pipeline_is_checked_before_parsing():
    from gramtile.kernels.errors import RepresentationError
    from gramtile.pipeline.parsing.parse import load_model, parse_deps

    nlp = load_model()
    with pytest.raises(RepresentationError, match="nlp.max_length"):
        parse_deps(["x" * (nlp.max_length + 1)], nlp)


def test_labels_and_ids_with_tabs_and_newlines_are_escaped_in_every_tsv_written(tmp_path, capsys):
    """export's .rows.tsv / .classes.tsv and predict's output: one line per example, the columns
    of the header, the label read back by undoing the escapes (before: a label with a newline
    split the line, one with a tab added a column)."""
    rows = [{"id": f"s\t{i}", "label": ["A\tx", "B\ny", "C\\z"][i % 3], "tree": tree(np.random.default_rng(i), "AB"[i % 2])}
            for i in range(30)]
    src = tmp_path / "d.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    q = ["--cluster", "sequential", "--no-progress", "-q"]
    c, g = tmp_path / "c.zarr", tmp_path / "g.zarr"
    assert run_cli(["prepare", "--input", src, "--format", "jsonl", "--out", c, *q], capsys)[0] == 0
    assert run_cli(["gram", "--corpus", c, "--kernel", BASE, "--out", g, *q], capsys)[0] == 0
    unescape = {"\\t": "\t", "\\n": "\n", "\\r": "\r", "\\\\": "\\"}

    def back(field):
        import re
        return re.sub(r"\\[tnr\\]", lambda m: unescape[m.group()], field)

    for fmt in ("npy", "libsvm"):
        out = tmp_path / f"k.{fmt}"
        rc, _, err = run_cli(["export", g, "--out", out, "--format", fmt], capsys)
        assert rc == 0, err
        lines = (tmp_path / f"k.{fmt}.rows.tsv").read_text().split("\n")
        assert lines[-1] == "" and len(lines) == 32 and all(len(x.split("\t")) == 4 for x in lines[:-1])
        assert [back(x.split("\t")[3]) for x in lines[1:-1]] == [r["label"] for r in rows]
        assert [back(x.split("\t")[2]) for x in lines[1:-1]] == [r["id"] for r in rows]
        if fmt == "libsvm":
            cl = (tmp_path / "k.libsvm.classes.tsv").read_text().split("\n")
            assert len(cl) == 5 and sorted(back(x.split("\t")[1]) for x in cl[1:-1]) == ["A\tx", "B\ny", "C\\z"]
    m = tmp_path / "m"
    assert run_cli(["train", "--corpus", c, "--gram", g, "--kernel", BASE, "--out", m, "-q"], capsys)[0] == 0
    for out in (None, tmp_path / "p.tsv"):
        rc, text, err = run_cli(["predict", "--model-dir", m, "--input", src, "-q",
                                 *([] if out is None else ["--out", out])], capsys)
        assert rc == 0, err
        lines = (text if out is None else out.read_text()).rstrip("\n").split("\n")
        assert len(lines) == 30 and all(len(x.split("\t")) == 2 for x in lines)
        assert [back(x.split("\t")[0]) for x in lines] == [r["id"] for r in rows]
        assert {back(x.split("\t")[1]) for x in lines} <= {"A\tx", "B\ny", "C\\z"}


# ---- every learner honours --labels or refuses it ----------------------------------------------------

def _labels_file(work, tmp_path) -> Path:
    """The corpus's labels renamed (A -> yes, B -> no): a model or evaluation that read them shows
    the new names; one that ignored them shows A and B."""
    lines = (work["dir"] / "d.jsonl").read_text().splitlines()
    f = tmp_path / "labels.txt"
    f.write_text("".join({"A": "yes", "B": "no"}[json.loads(x)["label"]] + "\n" for x in lines))
    return f


@pytest.mark.parametrize("kind", KINDS)
def test_train_honours_labels_or_refuses_them_for_every_learner(work, kind, tmp_path, capsys):
    lab = _labels_file(work, tmp_path)
    src = {"svm": ["--gram", work["dir"] / "g.zarr"], "perceptron": ["--gram", work["dir"] / "g.zarr"],
           "nystroem": ["--gram", work["dir"] / "lm.zarr"]}
    if kind == "linear":
        argv = ["train", "--features", work["dir"] / "f.zarr", "--model", "linear"]
    else:
        argv = ["train", "--corpus", work["corpus"], *src[kind], "--kernel", ST, "--model", kind]
    rc, out, err = run_cli([*argv, "--labels", lab, "--out", tmp_path / "m", "-q"], capsys)
    if kind == "linear":
        assert rc == 2 and one_line(err, "--labels") and not (tmp_path / "m").exists(), err
        return
    assert rc == 0, err
    assert sorted(map(str, SavedModel.load(tmp_path / "m").classes)) == ["no", "yes"]
    rc, out, err = predictions(tmp_path / "m", work["dir"] / "test.jsonl", capsys)
    assert rc == 0 and {x.split("\t")[1] for x in out.strip().splitlines()} <= {"yes", "no"}


@pytest.mark.parametrize("kind", KINDS)
def test_evaluate_honours_labels_or_refuses_them_for_every_learner(work, kind, tmp_path, capsys):
    lab = _labels_file(work, tmp_path)
    if kind == "linear":
        argv = ["evaluate", "--features", work["dir"] / "f.zarr", "--model", "linear"]
    else:
        argv = ["evaluate", "--gram", work["dir"] / "g.zarr", "--kernel", ST, "--model", kind, "--folds-dir", tmp_path,
                *(["--landmarks", "12"] if kind == "nystroem" else [])]
    rc, out, err = run_cli([*argv, "--folds", "2", "--labels", lab, "--out", tmp_path / "r", "-q"], capsys)
    if kind == "linear":
        assert rc == 2 and one_line(err, "--labels"), err
        return
    assert rc == 0, err
    res = json.loads((tmp_path / "r" / "results.json").read_text())
    golds = {g for p in res["predictions"].values() for g in p["gold"]}
    assert golds == {"yes", "no"}, golds


def test_predict_takes_no_labels_option(work, tmp_path, capsys):
    rc, out, err = run_cli(["predict", "--model-dir", work["models"]["svm"], "--input", work["dir"] / "test.jsonl",
                            "--labels", _labels_file(work, tmp_path)], capsys)
    assert rc == 2 and "--labels" in err and out == ""
