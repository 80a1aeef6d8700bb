"""``SqliteStorage``: memory in an embedded SQLite database (stdlib ``sqlite3``).

One connection per storage, used by one worker thread at a time (a
``trio.CapacityLimiter(1)``). Why not a connection per call: a ``":memory:"``
database lives and dies with its one connection, and SQLite has a single
writer anyway, so more connections would only queue on its file lock instead
of on our limiter (where waiting is cancellable). The limiter is released only
when the worker thread has really finished, so an abandoned call never runs
beside the next one.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, TypeVar

import trio

from .._errors import (
    StorageError,
    StorageLockedError,
    StorageUnavailableError,
)
from ..messages import Message
from . import _runs, _sql
from ._backend import SqlBackend
from ._values import Thread

__all__ = ["SqliteStorage", "sqlite_schema"]

T = TypeVar("T")
_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
# VM instructions between two looks at the cancel flag (about 10 µs of work).
_PROGRESS_EVERY = 1000


def sqlite_schema() -> _sql.Schema:
    """Schema version 3 in SQLite's types (JSON as TEXT, ISO-8601 UTC
    timestamps of fixed width, so text order is time order)."""
    return _sql.Schema(
        version=_sql.SCHEMA_VERSION,
        create=(
            "CREATE TABLE {version} (version INTEGER NOT NULL)",
            "CREATE TABLE {resources} (id TEXT PRIMARY KEY, working_memory TEXT, "
            "metadata TEXT, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
            "CREATE TABLE {threads} (id TEXT PRIMARY KEY, "
            "resource_id TEXT NOT NULL, title TEXT, metadata TEXT, "
            "created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
            "CREATE INDEX procession_threads_by_resource "
            "ON {threads} (resource_id, updated_at)",
            "CREATE TABLE {messages} (id TEXT PRIMARY KEY, thread_id TEXT NOT NULL "
            "REFERENCES {threads} (id) ON DELETE CASCADE, "
            "resource_id TEXT NOT NULL, role TEXT NOT NULL, type TEXT NOT NULL, "
            "content TEXT NOT NULL, created_at TEXT NOT NULL)",
            "CREATE INDEX procession_messages_by_thread "
            "ON {messages} (thread_id, created_at)",
            *_RUN_TABLES,
            _LEASES,
            *_DURABLE,
        ),
        upgrades={1: (*_RUN_TABLES, _LEASES), 2: _DURABLE},
    )


# Schema version 2: runs that wait for a person, the decisions on them, and
# who holds each thread for a run (the lease, across processes).
_RUN_TABLES: Final = (
    "CREATE TABLE {runs} (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, "
    "resource_id TEXT, thread_id TEXT, status TEXT NOT NULL, snapshot TEXT, "
    "pending TEXT, epoch INTEGER NOT NULL, created_at TEXT NOT NULL, "
    "updated_at TEXT NOT NULL)",
    "CREATE INDEX procession_runs_waiting "
    "ON {runs} (agent_id, status, resource_id, thread_id)",
    "CREATE TABLE {decisions} (run_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, "
    "decision TEXT NOT NULL, reason TEXT, data TEXT, decided_by TEXT, "
    "decided_at TEXT NOT NULL, PRIMARY KEY (run_id, tool_call_id))",
)

_LEASES = _sql.LEASES_TABLE.replace("{timestamp}", "TEXT")

# Schema version 3: durable runs (their lease, attempt, host; their tool calls).
_DURABLE: Final = _runs.durable_statements(json="TEXT", timestamp="TEXT")


class _Abandoned(Exception):
    """The caller was cancelled before its worker thread began; never seen."""


class _Call:
    """One storage call's cancel flag, shared with its worker thread."""

    __slots__ = ("abandoned",)

    def __init__(self) -> None:
        self.abandoned = False


class _Dialect:
    """SQLite's side of ``_sql.Dialect``."""

    for_update = ""  # BEGIN IMMEDIATE already excludes every other writer
    seq = "rowid"

    def __init__(self, where: str, current: Callable[[], _Call | None]) -> None:
        self.where = where
        self._current = current

    def sql(self, template: str) -> str:
        return template.format(
            version="procession_schema",
            resources="procession_resources",
            threads="procession_threads",
            messages="procession_messages",
            runs="procession_runs",
            tool_runs="procession_tool_runs",
            decisions="procession_tool_decisions",
            leases="procession_thread_leases",
        )

    def timestamp(self, moment: _dt.datetime) -> str:
        aware = moment if moment.tzinfo else moment.replace(tzinfo=_dt.UTC)
        return aware.astimezone(_dt.UTC).strftime(_FORMAT)

    def read_timestamp(self, value: Any) -> _dt.datetime:
        return _dt.datetime.strptime(value, _FORMAT).replace(tzinfo=_dt.UTC)

    def json(self, value: Any) -> str:
        return _sql.dumps(value)

    def read_json(self, value: Any) -> Any:
        return json.loads(value)

    @contextlib.contextmanager
    def read(self, conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("BEGIN")
        try:
            yield
        finally:
            if conn.in_transaction:  # nothing to keep: one snapshot, then done
                conn.execute("ROLLBACK")

    @contextlib.contextmanager
    def write(self, conn: sqlite3.Connection) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            call = self._current()
            if call is not None and call.abandoned:
                # Cancelled before the commit: nothing of it may land.
                raise sqlite3.OperationalError("interrupted")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def schema_lock(self, conn: sqlite3.Connection) -> None:
        pass  # BEGIN IMMEDIATE is the lock

    def has_version_table(self, conn: sqlite3.Connection) -> bool:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' "
            "AND name = 'procession_schema'"
        ).fetchone()
        return row is not None


