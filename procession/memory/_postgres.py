"""``PostgresStorage``: memory in PostgreSQL, for many processes sharing it.

The sync psycopg 3 driver with a ``psycopg_pool.ConnectionPool``, called
through ``trio.to_thread.run_sync``. (The async drivers, psycopg's and
asyncpg, need an asyncio loop and fail on trio.) psycopg is imported when a
storage is made, so ``procession.memory`` imports without it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Final, TypeVar
from urllib.parse import urlsplit

import trio

from .._errors import ConfigurationError, StorageError, StorageUnavailableError
from .._secrets import REDACTED, redact, register_secret
from ..messages import Message
from . import _runs, _sql
from ._backend import SqlBackend
from ._values import Thread

__all__ = ["PostgresStorage", "postgres_schema"]

T = TypeVar("T")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# One key for pg_advisory_xact_lock: "creating or upgrading procession's schema".
_SCHEMA_LOCK_KEY = 0x70726F63


def postgres_schema(*, own_schema: bool = False) -> _sql.Schema:
    """Schema version 3 in PostgreSQL's types; with ``own_schema``, it creates
    the PostgreSQL schema that holds the tables too.

    JSON, not JSONB: JSONB rewrites numbers (a float ``4.786337815060274e16``
    reads back as a different integer) and rejects ``\\u0000`` in strings, and
    a message must read back exactly. ``seq`` orders messages saved at the
    same instant."""
    return _sql.Schema(
        version=_sql.SCHEMA_VERSION,
        create=(
            *(["CREATE SCHEMA IF NOT EXISTS {schema}"] if own_schema else []),
            "CREATE TABLE {version} (version INTEGER NOT NULL)",
            "CREATE TABLE {resources} (id TEXT PRIMARY KEY, working_memory TEXT, "
            "metadata JSON, created_at TIMESTAMPTZ NOT NULL, "
            "updated_at TIMESTAMPTZ NOT NULL)",
            "CREATE TABLE {threads} (id TEXT PRIMARY KEY, "
            "resource_id TEXT NOT NULL, title TEXT, metadata JSON, "
            "created_at TIMESTAMPTZ NOT NULL, updated_at TIMESTAMPTZ NOT NULL)",
            "CREATE INDEX procession_threads_by_resource "
            "ON {threads} (resource_id, updated_at)",
            "CREATE TABLE {messages} (id TEXT PRIMARY KEY, thread_id TEXT NOT NULL "
            "REFERENCES {threads} (id) ON DELETE CASCADE, "
            "resource_id TEXT NOT NULL, role TEXT NOT NULL, type TEXT NOT NULL, "
            "content JSON NOT NULL, created_at TIMESTAMPTZ NOT NULL, "
            "seq BIGINT GENERATED ALWAYS AS IDENTITY)",
            "CREATE INDEX procession_messages_by_thread "
            "ON {messages} (thread_id, created_at, seq)",
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
    "resource_id TEXT, thread_id TEXT, status TEXT NOT NULL, snapshot JSON, "
    "pending JSON, epoch BIGINT NOT NULL, created_at TIMESTAMPTZ NOT NULL, "
    "updated_at TIMESTAMPTZ NOT NULL)",
    "CREATE INDEX procession_runs_waiting "
    "ON {runs} (agent_id, status, resource_id, thread_id)",
    "CREATE TABLE {decisions} (run_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, "
    "decision TEXT NOT NULL, reason TEXT, data JSON, decided_by TEXT, "
    "decided_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (run_id, tool_call_id))",
)

_LEASES = _sql.LEASES_TABLE.replace("{timestamp}", "TIMESTAMPTZ")

# Schema version 3: durable runs (their lease, attempt, host; their tool calls).
_DURABLE: Final = _runs.durable_statements(json="JSON", timestamp="TIMESTAMPTZ")


def _import_driver() -> tuple[Any, Any]:
    try:
        import psycopg
        import psycopg_pool
    except ImportError as exc:
        raise ConfigurationError(
            f"PostgresStorage needs psycopg 3 and psycopg-pool ({exc}); install "
            f"the extra: pip install 'procession[postgres]'"
        ) from None
    return psycopg, psycopg_pool


def _describe(
    dsn: str, conninfo_to_dict: Callable[[str], dict[str, Any]]
) -> tuple[str, str | None]:
    """Where the DSN points, for messages ("PostgreSQL at host:port/db as
    user"), and its password (to scrub from driver messages)."""
    try:
        info = conninfo_to_dict(dsn)
    except Exception:
        # Unparseable: say nothing of it beyond its scheme, which holds no secret.
        scheme = urlsplit(dsn).scheme if "://" in dsn else "key=value"
        return f"PostgreSQL (an unparseable {scheme} DSN)", None
    host = info.get("host") or info.get("hostaddr") or "localhost"
    where = (
        f"PostgreSQL at {host}:{info.get('port') or 5432}/{info.get('dbname') or ''}"
    )
    if info.get("user"):
        where += f" as {info['user']}"
    password = info.get("password")
    return where, str(password) if password else None


class _Dialect:
    """PostgreSQL's side of ``_sql.Dialect``."""

    for_update = " FOR UPDATE"
    seq = "seq"

    def __init__(self, where: str, schema_name: str | None, json_wrapper: Any) -> None:
        self.where = where
        self._schema = f'"{schema_name}"' if schema_name else "public"
        self._jsonb = json_wrapper

    def sql(self, template: str) -> str:
        s = self._schema
        return template.replace("?", "%s").format(
            schema=s,
            version=f"{s}.procession_schema",
            resources=f"{s}.procession_resources",
            threads=f"{s}.procession_threads",
            messages=f"{s}.procession_messages",
            runs=f"{s}.procession_runs",
            tool_runs=f"{s}.procession_tool_runs",
            decisions=f"{s}.procession_tool_decisions",
            leases=f"{s}.procession_thread_leases",
        )

    def timestamp(self, moment: _dt.datetime) -> _dt.datetime:
        return moment if moment.tzinfo else moment.replace(tzinfo=_dt.UTC)

    def read_timestamp(self, value: Any) -> _dt.datetime:
        moment: _dt.datetime = value
        return moment.astimezone(_dt.UTC)

    def json(self, value: Any) -> Any:
        return self._jsonb(value)

    def read_json(self, value: Any) -> Any:
        return value  # psycopg loads JSON itself

    @contextlib.contextmanager
    def read(self, conn: Any) -> Iterator[None]:
        with conn.transaction():
            yield

    @contextlib.contextmanager
    def write(self, conn: Any) -> Iterator[None]:
        with conn.transaction():
            yield

    def schema_lock(self, conn: Any) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))

    def has_version_table(self, conn: Any) -> bool:
        row = conn.execute(
            "SELECT to_regclass(%s)", (self.sql("{version}"),)
        ).fetchone()
        return row is not None and row[0] is not None


