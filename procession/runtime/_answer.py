"""Answering a run that waits for a person: the decision, applied once, and the
same run going on (``Agent.approve_tool_call`` and its kin).

An answer is a transaction in the run's storage (``RunStorage.decide``): the
decision on the waiting call, and the run claimed for one continuation.
Whoever answers second, in this process or another, gets
``ApprovalAlreadyDecided`` from entering the stream, before any chunk. The
continuation is a run like any other: same run id, steps numbered on, the
processors' ``state`` and the retry count as they were, the live agent's model
and tools; thread and resource come from the stored run, so no ``memory=`` is
needed.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, Literal

import attrs

from .._errors import NoRunStorageError, ToolCallNotPendingError, WaitingRunNotFound
from ..data import PendingToolCall
from ..memory import RunRecord, RunStorage
from ._agent_face import AgentFace
from ._options import CallOptions
from ._snapshot import Restored, apply_snapshot, pending_from_json, restore_snapshot
from ._state import RunSpec, RunState
from ._stream import AgentStream, Continuation, open_stream

__all__ = ["Answer", "SuspendedRun", "continue_run", "suspended_runs"]

Answer = Literal["approved", "declined", "resumed"]


@attrs.frozen(kw_only=True)
class SuspendedRun:
    """A run that waits for a person (``Agent.list_suspended_runs``), as
    Mastra's ``listSuspendedRuns`` lists it."""

    run_id: str
    thread_id: str | None
    resource_id: str | None
    suspended_at: _dt.datetime
    tool_calls: tuple[PendingToolCall, ...]


def _storage(agent: AgentFace) -> RunStorage:
    storage = agent.run_storage
    if storage is None:
        raise NoRunStorageError(
            f"agent {agent.id!r} has no storage that keeps waiting runs: give it "
            f"memory=Memory(storage=...) or storage=... (SqliteStorage or "
            f"PostgresStorage)"
        )
    return storage


async def suspended_runs(
    agent: AgentFace, *, resource_id: str | None, thread_id: str | None
) -> list[SuspendedRun]:
    """``Agent.list_suspended_runs``. Checkpoints."""
    records = await _storage(agent).list_runs(
        agent.id, status="waiting", resource_id=resource_id, thread_id=thread_id
    )
    return [
        SuspendedRun(
            run_id=r.id,
            thread_id=r.thread_id,
            resource_id=r.resource_id,
            suspended_at=r.updated_at,
            tool_calls=tuple(pending_from_json(p) for p in r.pending),
        )
        for r in records
    ]


def continued_spec(
    agent: AgentFace,
    prepare: Callable[[Any, CallOptions], tuple[RunSpec, Any]],
    restored: Restored,
    run: RunRecord,
    **more: Any,
) -> RunSpec:
    """The spec of ``run`` going on from its snapshot ``restored`` (after a
    person's answer, or taken over): the call's options as the snapshot kept
    them (the agent's where it kept none), its ids from its record, and
    ``more`` options (``durable``)."""
    options = restored.options
    spec, _unused = prepare(
        [],
        CallOptions(
            request_context=restored.request_context,
            max_steps=int(options.get("maxSteps") or agent.max_steps),
            execution_mode=options.get("mode") or agent.execution_mode,
            run_id=run.id,
            thread_id=run.thread_id,
            resource_id=run.resource_id,
            active_tools=options.get("activeTools"),
            model_settings=options.get("modelSettings"),
            provider_options=options.get("providerOptions"),
            **more,
        ),
    )
    return attrs.evolve(spec, budget=options.get("budget", spec.budget))


