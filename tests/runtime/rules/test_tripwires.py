"""SPEC §2 rule 6: tripwire results. A tripwire is one last chunk with the
Mastra shape, ``on_violation`` is awaited once before it and its errors are
swallowed; ``report_violation`` does not block."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio
import trio.testing

from procession import Agent, Processor, ProcessorViolation
from procession.actors import ExecutionMode
from procession.chunks import TextDeltaChunk, TripwireChunk, to_wire
from procession.processors import (
    ProcessInputArgs,
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
    ProcessOutputStreamArgs,
)
from procession.testing import ScriptedModel, text_turn
from tests.runtime.rules._helpers import (
    StreamGuard,
    deltas,
    each_mode,
    run_stream,
    types,
    wire,
)

# === 6. Tripwire results =========================================================


@each_mode
async def test_rule6_a_stream_tripwire_is_one_last_chunk_with_the_mastra_shape(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    log: list[Any] = []
    model = ScriptedModel([text_turn("hello there secret stuff more words")])
    agent = Agent(
        id="a", model=model, output_processors=[StreamGuard(log)], execution_mode=mode
    )
    async with agent.stream("hi", run_id="run-7") as stream:
        chunks = []
        async for chunk in stream:
            if isinstance(chunk, TripwireChunk):
                log.append("tripwire-chunk")
            chunks.append(chunk)
        result = await stream.result()
    assert types(chunks).count("tripwire") == 1
    assert to_wire(chunks[-1]) == {
        "type": "tripwire",
        "runId": "run-7",
        "from": "AGENT",
        "payload": {
            "reason": "leak",
            "retry": False,
            "metadata": {"kind": "pii"},
            "processorId": "stream-guard",
        },
    }
    assert deltas(chunks) == ["hello", " there"]
    assert log == [("violation", "leak", True), "tripwire-chunk"]
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert result.tripwire.processor_id == "stream-guard"
    assert result.error is None


async def test_rule6_a_process_input_tripwire_is_the_only_chunk() -> None:
    class Block(Processor):
        id = "block-input"

        def process_input(self, args: ProcessInputArgs) -> None:
            args.abort("no", metadata={"why": "test"})

    model = ScriptedModel(["never"])
    agent = Agent(id="a", model=model, input_processors=[Block()])
    chunks, result = await run_stream(agent, run_id="r-in")
    assert wire(chunks) == [
        {
            "type": "tripwire",
            "runId": "r-in",
            "from": "AGENT",
            "payload": {
                "reason": "no",
                "retry": False,
                "metadata": {"why": "test"},
                "processorId": "block-input",
            },
        }
    ]
    assert model.calls == []
    assert result.text == ""


async def test_rule6_generate_returns_on_a_tripwire() -> None:
    class Block(Processor):
        id = "quality"

        def process_output_step(self, args: ProcessOutputStepArgs) -> None:
            args.abort("too vague", metadata={"score": 0.2})

    agent = Agent(id="a", model=ScriptedModel(["meh"]), output_processors=[Block()])
    result = await agent.generate("hi")
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert attrs.asdict(result.tripwire) == {
        "reason": "too vague",
        "retry": False,
        "metadata": {"score": 0.2},
        "processor_id": "quality",
    }
    assert result.error is None


async def test_rule6_output_result_tripwire_keeps_text_and_persists_nothing() -> None:
    class Reject(Processor):
        id = "final-check"

        def process_output_result(self, args: ProcessOutputResultArgs) -> None:
            assert args.result.text == "the full answer"
            args.abort("rejected at the end")

    model = ScriptedModel(["the full answer"])
    agent = Agent(id="a", model=model, output_processors=[Reject()])
    chunks, result = await run_stream(agent)
    assert deltas(chunks) == ["the full answer"]
    # process_output_result runs once the finish chunk has been through the
    # output processors (Mastra 1I.67); its tripwire is still the last chunk.
    assert types(chunks)[-2:] == ["finish", "tripwire"]
    assert result.text == "the full answer"
    assert result.response_messages == ()
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert result.tripwire.processor_id == "final-check"


@pytest.mark.parametrize("hook", ["process_input", "process_output_step"])
async def test_rule6_on_violation_is_awaited_once_before_the_tripwire_chunk(
    hook: str, autojump_clock: trio.testing.MockClock
) -> None:
    log: list[Any] = []

    def trip(self: Any, args: Any) -> None:
        args.abort("blocked", metadata=1)

    async def on_violation(self: Any, violation: ProcessorViolation) -> None:
        await trio.sleep(5)
        log.append((violation.processor_id, violation.message, violation.blocking))

    cls = type(
        "Tripper",
        (Processor,),
        {"id": "tripper", hook: trip, "on_violation": on_violation},
    )
    lane = "input_processors" if hook == "process_input" else "output_processors"
    lanes: dict[str, Any] = {lane: [cls()]}
    agent = Agent(id="a", model=ScriptedModel(["x"]), **lanes)
    async with agent.stream("hi") as stream:
        async for chunk in stream:
            if isinstance(chunk, TripwireChunk):
                log.append("tripwire-chunk")
    assert log == [("tripper", "blocked", True), "tripwire-chunk"]


async def test_rule6_on_violation_errors_are_swallowed() -> None:
    class Tripper(Processor):
        id = "tripper"

        def process_output_step(self, args: ProcessOutputStepArgs) -> None:
            args.abort("blocked")

        def on_violation(self, violation: ProcessorViolation) -> None:
            raise RuntimeError("callback broke")

    agent = Agent(id="a", model=ScriptedModel(["x"]), output_processors=[Tripper()])
    chunks, result = await run_stream(agent)
    assert isinstance(chunks[-1], TripwireChunk)
    assert result.tripwire is not None
    assert result.tripwire.reason == "blocked"
    assert result.error is None


@each_mode
async def test_rule6_report_violation_does_not_block(mode: ExecutionMode) -> None:
    class Warner(Processor):
        id = "warner"

        def __init__(self) -> None:
            self.violations: list[ProcessorViolation] = []

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            part = args.part
            if isinstance(part, TextDeltaChunk) and "damn" in part.payload.text:
                args.report_violation("profanity", {"word": "damn"})
            return part

        def on_violation(self, violation: ProcessorViolation) -> None:
            self.violations.append(violation)

    warner = Warner()
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("oh damn it")]),
        output_processors=[warner],
        execution_mode=mode,
    )
    chunks, result = await run_stream(agent)
    assert warner.violations == [
        ProcessorViolation(
            processor_id="warner",
            message="profanity",
            detail={"word": "damn"},
            blocking=False,
        )
    ]
    assert result.finish_reason == "stop"
    assert result.tripwire is None
    assert result.text == "oh damn it"
    assert types(chunks)[-1] == "finish"
