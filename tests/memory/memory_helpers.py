"""Helpers of the memory tests: the PostgreSQL test server and the storage
makers of each backend (the fixtures are in conftest.py).

Every storage test runs on SQLite (a file and ``":memory:"``) and on PostgreSQL.

PostgreSQL comes from ``PROCESSION_TEST_POSTGRES_DSN`` (``.ci/run`` starts a
private server with ``.ci/pg``; by hand: ``bash .ci/pg -- python -m pytest
tests/memory``). Without it the PostgreSQL cases are skipped with that reason,
except under CI (``CI=true``), where a missing DSN fails them. Each
PostgreSQL test gets its own schema, dropped afterwards.

These tests use worker threads and sockets, so they run on trio's real clock
(the ``procession_real_clock`` mark): a virtual clock would jump past every
deadline while a worker thread is busy.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from procession.memory import MemoryStorage

DSN_VARIABLE = "PROCESSION_TEST_POSTGRES_DSN"
BACKENDS = ["sqlite-file", "sqlite-memory", "postgres"]


def postgres_dsn() -> str:
    """The test server's DSN; skips (fails under CI) when there is none."""
    dsn = os.environ.get(DSN_VARIABLE)
    if dsn:
        return dsn
    if os.environ.get("CI") == "true":
        pytest.fail(
            f"CI=true but {DSN_VARIABLE} is not set: .ci/run starts PostgreSQL "
            f"with .ci/pg before the tests",
            pytrace=False,
        )
    pytest.skip(
        f"{DSN_VARIABLE} is not set; run `bash .ci/pg -- python -m pytest "
        f"tests/memory` to start a private PostgreSQL server for these tests"
    )


def admin_connection() -> Any:
    """A second, plain psycopg connection to the test server (autocommit)."""
    import psycopg

    return psycopg.connect(postgres_dsn(), autocommit=True)


@attrs.define
class Backend:
    """How a test makes storages of one backend, all on the same database."""

    name: str
    make: Callable[..., MemoryStorage]
    slow_statement: str
    """A statement that runs for many seconds unless it is cancelled."""
    opened: list[MemoryStorage] = attrs.Factory(list)

    def __call__(self, **options: Any) -> MemoryStorage:
        storage = self.make(**options)
        self.opened.append(storage)
        return storage


# Counts to ten billion: minutes of work unless interrupted.
SQLITE_SLOW = (
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c "
    "WHERE x < 10000000000) SELECT count(*) FROM c"
)