class SqliteStorage(SqlBackend):
    """Conversation memory in a SQLite database file (or ``":memory:"``).

    Args:
        path: the database file (created if missing), or ``":memory:"`` for a
            private in-process database that ends with ``aclose()``.
        busy_timeout: seconds to wait for another connection's lock (another
            process writing the same file) before ``StorageLockedError``. It is
            SQLite's own busy timeout: a worker thread waits inside the driver
            and cannot be cancelled by trio sooner than this.

    A file is put in WAL mode, so readers in other processes never block the
    writer nor it them. Queries run in a worker thread
    (``trio.to_thread.run_sync``); a cancelled call abandons its thread and
    interrupts the connection (``sqlite3.Connection.interrupt``), so its
    query stops and its transaction rolls back. The tables are created on
    first use, or by ``migrate()``.
    """

    def __init__(
        self, path: str | os.PathLike[str] = ":memory:", *, busy_timeout: float = 5.0
    ) -> None:
        self.path = os.fspath(path)
        self.busy_timeout = busy_timeout
        self._schema = sqlite_schema()
        self._dialect = _Dialect(repr(self.path), lambda: self._running)
        self._conn: sqlite3.Connection | None = None
        self._schema_checked = False
        self._closed = False
        self._limiter = trio.CapacityLimiter(1)
        self._running: _Call | None = None
        self._abandon_lock = threading.Lock()
        # A test hook: called with the connection inside save_turn's
        # transaction, just before it commits.
        self._before_commit: Callable[[Any], None] | None = None

    def __repr__(self) -> str:
        return f"SqliteStorage({self.path!r})"

    @property
    def in_memory(self) -> bool:
        """Whether the database lives in this process's memory (``":memory:"``,
        or a ``file:`` URI that says ``mode=memory``): gone with it."""
        return self.path == ":memory:" or (
            self.path.startswith("file:") and "mode=memory" in self.path
        )

    # ----------------------------------------------------------- the thread

    async def _run(
        self, fn: Callable[[sqlite3.Connection], T], *, migrate: bool = False
    ) -> T:
        call = _Call()

        def work() -> T:
            with self._abandon_lock:
                if call.abandoned:
                    raise _Abandoned
                self._running = call
            try:
                return fn(self._connection(migrate=migrate))
            except sqlite3.Error as exc:
                raise self._translate(exc) from exc
            finally:
                self._running = None

        try:
            return await trio.to_thread.run_sync(
                work, abandon_on_cancel=True, limiter=self._limiter
            )
        except trio.Cancelled:
            self._abandon(call)
            raise

    def _abandon(self, call: _Call) -> None:
        with self._abandon_lock:
            call.abandoned = True
            if self._running is call and self._conn is not None:
                self._conn.interrupt()

    def _progress(self) -> int:
        call = self._running
        return 1 if call is not None and call.abandoned else 0

    def _connection(self, *, migrate: bool) -> sqlite3.Connection:
        if self._closed:
            raise StorageUnavailableError(f"{self!r} is closed")
        if self._conn is None:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout,
                isolation_level=None,  # we BEGIN and COMMIT ourselves
                check_same_thread=False,  # one thread at a time, by the limiter
            )
            try:
                conn.execute("PRAGMA foreign_keys = ON")
                if self.path != ":memory:":
                    conn.execute("PRAGMA journal_mode = WAL")
                conn.set_progress_handler(self._progress, _PROGRESS_EVERY)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        if migrate or not self._schema_checked:
            _sql.ensure_schema(self._conn, self._dialect, self._schema, migrate=migrate)
            self._schema_checked = True
        return self._conn

    def _translate(self, exc: sqlite3.Error) -> StorageError:
        name = getattr(exc, "sqlite_errorname", "")
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return StorageLockedError(
                f"the SQLite database {self.path!r} stayed locked by another "
                f"connection for {self.busy_timeout} s ({exc}); nothing was "
                f"written: retry, or find the process holding the file"
            )
        if name.startswith(("SQLITE_CANTOPEN", "SQLITE_IOERR", "SQLITE_FULL")):
            return StorageUnavailableError(
                f"the SQLite database {self.path!r} cannot be used: {exc}"
            )
        return StorageError(f"the SQLite database {self.path!r} failed: {exc}")

    # ------------------------------------------------------------ the API

    async def migrate(self) -> None:
        """Create the tables, or upgrade them from an older schema version, in
        one transaction. Checkpoints; cancelled, it rolls back."""
        await self._run(lambda conn: None, migrate=True)

    async def save_turn(
        self, thread_id: str, resource_id: str, messages: Sequence[Message]
    ) -> Thread:
        """See ``MemoryStorage.save_turn``: one ``BEGIN IMMEDIATE`` transaction.
        Checkpoints; cancelled before its commit, it writes nothing."""
        d, now, hook, batch = self._dialect, _now(), self._before_commit, list(messages)
        return await self._run(
            lambda c: _sql.save_turn(c, d, thread_id, resource_id, batch, now, hook)
        )

    async def aclose(self) -> None:
        """Close the connection once the running call (if any) has finished; a
        ``":memory:"`` database is gone then. Idempotent. Checkpoints; not
        cancellable while it waits for that call."""

        def close() -> None:
            self._closed = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        await trio.to_thread.run_sync(close, limiter=self._limiter)


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)
