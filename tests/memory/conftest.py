"""Fixtures of the memory tests: ``backend`` (a storage maker, once per
backend), ``storage`` (one storage of it) and ``postgres_dsn`` (the test
server's). See memory_helpers.py."""

from __future__ import annotations

import pathlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator

import pytest
import trio

from procession.memory import MemoryStorage, PostgresStorage, SqliteStorage
from tests.memory.memory_helpers import (
    BACKENDS,
    SQLITE_SLOW,
    Backend,
    PrivatePostgres,
    admin_connection,
    postgres_dsn_or_skip,
)


@pytest.fixture(params=BACKENDS)
def backend(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path
) -> Iterator[Backend]:
    """A storage maker for each backend; every storage it made is closed after
    the test (and a PostgreSQL test's schema dropped)."""
    name: str = request.param
    schema = None
    if name == "sqlite-file":
        path = tmp_path / "memory.db"
        made = Backend(
            name,
            lambda **o: SqliteStorage(path, **o),
            SQLITE_SLOW,
        )
    elif name == "sqlite-memory":
        # ":memory:" lives in one connection: every storage of the test is the
        # same object, so all of them see one database.
        shared = SqliteStorage(":memory:")
        made = Backend(name, lambda **o: shared, SQLITE_SLOW)
    else:
        dsn = postgres_dsn_or_skip()
        schema = f"t_{uuid.uuid4().hex[:12]}"
        made = Backend(
            name,
            lambda **o: PostgresStorage(dsn, schema_name=schema, **o),
            "SELECT pg_sleep(60)",
        )
    yield made
    for storage in made.opened:
        trio.run(storage.aclose)
    if schema is not None:
        with admin_connection() as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def storage(backend: Backend) -> MemoryStorage:
    """One storage of each backend."""
    return backend()


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """A started PostgreSQL server of the test's own, which it may stop and
    start; stopped and removed after the test."""
    # Not tmp_path: the server runs as another user when the tests run as
    # root, and pytest makes its temporary directories private (0700).
    root = pathlib.Path(tempfile.mkdtemp(prefix="procession-pg-"))
    try:
        server = PrivatePostgres.create(root)
        server.start_sync()
        yield server
        server.stop_sync()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_dsn() -> str:
    """The test PostgreSQL server's DSN; skips (fails under CI) without one."""
    return postgres_dsn_or_skip()
