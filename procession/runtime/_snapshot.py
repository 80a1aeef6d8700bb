"""A paused run as JSON, and back: the one snapshot format of a run that waits
for a person and of a durable run's checkpoint (DESIGN.md "A run that pauses
and continues"). A paused run's snapshot has ``paused`` (its step, stopped in
its tool phase); a checkpoint has ``checkpoint`` (the step it was taken
before); the rest is the same.

It holds the conversation (``MessageList.to_snapshot``), the steps so far, the
processors' per-run ``state`` (by processor id), the retry count, the usage,
the text and custom chunks the client was shown, the request context, the
call's options that JSON can hold, and the paused step (its model finish, its
tool calls, the calls already executed and their results, the call it waits
on). Nothing that is not JSON goes in: a processor state value, a request
context value or a tool result that JSON cannot hold is a ``SnapshotError``
naming it, raised before anything is written.

What it does not hold comes from the live agent on resume: the model and
tools (looked up by name), the processors (their state restored by id), the
policies (``require_tool_approval``, per-call processor lists, which JSON
cannot hold: the agent's own apply).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import attrs

from .._errors import SnapshotError
from ..data import (
    DataChunk,
    PendingToolCall,
    StepResult,
    ToolCallInfo,
    ToolResultInfo,
    TripwireInfo,
    Usage,
)
from ..memory import ToolDecision
from ..models import ModelFinish
from ..processors import MessageList, RequestContext
from ..wire import from_wire as chunk_from_wire
from ..wire import to_wire as chunk_to_wire
from ._approval import Executed, PausedStep, ToolPhase
from ._state import RunState, StepConfig

__all__ = [
    "SNAPSHOT_VERSION",
    "Restored",
    "apply_checkpoint",
    "apply_snapshot",
    "pending_from_json",
    "pending_json",
    "restore_snapshot",
    "take_checkpoint",
    "take_snapshot",
]

SNAPSHOT_VERSION: Final = 1


def _base(
    state: RunState, processor_states: Mapping[str, Any], why: str
) -> dict[str, Any]:
    """What every snapshot holds (a paused run's, a durable run's
    checkpoint): the run's conversation, bookkeeping and options."""
    spec = state.spec
    return {
        "version": SNAPSHOT_VERSION,
        "runId": spec.run_id,
        "agentId": spec.agent_id,
        "requestContext": _json(dict(spec.request_context), "the request context", why),
        "options": {
            "maxSteps": spec.max_steps,
            "budget": spec.budget,
            "mode": spec.mode,
            "activeTools": spec.active_tools,
            "modelSettings": _json(dict(spec.model_settings), "model_settings", why),
            "providerOptions": _json(
                dict(spec.provider_options), "provider_options", why
            ),
            "model": spec.model_label,
            "approvalTtl": spec.approval_ttl,
            "durable": spec.durable is not None,
        },
        "messageList": _json(state.message_list.to_snapshot(), "the conversation", why),
        "steps": [_step(s, why) for s in state.steps],
        "processorState": {
            pid: _json(_paused_state(pid, st, why), f"processor {pid!r}'s state", why)
            for pid, st in processor_states.items()
            if st
        },
        "retryCount": state.retry_count,
        "usage": _usage(state.usage),
        "allText": list(state.all_text),
        "customChunks": [chunk_to_wire(c) for c in state.custom_chunks],
        "feedback": state.feedback,
    }


_PAUSE: Final = "the run cannot pause"
_CHECKPOINT: Final = "the durable run cannot keep its checkpoint"


def take_snapshot(
    state: RunState, processor_states: Mapping[str, Any], paused: PausedStep
) -> dict[str, Any]:
    """The run as JSON (the module docstring); ``SnapshotError`` naming the
    first value JSON cannot hold."""
    config = paused.config
    phase = paused.phase
    assert phase is not None
    snapshot = _base(state, processor_states, _PAUSE)
    snapshot["paused"] = {
        "stepNumber": paused.step_number,
        "responseId": paused.response_id,
        "built": paused.built,
        "textBefore": paused.text_before,
        "finish": {
            "finishReason": paused.finish.finish_reason,
            "usage": _usage(paused.finish.usage),
            "providerMetadata": _json_or_none(paused.finish.provider_metadata),
        },
        "current": _step(paused.current, _PAUSE),
        "config": {
            "toolChoice": _json_or_none(config.tool_choice),
            "activeTools": config.active_tools,
            "modelSettings": _json(dict(config.model_settings), "model_settings"),
            "providerOptions": _json(dict(config.provider_options), "provider_options"),
        },
        "phase": _phase(phase),
    }
    return snapshot


