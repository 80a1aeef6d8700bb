"""``StructuredOutput``: the final answer parsed and checked, ``result.object``,
retries with the problems as feedback within the budget, and what happens when
they run out."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from procession import Agent, ConfigurationError
from procession import chunks as c
from procession.processors import Processor, StructuredOutput
from procession.processors.builtin import read_json
from procession.testing import ScriptedModel, tool_call_turn
from procession.wire import json_schema


@attrs.frozen
class Weather:
    city: str
    celsius: int


WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
    "required": ["city", "celsius"],
}


def agent_with(model: ScriptedModel, shape: StructuredOutput, **options: Any) -> Agent:
    return Agent(
        id="weather",
        model=model,
        input_processors=[shape],
        output_processors=[shape],
        **options,
    )


async def test_a_fitting_answer_is_the_results_object() -> None:
    model = ScriptedModel(['{"city": "Oslo", "celsius": 4}'])
    result = await agent_with(model, StructuredOutput(Weather)).generate("Oslo?")
    assert result.object == Weather(city="Oslo", celsius=4)
    assert result.tripwire is None
    assert result.text == '{"city": "Oslo", "celsius": 4}'
    # The model was told the schema.
    system = [m for m in model.calls[0].prompt if m.role == "system"]
    assert any('"celsius": {"type": "integer"}' in m.content for m in system)


async def test_a_json_schema_dict_gives_the_decoded_value() -> None:
    model = ScriptedModel(['Here:\n```json\n{"city": "Rome", "celsius": 20}\n```'])
    shape = StructuredOutput(WEATHER_SCHEMA)
    result = await agent_with(model, shape).generate("Rome?")
    assert result.object == {"city": "Rome", "celsius": 20}


async def test_the_stream_carries_the_object_result_chunk() -> None:
    model = ScriptedModel(['{"city": "Oslo", "celsius": 4}'])
    agent = agent_with(model, StructuredOutput(Weather))
    async with agent.stream("Oslo?") as stream:
        chunks = [chunk async for chunk in stream]
        result = await stream.result()
    objects = [x for x in chunks if isinstance(x, c.ObjectResultChunk)]
    assert [x.object for x in objects] == [Weather(city="Oslo", celsius=4)]
    assert objects[0].metadata == {"from": "structured-output"}
    kinds = [x.type for x in chunks]
    assert kinds.index("object-result") < kinds.index("finish")
    assert result.object == Weather(city="Oslo", celsius=4)


async def test_a_mismatch_is_retried_with_the_problems_as_feedback() -> None:
    model = ScriptedModel(
        ['{"city": "Oslo", "celsius": "4"}', '{"city": "Oslo", "celsius": 4}']
    )
    shape = StructuredOutput(Weather)
    result = await agent_with(model, shape, max_processor_retries=2).generate("Oslo?")
    assert result.object == Weather(city="Oslo", celsius=4)
    assert result.retry_count == 1
    assert result.text == '{"city": "Oslo", "celsius": 4}'
    feedback = " ".join(
        str(m.content) for m in model.calls[1].prompt if m.role == "system"
    )
    assert "expected an integer, got '4' @ $.celsius" in feedback
    assert "[StructuredOutput] The answer did not match the schema" in feedback


async def test_prose_is_not_json_and_trips_when_the_retries_run_out() -> None:
    model = ScriptedModel(["Sunny!", "Still sunny!", "Sunny, I said."])
    shape = StructuredOutput(Weather)
    result = await agent_with(model, shape, max_processor_retries=2).generate("Oslo?")
    assert result.object is None
    assert result.tripwire is not None
    assert result.tripwire.processor_id == "structured-output"
    assert result.tripwire.reason == (
        "[StructuredOutput] The answer did not match the schema: the text is not "
        "JSON: 'Sunny, I said.'. Answer again with only a JSON value matching the "
        "schema."
    )
    assert len(model.calls) == 3


async def test_without_a_budget_the_retry_is_a_tripwire() -> None:
    model = ScriptedModel(["not json"])
    result = await agent_with(model, StructuredOutput(Weather)).generate("Oslo?")
    assert result.tripwire is not None
    assert result.tripwire.retry  # it asked; the run had no budget
    assert len(model.calls) == 1


async def test_fallback_and_warn_once_retries_are_used() -> None:
    shape = StructuredOutput(
        Weather,
        error_strategy="fallback",
        fallback_value={"unknown": True},
        max_retries=0,
    )
    result = await agent_with(ScriptedModel(["nope"]), shape).generate("x")
    assert result.tripwire is None
    assert result.object == {"unknown": True}

    seen: list[Any] = []

    class Warned(StructuredOutput):
        def on_violation(self, violation: Any) -> None:
            seen.append(violation.message)

    warned = Warned(Weather, error_strategy="warn", max_retries=0)
    result = await agent_with(ScriptedModel(["nope"]), warned).generate("x")
    assert result.tripwire is None
    assert result.object is None
    assert len(seen) == 1
    assert seen[0].startswith("[StructuredOutput] The answer did not match")


async def test_a_tool_calling_step_is_not_checked() -> None:
    from procession import tool

    @tool
    def lookup(args: dict[str, Any], context: Any) -> str:
        """Look the weather up."""
        return "4 degrees"

    model = ScriptedModel(
        [[*tool_call_turn("lookup", {})], '{"city": "Oslo", "celsius": 4}']
    )
    agent = Agent(
        id="weather",
        model=model,
        tools=[lookup],
        input_processors=[shape := StructuredOutput(Weather)],
        output_processors=[shape],
    )
    result = await agent.generate("Oslo?")
    assert result.object == Weather(city="Oslo", celsius=4)
    assert result.retry_count == 0


async def test_an_object_from_a_retried_attempt_is_not_the_result() -> None:
    class RejectFirst(Processor):
        """A later processor that retries the first attempt after the object
        was written."""

        id = "reject-first"

        def process_output_step(self, args: Any) -> None:
            if args.retry_count == 0:
                args.abort("again", retry=True)

    model = ScriptedModel(['{"city": "A", "celsius": 1}', "no json this time"])
    shape = StructuredOutput(Weather, error_strategy="warn", max_retries=0)
    agent = Agent(
        id="weather",
        model=model,
        output_processors=[shape, RejectFirst()],
        max_processor_retries=1,
    )
    async with agent.stream("x") as stream:
        chunks = [chunk async for chunk in stream]
        result = await stream.result()
    # The client did see the first attempt's object, then the retry...
    assert [x.object for x in chunks if isinstance(x, c.ObjectResultChunk)] == [
        Weather(city="A", celsius=1)
    ]
    # ...which took it back.
    assert result.object is None
    assert result.retry_count == 1


def test_read_json() -> None:
    assert read_json('{"a": 1}') == (True, {"a": 1})
    assert read_json('Sure: {"a": [1, 2]} hope that helps') == (True, {"a": [1, 2]})
    assert read_json("```\n[1, 2]\n```") == (True, [1, 2])
    assert read_json("no json") == (False, None)
    assert read_json("") == (False, None)


def test_bad_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"error_strategy must be one of"):
        StructuredOutput(Weather, error_strategy="lenient")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"max_retries must be 0 or more"):
        StructuredOutput(Weather, max_retries=-1)
    with pytest.raises(
        ConfigurationError, match=r"StructuredOutput: expected an attrs class"
    ):
        StructuredOutput(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"not a valid JSON Schema"):
        StructuredOutput({"type": 12})
    assert StructuredOutput(Weather).checker.schema == json_schema(Weather)


async def test_the_writer_takes_an_object_result_and_still_refuses_run_chunks() -> None:
    from procession import ProcessorContractError
    from procession.processors import CollectingEmitter, ProcessorStreamWriter

    emitter = CollectingEmitter()
    writer = ProcessorStreamWriter(emitter, "shape")
    await writer.custom({"type": "object-result", "object": {"a": 1}})
    (written,) = [chunk for _, chunk in emitter.custom]
    assert isinstance(written, c.ObjectResultChunk)
    assert written.object == {"a": 1}
    with pytest.raises(ProcessorContractError, match=r"got a 'object' chunk"):
        writer.custom_nowait({"type": "object", "object": {"a": 1}})
