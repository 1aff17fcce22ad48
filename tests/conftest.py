"""Shared test helpers: where the real data lives.

The data sets sit beside the repository in ``../shared/data`` and are never copied into it.
A missing data set is a hard failure, not a skip: a test that silently skips cannot fail.
"""
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def require_data(name: str) -> Path:
    """Path of data set ``name`` under :data:`SHARED_DATA`; fails the test if it is missing."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.fail(f"data set {name!r} not found at {path}; the tests need ../shared/data beside the repository",
                    pytrace=False)
    return path


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The root of the shared data sets (fails when it is missing)."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared data directory not found at {SHARED_DATA}", pytrace=False)
    return SHARED_DATA
