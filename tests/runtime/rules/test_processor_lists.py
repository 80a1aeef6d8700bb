"""SPEC §2 rule 12 and per-call processor lists: how processors are registered
(shared instances, fresh state, duplicate ids, hookless objects, indices), and
per-call lists and factories of the request context that replace the agent's."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from procession import (
    Agent,
    ConfigurationError,
    DuplicateProcessorIdError,
    Processor,
    message_text,
)
from procession.chunks import FinishChunk, TextDeltaChunk, TextDeltaPayload
from procession.processors import (
    ProcessInputArgs,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
)
from procession.testing import ScriptedModel, tool_call_turn
from tests.runtime.rules._helpers import Upper, echo
from tests.seed_processors import content_filter_for

# === 12. Registration ============================================================


async def test_rule12_one_instance_in_two_lanes_shares_its_state() -> None:
    class Both(Processor):
        id = "both-lanes"

        def __init__(self) -> None:
            self.seen: list[Any] = []

        def process_input(self, args: ProcessInputArgs) -> None:
            args.state["from_input"] = message_text(args.messages[0])

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            self.seen.append(args.state.get("from_input"))
            return args.part

    both = Both()
    agent = Agent(
        id="a",
        model=ScriptedModel(["x"]),
        input_processors=[both],
        output_processors=[both],
    )
    result = await agent.generate("remember me")
    assert result.finish_reason == "stop"
    assert both.seen
    assert set(both.seen) == {"remember me"}


async def test_rule12_state_is_fresh_for_every_call() -> None:
    class Count(Processor):
        id = "count"

        def __init__(self) -> None:
            self.totals: list[int] = []

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            args.state["n"] = args.state.get("n", 0) + 1
            if isinstance(args.part, FinishChunk):
                self.totals.append(args.state["n"])
            return args.part

    counter = Count()
    agent = Agent(id="a", model=ScriptedModel(["x", "x"]), output_processors=[counter])
    await agent.generate("hi")
    await agent.generate("hi")
    assert len(counter.totals) == 2
    assert counter.totals[0] == counter.totals[1]


async def test_rule12_duplicate_ids_are_an_error_before_any_model_call() -> None:
    model = ScriptedModel(["x"])
    agent = Agent(id="a", model=model, output_processors=[Upper(), Upper()])
    with pytest.raises(DuplicateProcessorIdError, match="'upper'"):
        await agent.generate("hi")
    assert model.calls == []


async def test_rule12_a_processor_without_hooks_is_an_error() -> None:
    class Empty:
        id = "empty"

    model = ScriptedModel(["x"])
    agent = Agent(id="a", model=model, output_processors=[Empty()])
    with pytest.raises(ConfigurationError, match="implements none of the hooks"):
        await agent.generate("hi")
    assert model.calls == []


async def test_rule12_processor_index_is_the_merged_position() -> None:
    class P(Processor):
        def __init__(self, ident: str) -> None:
            self.id = ident

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            return args.part

        def process_input(self, args: ProcessInputArgs) -> None:
            return None

        def process_api_error(self, args: Any) -> None:
            return None  # d sits in the error lane, which needs this hook

    a, b, c, d = P("a"), P("b"), P("c"), P("d")
    agent = Agent(
        id="agent",
        model=ScriptedModel(["x"]),
        input_processors=[a, b],
        output_processors=[b, c],
        error_processors=[d],
    )
    await agent.generate("hi")
    assert [p.processor_index for p in (a, b, c, d)] == [0, 1, 2, 3]


async def test_rule12_a_tool_result_only_processor_is_accepted_in_the_output_lane() -> (
    None
):
    class Redact(Processor):
        id = "redact"

        def process_tool_result(self, args: ProcessToolResultArgs) -> None:
            part = args.message_list
            del part  # only counts calls
            self.calls = getattr(self, "calls", 0) + 1

    redact = Redact()
    model = ScriptedModel([tool_call_turn("echo", {"text": "x"}), "done"])
    agent = Agent(id="a", model=model, tools=[echo], output_processors=[redact])
    result = await agent.generate("hi")
    assert result.finish_reason == "stop"
    assert redact.calls == 1


# === Per-call overrides and processor factories ==================================


async def test_per_call_processor_lists_replace_the_agents() -> None:
    class Suffix(Processor):
        id = "suffix"

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            part = args.part
            if isinstance(part, TextDeltaChunk):
                return attrs.evolve(
                    part, payload=TextDeltaPayload(id=part.payload.id, text="x!")
                )
            return part

    agent = Agent(
        id="a", model=ScriptedModel(["abc", "abc", "abc"]), output_processors=[Upper()]
    )
    assert (await agent.generate("hi")).text == "ABC"
    assert (await agent.generate("hi", output_processors=[])).text == "abc"
    assert (await agent.generate("hi", output_processors=[Suffix()])).text == "x!"


async def test_processor_lists_may_be_callables_of_the_request_context() -> None:
    seen: list[Any] = []

    def factory(context: Any) -> list[object]:
        seen.append(context.get("blockedWords"))
        return content_filter_for(context)

    agent = Agent(
        id="a",
        model=ScriptedModel(["a forbidden word", "a forbidden word"]),
        output_processors=factory,
    )
    blocked = await agent.generate(
        "hi", request_context={"blockedWords": ["forbidden"]}
    )
    assert blocked.tripwire is not None
    assert blocked.tripwire.reason == "Blocked content detected in output"
    assert blocked.tripwire.processor_id == "content-filter"
    allowed = await agent.generate("hi", request_context={"blockedWords": ["other"]})
    assert allowed.tripwire is None
    assert allowed.text == "a forbidden word"
    assert seen == [["forbidden"], ["other"]]
