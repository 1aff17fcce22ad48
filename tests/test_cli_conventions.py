"""CLI conventions: one meaning per flag with deprecated old spellings, help without
reStructuredText markup, the `gramtile` logger with --quiet / --verbose, one progress line every
few seconds without a TTY, the timing summary with --no-progress. Real stores, real runs."""
import io
import logging
import subprocess
import sys

import pytest
from conftest import corpus_store_of, num_trees

from gramtile.pipeline.progress import LineProgress, log, progress_bar
from gramtile.workflows.cli import build_parser, main

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


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["-q", "--help"]])
def test_version_and_help_load_none_of_the_engine(argv):
    """`gramtile --version` and `--help` import neither a command's module nor the libraries of the
    engine (Zarr, Numba, scikit-learn, SciPy, Dask): they start at once (bench/cli_start.py)."""
    code = ("import sys\nfrom gramtile.workflows.cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'zarr', 'numba', 'sklearn', 'scipy', 'dask', "
            "'spacy', 'distributed'})\n"
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
