"""What only one backend does: SQLite's WAL mode, lock and open errors;
PostgreSQL's DSN secrecy, missing driver and unreachable server."""

from __future__ import annotations

import logging
import pathlib
import sqlite3
import sys

import pytest

from procession import ConfigurationError
from procession.memory import (
    PostgresStorage,
    SqliteStorage,
    StorageError,
    StorageLockedError,
    StorageUnavailableError,
)
from procession.messages import Message

pytestmark = pytest.mark.procession_real_clock


# --- SQLite ------------------------------------------------------------------------


async def test_a_file_is_in_wal_mode(tmp_path: pathlib.Path) -> None:
    """Readers in other processes never block the writer, nor it them."""
    storage = SqliteStorage(tmp_path / "m.db")
    await storage.save_turn("t", "alice", [Message.user("hi")])
    with sqlite3.connect(tmp_path / "m.db") as other:
        assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        other.execute("BEGIN")
        assert other.execute("SELECT count(*) FROM procession_messages").fetchone() == (
            1,
        )
        # The writer goes on while the other connection holds its read snapshot.
        await storage.save_turn("t", "alice", [Message.user("again")])
        other.execute("ROLLBACK")
    await storage.aclose()


async def test_a_locked_file_is_a_typed_error_and_nothing_is_written(
    tmp_path: pathlib.Path,
) -> None:
    path = tmp_path / "m.db"
    storage = SqliteStorage(path, busy_timeout=0.05)
    await storage.save_turn("t", "alice", [Message.user("first")])
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")  # another process writing, for a long time
    try:
        with pytest.raises(
            StorageLockedError, match=r"stayed locked .* 0\.05 s"
        ) as info:
            await storage.save_turn("t", "alice", [Message.user("blocked")])
        assert isinstance(info.value, StorageUnavailableError)
        assert isinstance(info.value.__cause__, sqlite3.OperationalError)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert [m.text for m in await storage.list_messages("t", "alice")] == ["first"]
    await storage.aclose()


async def test_a_file_that_cannot_be_opened_is_unavailable(
    tmp_path: pathlib.Path,
) -> None:
    storage = SqliteStorage(tmp_path / "no" / "such" / "dir" / "m.db")
    with pytest.raises(StorageUnavailableError, match="cannot be used: unable to open"):
        await storage.list_threads("alice")
    await storage.aclose()


def test_the_sqlite_repr_names_the_path() -> None:
    assert repr(SqliteStorage(":memory:")) == "SqliteStorage(':memory:')"


# --- PostgreSQL ---------------------------------------------------------------------

SECRET = "hunter2-do-not-print"


def _everything_said(error: BaseException, caplog: pytest.LogCaptureFixture) -> str:
    said = [str(error), repr(error), caplog.text]
    cause = error.__cause__
    while cause is not None:
        said += [str(cause), repr(cause)]
        cause = cause.__cause__
    return "\n".join(said)


async def test_an_unreachable_server_is_unavailable_and_keeps_the_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    # Port 1 on loopback: nothing listens there, the refusal is immediate.
    storage = PostgresStorage(
        f"postgresql://alice:{SECRET}@127.0.0.1:1/memory", connect_timeout=2
    )
    assert SECRET not in repr(storage)
    assert (
        repr(storage) == "<PostgresStorage PostgreSQL at 127.0.0.1:1/memory as alice>"
    )
    with pytest.raises(
        StorageUnavailableError, match=r"cannot connect to PostgreSQL at 127\.0\.0\.1:1"
    ) as info:
        await storage.list_threads("alice")
    assert SECRET not in _everything_said(info.value, caplog)
    await storage.aclose()


async def test_a_wrong_password_is_unavailable_and_not_printed(
    caplog: pytest.LogCaptureFixture, postgres_dsn: str
) -> None:
    import psycopg

    caplog.set_level(logging.DEBUG)
    storage = PostgresStorage(
        psycopg.conninfo.make_conninfo(postgres_dsn, password=SECRET)
    )
    with pytest.raises(
        StorageUnavailableError, match="password authentication failed"
    ) as raised:
        await storage.save_turn("t", "alice", [Message.user("hi")])
    assert SECRET not in _everything_said(raised.value, caplog)
    assert SECRET not in repr(storage)
    await storage.aclose()


def test_the_real_password_is_not_in_the_repr(postgres_dsn: str) -> None:
    import psycopg

    password = str(psycopg.conninfo.conninfo_to_dict(postgres_dsn)["password"])
    assert password not in repr(PostgresStorage(postgres_dsn))


def test_a_missing_driver_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails
    with pytest.raises(
        ConfigurationError, match=r"pip install 'procession\[postgres\]'"
    ):
        PostgresStorage("postgresql://localhost/db")


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"schema_name": 'x"; DROP TABLE y; --'}, "not a plain SQL identifier"),
        ({"pool_size": 0}, r"pool_size=0; it must be >= 1"),
    ],
)
def test_bad_postgres_options_are_configuration_errors(
    options: dict[str, object], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        # Deliberately the wrong type: the error is what is tested.
        PostgresStorage("postgresql://localhost/db", **options)  # type: ignore[arg-type]


def test_storage_errors_are_procession_errors() -> None:
    assert issubclass(StorageLockedError, StorageUnavailableError)
    assert issubclass(StorageUnavailableError, StorageError)
    assert not issubclass(StorageUnavailableError, OSError)
