"""The SQL both backends share: the schema, its version check, and every query,
as plain functions over a DB-API connection (sqlite3 or psycopg 3).

These functions block; the backends run them in a worker thread. A ``Dialect``
says what differs between the two databases (placeholders, column types, how a
transaction starts, how a timestamp or a JSON value crosses the driver).

The schema (version 3), with Mastra's column names in snake_case::

    procession_schema    (version)
    procession_resources (id, working_memory, metadata, created_at, updated_at)
    procession_threads   (id, resource_id, title, metadata, created_at,
                          updated_at)
    procession_messages  (id, thread_id, resource_id, role, type, content,
                          created_at)
    procession_runs      (id, agent_id, resource_id, thread_id, status,
                          snapshot, pending, epoch, created_at, updated_at,
                          durable, owner, lease_until, attempt, host)
    procession_tool_decisions (run_id, tool_call_id, decision, reason, data,
                          decided_by, decided_at)
    procession_thread_leases (thread_id, holder, expires_at)
    procession_tool_runs (run_id, tool_call_id, state, ok, result, epoch,
                          started_at, finished_at)

Version 2 added the runs, the decisions and the thread leases (``_runs``:
runs waiting for a person; the leases: one run at a time on a thread, across
processes); version 3 the durable runs' columns and their tool records. An
older database is upgraded by ``migrate()``.

``content`` holds the whole ``MastraDBMessage`` JSON (``message_to_wire``), so
a message reads back exactly, keys this library does not model included; the
other columns repeat what queries filter and sort on. The tables are not
called ``mastra_*``: Mastra's own tables have camelCase columns, and a
database that already holds them must not be mistaken for ours.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import attrs

from .._errors import (
    MessageFormatError,
    SchemaVersionError,
    StorageError,
    ThreadOwnershipError,
)
from ..messages import Message, message_from_wire, message_to_wire
from ._values import Resource, Thread

__all__ = [
    "LEASES_TABLE",
    "SCHEMA_VERSION",
    "Dialect",
    "Schema",
    "acquire_lease",
    "create_thread",
    "ensure_schema",
    "get_resource",
    "get_thread",
    "list_messages",
    "list_threads",
    "release_lease",
    "renew_lease",
    "save_turn",
    "save_turn_rows",
    "update_working_memory",
]

SCHEMA_VERSION = 3
_TICK = _dt.timedelta(microseconds=1)
_THREAD_COLUMNS = "id, resource_id, title, metadata, created_at, updated_at"
_RESOURCE_COLUMNS = "id, working_memory, metadata, created_at, updated_at"


class Connection(Protocol):
    """The part of a DB-API connection used here (sqlite3 and psycopg agree)."""

    def execute(self, sql: Any, parameters: Any = ..., /) -> Any: ...


@attrs.frozen
class Schema:
    """A schema version: the statements that create it from nothing, and the
    upgrades that reach it (``upgrades[v]`` takes version ``v`` to ``v + 1``)."""

    version: int
    create: tuple[str, ...]
    upgrades: Mapping[int, tuple[str, ...]] = attrs.field(factory=dict)


class Dialect(Protocol):
    """What differs between SQLite and PostgreSQL."""

    where: str
    """How error messages name the database (a path, a host; never a password)."""
    for_update: str
    """The row-lock suffix of a SELECT (empty where a write transaction already
    excludes other writers)."""
    seq: str
    """The column that orders messages saved at the same instant."""

    def sql(self, template: str) -> str:
        """``template`` with ``?`` placeholders and ``{threads}``-style table
        names, in this dialect."""
        ...

    def timestamp(self, moment: _dt.datetime) -> Any: ...
    def read_timestamp(self, value: Any) -> _dt.datetime: ...
    def json(self, value: Any) -> Any: ...
    def read_json(self, value: Any) -> Any: ...

    def read(self, conn: Any) -> contextlib.AbstractContextManager[None]:
        """A transaction that sees one snapshot and takes no write lock."""
        ...

    def write(self, conn: Any) -> contextlib.AbstractContextManager[None]:
        """A transaction that excludes other writers of the rows it locks;
        commits on success, rolls back on any exception."""
        ...

    def schema_lock(self, conn: Any) -> None:
        """Inside ``write``: wait until no other process is creating or
        upgrading the schema."""
        ...

    def has_version_table(self, conn: Any) -> bool: ...


# ------------------------------------------------------------------ the schema


def ensure_schema(
    conn: Connection, d: Dialect, schema: Schema, *, migrate: bool
) -> None:
    """Create the tables if there are none; check their version otherwise.

    An older version is upgraded when ``migrate`` is true and raises
    ``SchemaVersionError`` (saying to run ``migrate()``) when it is not; a
    newer one always raises it."""
    with d.write(conn):
        d.schema_lock(conn)
        if not d.has_version_table(conn):
            for statement in schema.create:
                conn.execute(d.sql(statement))
            conn.execute(
                d.sql("INSERT INTO {version} (version) VALUES (?)"), (schema.version,)
            )
            return
        row = conn.execute(d.sql("SELECT version FROM {version}")).fetchone()
        found = int(row[0]) if row is not None else 0
        if found == schema.version:
            return
        if found > schema.version or not migrate:
            raise SchemaVersionError(found, schema.version, d.where)
        for version in range(found, schema.version):
            steps = schema.upgrades.get(version)
            if steps is None:
                raise SchemaVersionError(found, schema.version, d.where)
            for statement in steps:
                conn.execute(d.sql(statement))
        conn.execute(d.sql("UPDATE {version} SET version = ?"), (schema.version,))


# ------------------------------------------------------------------- reading


def _thread(d: Dialect, row: Sequence[Any]) -> Thread:
    return Thread(
        id=row[0],
        resource_id=row[1],
        title=row[2],
        metadata=d.read_json(row[3]) if row[3] is not None else None,
        created_at=d.read_timestamp(row[4]),
        updated_at=d.read_timestamp(row[5]),
    )


def _resource(d: Dialect, row: Sequence[Any]) -> Resource:
    return Resource(
        id=row[0],
        working_memory=row[1],
        metadata=d.read_json(row[2]) if row[2] is not None else None,
        created_at=d.read_timestamp(row[3]),
        updated_at=d.read_timestamp(row[4]),
    )


def _select_thread(
    conn: Connection, d: Dialect, thread_id: str, *, lock: bool = False
) -> Thread | None:
    suffix = d.for_update if lock else ""
    row = conn.execute(
        d.sql(f"SELECT {_THREAD_COLUMNS} FROM {{threads}} WHERE id = ?{suffix}"),
        (thread_id,),
    ).fetchone()
    return None if row is None else _thread(d, row)


def get_thread(
    conn: Connection, d: Dialect, thread_id: str, resource_id: str | None
) -> Thread | None:
    with d.read(conn):
        thread = _select_thread(conn, d, thread_id)
    if thread is not None and resource_id is not None:
        _check_owner(thread, resource_id)
    return thread


def list_threads(conn: Connection, d: Dialect, resource_id: str) -> list[Thread]:
    with d.read(conn):
        rows = conn.execute(
            d.sql(
                f"SELECT {_THREAD_COLUMNS} FROM {{threads}} WHERE resource_id = ? "
                f"ORDER BY updated_at DESC, id"
            ),
            (resource_id,),
        ).fetchall()
    return [_thread(d, row) for row in rows]


def list_messages(
    conn: Connection, d: Dialect, thread_id: str, resource_id: str, last: int | None
) -> list[Message]:
    if last is not None and last <= 0:
        return []
    with d.read(conn):
        thread = _select_thread(conn, d, thread_id)
        if thread is None:
            return []
        _check_owner(thread, resource_id)
        limit = "" if last is None else f" LIMIT {int(last)}"
        rows = conn.execute(
            d.sql(
                f"SELECT content, thread_id, resource_id FROM {{messages}} "
                f"WHERE thread_id = ? ORDER BY created_at DESC, {d.seq} DESC{limit}"
            ),
            (thread_id,),
        ).fetchall()
    messages = []
    for content, row_thread, row_resource in reversed(rows):
        message = message_from_wire(d.read_json(content))
        message.thread_id, message.resource_id = row_thread, row_resource
        messages.append(message)
    return messages


def get_resource(conn: Connection, d: Dialect, resource_id: str) -> Resource | None:
    with d.read(conn):
        row = conn.execute(
            d.sql(f"SELECT {_RESOURCE_COLUMNS} FROM {{resources}} WHERE id = ?"),
            (resource_id,),
        ).fetchone()
    return None if row is None else _resource(d, row)


def _check_owner(thread: Thread, resource_id: str) -> None:
    if thread.resource_id != resource_id:
        raise ThreadOwnershipError(thread.id, resource_id)


# ------------------------------------------------------------------- writing


def _ensure_resource(
    conn: Connection, d: Dialect, resource_id: str, now: _dt.datetime
) -> None:
    conn.execute(
        d.sql(
            "INSERT INTO {resources} (id, created_at, updated_at) VALUES (?, ?, ?) "
            "ON CONFLICT (id) DO NOTHING"
        ),
        (resource_id, d.timestamp(now), d.timestamp(now)),
    )


def _locked_thread(
    conn: Connection,
    d: Dialect,
    thread_id: str,
    resource_id: str,
    now: _dt.datetime,
    *,
    title: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Thread:
    """The thread, created for ``resource_id`` if new, row-locked until the
    transaction ends; another resource's thread raises."""
    thread = _select_thread(conn, d, thread_id, lock=True)
    if thread is None:
        _ensure_resource(conn, d, resource_id, now)
        # ON CONFLICT: another process may create the same thread meanwhile;
        # then we wait for its commit and read its row below.
        conn.execute(
            d.sql(
                f"INSERT INTO {{threads}} ({_THREAD_COLUMNS}) "
                f"VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING"
            ),
            (
                thread_id,
                resource_id,
                title,
                d.json(dict(metadata)) if metadata is not None else None,
                d.timestamp(now),
                d.timestamp(now),
            ),
        )
        thread = _select_thread(conn, d, thread_id, lock=True)
        assert thread is not None
    _check_owner(thread, resource_id)
    return thread