@asynccontextmanager
async def continue_run(
    agent: AgentFace,
    prepare: Callable[[Any, CallOptions], tuple[RunSpec, Any]],
    run_id: str,
    tool_call_id: str | None,
    answer: Answer,
    *,
    reason: str | None = None,
    data: Any = None,
    resource_id: str | None = None,
    decided_by: str | None = None,
) -> AsyncIterator[AgentStream]:
    """Decide the waiting call (exactly once) and stream the run's
    continuation; the module docstring. Raises, on entering and before any
    chunk: ``NoRunStorageError``, ``WaitingRunNotFound``,
    ``ApprovalAlreadyDecided``, ``ToolCallNotPendingError`` (also for an
    approval sent to a tool that waits for resume data, and the reverse).
    Checkpoints."""
    storage = _storage(agent)
    waiting = await storage.get_run(run_id)
    if waiting is None or waiting.agent_id != agent.id:
        raise WaitingRunNotFound(run_id, agent.id)
    decision: str = answer
    if waiting.status == "waiting" and (
        resource_id is None or waiting.resource_id == resource_id
    ):
        decision, reason, data = _checked(
            agent, waiting, tool_call_id, answer, reason, data
        )
    found, run = await storage.decide(
        run_id,
        agent_id=agent.id,
        tool_call_id=tool_call_id,
        decision=decision,
        reason=reason,
        data=data,
        resource_id=resource_id,
        decided_by=decided_by,
    )
    snapshot = run.snapshot
    assert snapshot is not None
    restored = restore_snapshot(snapshot)
    spec = continued_spec(agent, prepare, restored, run)

    def restore(state: RunState) -> None:
        state.resume = apply_snapshot(state, snapshot, found)
        state.stored_epoch = run.epoch

    continuation = Continuation(
        restore=restore, processor_state=restored.processor_state
    )
    async with open_stream(
        spec, restored.message_list, continuation=continuation
    ) as stream:
        yield stream


def _checked(
    agent: AgentFace,
    waiting: RunRecord,
    tool_call_id: str | None,
    answer: Answer,
    reason: str | None,
    data: Any,
) -> tuple[str, str | None, Any]:
    """The decision to record for ``answer``: an approval past its time is
    ``expired``; an answer of the wrong kind for the call is refused."""
    pending = [pending_from_json(p) for p in waiting.pending]
    target = next(
        (p for p in pending if tool_call_id is None or p.tool_call_id == tool_call_id),
        None,
    )
    if target is None:
        return answer, reason, data  # decide() says what is wrong
    if answer == "resumed" and target.kind == "approval":
        # Mastra: resume_stream({"approved": bool, "reason": ...}) answers an
        # approval too.
        if isinstance(data, Mapping) and isinstance(data.get("approved"), bool):
            answer = "approved" if data["approved"] else "declined"
            reason = data.get("reason") if isinstance(data.get("reason"), str) else None
            data = None
        else:
            raise ToolCallNotPendingError(
                waiting.id,
                f"tool call {target.tool_call_id!r} waits for approval: answer it "
                f"with approve_tool_call / decline_tool_call (or resume data "
                f'{{"approved": true|false}})',
                (target.tool_call_id,),
            )
    elif answer != "resumed" and target.kind == "suspended":
        raise ToolCallNotPendingError(
            waiting.id,
            f"tool call {target.tool_call_id!r} ({target.tool_name}) suspended "
            f"itself and waits for resume data: answer it with resume_stream",
            (target.tool_call_id,),
        )
    if answer == "approved":
        ttl = _ttl(agent, waiting)
        if ttl is not None:
            waited = (_dt.datetime.now(_dt.UTC) - waiting.updated_at).total_seconds()
            if waited > ttl:
                return (
                    "expired",
                    f"Tool call was not approved in time: its approval expired "
                    f"after {ttl:g} seconds",
                    None,
                )
    return answer, reason, data


def _ttl(agent: AgentFace, waiting: RunRecord) -> float | None:
    snapshot = waiting.snapshot or {}
    options = snapshot.get("options") or {}
    if "approvalTtl" in options:
        value = options["approvalTtl"]
        return float(value) if value is not None else None
    return agent.approval_ttl
