"""Fixtures of the server tests: ``node_clients``, the real JavaScript clients
(tests/server/node_helpers.py) installed once a session; ``redis_url`` and
``postgres_dsn``, the test servers' (the test is skipped without one, or fails
under CI: tests/server/redis_helpers.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.server.node_helpers import CLIENTS, NPM_PACKAGES
from tests.server.redis_helpers import postgres_dsn_or_skip, redis_url_or_skip


def _package_name(spec: str) -> str:
    return spec.rsplit("@", 1)[0] if spec.rfind("@") > 0 else spec


@pytest.fixture(scope="session")
def node_clients(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the packages' node_modules and the client scripts
    beside it: ``$PROCESSION_NODE_CLIENTS`` when set (what it lacks is
    installed there), else a temporary directory, once per session."""
    given = os.environ.get("PROCESSION_NODE_CLIENTS")
    where = Path(given) if given else tmp_path_factory.mktemp("npm-clients")
    missing = [
        spec
        for spec in NPM_PACKAGES
        if not (where / "node_modules" / _package_name(spec)).exists()
    ]
    if missing:
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(where),
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                *missing,
            ],
            check=True,
            timeout=600,
        )
    for script in CLIENTS.glob("*.mjs"):
        shutil.copy(script, where / script.name)
    return where


@pytest.fixture
def redis_url() -> str:
    """The test Redis server's URL; skips (fails under CI) without one."""
    return redis_url_or_skip()


@pytest.fixture
def postgres_dsn() -> str:
    """The test PostgreSQL server's DSN (replicas on one database); skips
    (fails under CI) without one."""
    return postgres_dsn_or_skip()
