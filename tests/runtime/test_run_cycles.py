"""Issue 10 §3: a run that ends leaves nothing for the cyclic garbage collector.

With 1,000 concurrent runs the cyclic GC took ~35% of the time: every run left
~300 objects in reference cycles (a stage and its hook's arguments, a stage and
its pipeline, a ``MessageList`` and its views, the splitter and its pipeline),
so nothing of a run was freed until a collection found it, and each
collection walked every live run. These tests run one agent call with the
collector off and then count what a collection finds (``gc.collect()``
returns the number of unreachable objects): zero means reference counting
freed the whole run the moment its last reference went.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
import trio

from procession import Agent, Processor, tool
from procession.actors import ExecutionMode
from procession.processors import ProcessOutputStreamArgs
from procession.testing import (
    PassThrough,
    ScriptedModel,
    text_turn,
    tool_call_turn,
)

MODES: tuple[ExecutionMode, ...] = ("adaptive", "fused", "actors")


@pytest.fixture
def collector_off() -> Iterator[None]:
    """The cyclic GC off for the test (reference counting still frees)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@attrs.frozen
class CityInput:
    city: str


@tool(description="look a city up")
async def lookup(args: CityInput, context: Any) -> str:
    await context.writer.custom({"type": "data-progress", "data": {"city": args.city}})
    return f"sunny in {args.city}"


class Parks(Processor):
    """An async hook that parks (trio's clock): adaptive mode splits before it."""

    id = "parks"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        await trio.sleep(0.001)
        return args.part


class RetryOnce(Processor):
    """Asks for one retry on the first attempt's first text delta."""

    id = "retry-once"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        if args.part.type == "text-delta" and args.retry_count == 0:
            args.abort("again", retry=True)
        return args.part


class Blocks(Processor):
    """Ends the run with a tripwire on the third text delta."""

    id = "blocks"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        deltas = [c for c in args.stream_parts if c.type == "text-delta"]
        if len(deltas) == 3:
            args.abort("enough")
        return args.part


class Writes(Processor):
    """Writes a custom chunk through ``args.writer`` on every text delta."""

    id = "writes"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        if args.part.type == "text-delta":
            assert args.writer is not None
            await args.writer.custom({"type": "data-seen", "data": {}})
        return args.part


async def _drain(agent: Agent) -> int:
    count = 0
    async with agent.stream("hi") as stream:
        async for _ in stream:
            count += 1
        await stream.result()
    return count


def _texts(mode: ExecutionMode) -> Agent:
    return Agent(
        id="cycles",
        model=ScriptedModel([text_turn("one two three four")] * 2),
        output_processors=[PassThrough(0), Writes(), PassThrough(1)],
        execution_mode=mode,
    )


def _tools(mode: ExecutionMode) -> Agent:
    turns = [tool_call_turn("lookup", {"city": "Oslo"}), "done"]
    return Agent(
        id="cycles",
        model=ScriptedModel(turns * 2),
        tools=[lookup],
        output_processors=[PassThrough(0)],
        execution_mode=mode,
    )


def _retried(mode: ExecutionMode) -> Agent:
    return Agent(
        id="cycles",
        model=ScriptedModel(["first answer", "second answer"] * 2),
        output_processors=[RetryOnce()],
        max_processor_retries=1,
        execution_mode=mode,
    )


def _blocked(mode: ExecutionMode) -> Agent:
    return Agent(
        id="cycles",
        model=ScriptedModel([text_turn("one two three four")] * 2),
        output_processors=[PassThrough(0), Blocks()],
        execution_mode=mode,
    )


def _parked(mode: ExecutionMode) -> Agent:
    return Agent(
        id="cycles",
        model=ScriptedModel([text_turn("one two three four five six")] * 2),
        output_processors=[PassThrough(0), Parks(), PassThrough(1)],
        execution_mode=mode,
    )


RUNS: dict[str, Callable[[ExecutionMode], Agent]] = {
    "text and custom chunks": _texts,
    "a tool step": _tools,
    "a processor retry": _retried,
    "a hook that parks": _parked,
    "a tripwire": _blocked,
}


async def _garbage_of_one_run(agent: Agent) -> int:
    """Unreachable objects a collection finds after one run (a first run of
    the same agent warms up what is made once: registrations, caches)."""
    assert await _drain(agent) > 0
    gc.collect()
    assert await _drain(agent) > 0
    return gc.collect()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", sorted(RUNS))
async def test_a_finished_run_leaves_no_reference_cycles(
    scenario: str,
    mode: ExecutionMode,
    collector_off: None,
    autojump_clock: trio.testing.MockClock,
) -> None:
    assert await _garbage_of_one_run(RUNS[scenario](mode)) == 0


async def test_the_check_sees_a_cycle_a_processor_makes(
    collector_off: None,
) -> None:
    """The measure can fail: a processor that ties itself into a cycle per
    run is found."""

    class Loops(Processor):
        id = "loops"

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            if args.part.type == "start":
                loop: list[Any] = []
                loop.append(loop)
                args.state["loop"] = loop
            return args.part

    agent = Agent(
        id="cycles", model=ScriptedModel(["a b"] * 2), output_processors=[Loops()]
    )
    assert await _garbage_of_one_run(agent) >= 1
