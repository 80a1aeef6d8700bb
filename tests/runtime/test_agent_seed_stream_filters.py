"""The seed's example processors inside a real ``Agent`` loop with a
``ScriptedModel``: ContentFilter (input and output stream), WordCounter (state
across the stream) and ModerationCollector (data chunks a tool writes), in
every execution mode where a stream hook runs.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from procession import Agent
from procession.actors import ExecutionMode
from procession.chunks import (
    DataChunk,
    TextDeltaChunk,
    TripwireChunk,
    to_wire,
)
from procession.processors import (
    ProcessOutputResultArgs,
)
from procession.runtime.tools import ToolContext, tool
from procession.testing import (
    ScriptedModel,
    text_turn,
    tool_call_turn,
)
from tests.runtime.seed_agent_helpers import (
    MODES,
    CityInput,
    get_weather,
    of_type,
    run_stream,
    user_texts,
)
from tests.seed_processors import (
    ContentFilter,
    ModerationCollector,
    WordCounter,
    content_filter_for,
)

# --- ContentFilter (process_input and process_output_stream) ------------------------


async def test_content_filter_blocks_input_before_the_model_is_called() -> None:
    """Blocked input: no model call, and the stream is exactly one tripwire."""
    model = ScriptedModel(["never sent"])
    agent = Agent(id="a", model=model, input_processors=[ContentFilter(["secret"])])
    chunks, result = await run_stream(agent, "Tell me the secret code")

    assert model.calls == []
    assert len(of_type(chunks, TripwireChunk)) == 1
    assert isinstance(chunks[-1], TripwireChunk)
    assert not of_type(chunks, TextDeltaChunk)
    assert to_wire(chunks[-1]) == {
        "type": "tripwire",
        "runId": result.run_id,
        "from": "AGENT",
        "payload": {
            "reason": "Blocked content detected in input",
            "retry": False,
            "metadata": None,
            "processorId": "content-filter",
        },
    }
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert result.tripwire.processor_id == "content-filter"
    assert result.text == ""


async def test_content_filter_passes_clean_input() -> None:
    model = ScriptedModel(["Hello!"])
    agent = Agent(id="a", model=model, input_processors=[ContentFilter(["secret"])])
    result = await agent.generate("Say hello")

    assert result.tripwire is None
    assert result.text == "Hello!"
    assert user_texts(model.calls[0].prompt) == ["Say hello"]


@pytest.mark.parametrize("mode", MODES)
async def test_content_filter_blocks_output_mid_stream(mode: ExecutionMode) -> None:
    """A blocked word in a text delta: the deltas before it reach the client,
    the blocked one and everything after it do not, the tripwire is last, and
    the model's stream is closed early."""
    model = ScriptedModel([[*text_turn("The launch code is secret 1234 do not share")]])
    agent = Agent(
        id="a",
        model=model,
        output_processors=[ContentFilter(["secret"])],
        execution_mode=mode,
    )
    chunks, result = await run_stream(agent, "What is the launch code?")

    assert [c.payload.text for c in of_type(chunks, TextDeltaChunk)] == [
        "The",
        " launch",
        " code",
        " is",
    ]
    assert [c.type for c in chunks[:3]] == ["start", "step-start", "text-start"]
    tripwires = of_type(chunks, TripwireChunk)
    assert tripwires == [chunks[-1]]
    assert tripwires[0].payload.reason == "Blocked content detected in output"
    assert tripwires[0].payload.processor_id == "content-filter"
    assert "secret" not in repr(chunks[:-1])
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert result.tripwire.processor_id == "content-filter"
    assert model.calls[0].closed_early


