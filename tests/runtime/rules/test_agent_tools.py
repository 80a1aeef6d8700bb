"""SPEC §2 rules 13 and 17 and tool restriction: tools run concurrently with
results in call order (13), arguments failing validation go back to the model as
a tool error (17), and ``active_tools`` / ``tool_choice`` restrict the offer."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from procession import Agent, Processor, tool
from procession.chunks import ToolErrorChunk, ToolResultChunk
from procession.processors import (
    ProcessInputStepArgs,
    ProcessToolResultArgs,
    PromptToolResultPart,
)
from procession.runtime.tools import ToolContext
from procession.testing import ScriptedModel, tool_call_turn
from tests.runtime.rules._helpers import EchoInput, echo, prompt_texts, run_stream


@attrs.frozen
class NapInput:
    seconds: float


@tool
def other(args: EchoInput) -> str:
    """Another tool."""
    return f"other:{args.text}"


# === 13. Parallel tools ==========================================================


async def test_rule13_tools_run_concurrently_results_come_in_call_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    finished: list[str] = []

    @tool
    async def nap(args: NapInput, context: ToolContext) -> str:
        await trio.sleep(args.seconds)
        finished.append(context.tool_call_id)
        return f"slept {args.seconds:g}"

    class ResultOrder(Processor):
        id = "result-order"

        def __init__(self) -> None:
            self.order: list[str] = []

        def process_tool_result(self, args: ProcessToolResultArgs) -> None:
            self.order.append(args.tool_call_id)

    recorder = ResultOrder()
    model = ScriptedModel(
        [
            [
                *tool_call_turn("nap", {"seconds": 5}, tool_call_id="c1"),
                *tool_call_turn("nap", {"seconds": 1}, tool_call_id="c2"),
                *tool_call_turn("nap", {"seconds": 3}, tool_call_id="c3"),
            ],
            "rested",
        ]
    )
    agent = Agent(id="a", model=model, tools=[nap], output_processors=[recorder])
    start = trio.current_time()
    chunks, result = await run_stream(agent)
    assert trio.current_time() - start == pytest.approx(5)  # max, not the sum (9)
    assert finished == ["c2", "c3", "c1"]
    results = [c for c in chunks if isinstance(c, ToolResultChunk)]
    assert [r.payload.tool_call_id for r in results] == ["c1", "c2", "c3"]
    assert [r.payload.result for r in results] == ["slept 5", "slept 1", "slept 3"]
    assert recorder.order == ["c1", "c2", "c3"]
    assert prompt_texts(model.calls[1].prompt)[-1] == (
        "tool: result[c1]=slept 5 result[c2]=slept 1 result[c3]=slept 3"
    )
    assert result.text == "rested"


# === 17. Bad tool arguments go back to the model =================================


async def test_rule17_tool_args_failing_validation_become_a_tool_error() -> None:
    model = ScriptedModel(
        [
            tool_call_turn("echo", {"txt": 1}),
            tool_call_turn("echo", {"text": "ok"}),
            "done",
        ]
    )
    agent = Agent(id="a", model=model, tools=[echo])
    chunks, result = await run_stream(agent)
    errors = [c for c in chunks if isinstance(c, ToolErrorChunk)]
    assert len(errors) == 1
    assert errors[0].payload.tool_name == "echo"
    assert errors[0].payload.tool_call_id == "call-1"
    assert "echo" in str(errors[0].payload.error)
    tool_results = [
        part
        for message in model.calls[1].prompt
        if message.role == "tool"
        for part in message.content
    ]
    assert len(tool_results) == 1
    assert isinstance(tool_results[0], PromptToolResultPart)
    assert tool_results[0].is_error
    assert "text" in str(tool_results[0].result)
    assert result.finish_reason == "stop"
    assert result.text == "done"
    assert len(model.calls) == 3


# === Tool restriction ============================================================


async def test_active_tools_and_tool_choice_none_restrict_the_offered_tools() -> None:
    model = ScriptedModel(["a", "b", "c", "d"])
    agent = Agent(id="a", model=model, tools=[echo, other])
    await agent.generate("hi")
    await agent.generate("hi", active_tools=["other"])
    await agent.generate("hi", tool_choice="none")

    class OnlyEcho(Processor):
        id = "only-echo"

        def process_input_step(self, args: ProcessInputStepArgs) -> Any:
            return {"active_tools": ["echo"]}

    await agent.generate("hi", input_processors=[OnlyEcho()])
    assert [call.tool_names for call in model.calls] == [
        ["echo", "other"],
        ["other"],
        [],
        ["echo"],
    ]


async def test_a_call_to_a_tool_outside_active_tools_is_a_tool_error() -> None:
    model = ScriptedModel([tool_call_turn("echo", {"text": "x"}), "ok"])
    agent = Agent(id="a", model=model, tools=[echo, other])
    chunks, result = await run_stream(agent, active_tools=["other"])
    errors = [c for c in chunks if isinstance(c, ToolErrorChunk)]
    assert [e.payload.tool_name for e in errors] == ["echo"]
    assert "ToolResultChunk" not in {type(c).__name__ for c in chunks}
    assert result.text == "ok"