def create_thread(
    conn: Connection,
    d: Dialect,
    thread_id: str,
    resource_id: str,
    title: str | None,
    metadata: Mapping[str, Any] | None,
    now: _dt.datetime,
) -> Thread:
    with d.write(conn):
        return _locked_thread(
            conn, d, thread_id, resource_id, now, title=title, metadata=metadata
        )


def save_turn(
    conn: Connection,
    d: Dialect,
    thread_id: str,
    resource_id: str,
    messages: Sequence[Message],
    now: _dt.datetime,
    before_commit: Callable[[Any], None] | None = None,
) -> Thread:
    """One turn, in one transaction (see ``MemoryStorage.save_turn``).

    The thread's row lock (PostgreSQL) or the write lock (SQLite) orders two
    saves on one thread: the second places its new messages after the first's.
    ``before_commit(conn)`` runs last inside the transaction (a test hook)."""
    with d.write(conn):
        save_turn_rows(conn, d, thread_id, resource_id, messages, now)
        if before_commit is not None:
            before_commit(conn)
        return _select_thread(conn, d, thread_id) or _never()


def save_turn_rows(
    conn: Connection,
    d: Dialect,
    thread_id: str,
    resource_id: str,
    messages: Sequence[Message],
    now: _dt.datetime,
) -> None:
    """``save_turn``'s writes, inside a write transaction the caller holds
    (so a run's pause or end saves its messages with its own row)."""
    for message in messages:
        _check_storable(message)
    _locked_thread(conn, d, thread_id, resource_id, now)
    ids = [m.id for m in messages]
    owners = _message_threads(conn, d, ids)
    foreign = sorted(i for i, owner in owners.items() if owner != thread_id)
    if foreign:
        raise StorageError(
            f"message ids {foreign!r} are already saved in another thread; a "
            f"message belongs to one thread (give the new message a new id)"
        )
    shift = _shift(conn, d, thread_id, [m for m in messages if m.id not in owners])
    for message in messages:
        created = message.created_at
        if message.id not in owners:
            created = _aware(created) + shift
        _upsert_message(conn, d, message, thread_id, resource_id, created)
    conn.execute(
        d.sql("UPDATE {threads} SET updated_at = ? WHERE id = ?"),
        (d.timestamp(now), thread_id),
    )


