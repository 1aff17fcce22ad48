"""The README's quickstart is runnable as written: every ```python block, in order, in one
namespace, the command-line quickstart (every line, on samples of its data sets) and the block
for a user's own CoNLL-U file, on such a file. .ci/wheel-check runs the python blocks again from
an installed wheel outside the checkout."""
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
from conftest import TWO_SENTENCES_CONLLU, require_data

from gramtile.workflows.cli import build_parser, main

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, flags=re.S)



def test_readme_python_blocks_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = [body for lang, body in BLOCKS if lang == "python"]
    assert len(code) >= 3
    ns = {}
    for body in code:
        exec(compile(body, "README.md", "exec"), ns)
    out = capsys.readouterr().out
    assert "['dep', 'ptree', 'seq', 'tree']" in out  # what the first block says it prints
    # the bracket-tree block's K, as its comment shows it
    np.testing.assert_allclose(ns["K"], [[3.657216, 2.2336], [2.2336, 3.657216]])
    assert ns["clf"].predict([ns["nlp"]("A dog barks.")]).shape == (1,)


def test_readme_own_data_commands_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.conllu").write_text(TWO_SENTENCES_CONLLU)
    (block,) = [body for lang, body in BLOCKS if lang == "sh" and "mine.conllu" in body]
    lines = [ln for ln in block.splitlines() if ln.strip()]
    assert len(lines) == 2
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "gramtile"
        assert main(argv[1:] + ["--no-progress"]) == 0, line
    assert (tmp_path / "mine-route.zarr").is_dir()


@pytest.mark.timeout(600)
def test_readme_command_line_quickstart_runs_on_a_sample_of_its_data(tmp_path, monkeypatch):
    """The quickstart's command block, every line as written, with ``../shared/data`` standing for
    a folder of samples in the same layout (20 questions of each TREC class, 30 + 30 NUM trees):
    the full data takes minutes per step, the commands and their options are what is checked."""
    monkeypatch.chdir(tmp_path)
    data = tmp_path / "sample"

    def sample(name, rel, key, per):
        lines = (require_data(name) / rel).read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        kept, seen = [], {}
        for ln in lines:
            k = key(ln)
            if seen.get(k, 0) < per:
                seen[k] = seen.get(k, 0) + 1
                kept.append(ln)
        (data / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (data / name / rel).write_text("".join(kept), encoding="utf-8")
        assert len(seen) >= 2

    sample("trec_qc", "train.txt", lambda ln: ln.split(":", 1)[0], 20)
    sample("trec_qc", "test.txt", lambda ln: ln.split(":", 1)[0], 5)
    for rel in ("NUM_train.dat", "NUM_test.dat"):
        sample("trec_qc_num_constituency", rel, lambda ln: ln.startswith("-1"), 30)
    (block,) = [body for lang, body in BLOCKS if lang == "sh" and "--format trec --out qc.zarr" in body]
    lines = [ln for ln in block.splitlines() if ln.strip()]
    assert len(lines) >= 9 and lines[-1].startswith("gramtile run ")
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices
    for line in lines:
        argv = shlex.split(line.replace("../shared/data", str(data)))
        assert argv[0] == "gramtile"
        quiet = ["--no-progress"] if "--no-progress" in commands[argv[1]]._option_string_actions else []
        assert main(argv[1:] + quiet) == 0, line
    assert (tmp_path / "K.npy").stat().st_size > 120 * 120 * 8 - 1
    assert "| PT |" in (tmp_path / "out" / "num_qc" / "results.md").read_text()
