"""A ``BaseException`` from a hook (KeyboardInterrupt, SystemExit) escapes bare
in every execution mode, never inside a ``BaseExceptionGroup`` of our making
(SPEC §2.7; issue 9 §2.3): fused mode runs hooks in the caller's task, actors
mode in tasks of its own, and the caller must not be able to tell.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from procession import Agent, tool
from procession.actors import ExecutionMode, open_output_pipeline
from procession.chunks import text_delta
from procession.processors import (
    ProcessInputArgs,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
)
from procession.testing import ScriptedModel

MODES: tuple[ExecutionMode, ...] = ("adaptive", "fused", "actors")
each_mode = pytest.mark.parametrize("mode", MODES)
BASE_EXCEPTIONS = pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit])


async def numbered(count: int) -> AsyncIterator[Any]:
    for n in range(count):
        yield text_delta(str(n))


class Raiser:
    """Raises ``kind`` on chunk number ``at``."""

    def __init__(self, kind: type[BaseException], at: int, *, is_async: bool) -> None:
        self.id = f"raiser-{at}"
        self.kind = kind
        self.at = at
        self.is_async = is_async

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        if self.is_async:
            await trio.sleep(0.01)
        if len(args.stream_parts) - 1 == self.at:
            raise self.kind("stop here")
        return args.part


class Sleeper:
    """Another stage, parked in its hook when the other one raises."""

    def __init__(self, id: str = "sleeper") -> None:
        self.id = id

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        await trio.sleep(0.05)
        return args.part


@each_mode
@BASE_EXCEPTIONS
@pytest.mark.parametrize("is_async", [False, True])
@pytest.mark.parametrize("at", [0, 5])
async def test_a_hooks_base_exception_escapes_the_pipeline_bare(
    mode: ExecutionMode,
    kind: type[BaseException],
    is_async: bool,
    at: int,
    autojump_clock: trio.testing.MockClock,
) -> None:
    processors = [Sleeper("before"), Raiser(kind, at, is_async=is_async), Sleeper()]
    seen: list[Any] = []

    async def read_all() -> None:
        async with open_output_pipeline(processors, numbered(10), mode=mode) as out:
            async for chunk in out:
                seen.append(chunk)

    with pytest.raises(kind, match="stop here") as raised:
        await read_all()
    assert type(raised.value) is kind
    assert len(seen) <= at


# --- through Agent.stream --------------------------------------------------------


class InputRaiser:
    id = "input-raiser"

    def __init__(self, kind: type[BaseException]) -> None:
        self.kind = kind

    async def process_input(self, args: ProcessInputArgs) -> Any:
        await trio.sleep(0.01)
        raise self.kind("stop here")


class ToolResultRaiser:
    id = "tool-result-raiser"

    def __init__(self, kind: type[BaseException]) -> None:
        self.kind = kind

    async def process_tool_result(self, args: ProcessToolResultArgs) -> Any:
        await trio.sleep(0.01)
        raise self.kind("stop here")


async def lookup(args: dict[str, Any]) -> str:
    """Look a customer up."""
    await trio.sleep(0.01)
    return "found"


def tool_call(call_id: str) -> dict[str, Any]:
    return {
        "type": "tool-call",
        "payload": {"toolCallId": call_id, "toolName": "lookup", "args": {}},
    }


def agent_with(hook: str, kind: type[BaseException]) -> Agent:
    if hook == "process_input":
        return Agent(
            id="agent",
            model=ScriptedModel([[text_delta("hi")]]),
            input_processors=[InputRaiser(kind)],
            output_processors=[Sleeper()],
        )
    return Agent(
        id="agent",
        # Two parallel tool calls: their tasks are siblings of the hook's.
        model=ScriptedModel(
            [[text_delta("a"), tool_call("c1"), tool_call("c2")], [text_delta("ok")]]
        ),
        output_processors=[ToolResultRaiser(kind), Sleeper()],
        tools=[tool(lookup)],
    )


@each_mode
@BASE_EXCEPTIONS
@pytest.mark.parametrize("hook", ["process_input", "process_tool_result"])
@pytest.mark.parametrize("reads", [True, False])
async def test_a_hooks_base_exception_escapes_agent_stream_bare(
    mode: ExecutionMode,
    kind: type[BaseException],
    hook: str,
    reads: bool,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Whether the caller reads the stream or only awaits the result."""
    agent = agent_with(hook, kind)

    async def run() -> None:
        async with agent.stream("hi", execution_mode=mode) as stream:
            if reads:
                async for _chunk in stream:
                    pass
            await stream.result()

    with pytest.raises(kind, match="stop here") as raised:
        await run()
    assert type(raised.value) is kind


@each_mode
@BASE_EXCEPTIONS
@pytest.mark.parametrize("hook", ["process_input", "process_tool_result"])
async def test_a_hooks_base_exception_escapes_agent_generate_bare(
    mode: ExecutionMode,
    kind: type[BaseException],
    hook: str,
    autojump_clock: trio.testing.MockClock,
) -> None:
    with pytest.raises(kind, match="stop here") as raised:
        await agent_with(hook, kind).generate("hi", execution_mode=mode)
    assert type(raised.value) is kind