def take_checkpoint(
    state: RunState,
    processor_states: Mapping[str, Any],
    *,
    step_number: int | None,
) -> dict[str, Any]:
    """A durable run's checkpoint as JSON: the run before step
    ``step_number`` (None: before its input processors, nothing sent yet);
    ``SnapshotError`` naming the first value JSON cannot hold."""
    snapshot = _base(state, processor_states, _CHECKPOINT)
    snapshot["checkpoint"] = {"stepNumber": step_number}
    return snapshot


def _paused_state(
    processor_id: str, state: Mapping[str, Any], why: str = _PAUSE
) -> dict[str, Any]:
    """A processor's ``state`` as it is kept: a value whose class defines
    ``__pause__()`` is replaced by what that returns (None: dropped, the
    processor makes it again; a ``SnapshotError`` it raises names why it
    cannot wait, and here which processor and key)."""
    kept: dict[str, Any] = {}
    for key, value in state.items():
        pause = getattr(type(value), "__pause__", None)
        if pause is None:
            kept[key] = value
            continue
        try:
            replacement = pause(value)
        except SnapshotError as exc:
            raise SnapshotError(
                f"{why}: processor {processor_id!r}'s state[{key!r}]: {exc}"
            ) from None
        if replacement is not None:
            kept[key] = replacement
    return kept


def _phase(phase: ToolPhase) -> dict[str, Any]:
    executed = {}
    for index, outcome in phase.executed.items():
        call = phase.calls[index]
        value = outcome.value
        if not outcome.ok and isinstance(value, BaseException):
            value = {"name": type(value).__name__, "message": str(value)}
        executed[str(index)] = {
            "ok": outcome.ok,
            "denied": outcome.denied,
            "value": _json(value, f"the result of tool call {call.tool_call_id!r}"),
            "custom": [chunk_to_wire(c) for c in outcome.custom],
        }
    pending = phase.pending
    return {
        "stepNumber": phase.step_number,
        "calls": [_call(c) for c in phase.calls],
        "executed": executed,
        "verdicts": {str(i): v for i, v in phase.verdicts.items()},
        "pending": None if pending is None else _pending(pending),
        "suspendPayloads": _json(
            dict(phase.suspend_payloads), "a suspended tool's payload"
        ),
        "resumeData": _json(dict(phase.resume_data), "resume data"),
        "custom": [chunk_to_wire(c) for c in phase.custom],
    }


def _pending(pending: PendingToolCall) -> dict[str, Any]:
    return {
        "toolCallId": pending.tool_call_id,
        "toolName": pending.tool_name,
        "args": pending.args,
        "kind": pending.kind,
        "suspendPayload": pending.suspend_payload,
        "resumeSchema": pending.resume_schema,
    }


def pending_from_json(data: Mapping[str, Any]) -> PendingToolCall:
    """A ``PendingToolCall`` from its JSON (``RunRecord.pending`` items)."""
    return PendingToolCall(
        tool_call_id=str(data["toolCallId"]),
        tool_name=str(data.get("toolName", "")),
        args=data.get("args"),
        kind="suspended" if data.get("kind") == "suspended" else "approval",
        suspend_payload=data.get("suspendPayload"),
        resume_schema=data.get("resumeSchema"),
    )


def pending_json(pending: PendingToolCall) -> dict[str, Any]:
    """The JSON a ``RunRecord`` lists a waiting call as."""
    return _pending(pending)


# --- values ---------------------------------------------------------------------


