"""What users read speaks of the product, not of the project's history.

The README and every page of docs/ (the documentation site) cite measurements by their bench
script or BENCHMARKS.md topic and by date, never by an issue or a work session's number.
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])

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
