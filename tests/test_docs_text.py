"""What users read speaks of the product, not of the project's history.

The README, every page of docs/ (the documentation site) and the shipped workflow files cite
measurements by their bench script or BENCHMARKS.md topic and by date, never by an issue or a
work session's number.
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "workflows").glob("*.yaml")])

# "issue 19", "issues 15, 18", "session 7", "seventh session", "Issue 15:" (case-insensitive)
_ORDINALS = "first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
HISTORY = re.compile(rf"\b(issues? \d+|sessions? \d+|(?:{_ORDINALS}) session)\b", re.IGNORECASE)


def history_refs(text: str) -> list[str]:
    """Each line of ``text`` that names an issue or a session, with its line number."""
    return [f"{n}: {line.strip()}" for n, line in enumerate(text.splitlines(), 1) if HISTORY.search(line)]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_no_issue_or_session_references(page):
    assert history_refs(page.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("text", ["rerun on 2026-12-02 (issue 19)", "BENCHMARKS.md, issue 15, session 7",
                                  "## Learning at scale (issues 15, 18; seventh session)", "Session 10 turned it off"])
def test_the_pattern_finds_history(text):
    assert history_refs(text) == [f"1: {text}"]


def test_the_pattern_spares_the_product():
    assert history_refs("an open issue of scikit-learn; a shell session on real data; since 2026-12") == []


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
