"""A step's tool calls: run concurrently, handled in call order (SPEC §2.13).

Each call's result goes into the conversation, through ``process_tool_result``
(output lane, then input lane) and out as a ``tool-result`` (or ``tool-error``)
chunk; as in a sequential run, each ``tool-result`` chunk has been through the
output processors before the next call's hooks run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, Literal

import trio

from .._errors import ToolArgumentsError, TripWire
from ..actors import RunControl
from ..data import (
    DECLINED_TEXT,
    PendingToolCall,
    ToolApproval,
    ToolCallInfo,
    ToolErrorChunk,
    ToolErrorPayload,
    ToolInvocation,
    ToolInvocationPart,
    ToolOutputDeniedChunk,
    ToolOutputDeniedPayload,
    ToolResultChunk,
    ToolResultInfo,
    ToolResultPayload,
)
from ..processors import MessageList, ProcessorStreamWriter
from ._approval import Executed, PauseRun, ToolPhase, needs_approval
from ._durable import DurableRun
from ._hooks import HookEmitter, HookLanes
from ._state import RunState, StepConfig
from .tools import Tool, ToolContext, ToolSuspended, parse_arguments
from .tools._tool import execute_tool

__all__ = ["APPROVAL_SCHEMA", "ToolCalls"]

APPROVAL_SCHEMA: Final = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "approved": {
                "type": "boolean",
                "description": (
                    "Controls if the tool call is approved or not, should be true "
                    "when approved and false when declined"
                ),
            },
            "reason": {
                "description": (
                    "Optional explanation for the decision, surfaced to the model "
                    "when the tool call is declined"
                ),
                "type": "string",
            },
        },
        "required": ["approved"],
        "additionalProperties": False,
    },
    separators=(",", ":"),
)
"""The ``resumeSchema`` of a ``tool-call-approval`` chunk (Mastra's, as a JSON
string)."""


def _apply_decision(phase: ToolPhase) -> None:
    """A resumed step: the answer to its waiting call, made part of it."""
    pending, decision = phase.pending, phase.decision
    phase.pending = phase.decision = None
    if pending is None or decision is None:
        return
    index = next(
        i for i, c in enumerate(phase.calls) if c.tool_call_id == pending.tool_call_id
    )
    if decision.decision in ("declined", "expired"):
        reason = decision.reason or DECLINED_TEXT
        phase.executed[index] = Executed(ok=False, value=reason, denied=True)
    elif decision.decision == "approved":
        phase.verdicts[index] = False
    else:  # resumed: the tool runs again, with the data
        phase.verdicts[index] = False
        phase.resume_data[pending.tool_call_id] = decision.data


class ToolCalls:
    """Runs a step's tool calls for one run."""

    def __init__(
        self,
        state: RunState,
        lanes: HookLanes,
        control: RunControl,
        durable: DurableRun | None = None,
    ) -> None:
        self._state = state
        self._lanes = lanes
        self._control = control
        self._durable = durable

    async def run(
        self,
        step_number: int,
        config: StepConfig,
        calls: list[ToolCallInfo],
        phase: ToolPhase | None = None,
    ) -> list[ToolResultInfo]:
        """Run ``calls`` (concurrently, between the calls that wait for a
        person); handle their results, hooks and chunks in call order once all
        have run. ``phase`` is a resumed step's (its answer applied first).
        Raises ``PauseRun`` when a call waits for approval or its tool
        suspended itself (``_approval``'s docstring), ``TripWire`` from a
        ``process_tool_result`` hook and ``RetryRequested`` from settling a
        ``tool-result`` chunk. Checkpoints; a cancellation (the run ended)
        cancels the running tools too."""
        if not calls:
            return []
        if phase is None:
            phase = ToolPhase(step_number, list(calls))
        else:
            _apply_decision(phase)
        available = set(config.tools.names(config.active_tools))
        if config.tool_choice == "none":
            available = set()
        gated = self._may_need_approval(config, available)
        while (start := phase.next_index()) < len(calls):
            gate = len(calls)
            for index in range(start, len(calls)):
                if index in phase.executed:
                    continue
                if index not in phase.verdicts:
                    phase.verdicts[index] = gated and await self._verdict(
                        config, available, calls[index]
                    )
                if phase.verdicts[index]:
                    gate = index
                    break
            batch = [i for i in range(start, gate) if i not in phase.executed]
            await self._execute_batch(config, available, phase, batch)
            suspended = [i for i in batch if i not in phase.executed]
            if suspended:
                phase.pending = self._pending(config, phase, suspended[0], "suspended")
                raise PauseRun(phase)
            if gate < len(calls):
                phase.pending = self._pending(config, phase, gate, "approval")
                raise PauseRun(phase)
        results: list[ToolResultInfo] = []
        for index, call in enumerate(calls):
            if index:
                # The previous tool-result chunk has been through the output
                # processors (which may end the run or ask a retry) first.
                await self._control.settle()
            outcome = phase.executed[index]
            for chunk in outcome.custom:
                await self._control.inject(chunk)  # tool data reaches processors
            if outcome.denied:
                results.append(await self._denied(call, outcome.value))
            elif outcome.ok:
                results.append(await self._succeeded(step_number, call, outcome.value))
            else:
                results.append(await self._failed(call, outcome.value))
        return results

    def _may_need_approval(self, config: StepConfig, available: set[str]) -> bool:
        """Whether any call of the step could need approval (else no policy
        is asked: the usual case costs nothing)."""
        if self._state.spec.require_tool_approval is not False:
            return True
        tools = config.tools
        return any(tools[name].require_approval is not False for name in available)

    async def _verdict(
        self, config: StepConfig, available: set[str], call: ToolCallInfo
    ) -> bool:
        if call.tool_name not in available:
            return False  # it fails as a tool error, asked of nobody
        tool: Tool = config.tools[call.tool_name]
        try:
            args = parse_arguments(tool, call.args)
        except ToolArgumentsError:
            return False  # it fails as a tool error; the model corrects it
        state = self._state
        return await needs_approval(
            tool,
            call,
            args,
            self._context(call),
            state.spec.require_tool_approval,
            state.spec.request_context,
        )

    def _pending(
        self,
        config: StepConfig,
        phase: ToolPhase,
        index: int,
        kind: Literal["approval", "suspended"],
    ) -> PendingToolCall:
        call = phase.calls[index]
        if kind == "approval":
            schema: str | None = APPROVAL_SCHEMA
            payload = None
        else:
            tool = config.tools.get(call.tool_name)
            resume = tool.resume_schema if tool is not None else None
            schema = json.dumps(dict(resume)) if resume is not None else None
            payload = phase.suspend_payloads.get(call.tool_call_id)
        return PendingToolCall(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=call.args,
            kind=kind,
            suspend_payload=payload,
            resume_schema=schema,
        )

    async def _execute_batch(
        self,
        config: StepConfig,
        available: set[str],
        phase: ToolPhase,
        batch: list[int],
    ) -> None:
        """Run the calls ``batch`` concurrently; each one's outcome goes into
        ``phase`` (a call whose tool suspended itself leaves its payload in
        ``phase.suspend_payloads`` instead)."""

        durable = self._durable

        async def run_one(index: int) -> None:
            call = phase.calls[index]
            if durable is None:
                outcome = await self._execute(config, available, call, phase)
            else:
                outcome = await durable.run_tool(
                    call,
                    config.tools.get(call.tool_name),
                    lambda: self._execute(config, available, call, phase),
                    resumed=call.tool_call_id in phase.resume_data,
                )
            if outcome is not None:
                phase.executed[index] = outcome

        if len(batch) == 1:
            await run_one(batch[0])
            return
        async with trio.open_nursery() as nursery:
            for index in batch:
                nursery.start_soon(run_one, index)

    def _context(
        self, call: ToolCallInfo, emitter: HookEmitter | None = None, **resume: Any
    ) -> ToolContext:
        state = self._state
        return ToolContext(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            writer=(
                ProcessorStreamWriter(emitter, f"tool:{call.tool_name}")
                if emitter is not None
                else None
            ),
            request_context=state.spec.request_context,
            abort_signal=state.abort_signal,
            messages=tuple(state.message_list.get.all.db()),
            **resume,
        )

    async def _execute(
        self,
        config: StepConfig,
        available: set[str],
        call: ToolCallInfo,
        phase: ToolPhase,
    ) -> Executed | None:
        telemetry = self._state.telemetry
        if not telemetry.active:
            return await self._run_tool(config, available, call, phase)
        span = telemetry.tool_started(call.tool_name, call.tool_call_id)
        try:
            outcome = await self._run_tool(config, available, call, phase)
        except BaseException:
            span.end()
            raise
        failed = outcome is not None and not outcome.ok
        telemetry.tool_ended(span, outcome.value if failed and outcome else None)
        return outcome

    async def _run_tool(
        self,
        config: StepConfig,
        available: set[str],
        call: ToolCallInfo,
        phase: ToolPhase,
    ) -> Executed | None:
        """Run one call: its outcome, or None when the tool suspended itself
        (its payload kept in ``phase``)."""
        state = self._state
        emitter = HookEmitter()
        resumed = call.tool_call_id in phase.resume_data
        try:
            if call.tool_name not in available:
                raise ToolArgumentsError(
                    call.tool_name,
                    f"no tool named {call.tool_name!r} is available in this step; "
                    f"available: {sorted(available)}",
                )
            tool: Tool = config.tools[call.tool_name]
            args = parse_arguments(tool, call.args)
            context = self._context(
                call,
                emitter,
                resume_data=phase.resume_data.get(call.tool_call_id),
                suspend_payload=(
                    phase.suspend_payloads.get(call.tool_call_id) if resumed else None
                ),
            )
            result = await execute_tool(tool, args, context)
        except ToolSuspended as suspension:
            phase.suspend_payloads[call.tool_call_id] = suspension.payload
            phase.custom.extend(state.stamp(c) for c in emitter.custom)
            return None
        except Exception as exc:
            custom = tuple(state.stamp(c) for c in emitter.custom)
            return Executed(ok=False, value=exc, custom=custom)
        custom = tuple(state.stamp(c) for c in emitter.custom)
        return Executed(ok=True, value=result, custom=custom)

    async def _denied(self, call: ToolCallInfo, reason: str) -> ToolResultInfo:
        """A declined call: the model reads ``reason`` as its result (Mastra's
        ``output-denied``); ``process_tool_result`` is not called (Mastra)."""
        approval = {"id": call.tool_call_id, "approved": False, "reason": reason}
        _set_invocation(
            self._state.message_list, call, "output-denied", approval=approval
        )
        await self._control.inject(
            ToolOutputDeniedChunk(
                payload=ToolOutputDeniedPayload(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    args=call.args,
                    approval=ToolApproval(
                        id=call.tool_call_id, approved=False, reason=reason
                    ),
                ),
                run_id=self._state.run_id,
            )
        )
        return ToolResultInfo(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=call.args,
            result=reason,
            is_error=True,
        )

    async def _failed(self, call: ToolCallInfo, error: Any) -> ToolResultInfo:
        # Mastra sends the model the error's message (the type stays in the
        # tool-error chunk); one without a message is named by its type. (An
        # error read back from a paused run's snapshot is {"name", "message"}.)
        if isinstance(error, Mapping):
            text = str(error.get("message") or error.get("name") or "error")
        else:
            text = str(error) or type(error).__name__
        _set_invocation(
            self._state.message_list,
            call,
            "output-error",
            result=text,
            error_text=text,
        )
        await self._control.inject(
            ToolErrorChunk(
                payload=ToolErrorPayload(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    error=error,
                    args=call.args,
                ),
                run_id=self._state.run_id,
            )
        )
        return ToolResultInfo(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=call.args,
            result=text,
            is_error=True,
        )

    async def _succeeded(
        self, step_number: int, call: ToolCallInfo, value: Any
    ) -> ToolResultInfo:
        state = self._state
        ml = state.message_list
        _set_invocation(ml, call, "result", result=value)
        for actor in self._lanes.lane("process_tool_result", "output", "input"):
            try:
                result = await self._lanes.call(
                    actor,
                    "process_tool_result",
                    messages=ml.get.all.db(),
                    message_list=ml,
                    step_number=step_number,
                    tool_name=call.tool_name,
                    tool_call_id=call.tool_call_id,
                    args=call.args,
                    result=value,
                    system_messages=ml.get_all_system_messages(),
                    steps=tuple(state.steps),
                    provider_executed=call.provider_executed,
                )
            except TripWire:
                # The raw result must not stay in the history (Mastra 1H.64).
                _set_invocation(ml, call, "call")
                raise
            state.apply_messages(result, actor.id, "process_tool_result", "all")
        # Re-read: processors may have replaced it (update_tool_invocation).
        final = _find_result(ml, call.tool_call_id, value)
        await self._control.inject(
            ToolResultChunk(
                payload=ToolResultPayload(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    result=final,
                    args=call.args,
                    provider_executed=call.provider_executed,
                ),
                run_id=state.run_id,
            )
        )
        return ToolResultInfo(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=call.args,
            result=final,
            provider_executed=call.provider_executed,
        )


def _set_invocation(
    ml: MessageList, call: ToolCallInfo, state: Any, **fields: Any
) -> None:
    """Put tool call ``call`` in ``state`` (with ``result`` / ``error_text``)."""
    ml.update_tool_invocation(
        ToolInvocationPart(
            tool_invocation=ToolInvocation(
                state=state,
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                args=call.args,
                **fields,
            ),
            provider_executed=call.provider_executed,
        )
    )


def _find_result(ml: MessageList, tool_call_id: str, default: Any) -> Any:
    for message in reversed(ml.get.all.db()):
        for part in message.content.parts:
            if (
                isinstance(part, ToolInvocationPart)
                and part.tool_invocation.tool_call_id == tool_call_id
            ):
                return part.tool_invocation.result
    return default
