"""One run, one outcome: typed per-call options and the RunOutcome every ending
is derived from."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from procession import Agent, ConfigurationError, Processor, ProcessorContractError
from procession.actors import RunControl
from procession.chunks import AbortChunk, TripwireChunk
from procession.data import RunOutcome
from procession.runtime import USE_AGENT_DEFAULT
from procession.testing import ScriptedModel, tool_call_turn


class TripOnText(Processor):
    id = "trip-on-text"

    def process_output_stream(self, args: Any) -> Any:
        if args.part.type == "text-delta":
            args.abort("no text")
        return args.part


class TripOnInput(Processor):
    id = "trip-on-input"

    def process_input(self, args: Any) -> None:
        args.abort("no input")


def test_an_unknown_option_is_a_type_error_naming_the_valid_ones() -> None:
    agent = Agent(id="a", model=ScriptedModel(["hi"]))
    with pytest.raises(
        TypeError, match=r"max_stepz.*per-call options are: .*max_steps"
    ):
        agent.generate("hi", max_stepz=3)  # type: ignore[call-arg,unused-coroutine]  # the typo under test; raises before a coroutine exists
    with pytest.raises(TypeError, match=r"Agent\.stream\(\) got unexpected.*max_stepz"):
        agent.stream("hi", max_stepz=3)  # type: ignore[call-arg]  # the typo under test


def test_generate_checks_its_options_when_called_and_returns_a_coroutine() -> None:
    agent = Agent(id="a", model=ScriptedModel(["hi"]))
    with pytest.raises(ConfigurationError, match=r"max_steps must be an int >= 1"):
        agent.generate("hi", max_steps=0).close()  # (raised before it exists)
    pending = agent.generate("hi")
    assert inspect.iscoroutine(pending)
    pending.close()  # never awaited: nothing ran


async def test_use_agent_default_keeps_the_agents_value() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(id="a", model=model, max_steps=1)
    assert repr(USE_AGENT_DEFAULT) == "USE_AGENT_DEFAULT"
    result = await agent.generate("hi", max_steps=USE_AGENT_DEFAULT)
    assert result.text == "one"
    assert result.outcome == RunOutcome(kind="finish", finish_reason="stop")


async def test_a_stream_tripwire_is_the_outcome_and_the_last_chunk() -> None:
    agent = Agent(
        id="a", model=ScriptedModel(["blocked"]), output_processors=[TripOnText()]
    )
    async with agent.stream("hi") as stream:
        chunks = [chunk async for chunk in stream]
        result = await stream.result()
    assert isinstance(chunks[-1], TripwireChunk)
    assert stream.outcome is result.outcome
    assert result.outcome.kind == "tripwire"
    assert result.outcome.in_stream
    assert result.outcome.tripwire is not None
    assert result.outcome.tripwire.processor_id == "trip-on-text"
    assert result.finish_reason == result.outcome.finish_reason == "other"


async def test_a_tripwire_between_chunks_is_not_in_stream() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(id="a", model=model, input_processors=[TripOnInput()])
    result = await agent.generate("hi")
    assert result.outcome.kind == "tripwire"
    assert not result.outcome.in_stream
    assert model.calls == []


async def test_cancel_is_an_abort_outcome() -> None:
    agent = Agent(id="a", model=ScriptedModel(["one two three"]))
    async with agent.stream("hi") as stream:
        await stream.cancel()
        chunks = [chunk async for chunk in stream]
        result = await stream.result()
    assert isinstance(chunks[-1], AbortChunk)
    assert result.outcome == RunOutcome(kind="abort", finish_reason="aborted")
    assert result.finish_reason == "aborted"


async def test_the_first_conclusion_wins() -> None:
    """RunControl.conclude is write-once: a later ending cannot replace the one
    the client end decided."""
    seen: list[RunOutcome] = []

    class Observer:
        def attempt_began(self, view: Any) -> None:
            pass

        def delivered(self, chunk: Any) -> None:
            pass

    control = RunControl(
        run_id="r",
        may_retry=lambda: False,
        on_outcome=seen.append,
        observer=Observer(),
    )
    first = RunOutcome(kind="error", finish_reason="error")
    assert control.conclude(first) is first
    assert control.abort() is first
    assert control.conclude_stream_end(completed=True, finish_reason="stop") is first
    assert seen == [first]
    assert control.ended


class BadStreamResult(Processor):
    id = "bad-stream"

    def process_output_stream(self, args: Any) -> Any:
        return 42


class BadInputResult(Processor):
    id = "bad-input"

    def process_input(self, args: Any) -> Any:
        return 42


class ReturnsToolResult(Processor):
    id = "returns-result"

    def process_tool_result(self, args: Any) -> Any:
        return {"redacted": True}


@pytest.mark.parametrize(
    ("lane", "processor", "hook"),
    [
        ("output_processors", BadStreamResult(), "process_output_stream"),
        ("input_processors", BadInputResult(), "process_input"),
    ],
)
async def test_a_broken_contract_fails_the_same_way_in_every_lane(
    lane: str, processor: Processor, hook: str
) -> None:
    """The run's error is the ProcessorContractError itself, naming the
    processor and the hook once (issue 16: not wrapped in a ProcessorError
    that repeats it, in one lane but not another)."""
    lanes: dict[str, Any] = {lane: [processor]}
    agent = Agent(id="a", model=ScriptedModel(["hi"]), **lanes)
    result = await agent.generate("hi")
    assert type(result.error) is ProcessorContractError
    message = str(result.error)
    assert message.count(repr(processor.id)) == 1
    assert hook in message
    assert "returned 42" in message


async def test_returning_a_tool_result_points_to_update_tool_invocation() -> None:
    from procession import tool as make_tool

    @make_tool
    def echo(args: dict[str, Any], ctx: Any) -> str:
        """Echo."""
        return "x"

    model = ScriptedModel([tool_call_turn("echo", {}), "done"])
    agent = Agent(
        id="a", model=model, tools=[echo], output_processors=[ReturnsToolResult()]
    )
    result = await agent.generate("hi")
    assert isinstance(result.error, ProcessorContractError)
    assert "update_tool_invocation" in str(result.error)


def test_messages_of_the_wrong_type_are_named_in_the_users_words() -> None:
    agent = Agent(id="a", model=ScriptedModel(["hi"]))
    with pytest.raises(ConfigurationError, match=r"messages must be a str.*got 42$"):
        agent.generate(42).close()  # (raises before a coroutine exists)


def test_the_call_options_are_the_signatures_keywords() -> None:
    """``CALL_OPTIONS`` (what the TypeError lists, what _prepare reads) is
    exactly the keyword parameters of ``stream`` and ``generate``."""
    from procession.runtime._options import CALL_OPTIONS

    for method in (Agent.stream, Agent.generate):
        keywords = [
            name
            for name, p in inspect.signature(method).parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        ]
        assert tuple(keywords) == CALL_OPTIONS