class _Call:
    """One storage call: its cancel flag and, while it runs, its connection."""

    __slots__ = ("abandoned", "conn", "finished", "lock")

    def __init__(self) -> None:
        self.abandoned = False
        self.conn: Any = None
        self.finished = threading.Event()
        self.lock = threading.Lock()


class _Guarded:
    """The connection as the queries see it: once the call is abandoned, no
    further statement starts (a server-side cancel stops only the statement
    running when it arrives)."""

    __slots__ = ("_call", "_conn")

    def __init__(self, conn: Any, call: _Call) -> None:
        self._conn = conn
        self._call = call

    def execute(self, query: Any, params: Any = None) -> Any:
        if self._call.abandoned:
            raise _Abandoned
        return self._conn.execute(query, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class PostgresStorage(SqlBackend):
    """Conversation memory in PostgreSQL (the ``postgres`` extra).

    Args:
        dsn: a libpq connection string or URL,
            ``"postgresql://user:password@host:5432/db"``. Its password never
            appears in an error, a repr or a log line of ours.
        schema_name: the PostgreSQL schema holding the tables (created if
            missing); default ``public``.
        pool_size: the most connections this storage opens; as many calls run
            at once (more wait, cancellably, for a free one).
        connect_timeout: seconds a connection attempt may take before
            ``StorageUnavailableError``. It bounds the driver inside a worker
            thread, which trio cannot interrupt.

    Queries run in worker threads (``trio.to_thread.run_sync``), one pooled
    connection each; a cancelled call abandons its thread and cancels its
    query on the server, so its transaction rolls back. The tables are
    created on first use (by one process at a time: an advisory lock), or by
    ``migrate()``.

    When PostgreSQL goes away and comes back: a call pings its pooled
    connection before using it; when that fails, the storage drops its pool
    and opens a new one behind one direct connection. So a call while the
    server is down fails at once with ``StorageUnavailableError`` (a refused
    connection; a host that does not answer at all takes ``connect_timeout``),
    the first call after it is back succeeds, and a restart between two calls
    goes unnoticed. A call cut off mid-transaction fails with
    ``StorageUnavailableError`` and writes nothing (unless the cut came
    during its COMMIT); it is not retried.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema_name: str | None = None,
        pool_size: int = 10,
        connect_timeout: float = 10.0,
    ) -> None:
        psycopg, psycopg_pool = _import_driver()
        if schema_name is not None and not _IDENTIFIER.match(schema_name):
            raise ConfigurationError(
                f"schema_name={schema_name!r} is not a plain SQL identifier "
                f"(letters, digits and _, not starting with a digit)"
            )
        if pool_size < 1:
            raise ConfigurationError(f"pool_size={pool_size!r}; it must be >= 1")
        self._psycopg = psycopg
        self._pool_module = psycopg_pool
        self._dsn = dsn
        self.where, self._password = _describe(dsn, psycopg.conninfo.conninfo_to_dict)
        register_secret(self._password)  # nothing this process shows quotes it
        self.schema_name = schema_name
        self.pool_size = pool_size
        self.connect_timeout = connect_timeout
        self._schema = postgres_schema(own_schema=schema_name is not None)
        self._dialect = _Dialect(self.where, schema_name, psycopg.types.json.Json)
        self._pool: Any = None
        # When the last direct connection failed, and its error.
        self._refused: tuple[float, str] | None = None
        self._schema_checked = False
        self._closed = False
        self._open_lock = threading.Lock()
        self._limiter = trio.CapacityLimiter(pool_size)
        # A test hook: called with the connection inside save_turn's
        # transaction, just before it commits.
        self._before_commit: Callable[[Any], None] | None = None

    def __repr__(self) -> str:
        schema = f", schema_name={self.schema_name!r}" if self.schema_name else ""
        return f"<PostgresStorage {self.where}{schema}>"

    # ----------------------------------------------------------- the thread

    async def _run(self, fn: Callable[[Any], T], *, migrate: bool = False) -> T:
        call = _Call()

        def work() -> T:
            pool, conn = self._lend(migrate=migrate)
            try:
                with call.lock:
                    if call.abandoned:
                        raise _Abandoned
                    call.conn = conn
                return fn(_Guarded(conn, call))
            except self._psycopg.Error as exc:
                raise self._translate(exc) from exc
            finally:
                with call.lock:
                    call.conn = None
                if conn.broken:
                    # The session was cut: the server went away, or someone
                    # ended it. Either way the pool is not to be trusted.
                    self._discard(pool)
                    conn.close()
                else:
                    pool.putconn(conn)
                call.finished.set()

        try:
            return await trio.to_thread.run_sync(
                work, abandon_on_cancel=True, limiter=self._limiter
            )
        except trio.Cancelled:
            with call.lock:
                call.abandoned = True
                running = call.conn is not None
            if running:
                # cancel_safe waits for the server's answer: not on trio's thread.
                threading.Thread(target=_cancel, args=(call,), daemon=True).start()
            raise

    def _lend(self, *, migrate: bool) -> tuple[Any, Any]:
        """The pool and one of its connections that answered a ping, or
        ``StorageUnavailableError``.

        A pooled connection that does not answer means the server went away
        (and may be back): its idle siblings are as dead, and the pool's own
        reconnection backs off for seconds, so the pool is dropped and a new
        one opened behind a direct connection (``_open``). That connection is
        refused at once while the server is down, and succeeds as soon as it
        is back."""
        asked = time.monotonic()
        failure: BaseException | None = None
        for attempt in range(2):
            pool = self._open(migrate=migrate and attempt == 0, asked=asked)
            try:
                conn = pool.getconn()
            except self._pool_module.PoolClosed as exc:
                failure = exc  # dropped by another call meanwhile: open anew
                continue
            except self._psycopg.Error as exc:
                # PoolTimeout: no connection within connect_timeout; the
                # pool's reconnection is backing off.
                self._discard(pool)
                raise self._translate(exc, connecting=True) from exc
            try:
                self._pool_module.ConnectionPool.check_connection(conn)
            except self._psycopg.Error as exc:
                failure = exc
                self._discard(pool)
                conn.close()
                continue
            return pool, conn
        assert failure is not None
        raise self._translate(failure, connecting=True) from failure

    def _open(self, *, migrate: bool, asked: float) -> Any:
        """The pool; without one (the first call, or the last pool was
        dropped) one direct connection first, which fails fast and says why
        (refused, bad password) where a pool would retry until its timeout,
        and checks the schema."""
        with self._open_lock:
            if self._closed:
                raise StorageUnavailableError(f"{self!r} is closed")
            if self._pool is not None and not migrate:
                return self._pool
            if self._refused is not None and self._refused[0] > asked:
                # That connection failed while this call waited for the lock:
                # its answer is this call's too (each trying in turn would add
                # up their connect_timeouts).
                raise StorageUnavailableError(self._refused[1])
            try:
                with self._psycopg.connect(
                    self._dsn, connect_timeout=max(1, round(self.connect_timeout))
                ) as conn:
                    if migrate or not self._schema_checked:
                        _sql.ensure_schema(
                            conn, self._dialect, self._schema, migrate=migrate
                        )
                self._schema_checked = True
                if self._pool is None:
                    self._pool = self._new_pool()
            except (self._psycopg.Error, self._pool_module.PoolTimeout) as exc:
                error = self._translate(exc, connecting=True)
                if isinstance(error, StorageUnavailableError):
                    self._refused = (time.monotonic(), str(error))
                raise error from exc
            return self._pool

    def _new_pool(self) -> Any:
        pool = self._pool_module.ConnectionPool(
            self._dsn,
            min_size=1,
            max_size=self.pool_size,
            open=False,
            timeout=self.connect_timeout,
            # No check=: _lend pings the connection itself, to drop the
            # pool when it fails.
            name="procession-memory",
            kwargs={"connect_timeout": max(1, round(self.connect_timeout))},
        )
        try:
            pool.open(wait=True, timeout=self.connect_timeout)
        except BaseException:
            _close_soon(pool)
            raise
        return pool

    def _discard(self, pool: Any) -> None:
        """Drop ``pool`` if it is still the storage's: the next call opens a
        new one. Its idle connections close, lent ones when they come back
        (the caller closes the dead one it holds), its reconnection attempts
        stop; calls waiting on it get ``PoolClosed`` and open anew."""
        with self._open_lock:
            if self._pool is not pool:
                return
            self._pool = None
        _close_soon(pool)

    def _translate(
        self, exc: BaseException, *, connecting: bool = False
    ) -> StorageError:
        text = redact(str(exc).strip())
        if self._password:
            text = text.replace(self._password, REDACTED)
        unavailable = (self._psycopg.OperationalError, self._pool_module.PoolTimeout)
        if connecting and isinstance(exc, unavailable):
            return StorageUnavailableError(f"cannot connect to {self.where}: {text}")
        if isinstance(exc, unavailable):
            return StorageUnavailableError(
                f"the connection to {self.where} failed: {text}; the transaction "
                f"was rolled back, nothing of it is written (unless the failure "
                f"came during its COMMIT)"
            )
        return StorageError(f"{self.where} failed: {text}")

    # ------------------------------------------------------------ the API

    async def migrate(self) -> None:
        """Create the tables, or upgrade them from an older schema version, in
        one transaction under an advisory lock (safe from many processes).
        Checkpoints; cancelled, it rolls back."""
        await self._run(lambda conn: None, migrate=True)

    async def save_turn(
        self, thread_id: str, resource_id: str, messages: Sequence[Message]
    ) -> Thread:
        """See ``MemoryStorage.save_turn``: one transaction holding the
        thread's row lock, so saves on one thread (from any process) queue.
        Checkpoints; cancelled before its commit, it writes nothing."""
        d, now, hook, batch = self._dialect, _now(), self._before_commit, list(messages)
        return await self._run(
            lambda c: _sql.save_turn(c, d, thread_id, resource_id, batch, now, hook)
        )

    async def aclose(self) -> None:
        """Close the pool (waiting for lent connections to come back).
        Idempotent. Checkpoints; not cancellable while it waits."""

        def close() -> None:
            with self._open_lock:
                self._closed = True
                pool, self._pool = self._pool, None
            if pool is not None:
                pool.close()

        await trio.to_thread.run_sync(close)


def _close_soon(pool: Any) -> None:
    """Close a pool in a thread of its own: closing waits for the pool's
    workers, which may be in a connection attempt."""
    threading.Thread(
        target=pool.close, name="procession-memory-close", daemon=True
    ).start()


class _Abandoned(Exception):
    """The caller was cancelled before its query began; never seen."""


def _cancel(call: _Call) -> None:
    """Cancel the call's statement on the server until its worker has left.

    A cancel request that reaches the server between two statements is
    ignored by it, so one request is not enough; ``_Guarded`` stops the next
    statement from starting, and this retries for the one already sent."""
    while True:
        with call.lock:
            conn = call.conn
        if conn is None:
            return
        with contextlib.suppress(Exception):  # the statement may have ended
            conn.cancel_safe(timeout=5)
        if call.finished.wait(0.05):
            return


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)
