"""CLI conventions: one meaning per flag with deprecated old spellings, help without
reStructuredText markup, the `gramtile` logger with --quiet / --verbose, one progress line every
few seconds without a TTY, the timing summary with --no-progress. Real stores, real runs."""
import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import corpus_store_of, num_trees, require_data

from gramtile.pipeline.progress import LineProgress, log, progress_bar
from gramtile.workflows.cli import COMMANDS, build_parser, main

GRAMTILE = [sys.executable, "-m", "gramtile"]


def test_help_text_has_no_rst_markup():
    p = build_parser()
    sub = next(a for a in p._actions if a.dest == "command")
    for name, cmd in sub.choices.items():
        text = cmd.format_help()
        assert "``" not in text and ":func:" not in text and ":mod:" not in text, name


@pytest.mark.parametrize("cmd,new,old,dest", [
    ("evaluate", "--fold-seed", "--seed", "fold_seed"),
    ("train", "--perceptron-seed", "--seed", "perceptron_seed"),
    ("predict", "--model-dir", "--model", "model_dir"),
    ("prepare", "--spacy-model", "--model", "spacy_model"),
    ("demo", "--fold-seed", "--seed", "fold_seed"),
])
def test_one_meaning_per_flag_and_old_spellings_still_work_with_a_warning(cmd, new, old, dest, capsys):
    p = build_parser()
    base = {"evaluate": ["--gram", "g.zarr"], "train": ["--corpus", "c", "--kernel", "{}", "--out", "m"],
            "predict": ["--input", "x"], "prepare": ["--input", "x", "--format", "text", "--out", "o"], "demo": []}[cmd]
    value = "3" if "seed" in new else "dir3"
    from gramtile.pipeline.progress import configure
    configure(0)
    ns = p.parse_args([cmd, *base, new, value])
    assert str(getattr(ns, dest)) == value and "deprecated" not in capsys.readouterr().err
    ns = p.parse_args([cmd, *base, old, value])
    assert str(getattr(ns, dest)) == value
    err = capsys.readouterr().err
    assert f"{old} is deprecated" in err and new in err
    help_text = next(a for a in p._actions if a.dest == "command").choices[cmd].format_help()
    assert new in help_text and f"  {old} " not in help_text


def test_line_progress_without_a_tty_prints_one_line_every_few_seconds(capsys):
    from gramtile.pipeline.progress import configure
    configure(0)
    bar = progress_bar(1000, "tile", "gram sst")  # stderr is captured: not a terminal
    assert isinstance(bar, LineProgress)
    bar.every = 0.05
    import time
    t0 = time.monotonic()
    while time.monotonic() - t0 < 0.3:
        bar.set_postfix_str("1 evals/s")
        bar.update(1)
        time.sleep(0.001)
    bar.close()
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert "\r" not in err and 2 <= len(lines) <= 12, lines
    assert lines[-1].startswith(f"gram sst: {bar.n}/1000 tiles") and "1 evals/s" in lines[-1]


