"""Services for the ``cluster`` tests: a real single-node SLURM and a real S3-protocol server.

The scripts in ``tests/cluster/services/`` bring each service up on 127.0.0.1 (as root, on a
fresh Debian machine: ``make cluster-services``, run by ``make test``) and write what a client
needs into ``$GRAMTILE_SERVICES/<name>.env`` (``KEY=VALUE`` lines; default folder
``/tmp/gramtile-services``); ``tests/cluster/services/down.sh`` stops them by PID.

Every test here carries the marker ``cluster`` (set below) and asks for its service with
:func:`service`: where the service is not running the test is skipped with the reason, unless
``GRAMTILE_REQUIRE_CLUSTER=1`` (set by CI), where it fails, so that a CI run whose services did
not come up cannot pass for one that tested them.
"""
import os
from pathlib import Path

import pytest

SERVICES = Path(os.environ.get("GRAMTILE_SERVICES", "/tmp/gramtile-services"))
REQUIRE_CLUSTER = os.environ.get("GRAMTILE_REQUIRE_CLUSTER") == "1"
HERE = Path(__file__).resolve().parent


def service(name: str) -> dict:
    """The settings of running service ``name`` (``slurm``, ``s3``) from its ``.env`` file.

    Skips the test (fails it under ``GRAMTILE_REQUIRE_CLUSTER=1``) when the service is not up.
    """
    env = SERVICES / f"{name}.env"
    if not env.is_file():
        why = (f"the {name} service is not running ({env} missing); start it as root with "
               "`make cluster-services`")
        if REQUIRE_CLUSTER:
            pytest.fail(why + " (GRAMTILE_REQUIRE_CLUSTER=1)", pytrace=False)
        pytest.skip(why)
    out = {}
    for line in env.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def pytest_collection_modifyitems(config, items):
    """Every test under tests/cluster is a ``cluster`` test."""
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.cluster)