# ------------------------------------------------------------- thread leases

LEASES_TABLE = (
    "CREATE TABLE {leases} (thread_id TEXT PRIMARY KEY, holder TEXT NOT NULL, "
    "expires_at {timestamp} NOT NULL)"
)
"""Schema version 2's lease table: who holds each thread for a run, until when."""


def acquire_lease(
    conn: Connection,
    d: Dialect,
    thread_id: str,
    holder: str,
    now: _dt.datetime,
    expires: _dt.datetime,
) -> bool:
    """Take the thread's lease for ``holder`` until ``expires`` if nobody
    holds it, it lapsed (its expiry is past ``now``) or ``holder`` has it
    already; True if taken. One statement: two processes never both win."""
    with d.write(conn):
        cursor = conn.execute(
            d.sql(
                "INSERT INTO {leases} AS l (thread_id, holder, expires_at) "
                "VALUES (?, ?, ?) ON CONFLICT (thread_id) DO UPDATE SET "
                "holder = excluded.holder, expires_at = excluded.expires_at "
                "WHERE l.expires_at <= ? OR l.holder = excluded.holder"
            ),
            (thread_id, holder, d.timestamp(expires), d.timestamp(now)),
        )
        return bool(cursor.rowcount == 1)


def renew_lease(
    conn: Connection, d: Dialect, thread_id: str, holder: str, expires: _dt.datetime
) -> bool:
    """Move ``holder``'s lease on the thread to ``expires``; False if it is
    not ``holder``'s any more (it lapsed and another took it)."""
    with d.write(conn):
        cursor = conn.execute(
            d.sql(
                "UPDATE {leases} SET expires_at = ? WHERE thread_id = ? AND holder = ?"
            ),
            (d.timestamp(expires), thread_id, holder),
        )
        return bool(cursor.rowcount == 1)


