"""What users read speaks of the product, not of the project's history.

The README, BENCHMARKS.md, every page of docs/ (the documentation site), the shipped workflow
files, the benchmark scripts (their docstrings are their --help), the help of every command and the docstrings of the installed package cite measurements
by their bench script or BENCHMARKS.md topic and by date, never by an issue or a work session's
number.
"""
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
import tomllib

from gramtile.workflows import cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", ROOT / "BENCHMARKS.md", *(ROOT / "docs").rglob("*.md"),
                *(ROOT / "workflows").glob("*.yaml"), *(ROOT / "bench").glob("*.py")])

# "issue 19", "issues 15, 18", "session 7", "seventh session", "Issue 15:", "this session",
# "the issue's target", "item 5a" (case-insensitive)
_ORDINALS = "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
HISTORY = re.compile(rf"\b(issues? \d+|sessions? \d+|(?:{_ORDINALS}|this|last|previous) session|the issue's"
                     rf"|items? \d+[a-z])\b", re.IGNORECASE)


def history_refs(text: str) -> list[str]:
    """Each line of ``text`` that names an issue or a session, with its line number."""
    return [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if HISTORY.search(line)]


def history_in(text: str) -> list[str]:
    """The references to an issue or a session in ``text`` once its lines are joined (help and
    docstrings wrap lines, and a reference may be split across two)."""
    return [m.group(0) for m in HISTORY.finditer(" ".join((text or "").split()))]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_no_issue_or_session_references(page):
    assert history_refs(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("text", ["rerun on 2026-12-02 (issue 19)", "BENCHMARKS.md, issue 15, session 7",
                                  "## Learning at scale (issues 15, 18; seventh session)", "Session 10 turned it off",
                                  "Changes this session: the fast exit", "as in the previous session",
                                  "So the issue's target is met", "**Landmark Gram and Nystroem, item 5b**"])
def test_the_pattern_finds_history(text):
    assert history_refs(text) == [f"1: {text}"]


def test_the_pattern_spares_the_product():
    assert history_refs("an open issue of scikit-learn; a shell session on real data; since 2026-12; "
                        "the sessions of previous runs; item 3 of the list; an issue's title") == []


def test_a_reference_split_across_two_lines_is_found():
    text = "as measured in session\n    7, and in issue\n 19 above"
    assert history_refs(text) == [] and history_in(text) == ["session 7", "issue 19"]


def _help(name, capsys) -> str:
    """``gramtile [NAME] --help`` as the command line prints it."""
    with pytest.raises(SystemExit) as stop:
        cli.main([*([name] if name else []), "--help"])
    out = capsys.readouterr().out
    assert stop.value.code == 0 and out.startswith(f"usage: gramtile{f' {name}' if name else ''} ")
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", [None, *cli.COMMANDS], ids=["gramtile", *cli.COMMANDS])
def test_no_issue_or_session_references_in_help(name, capsys):
    assert history_in(_help(name, capsys)) == []


def _shipped_packages() -> list[str]:
    """The packages the distribution ships (pyproject.toml): gramtile's subpackages come from the
    repository's top-level folders, so that pkgutil cannot find them under ``gramtile.__path__`` in
    an editable install."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"]


def _modules():
    """Every module of the installed package ``gramtile``, imported (``__main__`` modules run the
    command line when imported, and hold no docstring of their own)."""
    for name in _shipped_packages():
        package = importlib.import_module(name)
        yield package
        for info in pkgutil.iter_modules(package.__path__, f"{name}."):
            if not info.ispkg and not info.name.endswith(".__main__"):
                yield importlib.import_module(info.name)


def _documented(module):
    """``module`` and its public functions and classes (with their public methods and properties),
    each with its docstring."""
    yield module.__name__, module.__doc__
    for name, obj in vars(module).items():
        if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)) \
                or getattr(obj, "__module__", None) != module.__name__:
            continue
        yield f"{module.__name__}.{name}", obj.__doc__
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                member = getattr(member, "__func__", member)  # classmethod, staticmethod
                if not attr.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                    yield f"{module.__name__}.{name}.{attr}", member.__doc__


@pytest.mark.timeout(300)
def test_no_issue_or_session_references_in_docstrings():
    documented = [(name, doc) for module in _modules() for name, doc in _documented(module)]
    names = {name for name, _ in documented}
    assert {"gramtile", "gramtile.workflows.cli", "gramtile.kernels.spec", "gramtile.workflows.cli.main",
            "gramtile.pipeline.stores.gram_store.GramStore"} <= names
    assert [(name, refs) for name, doc in documented if (refs := history_in(doc))] == []


def _roles():
    import importlib.util

    spec = importlib.util.spec_from_file_location("sphinx_roles", ROOT / "docs" / "_ext" / "sphinx_roles.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_sphinx_roles_become_optional_cross_references():
    """The site's griffe extension: roles resolve in the docstring's scope; ``~`` shortens the title."""
    import griffe

    roles = _roles()
    pkg = griffe.Module("pkg")
    mod = griffe.Module("engine", parent=pkg)
    pkg.set_member("engine", mod)
    fn = griffe.Function("run", parent=mod)
    mod.set_member("run", fn)
    out = roles.rewrite("see :func:`run`, :class:`~pkg.stores.GramStore` and :mod:`other`", fn)
    assert out == ('see <autoref identifier="pkg.engine.run" optional><code>run()</code></autoref>, '
                   '<autoref identifier="pkg.stores.GramStore" optional><code>GramStore</code></autoref> and '
                   '<autoref identifier="other" optional><code>other</code></autoref>')
    assert ":func:" not in roles.rewrite(":meth:`Runtime.task_memory` and :func:`title <pkg.engine.run>`", fn)
