"""The fault suite (issue 19, Build 7): faults a careful user and an unlucky cluster would cause,
with the figures docs/reliability.md quotes.

- kill points: the driver of `gramtile gram` SIGKILLed after a seeded random delay, then the same
  command rerun; K must equal a clean run's bit for bit;
- store damage: chunks deleted, truncated, bit-flipped or swapped, the done mask, the checksum
  manifest, diagonals and metadata damaged; `verify` must detect every case and `verify --repair`
  repair it to the clean matrix, or refuse with the fix;
- bad inputs: every reader format x kinds of damage, and bad arguments for every command; each
  must end with exit 2 and one line naming the file or the option (no traceback), leaving no store;
- lock races: three processes taking one store lock at once, with stale takeovers;
- malformed batches: seeded random corruptions of encoded batches; each is refused or computes,
  and the process never crashes (they run in a child process whose death would be counted).

Sizes: ``GRAMTILE_FAULT_KILLS`` kill points (default 3), ``GRAMTILE_FAULT_BATCHES`` malformed
batches (default 60), ``GRAMTILE_FAULT_RACES`` race rounds (default 20); bench/faults.py runs
larger sizes for the figures. With
``GRAMTILE_FAULT_SUMMARY=FILE`` the counts are written there as JSON (bench/faults.py does this).
"""
import gzip
import json
import multiprocessing
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from conftest import corpus_store_of, num_trees

from gramtile.pipeline.compute.engine import run_gram
from gramtile.pipeline.compute.repair import repair
from gramtile.pipeline.parsing.formats import FORMATS
from gramtile.pipeline.stores.errors import StoreError, StoreLockedError
from gramtile.pipeline.stores.gram_store import GramStore
from gramtile.pipeline.stores.gram_verify import verify
from gramtile.pipeline.stores.locks import StoreLock
from gramtile.workflows.cli import main

GRAMTILE = [sys.executable, "-m", "gramtile"]
SST = '{"kind": "sst", "lam": 0.4}'
KILLS = int(os.environ.get("GRAMTILE_FAULT_KILLS", "3"))
BATCHES = int(os.environ.get("GRAMTILE_FAULT_BATCHES", "60"))
RACES = int(os.environ.get("GRAMTILE_FAULT_RACES", "20"))
FORK = multiprocessing.get_context("fork")

#: counts per category, written to $GRAMTILE_FAULT_SUMMARY at the end of the module
TALLY = defaultdict(lambda: defaultdict(int))


@pytest.fixture(scope="module", autouse=True)
def summary():
    yield
    path = os.environ.get("GRAMTILE_FAULT_SUMMARY")
    if path:
        Path(path).write_text(json.dumps({k: dict(v) for k, v in sorted(TALLY.items())}, indent=1) + "\n")


def count(category: str, outcome: str):
    TALLY[category]["tried"] += 1
    TALLY[category][outcome] += 1
    if category == "store_damage":  # which case had which outcome
        case = next(c for c, v in reversed(TALLY["store_damage_cases"].items()) if v == 0)
        TALLY["store_damage_cases"][case] = outcome


# ---- a small corpus, its clean matrix ---------------------------------------------------------

@pytest.fixture(scope="module")
def num(tmp_path_factory):
    d = tmp_path_factory.mktemp("suite")
    corpus = corpus_store_of(d / "num.zarr", num_trees(300), 150)
    ref_store = run_gram(corpus, SST, d / "ref.zarr", tile=20, cluster="sequential")
    return corpus, ref_store.path, ref_store.view().block()


def gram_argv(corpus, out, *extra):
    return GRAMTILE + ["gram", "--corpus", str(corpus), "--kernel", SST, "--out", str(out), "--tile", "20",
                       "--cluster", "sequential", "--no-progress", "-q", *extra]


# ---- kill points --------------------------------------------------------------------------------