def release_lease(conn: Connection, d: Dialect, thread_id: str, holder: str) -> None:
    """Give ``holder``'s lease on the thread back (nothing if not its)."""
    with d.write(conn):
        conn.execute(
            d.sql("DELETE FROM {leases} WHERE thread_id = ? AND holder = ?"),
            (thread_id, holder),
        )


def _never() -> Thread:  # pragma: no cover - the row is locked by us
    raise StorageError("the thread vanished inside its own transaction")


def _message_threads(
    conn: Connection, d: Dialect, ids: Sequence[str]
) -> dict[str, str]:
    if not ids:
        return {}
    marks = ", ".join("?" for _ in ids)
    rows = conn.execute(
        d.sql(f"SELECT id, thread_id FROM {{messages}} WHERE id IN ({marks})"),
        tuple(ids),
    ).fetchall()
    return {row[0]: row[1] for row in rows}


def _shift(
    conn: Connection, d: Dialect, thread_id: str, new: Sequence[Message]
) -> _dt.timedelta:
    """How far to move the new messages so the earliest lands just after the
    thread's newest saved message (zero if it already does)."""
    if not new:
        return _dt.timedelta(0)
    row = conn.execute(
        d.sql("SELECT MAX(created_at) FROM {messages} WHERE thread_id = ?"),
        (thread_id,),
    ).fetchone()
    if row is None or row[0] is None:
        return _dt.timedelta(0)
    latest = d.read_timestamp(row[0])
    earliest = min(_aware(m.created_at) for m in new)
    return max(_dt.timedelta(0), latest + _TICK - earliest)


def _upsert_message(
    conn: Connection,
    d: Dialect,
    message: Message,
    thread_id: str,
    resource_id: str,
    created: _dt.datetime,
) -> None:
    wire = message_to_wire(
        attrs.evolve(
            message, created_at=created, thread_id=thread_id, resource_id=resource_id
        )
    )
    conn.execute(
        d.sql(
            "INSERT INTO {messages} "
            "(id, thread_id, resource_id, role, type, content, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
            "role = excluded.role, type = excluded.type, content = excluded.content"
        ),
        (
            message.id,
            thread_id,
            resource_id,
            message.role,
            message.type or "v2",
            d.json(wire),
            d.timestamp(created),
        ),
    )


def update_working_memory(
    conn: Connection, d: Dialect, resource_id: str, text: str, now: _dt.datetime
) -> Resource:
    with d.write(conn):
        _ensure_resource(conn, d, resource_id, now)
        conn.execute(
            d.sql(
                "UPDATE {resources} SET working_memory = ?, updated_at = ? WHERE id = ?"
            ),
            (text, d.timestamp(now), resource_id),
        )
        row = conn.execute(
            d.sql(f"SELECT {_RESOURCE_COLUMNS} FROM {{resources}} WHERE id = ?"),
            (resource_id,),
        ).fetchone()
    return _resource(d, row)


# ------------------------------------------------------------------- helpers


def _check_storable(message: Message) -> None:
    """Timestamps are stored in UTC with a four-digit year (SQLite sorts them
    as text); a ``created_at`` outside that range cannot be stored."""
    try:
        year = _aware(message.created_at).astimezone(_dt.UTC).year
    except OverflowError:
        year = 0
    if not 1000 <= year <= 9998:
        raise MessageFormatError(
            f"message {message.id!r} has created_at={message.created_at!r}; memory "
            f"stores times from the year 1000 to 9998 (UTC)"
        )


def _aware(moment: _dt.datetime) -> _dt.datetime:
    # Naive datetimes are taken as UTC, as MessageList does.
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=_dt.UTC)


def dumps(value: Any) -> str:
    """Compact JSON text (for the SQLite columns)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
