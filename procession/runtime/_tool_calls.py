"""A step's tool calls: run concurrently, handled in call order (SPEC §2.13).

Each call's result goes into the conversation, through ``process_tool_result``
(output lane, then input lane) and out as a ``tool-result`` (or ``tool-error``)
chunk; as in a sequential run, each ``tool-result`` chunk has been through the
output processors before the next call's hooks run.
"""

from __future__ import annotations

from typing import Any

import trio

from ..actors import RunControl
from ..data import (
    ToolCallInfo,
    ToolErrorChunk,
    ToolErrorPayload,
    ToolInvocation,
    ToolInvocationPart,
    ToolResultChunk,
    ToolResultInfo,
    ToolResultPayload,
)
from ..processors import (
    MessageList,
    ProcessorStreamWriter,
    ToolArgumentsError,
    TripWire,
)
from ._hooks import HookEmitter, HookLanes
from ._state import RunState, StepConfig
from .tools import Tool, ToolContext, execute_tool, parse_arguments

__all__ = ["ToolCalls"]

_Outcome = tuple[bool, Any, list[Any]]  # (succeeded, result or error, custom chunks)


class ToolCalls:
    """Runs a step's tool calls for one run."""

    def __init__(self, state: RunState, lanes: HookLanes, control: RunControl) -> None:
        self._state = state
        self._lanes = lanes
        self._control = control

    async def run(
        self, step_number: int, config: StepConfig, calls: list[ToolCallInfo]
    ) -> list[ToolResultInfo]:
        """Run ``calls`` concurrently; handle their results, hooks and chunks in
        call order. Raises ``TripWire`` from a ``process_tool_result`` hook and
        ``RetryRequested`` from settling a ``tool-result`` chunk. Checkpoints;
        a cancellation (the run ended) cancels the running tools too."""
        if not calls:
            return []
        outcomes: list[_Outcome] = [(False, None, [])] * len(calls)
        available = set(config.tools.names(config.active_tools))
        if config.tool_choice == "none":
            available = set()

        async def run_one(index: int, call: ToolCallInfo) -> None:
            outcomes[index] = await self._execute(config, available, call)

        async with trio.open_nursery() as nursery:
            for index, call in enumerate(calls):
                nursery.start_soon(run_one, index, call)

        results: list[ToolResultInfo] = []
        for index, (call, (ok, value, custom)) in enumerate(
            zip(calls, outcomes, strict=True)
        ):
            if index:
                # The previous tool-result chunk has been through the output
                # processors (which may end the run or ask a retry) first.
                await self._control.settle()
            for chunk in custom:
                await self._control.inject(chunk)  # tool data reaches processors
            if ok:
                results.append(await self._succeeded(step_number, call, value))
            else:
                results.append(await self._failed(call, value))
        return results

    async def _execute(
        self, config: StepConfig, available: set[str], call: ToolCallInfo
    ) -> _Outcome:
        telemetry = self._state.telemetry
        if not telemetry.active:
            return await self._run_tool(config, available, call)
        span = telemetry.tool_started(call.tool_name, call.tool_call_id)
        try:
            outcome = await self._run_tool(config, available, call)
        except BaseException:
            span.end()
            raise
        ok, value, _custom = outcome
        telemetry.tool_ended(span, None if ok else value)
        return outcome

    async def _run_tool(
        self, config: StepConfig, available: set[str], call: ToolCallInfo
    ) -> _Outcome:
        state = self._state
        emitter = HookEmitter()
        try:
            if call.tool_name not in available:
                raise ToolArgumentsError(
                    call.tool_name,
                    f"no tool named {call.tool_name!r} is available in this step; "
                    f"available: {sorted(available)}",
                )
            tool: Tool = config.tools[call.tool_name]
            args = parse_arguments(tool, call.args)
            context = ToolContext(
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                writer=ProcessorStreamWriter(emitter, f"tool:{call.tool_name}"),
                request_context=state.spec.request_context,
                abort_signal=state.abort_signal,
                messages=tuple(state.message_list.get.all.db()),
            )
            result = await execute_tool(tool, args, context)
        except Exception as exc:
            return (False, exc, [state.stamp(c) for c in emitter.custom])
        return (True, result, [state.stamp(c) for c in emitter.custom])

    async def _failed(self, call: ToolCallInfo, error: Exception) -> ToolResultInfo:
        # Mastra sends the model the error's message (the type stays in the
        # tool-error chunk); one without a message is named by its type.
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
