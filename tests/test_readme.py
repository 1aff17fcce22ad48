"""The README's quickstart is runnable as written: every ```python block, in order, in one
namespace, and the command-line block for a user's own CoNLL-U file, on such a file."""
import re
import shlex
from pathlib import Path

import numpy as np

from gramtile.workflows.cli import main

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", README, flags=re.S)

CONLLU = """# sent_id = s1
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tdog\tdog\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tbarks\tbark\tVERB\tVBZ\t_\t0\troot\t_\t_

# sent_id = s2
1\tCats\tcat\tNOUN\tNNS\t_\t2\tnsubj\t_\t_
2\tsleep\tsleep\tVERB\tVBP\t_\t0\troot\t_\t_

"""


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
    (tmp_path / "mine.conllu").write_text(CONLLU)
    (block,) = [body for lang, body in BLOCKS if lang == "sh" and "mine.conllu" in body]
    lines = [ln for ln in block.splitlines() if ln.strip()]
    assert len(lines) == 2
    for line in lines:
        argv = shlex.split(line)
        assert argv[0] == "gramtile"
        assert main(argv[1:] + ["--no-progress"]) == 0, line
    assert (tmp_path / "mine-route.zarr").is_dir()
