"""A run that pauses for a person, and a continuation that ends.

The pause, in the order that makes it safe (Mastra's issue #22413 is the
other order): the waiting run is written first, in one transaction with the
turn so far (``RunStorage.suspend_run``); only then does the
``tool-call-approval`` (or ``tool-call-suspended``) chunk go through the
output processors to the client, and the stream ends ``suspended`` (no
``step-finish``, no ``finish``: Mastra's shape). A processor that trips on
that chunk ends the run as a tripwire, and the stored run is ended with it.
The run's end releases the thread's turn (a paused run holds no lock).

A continuation (``Agent.approve_tool_call`` ...) holds the stored run at an
epoch: it ends it in one transaction with the rest of the turn when it
finishes, ends it with nothing more when it fails, is tripped or is
cancelled, and pauses it again (fenced by the epoch) when another call waits.
"""

from __future__ import annotations

import copy
import datetime as _dt

import trio

from .._errors import NoRunStorageError, SnapshotError, StorageError
from .._secrets import get_logger
from ..actors import RetryRequested, RunControl
from ..data import (
    Message,
    PendingToolCall,
    RunOutcome,
    ToolCallApprovalChunk,
    ToolCallApprovalPayload,
    ToolCallSuspendedChunk,
    ToolCallSuspendedPayload,
)
from ..memory import RunRecord, persisted_messages
from ._approval import PauseRun
from ._control_flow import EndOfRun
from ._hooks import HookLanes
from ._snapshot import pending_json, take_snapshot
from ._state import RunState

__all__ = ["Pauses"]

logger = get_logger("procession")


class Pauses:
    """The coordinator's side of a run kept in storage."""

    def __init__(self, state: RunState, lanes: HookLanes, control: RunControl) -> None:
        self._state = state
        self._lanes = lanes
        self._control = control

    async def pause(self, pause: PauseRun) -> EndOfRun | None:
        """Keep the run, then tell the client it waits (the module
        docstring); the end to propose instead when that went wrong. A run
        that cannot be kept (no storage, a value that is not JSON, the
        storage failing) ends with that error, before the waiting call's
        chunk is sent. Checkpoints."""
        state = self._state
        spec = state.spec
        paused = pause.paused
        assert paused is not None
        assert paused.phase is not None
        pending = paused.phase.pending
        assert pending is not None
        storage = spec.run_storage
        what = "approval" if pending.kind == "approval" else "answer"
        if storage is None:
            return EndOfRun(
                error=NoRunStorageError(
                    f"tool call {pending.tool_call_id!r} ({pending.tool_name}) "
                    f"waits for a person's {what}, but agent {spec.agent_id!r} "
                    f"has no storage to keep the waiting run in: give it "
                    f"memory=Memory(storage=...) or storage=... (SqliteStorage "
                    f"or PostgresStorage)"
                )
            )
        ml = state.message_list
        try:
            snapshot = take_snapshot(
                state,
                {pid: actor.state for pid, actor in self._lanes.actors.items()},
                paused,
            )
        except SnapshotError as exc:
            return EndOfRun(error=exc)
        now = _dt.datetime.now(_dt.UTC)
        record = RunRecord(
            id=spec.run_id,
            agent_id=spec.agent_id,
            # The call's resource owns the waiting run, memory or not: only it
            # may answer it when the answer names one (the server's does).
            resource_id=ml.resource_id,
            thread_id=ml.thread_id,
            status="waiting",
            snapshot=snapshot,
            pending=(pending_json(pending),),
            created_at=now,
            updated_at=now,
        )
        messages = []
        if spec.memory is not None:
            messages = [copy.deepcopy(m) for m in ml.drain_unsaved_messages()]
            _mark_pending(messages, paused.response_id, pending, spec.run_id)
        try:
            await storage.suspend_run(
                record, messages, expected_epoch=state.stored_epoch
            )
        except StorageError as exc:
            return EndOfRun(error=exc)
        state.stored_closed = True
        stored_epoch = state.stored_epoch if state.stored_epoch is not None else 0
        end: EndOfRun | None = None
        try:
            await self._control.inject(_waiting_chunk(pending, spec.run_id))
            await self._control.settle()
        except RetryRequested as late:
            # Nothing to retry: the step is over. The processor's word ends it.
            end = EndOfRun(tripwire=late.tripwire)
        if end is not None or self._control.outcome is not None:
            # A processor ended the run on the waiting chunk: it waits no more.
            await self._close(stored_epoch)
            return end
        self._control.suspend(
            RunOutcome(kind="suspended", finish_reason="suspended", pending=(pending,))
        )
        return None

    async def end_stored(self) -> None:
        """The continuation finished: the rest of the turn, and the stored
        run's end, in one transaction. Checkpoints."""
        state = self._state
        spec = state.spec
        assert state.stored_epoch is not None
        ml = state.message_list
        batch = []
        if spec.memory is not None:
            batch = persisted_messages(ml.drain_unsaved_messages(), state.custom_chunks)
        await spec.run_storage.end_run(
            spec.run_id,
            epoch=state.stored_epoch,
            thread_id=ml.thread_id if batch else None,
            resource_id=ml.resource_id if batch else None,
            messages=batch,
        )
        state.stored_closed = True

    async def close_stored(self) -> None:
        """The continuation ended without finishing (an error, a tripwire, a
        cancel): the stored run ends, nothing more of the turn is saved.
        Shielded (it runs as the run is torn down); a failure is logged."""
        assert self._state.stored_epoch is not None
        await self._close(self._state.stored_epoch)

    async def _close(self, epoch: int) -> None:
        state = self._state
        state.stored_closed = True
        with trio.CancelScope(shield=True):
            try:
                await state.spec.run_storage.end_run(state.run_id, epoch=epoch)
            except StorageError:
                logger.exception("run %s: its stored run was not ended", state.run_id)


def _waiting_chunk(
    pending: PendingToolCall, run_id: str
) -> ToolCallApprovalChunk | ToolCallSuspendedChunk:
    if pending.kind == "approval":
        return ToolCallApprovalChunk(
            payload=ToolCallApprovalPayload(
                tool_call_id=pending.tool_call_id,
                tool_name=pending.tool_name,
                args=pending.args,
                resume_schema=pending.resume_schema,
            ),
            run_id=run_id,
        )
    return ToolCallSuspendedChunk(
        payload=ToolCallSuspendedPayload(
            tool_call_id=pending.tool_call_id,
            tool_name=pending.tool_name,
            args=pending.args,
            suspend_payload=pending.suspend_payload,
            resume_schema=pending.resume_schema,
        ),
        run_id=run_id,
    )


def _mark_pending(
    messages: list[Message],
    response_id: str,
    pending: PendingToolCall,
    run_id: str,
) -> None:
    """The saved assistant message says which call waits, as Mastra's does
    (``metadata.pendingToolApprovals`` / ``suspendedTools``), so a client
    that reloads the thread can show it."""
    for message in messages:
        if message.id == response_id:
            key = (
                "pendingToolApprovals"
                if pending.kind == "approval"
                else "suspendedTools"
            )
            entry: dict[str, object] = {
                "toolCallId": pending.tool_call_id,
                "toolName": pending.tool_name,
                "args": pending.args,
                "type": pending.kind,
                "runId": run_id,
                "resumeSchema": pending.resume_schema,
            }
            if pending.kind == "suspended":
                entry["suspendPayload"] = pending.suspend_payload
            metadata = dict(message.content.metadata or {})
            metadata[key] = {pending.tool_call_id: entry}
            message.content.metadata = metadata