async def test_content_filter_from_the_request_context() -> None:
    """``input_processors=content_filter_for``: the blocked words come from each
    call's request context."""
    model = ScriptedModel(["ok", "ok"])
    agent = Agent(id="a", model=model, input_processors=content_filter_for)

    blocked = await agent.generate(
        "My password is hunter2", request_context={"blockedWords": ["hunter2"]}
    )
    assert blocked.finish_reason == "other"
    assert blocked.tripwire is not None
    assert blocked.tripwire.reason == "Blocked content detected in input"
    assert blocked.tripwire.processor_id == "content-filter"
    assert model.calls == []

    allowed = await agent.generate(
        "My password is hunter2", request_context={"blockedWords": ["swordfish"]}
    )
    assert allowed.tripwire is None
    assert allowed.text == "ok"

    no_words = await agent.generate("My password is hunter2")
    assert no_words.tripwire is None
    assert len(model.calls) == 2


# --- WordCounter (process_output_stream with state) ---------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_word_counter_state_spans_the_whole_stream(
    mode: ExecutionMode, caplog: pytest.LogCaptureFixture
) -> None:
    """WordCounter's state lives across every chunk of every step of one call:
    the total it logs once, at the run's finish, is the word count of the whole
    text; a new call starts from zero."""
    first_text = "Let me check the weather for you. "
    second_text = "It is 21 degrees and sunny in Paris."
    model = ScriptedModel(
        [
            [*text_turn(first_text), *tool_call_turn("get_weather", {"city": "Paris"})],
            [*text_turn(second_text)],
            "One two three.",
        ]
    )
    agent = Agent(
        id="a",
        model=model,
        tools=[get_weather],
        output_processors=[WordCounter()],
        execution_mode=mode,
    )
    with caplog.at_level(logging.INFO, logger="seed_processors"):
        result = await agent.generate("Weather in Paris?")
        again = await agent.generate("Count to three")

    assert result.text == first_text + second_text
    assert len(result.text.split()) == 15
    assert again.text == "One two three."
    assert caplog.messages == ["Total words: 15", "Total words: 3"]


# --- ModerationCollector (process_data_parts) ---------------------------------------


class Collector(ModerationCollector):
    """ModerationCollector that hands its state's warnings to the test when the
    run completes (process_output_result shares the stream hook's state)."""

    def __init__(self, seen: list[Any]) -> None:
        self.seen = seen

    async def process_output_result(self, args: ProcessOutputResultArgs) -> None:
        self.seen.append(args.state.get("warnings", []))


class BlindCollector(Collector):
    """The same code without ``process_data_parts``."""

    id = "blind-collector"
    process_data_parts = False


WARNING = {"level": "warn", "reason": "Possibly unsafe"}


@tool("moderate")
async def moderate(args: CityInput, context: ToolContext) -> str:
    """Check a city name; reports a moderation warning through the writer."""
    assert context.writer is not None
    await context.writer.custom({"type": "data-moderation", "data": WARNING})
    await context.writer.custom(
        {"type": "data-progress", "data": {"status": "done"}, "transient": True}
    )
    return "checked"


@pytest.mark.parametrize("mode", MODES)
async def test_moderation_collector_sees_data_chunks_from_a_tool_writer(
    mode: ExecutionMode,
) -> None:
    """Data chunks written by a tool reach the client and processors with
    process_data_parts=True; a processor without the flag never sees them."""
    collected: list[Any] = []
    blind: list[Any] = []
    model = ScriptedModel(
        [[*tool_call_turn("moderate", {"city": "Paris"})], "Paris is fine."]
    )
    agent = Agent(
        id="a",
        model=model,
        tools=[moderate],
        output_processors=[BlindCollector(blind), Collector(collected)],
        execution_mode=mode,
    )
    chunks, result = await run_stream(agent, "Is Paris ok?")

    assert result.text == "Paris is fine."
    assert collected == [[WARNING]]
    assert blind == [[]]
    data_chunks = of_type(chunks, DataChunk)
    assert [(c.type, c.data) for c in data_chunks] == [
        ("data-moderation", WARNING),
        ("data-progress", {"status": "done"}),
    ]
    assert [c.type for c in result.custom_chunks] == [
        "data-moderation",
        "data-progress",
    ]
    # The tool's data comes before its tool-result.
    kinds = [
        c.type for c in chunks if c.type.startswith("data-") or c.type == "tool-result"
    ]
    assert kinds == ["data-moderation", "data-progress", "tool-result"]