def _json(value: Any, what: str, why: str = _PAUSE) -> Any:
    """``value`` itself if JSON can hold it exactly, else ``SnapshotError``
    (``why``: what cannot be done)."""
    problem = _not_json(value, what)
    if problem is not None:
        raise SnapshotError(
            f"{why}: {problem}; keep only JSON values (str, int, float, bool, "
            f"None, lists and dicts with str keys) there"
        )
    return value


def _json_or_none(value: Any) -> Any:
    return value if _not_json(value, "") is None else None


def _not_json(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, bool | int | str):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where} holds {value!r}"
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            problem = _not_json(item, f"{where}[{index}]")
            if problem is not None:
                return problem
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where} has the key {key!r}, not a str"
            problem = _not_json(item, f"{where}[{key!r}]")
            if problem is not None:
                return problem
        return None
    return f"{where} holds a {type(value).__name__} ({_short(value)})"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _usage(usage: Usage | None) -> dict[str, Any] | None:
    if usage is None:
        return None
    out = {
        f.name: getattr(usage, f.name)
        for f in attrs.fields(Usage)
        if f.name not in ("raw", "extra") and getattr(usage, f.name) is not None
    }
    return out


def _usage_from(data: Mapping[str, Any] | None) -> Usage | None:
    return None if data is None else Usage(**dict(data))


def _call(call: ToolCallInfo, why: str = _PAUSE) -> dict[str, Any]:
    return {
        "toolCallId": call.tool_call_id,
        "toolName": call.tool_name,
        "args": _json(call.args, f"tool call {call.tool_call_id!r}'s arguments", why),
        "providerExecuted": call.provider_executed,
    }


def _call_from(data: Mapping[str, Any]) -> ToolCallInfo:
    return ToolCallInfo(
        tool_call_id=data["toolCallId"],
        tool_name=data["toolName"],
        args=data.get("args"),
        provider_executed=data.get("providerExecuted"),
    )


def _step(step: StepResult, why: str = _PAUSE) -> dict[str, Any]:
    return {
        "stepNumber": step.step_number,
        "text": step.text,
        "reasoning": step.reasoning,
        "toolCalls": [_call(c, why) for c in step.tool_calls],
        "toolResults": [
            {
                "toolCallId": r.tool_call_id,
                "toolName": r.tool_name,
                "args": _json_or_none(r.args),
                "result": _json(
                    r.result, f"tool call {r.tool_call_id!r}'s result", why
                ),
                "isError": r.is_error,
                "providerExecuted": r.provider_executed,
            }
            for r in step.tool_results
        ],
        "finishReason": step.finish_reason,
        "usage": _usage(step.usage),
        "tripwire": None
        if step.tripwire is None
        else {
            "reason": step.tripwire.reason,
            "retry": step.tripwire.retry,
            "metadata": _json_or_none(step.tripwire.metadata),
            "processorId": step.tripwire.processor_id,
        },
        "providerMetadata": _json_or_none(step.provider_metadata),
        "sources": [chunk_to_wire(c) for c in step.sources],
        "files": [chunk_to_wire(c) for c in step.files],
    }


def _step_from(data: Mapping[str, Any]) -> StepResult:
    tripwire = data.get("tripwire")
    return StepResult(
        step_number=int(data["stepNumber"]),
        text=data.get("text", ""),
        reasoning=data.get("reasoning", ""),
        tool_calls=tuple(_call_from(c) for c in data.get("toolCalls", ())),
        tool_results=tuple(
            ToolResultInfo(
                tool_call_id=r["toolCallId"],
                tool_name=r["toolName"],
                args=r.get("args"),
                result=r.get("result"),
                is_error=bool(r.get("isError")),
                provider_executed=r.get("providerExecuted"),
            )
            for r in data.get("toolResults", ())
        ),
        finish_reason=data.get("finishReason", "unknown"),
        usage=_usage_from(data.get("usage")),
        tripwire=None
        if tripwire is None
        else TripwireInfo(
            reason=tripwire["reason"],
            retry=bool(tripwire.get("retry")),
            metadata=tripwire.get("metadata"),
            processor_id=tripwire.get("processorId"),
        ),
        provider_metadata=data.get("providerMetadata"),
        sources=tuple(chunk_from_wire(c) for c in data.get("sources", ())),
        files=tuple(chunk_from_wire(c) for c in data.get("files", ())),
    )


