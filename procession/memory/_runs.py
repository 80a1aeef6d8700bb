"""The SQL of runs that wait for a person (schema version 2): a waiting run's
snapshot, the decisions taken on its calls, and the claim that lets exactly
one continuation run it. Plain functions over a DB-API connection, like
``_sql``; the backends run them in a worker thread.

Exactly once, in the store: a decision is a row keyed ``(run_id,
tool_call_id)``, written in the same transaction that moves the run from
``waiting`` to ``running`` and bumps its ``epoch`` (the run's row is locked
first: ``FOR UPDATE`` on PostgreSQL, the write lock on SQLite). A second
answer, from this process or another, finds the decision and raises
``ApprovalAlreadyDecided``; nothing else is written. The continuation then
writes only while the run is ``running`` at its epoch (``end_run``,
``suspend_run`` again), so a stale one can never overwrite a newer one.
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
from ._values import RunRecord, RunStatus, ToolDecision

__all__ = [
    "RunLostError",
    "decide",
    "end_run",
    "get_run",
    "list_runs",
    "run_decisions",
    "suspend_run",
]

_RUN_COLUMNS = (
    "id, agent_id, resource_id, thread_id, status, snapshot, pending, epoch, "
    "created_at, updated_at"
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
                    f"INSERT INTO {{runs}} ({_RUN_COLUMNS}) "
                    f"VALUES (?, ?, ?, ?, 'waiting', ?, ?, 0, ?, ?)"
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
                    "pending = ?, updated_at = ? WHERE id = ?"
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
                "pending = NULL, updated_at = ? WHERE id = ?"
            ),
            (d.timestamp(now), run_id),
        )
        ended = _select_run(conn, d, run_id)
        assert ended is not None
        return ended
