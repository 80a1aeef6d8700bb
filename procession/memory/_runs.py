"""The SQL of runs kept in storage: runs that wait for a person (schema
version 2: a waiting run's snapshot, the decisions taken on its calls, and
the claim that lets exactly one continuation run it) and durable runs
(version 3: their checkpoints, their lease, their takeover, their tool
calls' records). Plain functions over a DB-API connection, like
``_sql``; the backends run them in a worker thread.

Exactly once, in the store: a decision is a row keyed ``(run_id,
tool_call_id)``, written in the same transaction that moves the run from
``waiting`` to ``running`` and bumps its ``epoch`` (the run's row is locked
first: ``FOR UPDATE`` on PostgreSQL, the write lock on SQLite). A second
answer, from this process or another, finds the decision and raises
``ApprovalAlreadyDecided``; nothing else is written. The continuation then
writes only while the run is ``running`` at its epoch (``end_run``,
``suspend_run`` again), so a stale one can never overwrite a newer one.

A durable run is fenced the same way: its owner writes (a checkpoint, a
tool call's start or result, the end) only at its epoch, with the run's row
locked, and a takeover is a compare-and-set on that row (the lease lapsed,
the epoch still the one the taker read): the epoch moves on, the old owner's
next write fails (``RunLostError``) and it stops.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from typing import Any, cast

from .._errors import (
    ApprovalAlreadyDecided,
    StorageError,
    ToolCallNotPendingError,
    WaitingRunNotFound,
)
from ..messages import Message
from ._sql import Connection, Dialect, save_turn_rows
from ._values import RunRecord, RunStatus, ToolDecision, ToolRecord

__all__ = [
    "RunLostError",
    "checkpoint_run",
    "decide",
    "durable_statements",
    "end_run",
    "get_run",
    "lapsed_runs",
    "list_runs",
    "record_attempt",
    "release_run",
    "renew_run",
    "run_decisions",
    "start_run",
    "suspend_run",
    "take_over",
    "tool_finished",
    "tool_records",
    "tool_started",
]

_RUN_COLUMNS = (
    "id, agent_id, resource_id, thread_id, status, snapshot, pending, epoch, "
    "created_at, updated_at, durable, owner, lease_until, attempt, host"
)
_TOOL_COLUMNS = "run_id, tool_call_id, state, ok, result, epoch"


def durable_statements(json: str, timestamp: str) -> tuple[str, ...]:
    """Schema version 3 (durable runs) in a dialect's ``json`` and
    ``timestamp`` column types: the run's lease, its attempt in flight, its
    host's data, and its tool calls' records."""
    return (
        "ALTER TABLE {runs} ADD COLUMN durable INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE {runs} ADD COLUMN owner TEXT",
        f"ALTER TABLE {{runs}} ADD COLUMN lease_until {timestamp}",
        f"ALTER TABLE {{runs}} ADD COLUMN attempt {json}",
        f"ALTER TABLE {{runs}} ADD COLUMN host {json}",
        "CREATE INDEX procession_runs_lapsed ON {runs} (status, durable, lease_until)",
        f"CREATE TABLE {{tool_runs}} (run_id TEXT NOT NULL, "
        f"tool_call_id TEXT NOT NULL, state TEXT NOT NULL, ok INTEGER, "
        f"result {json}, epoch BIGINT NOT NULL, started_at {timestamp} NOT NULL, "
        f"finished_at {timestamp}, PRIMARY KEY (run_id, tool_call_id))",
    )


_DECISION_COLUMNS = (
    "run_id, tool_call_id, decision, reason, data, decided_by, decided_at"
)


class RunLostError(StorageError):
    """A continuation wrote to a run it no longer holds (another claimed it:
    its epoch moved on, or the run ended). Nothing was written."""


def _run(d: Dialect, row: Sequence[Any]) -> RunRecord:
    return RunRecord(
        id=row[0],
        agent_id=row[1],
        resource_id=row[2],
        thread_id=row[3],
        status=cast(RunStatus, row[4]),
        snapshot=d.read_json(row[5]) if row[5] is not None else None,
        pending=tuple(d.read_json(row[6]) or ()) if row[6] is not None else (),
        epoch=int(row[7]),
        created_at=d.read_timestamp(row[8]),
        updated_at=d.read_timestamp(row[9]),
        durable=bool(row[10]),
        owner=row[11],
        lease_until=d.read_timestamp(row[12]) if row[12] is not None else None,
        attempt=d.read_json(row[13]) if row[13] is not None else None,
        host=d.read_json(row[14]) if row[14] is not None else None,
    )


def _decision(d: Dialect, row: Sequence[Any]) -> ToolDecision:
    return ToolDecision(
        run_id=row[0],
        tool_call_id=row[1],
        decision=row[2],
        reason=row[3],
        data=d.read_json(row[4]) if row[4] is not None else None,
        decided_by=row[5],
        decided_at=d.read_timestamp(row[6]),
    )


def _select_run(
    conn: Connection, d: Dialect, run_id: str, *, lock: bool = False
) -> RunRecord | None:
    suffix = d.for_update if lock else ""
    row = conn.execute(
        d.sql(f"SELECT {_RUN_COLUMNS} FROM {{runs}} WHERE id = ?{suffix}"), (run_id,)
    ).fetchone()
    return None if row is None else _run(d, row)


def get_run(conn: Connection, d: Dialect, run_id: str) -> RunRecord | None:
    with d.read(conn):
        return _select_run(conn, d, run_id)


def list_runs(
    conn: Connection,
    d: Dialect,
    agent_id: str,
    status: RunStatus,
    resource_id: str | None,
    thread_id: str | None,
) -> list[RunRecord]:
    where = ["agent_id = ?", "status = ?"]
    values: list[Any] = [agent_id, status]
    for column, value in (("resource_id", resource_id), ("thread_id", thread_id)):
        if value is not None:
            where.append(f"{column} = ?")
            values.append(value)
    with d.read(conn):
        rows = conn.execute(
            d.sql(
                f"SELECT {_RUN_COLUMNS} FROM {{runs}} WHERE {' AND '.join(where)} "
                f"ORDER BY updated_at DESC, id"
            ),
            tuple(values),
        ).fetchall()
    return [_run(d, row) for row in rows]


def suspend_run(
    conn: Connection,
    d: Dialect,
    run: RunRecord,
    messages: Sequence[Message],
    expected_epoch: int | None,
    now: _dt.datetime,
) -> RunRecord:
    """In ONE transaction: save ``messages`` to the run's thread (the turn so
    far; none without a thread) and keep ``run`` as ``waiting``. A new run
    (``expected_epoch`` None) must not exist yet; a continuation pausing again
    must still hold the run at ``expected_epoch`` (else ``RunLostError``)."""
    with d.write(conn):
        existing = _select_run(conn, d, run.id, lock=True)
        if expected_epoch is None and existing is not None:
            raise StorageError(
                f"a run with the id {run.id!r} is already kept in this storage; "
                f"a run that pauses needs an id of its own"
            )
        if expected_epoch is not None and (
            existing is None
            or existing.status != "running"
            or existing.epoch != expected_epoch
        ):
            raise RunLostError(
                f"run {run.id!r} was claimed by another continuation; this one "
                f"stops without writing"
            )
        if run.thread_id is not None and run.resource_id is not None and messages:
            save_turn_rows(conn, d, run.thread_id, run.resource_id, messages, now)
        values = (
            d.json(dict(run.snapshot or {})),
            d.json([dict(p) for p in run.pending]),
            d.timestamp(now),
        )
        if existing is None:
            conn.execute(
                d.sql(
                    "INSERT INTO {runs} (id, agent_id, resource_id, thread_id, "
                    "status, snapshot, pending, epoch, created_at, updated_at) "
                    "VALUES (?, ?, ?, ?, 'waiting', ?, ?, 0, ?, ?)"
                ),
                (
                    run.id,
                    run.agent_id,
                    run.resource_id,
                    run.thread_id,
                    *values[:2],
                    values[2],
                    values[2],
                ),
            )
        else:
            conn.execute(
                d.sql(
                    "UPDATE {runs} SET status = 'waiting', snapshot = ?, "
                    "pending = ?, updated_at = ?, attempt = NULL, "
                    "lease_until = NULL WHERE id = ?"
                ),
                (*values, run.id),
            )
        found = _select_run(conn, d, run.id)
        assert found is not None
        return found


def decide(
    conn: Connection,
    d: Dialect,
    run_id: str,
    agent_id: str,
    tool_call_id: str | None,
    decision: str,
    reason: str | None,
    data: Any,
    resource_id: str | None,
    decided_by: str | None,
    now: _dt.datetime,
) -> tuple[ToolDecision, RunRecord]:
    """Decide a waiting call and claim the run for its continuation, in ONE
    transaction (the module docstring). ``resource_id`` given: only that
    resource's run is found. Raises ``WaitingRunNotFound`` (no such run of
    this agent and resource: checked first, so another resource learns
    nothing), ``ApprovalAlreadyDecided`` (the call, or with no call named the
    run's last waiting call, was answered), ``ToolCallNotPendingError``."""
    with d.write(conn):
        run = _select_run(conn, d, run_id, lock=True)
        if (
            run is None
            or run.agent_id != agent_id
            or (resource_id is not None and run.resource_id != resource_id)
        ):
            raise WaitingRunNotFound(run_id, agent_id)
        pending = [str(p.get("toolCallId")) for p in run.pending]
        if tool_call_id is None:
            if run.status == "waiting" and len(pending) == 1:
                tool_call_id = pending[0]
            elif run.status == "waiting":
                raise ToolCallNotPendingError(
                    run_id,
                    f"run {run_id!r} waits on {len(pending)} tool calls "
                    f"({', '.join(pending)}); name the one you answer "
                    f"(tool_call_id=)",
                    tuple(pending),
                )
        earlier = _decisions(conn, d, run_id, tool_call_id)
        if earlier:
            last = earlier[-1]
            raise ApprovalAlreadyDecided(run_id, last.tool_call_id, last.decision)
        if tool_call_id is None or run.status != "waiting":
            # Nothing waits, and nothing was decided under this name.
            raise WaitingRunNotFound(run_id, agent_id)
        if tool_call_id not in pending:
            raise ToolCallNotPendingError(
                run_id,
                f"run {run_id!r} does not wait on tool call {tool_call_id!r}; it "
                f"waits on {', '.join(pending) or 'nothing'}",
                tuple(pending),
            )
        conn.execute(
            d.sql(
                f"INSERT INTO {{decisions}} ({_DECISION_COLUMNS}) "
                f"VALUES (?, ?, ?, ?, ?, ?, ?)"
            ),
            (
                run_id,
                tool_call_id,
                decision,
                reason,
                d.json(data) if data is not None else None,
                decided_by,
                d.timestamp(now),
            ),
        )
        conn.execute(
            d.sql(
                "UPDATE {runs} SET status = 'running', epoch = epoch + 1, "
                "updated_at = ? WHERE id = ?"
            ),
            (d.timestamp(now), run_id),
        )
        claimed = _select_run(conn, d, run_id)
        assert claimed is not None
        return _decisions(conn, d, run_id, tool_call_id)[0], claimed


def _decisions(
    conn: Connection, d: Dialect, run_id: str, tool_call_id: str | None
) -> list[ToolDecision]:
    """The decisions on ``tool_call_id`` (all of the run's, oldest first, when
    None)."""
    where, values = "run_id = ?", [run_id]
    if tool_call_id is not None:
        where += " AND tool_call_id = ?"
        values.append(tool_call_id)
    rows = conn.execute(
        d.sql(
            f"SELECT {_DECISION_COLUMNS} FROM {{decisions}} WHERE {where} "
            f"ORDER BY decided_at, tool_call_id"
        ),
        tuple(values),
    ).fetchall()
    return [_decision(d, row) for row in rows]


def run_decisions(conn: Connection, d: Dialect, run_id: str) -> list[ToolDecision]:
    with d.read(conn):
        return _decisions(conn, d, run_id, None)


def end_run(
    conn: Connection,
    d: Dialect,
    run_id: str,
    epoch: int,
    thread_id: str | None,
    resource_id: str | None,
    messages: Sequence[Message],
    now: _dt.datetime,
) -> RunRecord:
    """In ONE transaction: save the rest of the turn (``messages``; none
    without a thread) and mark the run ``ended`` (its snapshot dropped, its
    decisions kept), if the caller still holds it at ``epoch``; else
    ``RunLostError`` and nothing is written."""
    with d.write(conn):
        run = _select_run(conn, d, run_id, lock=True)
        # A waiting run is ended too (its approval chunk tripped a processor
        # right after the pause was written): at its epoch, nobody claimed it.
        if run is None or run.status == "ended" or run.epoch != epoch:
            raise RunLostError(
                f"run {run_id!r} is no longer held by this continuation (epoch "
                f"{epoch}); its end is not written"
            )
        if thread_id is not None and resource_id is not None and messages:
            save_turn_rows(conn, d, thread_id, resource_id, messages, now)
        conn.execute(
            d.sql(
                "UPDATE {runs} SET status = 'ended', snapshot = NULL, "
                "pending = NULL, attempt = NULL, lease_until = NULL, "
                "updated_at = ? WHERE id = ?"
            ),
            (d.timestamp(now), run_id),
        )
        # A durable run's tool records served its takeovers; its end needs
        # none (its decisions, like a waiting run's, are kept).
        conn.execute(d.sql("DELETE FROM {tool_runs} WHERE run_id = ?"), (run_id,))
        ended = _select_run(conn, d, run_id)
        assert ended is not None
        return ended


# --- durable runs (schema version 3) ----------------------------------------------


def _held(conn: Connection, d: Dialect, run_id: str, epoch: int) -> RunRecord:
    """The run's row, locked, if it is ``running`` at ``epoch``; else
    ``RunLostError`` (the caller writes nothing)."""
    run = _select_run(conn, d, run_id, lock=True)
    if run is None or run.status != "running" or run.epoch != epoch:
        raise RunLostError(
            f"run {run_id!r} is no longer held at epoch {epoch} (another process "
            f"took it over, or it ended); this one stops without writing"
        )
    return run


def start_run(
    conn: Connection, d: Dialect, run: RunRecord, now: _dt.datetime
) -> RunRecord:
    """Keep a new durable run (``running``, epoch 0, held by ``run.owner``
    until ``run.lease_until``, its first checkpoint ``run.snapshot``) in one
    transaction; ``StorageError`` if a run with its id is kept already."""
    with d.write(conn):
        if _select_run(conn, d, run.id, lock=True) is not None:
            raise StorageError(
                f"a run with the id {run.id!r} is already kept in this storage; "
                f"a durable run needs an id of its own"
            )
        assert run.lease_until is not None
        conn.execute(
            d.sql(
                f"INSERT INTO {{runs}} ({_RUN_COLUMNS}) VALUES "
                f"(?, ?, ?, ?, 'running', ?, NULL, 0, ?, ?, 1, ?, ?, NULL, ?)"
            ),
            (
                run.id,
                run.agent_id,
                run.resource_id,
                run.thread_id,
                d.json(dict(run.snapshot or {})),
                d.timestamp(now),
                d.timestamp(now),
                run.owner,
                d.timestamp(run.lease_until),
                d.json(dict(run.host)) if run.host is not None else None,
            ),
        )
        found = _select_run(conn, d, run.id)
        assert found is not None
        return found


def checkpoint_run(
    conn: Connection,
    d: Dialect,
    run_id: str,
    epoch: int,
    snapshot: Any,
    owner: str,
    lease_until: _dt.datetime,
    host: Any,
    now: _dt.datetime,
) -> None:
    """Replace a held run's checkpoint with ``snapshot`` (its attempt record
    cleared: the checkpoint is past it), renew its lease, and mark it durable
    (a continuation becomes so at its first checkpoint). Fenced:
    ``RunLostError`` unless ``running`` at ``epoch``."""
    with d.write(conn):
        run = _held(conn, d, run_id, epoch)
        if host is None and run.host is not None:
            host = dict(run.host)  # a checkpoint that does not say keeps it
        conn.execute(
            d.sql(
                "UPDATE {runs} SET snapshot = ?, attempt = NULL, durable = 1, "
                "owner = ?, lease_until = ?, host = ?, updated_at = ? WHERE id = ?"
            ),
            (
                d.json(snapshot),
                owner,
                d.timestamp(lease_until),
                d.json(host) if host is not None else None,
                d.timestamp(now),
                run_id,
            ),
        )


def record_attempt(
    conn: Connection,
    d: Dialect,
    run_id: str,
    epoch: int,
    attempt: Any,
    now: _dt.datetime,
) -> None:
    """Keep what the step in flight did since the last checkpoint (fenced)."""
    with d.write(conn):
        _held(conn, d, run_id, epoch)
        conn.execute(
            d.sql("UPDATE {runs} SET attempt = ?, updated_at = ? WHERE id = ?"),
            (d.json(attempt), d.timestamp(now), run_id),
        )


def renew_run(
    conn: Connection,
    d: Dialect,
    run_id: str,
    epoch: int,
    owner: str,
    lease_until: _dt.datetime,
) -> bool:
    """Extend ``owner``'s lease on the run to ``lease_until``; False if it
    holds the run no more (another took it over, or it ended). One
    statement."""
    with d.write(conn):
        cursor = conn.execute(
            d.sql(
                "UPDATE {runs} SET lease_until = ? WHERE id = ? AND epoch = ? "
                "AND status = 'running' AND owner = ?"
            ),
            (d.timestamp(lease_until), run_id, epoch, owner),
        )
        return bool(cursor.rowcount == 1)


def release_run(
    conn: Connection, d: Dialect, run_id: str, epoch: int, now: _dt.datetime
) -> bool:
    """Hand the run over: its lease lapses now, so another process may take
    it at once; False if the caller held it no more."""
    with d.write(conn):
        cursor = conn.execute(
            d.sql(
                "UPDATE {runs} SET lease_until = ? WHERE id = ? AND epoch = ? "
                "AND status = 'running'"
            ),
            (d.timestamp(now - _dt.timedelta(microseconds=1)), run_id, epoch),
        )
        return bool(cursor.rowcount == 1)


def lapsed_runs(
    conn: Connection,
    d: Dialect,
    agent_ids: Sequence[str],
    now: _dt.datetime,
    limit: int,
) -> list[RunRecord]:
    """The durable runs of ``agent_ids`` whose lease lapsed by ``now`` (their
    owner died, or handed them over), oldest lapse first."""
    if not agent_ids:
        return []
    marks = ", ".join("?" for _ in agent_ids)
    with d.read(conn):
        rows = conn.execute(
            d.sql(
                f"SELECT {_RUN_COLUMNS} FROM {{runs}} WHERE status = 'running' "
                f"AND durable = 1 AND lease_until <= ? AND agent_id IN ({marks}) "
                f"ORDER BY lease_until, id LIMIT {int(limit)}"
            ),
            (d.timestamp(now), *agent_ids),
        ).fetchall()
    return [_run(d, row) for row in rows]


def take_over(
    conn: Connection,
    d: Dialect,
    run_id: str,
    expected_epoch: int,
    owner: str,
    lease_until: _dt.datetime,
    now: _dt.datetime,
) -> RunRecord | None:
    """Take a lapsed durable run for ``owner``: a compare-and-set on its row
    (still ``running`` and durable, its lease lapsed, its epoch the one the
    taker read); the run at its new epoch, or None when another took it
    first, it ended, or its owner renewed the lease meanwhile."""
    with d.write(conn):
        run = _select_run(conn, d, run_id, lock=True)
        if (
            run is None
            or run.status != "running"
            or not run.durable
            or run.epoch != expected_epoch
            or run.lease_until is None
            or run.lease_until > now
        ):
            return None
        conn.execute(
            d.sql(
                "UPDATE {runs} SET epoch = epoch + 1, owner = ?, lease_until = ?, "
                "updated_at = ? WHERE id = ?"
            ),
            (owner, d.timestamp(lease_until), d.timestamp(now), run_id),
        )
        return _select_run(conn, d, run_id)


def tool_started(
    conn: Connection,
    d: Dialect,
    run_id: str,
    epoch: int,
    tool_call_id: str,
    now: _dt.datetime,
) -> None:
    """Record that the run's tool call is about to run (fenced: a process
    that lost the run never starts a tool)."""
    with d.write(conn):
        _held(conn, d, run_id, epoch)
        conn.execute(
            d.sql(
                f"INSERT INTO {{tool_runs}} ({_TOOL_COLUMNS}, started_at) "
                f"VALUES (?, ?, 'started', NULL, NULL, ?, ?) "
                f"ON CONFLICT (run_id, tool_call_id) DO UPDATE SET "
                f"state = 'started', ok = NULL, result = NULL, "
                f"epoch = excluded.epoch, started_at = excluded.started_at, "
                f"finished_at = NULL"
            ),
            (run_id, tool_call_id, epoch, d.timestamp(now)),
        )


def tool_finished(
    conn: Connection,
    d: Dialect,
    run_id: str,
    epoch: int,
    tool_call_id: str,
    ok: bool,
    result: Any,
    now: _dt.datetime,
) -> None:
    """Record the tool call's outcome (fenced)."""
    with d.write(conn):
        _held(conn, d, run_id, epoch)
        conn.execute(
            d.sql(
                f"INSERT INTO {{tool_runs}} ({_TOOL_COLUMNS}, started_at, "
                f"finished_at) VALUES (?, ?, 'done', ?, ?, ?, ?, ?) "
                f"ON CONFLICT (run_id, tool_call_id) DO UPDATE SET "
                f"state = 'done', ok = excluded.ok, result = excluded.result, "
                f"epoch = excluded.epoch, finished_at = excluded.finished_at"
            ),
            (
                run_id,
                tool_call_id,
                1 if ok else 0,
                d.json(result),
                epoch,
                d.timestamp(now),
                d.timestamp(now),
            ),
        )


def tool_records(conn: Connection, d: Dialect, run_id: str) -> list[ToolRecord]:
    """The run's tool call records, by tool call id order."""
    with d.read(conn):
        rows = conn.execute(
            d.sql(
                f"SELECT {_TOOL_COLUMNS} FROM {{tool_runs}} WHERE run_id = ? "
                f"ORDER BY tool_call_id"
            ),
            (run_id,),
        ).fetchall()
    return [
        ToolRecord(
            run_id=row[0],
            tool_call_id=row[1],
            state="done" if row[2] == "done" else "started",
            ok=None if row[3] is None else bool(row[3]),
            result=d.read_json(row[4]) if row[4] is not None else None,
            epoch=int(row[5]),
        )
        for row in rows
    ]