# --- back -------------------------------------------------------------------------


@attrs.frozen
class Restored:
    """What a snapshot gives back, for ``Agent`` to continue the run."""

    message_list: MessageList
    request_context: RequestContext
    options: Mapping[str, Any]
    processor_state: Mapping[str, Any]


def restore_snapshot(snapshot: Mapping[str, Any]) -> Restored:
    """The parts of a snapshot that make the continuation's spec (the rest
    goes into its state: ``apply_snapshot``)."""
    version = snapshot.get("version")
    if version != SNAPSHOT_VERSION:
        raise SnapshotError(
            f"this run was paused by a procession whose snapshot version is "
            f"{version!r}; this one reads version {SNAPSHOT_VERSION}"
        )
    return Restored(
        message_list=MessageList.from_snapshot(snapshot["messageList"]),
        request_context=RequestContext(snapshot.get("requestContext") or {}),
        options=snapshot.get("options") or {},
        processor_state=snapshot.get("processorState") or {},
    )


def apply_checkpoint(state: RunState, snapshot: Mapping[str, Any]) -> None:
    """Put a snapshot's bookkeeping into ``state`` (a fresh continuation's,
    or a takeover's)."""
    state.steps = [_step_from(s) for s in snapshot.get("steps", ())]
    state.retry_count = int(snapshot.get("retryCount") or 0)
    state.usage = _usage_from(snapshot.get("usage"))
    state.all_text = list(snapshot.get("allText") or ())
    state.custom_chunks = [
        c
        for c in (chunk_from_wire(w) for w in snapshot.get("customChunks", ()))
        if isinstance(c, DataChunk)
    ]
    state.feedback = snapshot.get("feedback")


def apply_snapshot(
    state: RunState, snapshot: Mapping[str, Any], decision: ToolDecision
) -> PausedStep:
    """Put the snapshot's bookkeeping into ``state`` (a fresh continuation's)
    and return its paused step, with ``decision`` to apply."""
    apply_checkpoint(state, snapshot)
    data = snapshot["paused"]
    spec = state.spec
    saved = data["config"]
    config = StepConfig.start(spec)
    if saved.get("activeTools") is not None:
        names = [n for n in saved["activeTools"] if n in spec.tools]
        config.active_tools = names
    if saved.get("toolChoice") is not None:
        config.tool_choice = saved["toolChoice"]
    config.model_settings = saved.get("modelSettings") or config.model_settings
    config.provider_options = saved.get("providerOptions") or config.provider_options
    finish = data["finish"]
    phase_data = data["phase"]
    phase = ToolPhase(
        step_number=int(phase_data["stepNumber"]),
        calls=[_call_from(c) for c in phase_data["calls"]],
        executed={
            int(i): Executed(
                ok=bool(e["ok"]),
                value=e.get("value"),
                custom=tuple(chunk_from_wire(c) for c in e.get("custom", ())),
                denied=bool(e.get("denied")),
            )
            for i, e in phase_data.get("executed", {}).items()
        },
        verdicts={int(i): bool(v) for i, v in phase_data.get("verdicts", {}).items()},
        pending=None
        if phase_data.get("pending") is None
        else pending_from_json(phase_data["pending"]),
        suspend_payloads=dict(phase_data.get("suspendPayloads") or {}),
        resume_data=dict(phase_data.get("resumeData") or {}),
        custom=[chunk_from_wire(c) for c in phase_data.get("custom", ())],
        decision=decision,
    )
    return PausedStep(
        step_number=int(data["stepNumber"]),
        config=config,
        finish=ModelFinish(
            finish_reason=finish.get("finishReason", "tool-calls"),
            usage=_usage_from(finish.get("usage")),
            provider_metadata=finish.get("providerMetadata"),
        ),
        response_id=data["responseId"],
        current=_step_from(data["current"]),
        built=int(data.get("built") or 0),
        phase=phase,
        text_before=data.get("textBefore", ""),
    )