@pytest.mark.parametrize("k", range(KILLS))
def test_a_driver_killed_at_a_random_point_resumes_to_the_same_matrix(num, tmp_path, k):
    corpus, _, ref = num
    rng = random.Random(1000 + k)
    out = tmp_path / "g.zarr"
    p = subprocess.Popen(gram_argv(corpus, out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t0 = time.monotonic()  # the delay counts from the first stored tile, so the kill lands mid-run
    while p.poll() is None and not (out / "K" / "c").exists() and time.monotonic() - t0 < 120:
        time.sleep(0.05)
    time.sleep(rng.uniform(0.0, 0.5))
    killed = p.poll() is None
    if killed:
        p.send_signal(signal.SIGKILL)
    p.wait()
    r = subprocess.run(gram_argv(corpus, out), capture_output=True, text=True, timeout=300)
    same = r.returncode == 0 and np.array_equal(GramStore.open(out).view().block(), ref)
    count("kill_points", "survived" if same else "silent_wrong" if r.returncode == 0 else "failed")
    TALLY["kill_points"]["killed_mid_run"] += int(killed)
    assert same, r.stderr


# ---- store damage -------------------------------------------------------------------------------

def _flip(path: Path, at: int):
    b = bytearray(path.read_bytes())
    b[at % len(b)] ^= 0x40
    path.write_bytes(bytes(b))


def _set_attr(g: Path, key, value):
    meta = json.loads((g / "zarr.json").read_text())
    meta["attributes"]["gramtile"][key] = value
    (g / "zarr.json").write_text(json.dumps(meta))


DAMAGE = {
    "K chunk deleted": lambda g: (g / "K/c/1/3").unlink(),
    "K chunk truncated": lambda g: (g / "K/c/0/2").write_bytes((g / "K/c/0/2").read_bytes()[:100]),
    "K chunk bit flipped (data)": lambda g: _flip(g / "K/c/2/5", 800),
    "K chunk bit flipped (checksum)": lambda g: _flip(g / "K/c/4/4", -2),
    "K chunks swapped": lambda g: _swap(g / "K/c/0/1", g / "K/c/0/2"),
    "K chunk emptied": lambda g: (g / "K/c/3/7").write_bytes(b""),
    "K chunk replaced by another store's": None,  # filled in by the test (needs a second store)
    "diag_rows chunk deleted": lambda g: (g / "diag_rows/c/2").unlink(),
    "diag_cols chunk bit flipped": lambda g: _flip(g / "diag_cols/c/1", 40),
    "done mask bit flipped": lambda g: _flip(g / "done/c/0/0", 20),
    "done mask deleted": lambda g: (g / "done/c/0/0").unlink(),
    "checksum manifest deleted": lambda g: shutil.rmtree(g / "tile_crc"),
    "checksum manifest bit flipped": lambda g: _flip(g / "tile_crc/c/0/0", 30),
    "K array deleted": lambda g: shutil.rmtree(g / "K"),
    "K metadata damaged": lambda g: (g / "K/zarr.json").write_text("{"),
    "store metadata damaged": lambda g: (g / "zarr.json").write_text('{"zarr_format": 3,'),
    "n_rows edited": lambda g: _set_attr(g, "n_rows", 299),
    "tile edited": lambda g: _set_attr(g, "tile", 25),
    "symmetric edited": lambda g: _set_attr(g, "symmetric", False),
    "row_index chunk bit flipped": lambda g: _flip(g / "row_index/c/0", 100),
}


def _swap(a: Path, b: Path):
    x, y = a.read_bytes(), b.read_bytes()
    a.write_bytes(y)
    b.write_bytes(x)


@pytest.mark.parametrize("case", list(DAMAGE))
def test_store_damage_is_detected_and_repaired_or_refused_with_the_fix(num, tmp_path, case):
    corpus, ref_path, ref = num
    g = tmp_path / "g.zarr"
    shutil.copytree(ref_path, g)
    if DAMAGE[case] is None:  # same position, another kernel's store: a valid chunk that is wrong here
        other = run_gram(corpus, '{"kind": "sst", "lam": 0.3}', tmp_path / "other.zarr", tile=20,
                         cluster="sequential").path
        shutil.copy(Path(other) / "K/c/2/6", g / "K/c/2/6")
    else:
        DAMAGE[case](g)
    TALLY["store_damage_cases"][case] = 0  # its outcome is the last one counted below
    try:
        rep = verify(g)
        detected = not rep.ok
    except StoreError as e:  # refused when opened: must name the fix
        detected = any(w in str(e) for w in ("Fix", "rerun", "delete"))
        count("store_damage", "refused_with_fix" if detected else "refused_without_fix")
        assert detected, str(e)
        return
    if not detected:
        # undetected: is the matrix still the clean one? (then the damage was harmless, else silently wrong)
        try:
            same = np.array_equal(GramStore.open(g).view().block(), ref)
        except StoreError as e:  # verify missed it, but every read refuses it with the fix
            fix = any(w in str(e) for w in ("Fix", "rerun", "delete"))
            count("store_damage", "missed_by_verify_refused_by_reads" if fix else "refused_without_fix")
            assert fix, str(e)
            return
        count("store_damage", "harmless" if same else "silent_wrong")
        assert same, f"{case}: verify passed on a damaged store"
        return
    try:
        rep = repair(g, cluster="sequential")
        repaired = verify(g).ok and np.array_equal(GramStore.open(g).view().block(), ref)
    except StoreError as e:
        fix = any(w in str(e) for w in ("Fix", "rerun", "delete"))
        count("store_damage", "refused_with_fix" if fix else "refused_without_fix")
        assert fix, str(e)
        return
    if not repaired and not rep.ok and rep.metadata:  # metadata edits are reported, never "repaired"
        count("store_damage", "refused_with_fix")
        return
    count("store_damage", "detected_and_repaired" if repaired else "silent_wrong")
    assert repaired, case


# ---- bad inputs ---------------------------------------------------------------------------------

TREE = "(S (NP (D the) (N dog)) (VP (V barks)))"
GOOD = {
    "jsonl": json.dumps({"id": "a", "label": "A", "tree": TREE}) + "\n",
    "svmlighttk": f"+1 |BT| {TREE} |ET|\n",
    "kelp": f"NUM |BT:grct| {TREE} |ET|\n",
    "ptb": f"( {TREE} )\n",
    "conllu": "# sent_id = a\n1\tthe\tthe\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t0\troot\t_\t_\n\n",
    "dp": "the\tDT\t2\ndog\tNN\t0\n",
    "trec": "NUM:count How many dogs bark ?\n",
    "tsv": "A\tthe dog barks\n",
    "text": "the dog barks\n",
}

#: damage kinds every format gets: (name, file name suffix, bytes of the damaged file)
GENERIC = [
    ("empty file", "", lambda good: b""),
    ("blank lines only", "", lambda good: b"\n   \n\n"),
    ("invalid UTF-8", "", lambda good: b"\xff\xfe\xfa bad \xc3\x28\n" + good),
    ("NUL-filled binary", "", lambda good: bytes(random.Random(7).choices(range(8), k=3000))),
    ("truncated gzip", ".gz", lambda good: gzip.compress(good * 4000)[:-300]),
]

#: format-specific malformations: (format, name, content)
SPECIFIC = [
    ("jsonl", "not JSON", "{id: a}\n"),
    ("jsonl", "truncated object", '{"id": "a", "tree": "(S (A b))"\n'),
    ("jsonl", "unknown key", '{"id": "a", "tre": "(S (A b))"}\n'),
    ("jsonl", "array not object", '["a", "b"]\n'),
    ("jsonl", "tree not a string", '{"tree": 5}\n'),
    ("jsonl", "unbalanced tree", '{"tree": "(S (A b)"}\n'),
    ("jsonl", "extra bracket", '{"tree": "(S (A b)))"}\n'),
    ("jsonl", "empty tree", '{"tree": ""}\n'),
    ("jsonl", "heads out of range", '{"words": ["a", "b"], "heads": [5, -1]}\n'),
    ("jsonl", "two roots", '{"words": ["a", "b"], "heads": [-1, -1]}\n'),
    ("jsonl", "head cycle", '{"words": ["a", "b", "c"], "heads": [1, 0, -1]}\n'),
    ("jsonl", "lengths differ", '{"words": ["a", "b"], "heads": [-1]}\n'),
    ("jsonl", "duplicate id", '{"id": "a", "tree": "(S a)"}\n{"id": "a", "tree": "(S b)"}\n'),
    ("jsonl", "label a number", '{"label": 3, "tree": "(S a)"}\n'),
    ("jsonl", "NaN bag feature", '{"tree": "(S a)", "bag": {"x": NaN}}\n'),
    ("jsonl", "deeply nested", '{"id": "a", "meta": ' + "[" * 50000 + "]" * 50000 + "}\n"),
    ("jsonl", "target outside", '{"lemmas": ["a"], "pos": ["N"], "target": 4}\n'),
    ("jsonl", "hdag edge outside", '{"hdag": {"attrs": [["a"]], "parent": [-1], "edges": [[0, 3]]}}\n'),
    ("jsonl", "ptree position zero", '{"ptree": {"label": "a", "children": {"0": {"label": "b"}}}}\n'),
    ("jsonl", "too many tokens", json.dumps({"tokens": ["w"] * 1200}) + "\n"),
    ("svmlighttk", "unbalanced", "+1 |BT| (S (A b) |ET|\n"),
    ("svmlighttk", "no markers", f"+1 {TREE}\n"),
    ("svmlighttk", "empty tree", "+1 |BT|  |ET|\n"),
    ("svmlighttk", "no |ET|", f"+1 |BT| {TREE}\n"),
    ("svmlighttk", "CR-only line ends", f"+1 |BT| {TREE} |ET|\r+1 |BT| {TREE} |ET|\r"),
    ("kelp", "unterminated", f"NUM |BT:grct| {TREE}\n"),
    ("kelp", "empty tree", "NUM |BT:grct|  |ET|\n"),
    ("ptb", "unclosed", "( (S (A b)\n"),
    ("ptb", "extra closing", "( (S (A b))))\n"),
    ("conllu", "head out of range", "1\ta\ta\tX\tX\t_\t9\tdep\t_\t_\n\n"),
    ("conllu", "cycle", "1\ta\ta\tX\tX\t_\t2\tdep\t_\t_\n2\tb\tb\tX\tX\t_\t1\tdep\t_\t_\n\n"),
    ("conllu", "bad id", "x\ta\ta\tX\tX\t_\t0\troot\t_\t_\n\n"),
    ("conllu", "too few columns", "1\ta\ta\tX\n\n"),
    ("dp", "head not a number", "the\tDT\tx\n"),
    ("dp", "two roots", "a\tN\t0\nb\tN\t0\n"),
    ("dp", "too few columns", "the\n"),
    ("trec", "no label", "How many dogs bark ?\n"),
    ("tsv", "no tab", "the dog barks\n"),
    ("tsv", "empty text", "A\t \n"),
    ("tsv", "tab inside the text", "A\tthe dog\tbarks\n"),
    ("tsv", "header line", "label\ttext\nA\tthe dog barks\n"),
    ("tsv", "blank line inside", "A\tthe dog barks\n\nB\ta cat sleeps\n"),
    ("csv", "no text column chosen", "the dog barks,A\n"),
    ("text", "too many tokens", " ".join(["w"] * 1200) + "\n"),
]


def bad_input_cases():
    cases = []
    for fmt in sorted(FORMATS):
        for name, suffix, make in GENERIC:
            cases.append((fmt, name, suffix, make))
        cases.append((fmt, "missing file", "", None))
        if fmt not in ("ptb", "dp"):  # those two read directories
            cases.append((fmt, "a directory", "", "dir"))
    for fmt, name, content in SPECIFIC:
        cases.append((fmt, name, "", content))
    return cases


def one_line(err: str, *names) -> bool:
    lines = [x for x in err.strip().splitlines() if not x.startswith("usage:") and not x.startswith("  ")]
    return "Traceback" not in err and len(lines) == 1 and ": error: " in lines[0] and all(n in lines[0] for n in names)


def run_main(argv, capsys):
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    except BaseException as e:  # noqa: BLE001  (a crash of the command: counted, then failed)
        count("bad_inputs", "crashed")
        raise AssertionError(f"{argv}: {type(e).__name__}: {e}") from e
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("fmt,name,suffix,make", bad_input_cases(),
                         ids=[f"{c[0]}-{c[1]}" for c in bad_input_cases()])
def test_a_bad_input_file_is_exit_2_and_one_line_naming_it(tmp_path, fmt, name, suffix, make, capsys):
    good = GOOD.get(fmt, GOOD["text"]).encode()
    path = tmp_path / f"input.{fmt}{suffix}"
    if make == "dir":
        path.mkdir()
    elif callable(make):
        path.write_bytes(make(good))
    elif isinstance(make, str):
        path.write_text(make, encoding="utf-8", newline="")
    out = tmp_path / "c.zarr"
    rc, err = run_main(["prepare", "--input", path, "--format", fmt, "--out", out, "--cluster", "sequential",
                        "--no-progress"], capsys)
    clear = rc == 2 and one_line(err, path.name) and not out.exists()
    count("bad_inputs", "clear" if clear else "unclear")
    assert clear, (rc, err, out.exists())


def bad_arguments(d: Path):
    """(command line, the name its one-line error must mention) for every command."""
    g, c, m = d / "g.zarr", d / "c.zarr", d / "model"
    cases = []
    for cmd in ("status", "verify", "export", "evaluate"):
        where = ["--gram", d / "nope.zarr"] if cmd == "evaluate" else [d / "nope.zarr"]
        tail = ["--out", d / "x.npy"] if cmd == "export" else []
        cases.append(([cmd, *where, *tail], "nope.zarr"))
    cases += [(["inspect", d / "nope.zarr"], "nope.zarr"), (["inspect", g], "g.zarr"), (["status", c], "c.zarr"),
              (["predict", "--model-dir", d / "nope", "--input", d / "d.jsonl"], "nope"),
              (["predict", "--model-dir", m, "--input", d / "nope.jsonl"], "nope.jsonl"),
              (["train", "--corpus", d / "nope.zarr", "--kernel", SST, "--out", d / "m2"], "nope.zarr"),
              (["train", "--corpus", c, "--kernel", SST, "--out", d / "m2", "--gram", d / "nope.zarr"], "nope.zarr"),
              (["train", "--input", d / "d.jsonl", "--format", "xml", "--kernel", SST, "--out", d / "m2"], "xml"),
              (["prepare", "--input", d / "d.jsonl", "--format", "jsonl", "--out", d / "p.zarr", "--encoding", "utf-9",
                "--cluster", "sequential", "--no-progress"], "utf-9"),
              (["prepare", "--input", d / "d.jsonl", "--format", "nope", "--out", d / "p.zarr"], "nope"),
              (["prepare", "--input", d / "d.jsonl", "--format", "jsonl", "--out", d / "p.zarr", "--resources",
                "wordnot"], "wordnot"),
              (["prepare", "--input", d / "d.jsonl", "--format", "jsonl", "--out", d / "p.zarr", "--reps", "hdagx",
                "--no-progress"], "hdagx"),
              (["gram", "--corpus", c, "--kernel", SST, "--out", d / "x.zarr", "--cluster", "nope"], "nope"),
              (["gram", "--corpus", c, "--kernel", SST, "--out", d / "x.zarr", "--cluster-file", d / "no.yaml"],
               "no.yaml"),
              (["run", d / "nope.yaml", "--out", d / "r"], "nope.yaml"),
              (["run", "num_qc", "--out", d / "r", "--data", d / "nodata"], "nodata"),
              (["evaluate", "--gram", g, "--split", "train:0:30"], "split"),
              (["evaluate", "--gram", g, "--split", "train:0:30,test:20:99"], "test"),
              (["evaluate", "--gram", g, "--labels", d / "nolabels.txt"], "nolabels.txt"),
              (["evaluate", "--gram", g, "--class-weight", "A:x"], "class"),
              (["evaluate", "--gram", g, "--folds", "3", "--split", "train:0:30,test:30:40"], "--split"),
              (["export", g, "--out", d / "y.npy", "--format", "csv"], "format"),
              (["verify", g, "--repair", "--cluster", "nope"], "nope")]
    kernels = ['{"kind": "nope"}', '{"kind": "sst"', '{"kind": "sst", "lam": 2}', '{"kind": "sst", "lam": true}',
               '{"kind": "sst", "rep": "dep"}', '{"kind": "sst", "extra": 1}', '[]', '"sst"', "@" + str(d / "no.json"),
               '{"kind": "sum", "kernels": []}', '{"kind": "normalized"}', '{"kind": "pt", "lam": 0.4, "mu": 2}']
    for k in kernels:
        cases.append((["gram", "--corpus", c, "--kernel", k, "--out", d / "x.zarr", "--cluster", "sequential"], "kernel"))
        cases.append((["train", "--corpus", c, "--kernel", k, "--out", d / "m2"], "kernel"))
    for sel in ("5:2", "a:b", "0:99999", "@" + str(d / "none.txt"), "-3", "1:2:3"):
        cases.append((["gram", "--corpus", c, "--kernel", SST, "--out", d / "x.zarr", "--rows", sel,
                       "--cluster", "sequential"], "--rows"))
        cases.append((["export", g, "--out", d / "z.npy", "--rows", sel], "--rows"))
    for tile in ("0", "-1", "1000000000", "x"):
        cases.append((["gram", "--corpus", c, "--kernel", SST, "--out", d / "x.zarr", "--tile", tile,
                       "--cluster", "sequential"], "tile"))
    for opt, vals in (("--C", ("-5", "0", "nan", "inf", "abc")), ("--epochs", ("0", "-1", "x")),
                      ("--perceptron-seed", ("-1", "x"))):
        for v in vals:
            cases.append((["train", "--corpus", c, "--gram", g, "--kernel", SST, "--out", d / "m2", opt, v],
                          opt.lstrip("-").split("-")[0]))
    for opt, vals in (("--C", ("-5", "0", "nan", "x,1")), ("--folds", ("0", "1", "-2", "x", "1000")),
                      ("--inner-folds", ("0", "1")), ("--fold-seed", ("-1", "x")), ("--curve", ("0", "2", "nan")),
                      ("--landmarks", ("0", "-1"))):
        for v in vals:
            extra = ["--model", "nystroem"] if opt == "--landmarks" else []
            cases.append((["evaluate", "--gram", g, opt, v, *extra], opt.lstrip("-").split("-")[0]))
    for opt, vals in (("--shard-size", ("0", "-1", "x")), ("--max-tokens", ("0", "-1", "x"))):
        for v in vals:
            cases.append((["prepare", "--input", d / "d.jsonl", "--format", "jsonl", "--out", d / "p.zarr", opt, v,
                           "--cluster", "sequential"], opt.lstrip("-").split("-")[0]))
    return cases


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("args")
    (d / "d.jsonl").write_text("".join(json.dumps({"id": f"s{i}", "label": "AB"[i % 2],
                                                   "tree": ["(S (A x) (B y))", "(S (C z))"][i % 2]}) + "\n"
                                       for i in range(40)))
    assert main(["prepare", "--input", str(d / "d.jsonl"), "--format", "jsonl", "--out", str(d / "c.zarr"),
                 "--cluster", "sequential", "--no-progress", "-q"]) == 0
    assert main(["gram", "--corpus", str(d / "c.zarr"), "--kernel", SST, "--out", str(d / "g.zarr"), "--cluster",
                 "sequential", "--tile", "10", "--no-progress", "-q"]) == 0
    assert main(["train", "--corpus", str(d / "c.zarr"), "--gram", str(d / "g.zarr"), "--kernel", SST, "--out",
                 str(d / "model")]) == 0
    return d


N_ARGS = len(bad_arguments(Path("/d")))


@pytest.mark.parametrize("k", range(N_ARGS))
def test_a_bad_argument_is_exit_2_and_one_line_naming_it(small, k, capsys):
    argv, name = bad_arguments(small)[k]
    before = sorted(os.listdir(small))
    rc, err = run_main(argv, capsys)
    clear = rc == 2 and one_line(err, name) and sorted(os.listdir(small)) == before
    count("bad_inputs", "clear" if clear else "unclear")
    assert clear, (argv, rc, err)


# ---- lock races ---------------------------------------------------------------------------------

def _contend(lock_path, marker, start, die, violations):
    start.wait()
    lock = StoreLock(lock_path, "suite store")
    try:
        lock.acquire()
    except StoreLockedError:
        os._exit(0)
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        violations.value += 1
        os._exit(0)
    time.sleep(0.003)
    os.unlink(marker)
    if die:
        os._exit(0)  # dies holding it: a stale lock file for the next round to take over
    lock.release()
    os._exit(0)


def test_lock_races_never_give_two_holders(tmp_path):
    lock_path, marker = tmp_path / "gramtile.lock", tmp_path / "holder"
    violations = FORK.Value("i", 0)
    for r in range(RACES):
        start = FORK.Event()
        procs = [FORK.Process(target=_contend, args=(lock_path, marker, start, r % 2 == 0, violations))
                 for _ in range(3)]
        for p in procs:
            p.start()
        start.set()
        for p in procs:
            p.join(30)
        crashed = any(p.exitcode != 0 for p in procs)
        count("lock_races", "crashed" if crashed else "one_holder")
    TALLY["lock_races"]["two_holders"] = violations.value
    assert violations.value == 0 and TALLY["lock_races"]["crashed"] == 0


# ---- malformed batches --------------------------------------------------------------------------

BATCH_CHILD = r'''
import json, sys, random, resource
# a core that allocates by an id must fail with MemoryError here, not drive the shared machine into swap
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
import numpy as np
from gramtile.kernels.batches import Batch
from gramtile.kernels.errors import RepresentationError
from gramtile.kernels.registry import spec_from_dict
from gramtile.pipeline.representations.brackets import parse_tree
from gramtile.pipeline.representations.encode import encode
from gramtile.pipeline.representations.vocab import Vocabularies
n, seed = int(sys.argv[1]), int(sys.argv[2])
good = encode([parse_tree("(S (NP (D a) (N b)) (VP (V c) (NP (N d))))"), parse_tree("(S (NP x) (VP y))")],
              Vocabularies())
specs = [spec_from_dict(s) for s in ({"kind": "sst", "lam": 0.4}, {"kind": "st"}, {"kind": "pt", "lam": 0.4, "mu": 0.4})]
rng = random.Random(seed)
for k in range(n):
    off, cols = good.offsets.copy(), {c: v.copy() for c, v in good.columns.items()}
    target = rng.choice(["offsets"] + sorted(cols))
    arr = off if target == "offsets" else cols[target]
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(arr))
        arr[i] = rng.choice([-1, -2**31, 2**31 - 1, len(arr), len(arr) + 1, rng.randint(-50, 50)])
    try:
        b = Batch("tree", off, cols)
    except RepresentationError:
        print(json.dumps({"case": k, "target": target, "outcome": "refused"}), flush=True)
        continue
    try:
        for spec in specs:
            K = spec.block(b, b)
            assert np.isfinite(K).all()
        outcome = "accepted_and_computed"
    except MemoryError:
        outcome = "memory_error"
    except Exception as e:
        outcome = "exception " + type(e).__name__
    print(json.dumps({"case": k, "target": target, "outcome": outcome}), flush=True)
'''


def test_malformed_batches_are_refused_or_compute_and_never_crash_the_process(tmp_path):
    r = subprocess.run([sys.executable, "-c", BATCH_CHILD, str(BATCHES), "19"], capture_output=True, text=True,
                       timeout=600)
    results = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    for res in results:
        count("malformed_batches", res["outcome"])
    if r.returncode != 0:  # a signal (SIGSEGV...) or an exception: the case after the last result crashed
        count("malformed_batches", "crashed")
    assert r.returncode == 0 and len(results) == BATCHES, r.stderr[-2000:]
    # ids far above any vocabulary once made the tree cores allocate by id (MemoryError); they are
    # renumbered now, so anything but a refusal or a finite K is a failure
    assert all(res["outcome"] in ("refused", "accepted_and_computed") for res in results), results
