"""A seeded, randomised bit-flip sweep over every file of a feature store, a landmark store and
each kind of model directory (svm, perceptron, nystroem, linear; docs/reliability.md,
"Integrity"). Each flip, read by the command that consumes the file, must end in one of two
ways: the very result of the clean run (identical scores, bit for bit), or one line, exit 2,
naming the damaged file (or its array) -- never a traceback, never another number; and every
flip the command refuses is reported by ``gramtile verify`` too.

Each file gets ``GRAMTILE_SWEEP_FLIPS`` flips (default 8) at seeded random bit positions
(seed ``GRAMTILE_SWEEP_SEED``, default 30), so the sweep is bounded and repeatable; with
``GRAMTILE_SWEEP_SUMMARY=FILE`` the counts are written there as JSON (bench/faults.py).
Real stores and models built by the real commands; each flip is undone before the next one."""
import hashlib
import json
import os
import zlib
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from test_integrity import ST, run_cli, work  # noqa: F401  (the fixture)

FLIPS = int(os.environ.get("GRAMTILE_SWEEP_FLIPS", "8"))
SEED = int(os.environ.get("GRAMTILE_SWEEP_SEED", "30"))
TALLY = defaultdict(lambda: defaultdict(int))


@pytest.fixture(scope="module", autouse=True)
def summary():
    yield
    path = os.environ.get("GRAMTILE_SWEEP_SUMMARY")
    if path:
        Path(path).write_text(json.dumps({k: dict(v) for k, v in sorted(TALLY.items())}, indent=1) + "\n")


def files_of(root: Path) -> list:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def tree_digest(root: Path) -> str:
    h = hashlib.sha256()
    for rel in files_of(root):
        h.update(rel.encode() + b"\0" + (root / rel).read_bytes())
    return h.hexdigest()


def flips_of(root: Path, rel: str) -> list:
    """``FLIPS`` distinct (byte, bit) positions of file ``rel``, seeded by the sweep's seed and the
    file's name (the same flips on every run and machine)."""
    size = (root / rel).stat().st_size
    if size == 0:
        return []
    rng = np.random.default_rng([SEED, zlib.crc32(rel.encode())])
    bits = rng.choice(size * 8, size=min(FLIPS, size * 8), replace=False)
    return [(int(b) // 8, int(b) % 8) for b in bits]


def names_the_file(err: str, rel: str) -> bool:
    """stderr is one ``gramtile CMD: error: ...`` line naming the file: its path inside the store
    (or model directory), or for a file of a Zarr array the array (``row_index``, ``vocab``)."""
    lines = [x for x in err.strip().splitlines() if x.strip()]
    if "Traceback" in err or len(lines) != 1 or ": error: " not in lines[0]:
        return False
    parts = rel.split("/")
    names = {rel, parts[0]} if len(parts) > 1 else {rel}
    return any(n in lines[0] for n in names)


def verify_finds(target: Path, capsys) -> bool:
    """Whether ``gramtile verify TARGET`` reports damage (a non-zero exit)."""
    rc, _, _ = run_cli(["verify", target], capsys)
    return rc != 0


def sweep(target: Path, run, kind: str, capsys=None):
    """Flip each file of ``target`` ``FLIPS`` times; ``run()`` -> (exit code, result, stderr).
    Returns the flips that ended otherwise than the clean result or one line naming the file, and
    (with ``capsys``) the refused flips that ``gramtile verify`` did not report."""
    rc, want, err = run()
    assert rc == 0 and want, err
    clean = tree_digest(target)
    bad = []
    for rel in files_of(target):
        p = target / rel
        original = p.read_bytes()
        for byte, bit in flips_of(target, rel):
            data = bytearray(original)
            data[byte] ^= 1 << bit
            p.write_bytes(bytes(data))
            try:
                try:
                    rc, got, err = run()
                except Exception as e:  # noqa: BLE001  (a traceback of the command: counted, reported)
                    rc, got, err = None, None, f"Traceback: {type(e).__name__}: {e}"
                missed = rc == 2 and capsys is not None and not verify_finds(target, capsys)
            finally:
                p.write_bytes(original)
            if missed:
                TALLY[kind]["refused_but_verify_missed"] += 1
                bad.append((rel, byte, bit, rc, "verify_missed", err.strip()[-300:]))
            TALLY[kind]["tried"] += 1
            if rc == 0 and got == want:
                TALLY[kind]["same_result"] += 1
            elif rc == 2 and names_the_file(err, rel):
                TALLY[kind]["refused_naming_the_file"] += 1
            else:
                what = ("traceback" if "Traceback" in err else "wrong_number" if rc == 0 else "unclear_error")
                TALLY[kind][what] += 1
                bad.append((rel, byte, bit, rc, what, err.strip()[-300:]))
        assert tree_digest(target) == clean, f"the command changed {target} (after flipping {rel})"
    TALLY[kind]["files"] = len(files_of(target))
    if bad and os.environ.get("GRAMTILE_SWEEP_REPORT"):
        with open(os.environ["GRAMTILE_SWEEP_REPORT"], "a") as f:
            f.writelines(f"{kind}\t{b}\n" for b in bad)
    return bad


def scores(path: Path):
    return [(r["id"], r["predicted"], r["score"]) for r in json.loads(path.read_text())]


def predict_run(model: Path, work, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "p.json"

    def run():
        rc, _, err = run_cli(["predict", "--model-dir", model, "--input", work["dir"] / "test.jsonl", "--out", out,
                              "--overwrite", "-q"], capsys)
        return rc, scores(out) if rc == 0 else None, err
    return run


@pytest.mark.parametrize("kind", ["svm", "perceptron", "nystroem", "linear"])
def test_every_bit_flip_of_a_model_directory_is_the_clean_result_or_one_line(work, kind, tmp_path, capsys):  # noqa: F811
    import shutil

    m = tmp_path / kind
    shutil.copytree(work["models"][kind], m)
    bad = sweep(m, predict_run(m, work, tmp_path, capsys), f"model_{kind}", capsys)
    assert not bad, bad


def test_every_bit_flip_of_a_feature_store_is_the_clean_result_or_one_line(work, tmp_path, capsys):  # noqa: F811
    import shutil

    from gramtile.pipeline.learn.linear_models import LinearModel

    f = tmp_path / "f.zarr"
    shutil.copytree(work["dir"] / "f.zarr", f)
    out = tmp_path / "m"
    pred = predict_run(out, work, tmp_path, capsys)

    def run():
        rc, _, err = run_cli(["train", "--features", f, "--model", "linear", "--out", out, "--overwrite", "-q"],
                             capsys)
        if rc != 0:
            return rc, None, err
        m = LinearModel.load(out)
        rc, got, err = pred()
        return rc, (m.coef.tobytes(), m.intercept.tobytes(), m.classes, got), err
    bad = sweep(f, run, "feature_store", capsys)
    assert not bad, bad


def test_every_bit_flip_of_a_landmark_store_is_the_clean_result_or_one_line(work, tmp_path, capsys):  # noqa: F811
    import shutil

    g = tmp_path / "lm.zarr"
    shutil.copytree(work["dir"] / "lm.zarr", g)
    m = tmp_path / "m"
    pred = predict_run(m, work, tmp_path, capsys)

    def run():
        rc, _, err = run_cli(["train", "--corpus", work["corpus"], "--gram", g, "--kernel", ST, "--model", "nystroem",
                              "--out", m, "--overwrite", "-q"], capsys)
        if rc != 0:
            return rc, None, err
        return pred()
    bad = sweep(g, run, "landmark_store", capsys)
    assert not bad, bad