@pytest.mark.shared_data
def test_gram_prints_its_timing_summary_without_progress_and_quiet_silences_it(tmp_path):
    corpus = corpus_store_of(tmp_path / "corpus.zarr", num_trees(40), 64)
    argv = ["gram", "--corpus", str(corpus), "--kernel", '{"kind": "sst", "lam": 0.4}', "--cluster", "sequential",
            "--no-progress"]
    r = subprocess.run(GRAMTILE + argv + ["--out", str(tmp_path / "a.zarr")], capture_output=True, text=True)
    assert r.returncode == 0 and "tile(s) computed this run" in r.stderr and "\r" not in r.stderr
    r = subprocess.run(GRAMTILE + ["--quiet"] + argv + ["--out", str(tmp_path / "b.zarr")], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stderr == ""
    r = subprocess.run(GRAMTILE + argv + ["--out", str(tmp_path / "c.zarr"), "-q"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == "" and "tiles done" in r.stdout  # the result line stays on stdout
    # without --no-progress and without a terminal: plain lines, no carriage returns
    r = subprocess.run(GRAMTILE + argv[:-1] + ["--out", str(tmp_path / "d.zarr")], capture_output=True, text=True)
    assert r.returncode == 0 and "\r" not in r.stderr


@pytest.mark.shared_data
@pytest.mark.timeout(300)
def test_verbose_adds_the_plan_of_prepare_gram_and_evaluate(tmp_path):
    """-v says what was chosen: the store and shard size of prepare, the tile and the tiles to
    compute of gram, the learner, splits and grid of evaluate; without it none of that is printed."""
    trees = tmp_path / "trees.dat"
    lines = (require_data("trec_qc_num_constituency") / "NUM_train.dat").read_text().splitlines(keepends=True)
    trees.write_text("".join([ln for ln in lines if not ln.startswith("-1")][:15] +
                             [ln for ln in lines if ln.startswith("-1")][:15]))
    steps = [["prepare", "--input", str(trees), "--format", "svmlighttk", "--out", str(tmp_path / "c.zarr"),
              "--shard-size", "8"],
             ["gram", "--corpus", str(tmp_path / "c.zarr"), "--kernel", '{"kind": "sst", "lam": 0.4}', "--out",
              str(tmp_path / "g.zarr"), "--cluster", "sequential", "--tile", "16"],
             ["evaluate", "--gram", str(tmp_path / "g.zarr"), "--folds", "2", "--C", "1"]]
    want = ["prepare: " + str(trees) + " (svmlighttk) -> " + str(tmp_path / "c.zarr") + ", a new store, shards of 8",
            "K 30 x 30 symmetric float64, tile 16 (default for this memory:", "; 3 of 3 tiles to compute; path auto",
            "learner svm reading kernel, task classification; 2 split(s) of 15/15 training examples; 1 grid point"]
    for argv, line in zip(steps, [want[0], want[1], want[3]], strict=True):
        r = subprocess.run(GRAMTILE + ["-v", *argv, "--no-progress"], capture_output=True, text=True, timeout=240)
        assert r.returncode == 0, r.stderr
        assert line in r.stderr, (line, r.stderr)
        if argv[0] == "gram":
            assert want[2] in r.stderr, r.stderr
    r = subprocess.run(GRAMTILE + [*steps[2], "--no-progress"], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0 and "learner svm reading" not in r.stderr and "| svm |" in r.stdout, r.stderr


def test_quiet_and_verbose_set_the_gramtile_logger_level(tmp_path, capsys):
    for flags, level in ((["--verbose"], logging.DEBUG), ([], logging.INFO), (["-q"], logging.WARNING)):
        assert main([*flags, "status", str(tmp_path / "nothing.zarr")]) == 2
        assert log.level == level
    stream = io.StringIO()
    h = logging.StreamHandler(stream)
    log.addHandler(h)
    try:
        main(["-q", "evaluate", "--gram", str(tmp_path / "g.zarr"), "--seed", "1"])
    finally:
        log.removeHandler(h)
    assert "--seed is deprecated" in stream.getvalue()  # warnings pass --quiet


def test_the_command_table_says_what_each_command_module_says():
    from gramtile.workflows.cli import COMMANDS

    p = build_parser()
    sub = next(a for a in p._actions if a.dest == "command")
    assert {a.dest: a.help for a in sub._choices_actions} == dict(COMMANDS)


#: the engine's libraries, which no help text needs (each takes 0.1-0.5 s to import)
ENGINE_LIBRARIES = ("zarr", "numba", "sklearn", "scipy", "dask", "spacy", "distributed", "nltk", "matplotlib")


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["-q", "--help"]])
def test_version_and_help_load_none_of_the_engine(argv):
    """`gramtile --version` and `--help` import neither a command's module nor the libraries of the
    engine (Zarr, Numba, scikit-learn, SciPy, Dask): they start at once (bench/cli_start.py)."""
    code = ("import sys\nfrom gramtile.workflows.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({ENGINE_LIBRARIES!r}))\n"
            "mods = sorted(m for m in sys.modules if m.startswith('gramtile.workflows.commands'))\n"
            "print('HEAVY', heavy, 'COMMANDS', mods)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "HEAVY [] COMMANDS []" in r.stdout, r.stdout
    # a command's parser loads that command's module only
    code2 = code.replace(repr(argv), repr(["status", "--help"]))
    r2 = subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True, timeout=120)
    loaded = r2.stdout.split("COMMANDS", 1)[1]
    assert "commands.status" in loaded and "commands.gram" not in loaded and "commands.evaluate" not in loaded


def _modules_after(statement: str) -> subprocess.CompletedProcess:
    """A new interpreter runs ``statement`` (SystemExit caught, its code printed), then prints the
    engine's libraries and the commands' run modules it has loaded."""
    code = ("import sys\n"
            f"try:\n    {statement}\nexcept SystemExit as e:\n    print('EXIT', e.code)\n"
            f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({ENGINE_LIBRARIES!r}))\n"
            "runs = sorted(m for m in sys.modules if m.startswith('gramtile.workflows.commands.') and "
            "(m.endswith('_run') or m.endswith('.running')))\n"
            "print('HEAVY', heavy, 'RUNS', runs)")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


@pytest.mark.timeout(150)
@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_a_commands_help_loads_none_of_the_engine(cmd):
    """`gramtile COMMAND --help` imports the command's options module only: neither its run module
    nor the engine's libraries (the choices it shows come from light modules), so it starts at once."""
    r = _modules_after(f"from gramtile.workflows.cli import main\n    main([{cmd!r}, '--help'])")
    assert r.returncode == 0, r.stderr
    assert f"usage: gramtile {cmd} " in r.stdout and "EXIT 0" in r.stdout, r.stdout[-500:]
    assert "HEAVY [] RUNS []" in r.stdout, r.stdout[-500:]


@pytest.mark.timeout(150)
def test_the_commands_package_loads_none_of_the_engine():
    r = _modules_after("import gramtile.workflows.commands")
    assert r.returncode == 0 and "HEAVY [] RUNS []" in r.stdout, (r.stdout, r.stderr)


def test_every_command_runs_its_run_module():
    """Each parser's ``func`` imports the command's run module, which exists and has ``run``."""
    import importlib

    from gramtile.workflows.commands import DeferredRun

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, cmd in sub.choices.items():
        func = cmd.get_default("func")
        assert isinstance(func, DeferredRun) and func.module == f"gramtile.workflows.commands.{name}_run", name
        assert callable(importlib.import_module(func.module).run), name


def test_the_choices_help_shows_are_the_registries():
    """The learner cards, task kinds and format names the options read from light modules say
    what the learners and the format table declare."""
    from gramtile.pipeline.learn import choices
    from gramtile.pipeline.learn.learners import registry
    from gramtile.pipeline.parsing.choices import FORMAT_NAMES
    from gramtile.pipeline.parsing.formats import FORMATS

    assert list(choices.LEARNERS) == list(registry.LEARNERS)
    for name, cls in registry.LEARNERS.items():
        card = choices.LEARNERS[name]
        assert (card.name, card.summary_line, card.task_kinds) == (cls.name, cls.summary_line, cls.task_kinds), name
        assert [(g.name, g.option, g.help, g.default, type(g.default), g.default_text) for g in card.params] == \
            [(p.name, p.option, p.help, p.default, p.kind, p.text(p.default)) for p in cls.params], name
    for task in choices.TASKS:
        assert choices.names_for_task(task) == registry.names_for_task(task)
    assert tuple(FORMATS) == FORMAT_NAMES


@pytest.mark.timeout(300)
def test_train_shows_its_selection_progress_and_no_progress_hides_it(tmp_path):
    """A grid makes ``train`` select by inner cross-validation: its fits show the progress line,
    which --no-progress removes (as in evaluate), while the result line stays."""
    demo = Path(__file__).resolve().parents[2] / "workflows" / "data" / "demo.tsv"
    argv = ["train", "--input", str(demo), "--format", "tsv", "--kernel", '{"kind": "bow"}', "--C", "0.1,1"]
    shown = subprocess.run(GRAMTILE + argv + ["--out", str(tmp_path / "a")], capture_output=True, text=True,
                           timeout=240)
    hidden = subprocess.run(GRAMTILE + argv + ["--out", str(tmp_path / "b"), "--no-progress"], capture_output=True,
                            text=True, timeout=240)
    assert shown.returncode == 0 and hidden.returncode == 0, (shown.stderr, hidden.stderr)
    assert "6/6 fits (100%)" in shown.stderr, shown.stderr
    assert "fits (" not in hidden.stderr and "model written to" in hidden.stderr, hidden.stderr
