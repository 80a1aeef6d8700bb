"""SPEC §2 rules 2 and 7: how a run fails. A processor's ``on_error`` policy
(raise / pass / block) in every hook kind (2); bad arguments, failed runs and the
caller's own exceptions (7)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from procession import (
    Agent,
    ConfigurationError,
    Processor,
    ProcessorError,
    ProviderError,
)
from procession.actors import ExecutionMode
from procession.chunks import TextDeltaChunk, TripwireChunk
from procession.testing import (
    Delay,
    ScriptedModel,
    assert_run_shape,
    text_turn,
    tool_call_turn,
)
from tests.runtime.rules._helpers import (
    Upper,
    each_mode,
    echo,
    prompt_texts,
    run_stream,
    types,
)

# === 2. on_error policies, in every hook kind ====================================

INPUT_HOOKS = (
    "process_input",
    "process_input_step",
    "process_llm_request",
    "process_llm_response",
)
OUTPUT_HOOKS = (
    "process_output_stream",
    "process_output_step",
    "process_tool_result",
    "process_output_result",
)
ALL_HOOKS = INPUT_HOOKS + OUTPUT_HOOKS


def failing_processor(hook: str, policy: str, calls: list[str]) -> Any:
    def fail(self: Any, args: Any) -> Any:
        calls.append(hook)
        raise ValueError("boom")

    cls = type(
        "Failing", (Processor,), {"id": "failing", "on_error": policy, hook: fail}
    )
    return cls()


def tool_then_text_agent(
    hook: str, processor: Any, **options: Any
) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([tool_call_turn("echo", {"text": "x"}), "all done"])
    lane = "input_processors" if hook in INPUT_HOOKS else "output_processors"
    lanes: dict[str, Any] = {lane: [processor], **options}
    agent = Agent(id="a", model=model, tools=[echo], **lanes)
    return agent, model


@pytest.mark.parametrize("hook", ALL_HOOKS)
async def test_rule2_on_error_raise_ends_the_run_with_one_error_chunk(
    hook: str,
) -> None:
    calls: list[str] = []
    agent, _ = tool_then_text_agent(hook, failing_processor(hook, "raise", calls))
    chunks, result = await run_stream(agent)
    assert calls == [hook]
    assert types(chunks).count("error") == 1
    assert assert_run_shape(chunks) == "error"
    assert result.finish_reason == "error"
    assert result.tripwire is None
    assert isinstance(result.error, ProcessorError)
    assert result.error.processor_id == "failing"
    assert isinstance(result.error.__cause__, ValueError)
    assert str(result.error.__cause__) == "boom"


@pytest.mark.parametrize("hook", ALL_HOOKS)
async def test_rule2_on_error_pass_fails_open(hook: str) -> None:
    calls: list[str] = []
    agent, model = tool_then_text_agent(hook, failing_processor(hook, "pass", calls))
    chunks, result = await run_stream(agent)
    assert hook in calls
    assert result.finish_reason == "stop"
    assert result.error is None
    assert result.tripwire is None
    assert result.text == "all done"
    assert "error" not in types(chunks)
    assert types(chunks)[-1] == "finish"
    assert len(model.calls) == 2
    # The tool result went through unchanged.
    assert "tool: result[call-1]=echo:x" in prompt_texts(model.calls[1].prompt)


@pytest.mark.parametrize("hook", ALL_HOOKS)
async def test_rule2_on_error_block_fails_closed_with_a_tripwire(hook: str) -> None:
    calls: list[str] = []
    agent, _ = tool_then_text_agent(hook, failing_processor(hook, "block", calls))
    chunks, result = await run_stream(agent)
    assert calls == [hook]
    assert types(chunks).count("tripwire") == 1
    assert isinstance(chunks[-1], TripwireChunk)
    assert chunks[-1].payload.reason == "failing failed: boom"
    assert chunks[-1].payload.processor_id == "failing"
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert result.tripwire.reason == "failing failed: boom"
    assert result.error is None


@pytest.mark.parametrize("hook", ["process_output_stream", "process_output_step"])
async def test_rule2_a_fail_open_processor_cannot_swallow_its_abort_in_a_group(
    hook: str,
) -> None:
    """The abort is raised inside the processor's own nursery, so it arrives as
    an ExceptionGroup; ``on_error="pass"`` must not turn it into "no change"."""

    async def body(self: Any, args: Any) -> Any:
        async def trip() -> None:
            args.abort("grouped abort")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trip)
        return getattr(args, "part", None)

    cls = type(
        "Grouped", (Processor,), {"id": "grouped", "on_error": "pass", hook: body}
    )
    agent = Agent(id="a", model=ScriptedModel(["hello"]), output_processors=[cls()])
    chunks, result = await run_stream(agent)
    assert isinstance(chunks[-1], TripwireChunk)
    assert result.tripwire is not None
    assert result.tripwire.reason == "grouped abort"
    assert result.tripwire.processor_id == "grouped"
    assert result.finish_reason == "other"


# === 7. Errors ===================================================================


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_processor_retries": -1}, "max_processor_retries"),
        ({"max_processor_retries": "3"}, "max_processor_retries"),
        ({"max_steps": 0}, "max_steps"),
        ({"execution_mode": "warp"}, "execution_mode"),
        ({"active_tools": ["nope"]}, "nope"),
        ({"output_processors": "upper"}, "output_processors"),
        ({"model": "no-such-provider/x"}, "no-such-provider"),
        ({"prepare_step": 42}, "prepare_step"),
        ({"input_processors": [object()]}, "has no id"),
    ],
)
async def test_rule7_bad_call_arguments_raise_before_any_model_call(
    options: dict[str, Any], match: str
) -> None:
    model = ScriptedModel(["x"])
    agent = Agent(id="a", model=model, tools=[echo])
    with pytest.raises(ConfigurationError, match=match):
        agent.stream("hi", **options)  # raises at once, not on entering
    with pytest.raises(ConfigurationError, match=match):
        await agent.generate("hi", **options)
    assert model.calls == []


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"id": ""}, "id"),
        ({"max_steps": 0}, "max_steps"),
        ({"max_processor_retries": -2}, "max_processor_retries"),
        ({"instructions": [1]}, "instructions"),
        ({"execution_mode": "threads"}, "execution_mode"),
        ({"model": "nonsense"}, "provider/model-id"),
    ],
)
def test_rule7_bad_agent_arguments_raise_at_once(
    options: dict[str, Any], match: str
) -> None:
    model = ScriptedModel(["x"])
    kwargs: dict[str, Any] = {"id": "a", "model": model, **options}
    with pytest.raises(ConfigurationError, match=match):
        Agent(**kwargs)
    assert model.calls == []


async def test_rule7_a_failed_run_returns_error() -> None:
    failure = ProviderError("internal", status_code=500)
    agent = Agent(id="a", model=ScriptedModel([failure]))
    result = await agent.generate("hi")
    assert result.finish_reason == "error"
    assert result.error is failure
    assert result.tripwire is None


@each_mode
async def test_rule7_user_exceptions_in_the_stream_block_come_out_unwrapped(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    model = ScriptedModel([[*text_turn("a b c d"), Delay(10), *text_turn("e", id="x")]])
    agent = Agent(id="a", model=model, execution_mode=mode, output_processors=[Upper()])

    async def consume() -> None:
        async with agent.stream("hi") as stream:
            async for chunk in stream:
                if isinstance(chunk, TextDeltaChunk):
                    raise KeyError("mine")

    with pytest.raises(KeyError, match="mine") as caught:
        await consume()
    assert type(caught.value) is KeyError  # not an ExceptionGroup
    assert model.calls[0].closed_early


@each_mode
async def test_rule7_the_blocks_own_exception_keeps_its_context_and_cause(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    """Leaving the run (its nursery, its pipeline) neither wraps the block's
    exception nor rewrites what it was raised from."""
    model = ScriptedModel([[*text_turn("a b"), Delay(10), *text_turn("c", id="x")]])
    agent = Agent(id="a", model=model, execution_mode=mode, output_processors=[Upper()])
    origin = ValueError("origin")

    async def consume() -> None:
        async with agent.stream("hi") as stream:
            async for chunk in stream:
                if isinstance(chunk, TextDeltaChunk):
                    try:
                        raise origin
                    except ValueError as exc:
                        raise KeyError("mine") from exc

    with pytest.raises(KeyError, match="mine") as caught:
        await consume()
    assert caught.value.__cause__ is origin
    assert caught.value.__context__ is origin
    assert model.calls[0].closed_early


async def test_rule7_a_callers_cancel_scope_ends_the_block_and_the_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([[*text_turn("a b"), Delay(10), *text_turn("c", id="x")]])
    agent = Agent(id="a", model=model)
    seen: list[str] = []
    with trio.move_on_after(5) as scope:
        async with agent.stream("hi") as stream:
            async for chunk in stream:
                seen.append(chunk.type)
    assert scope.cancelled_caught
    assert "text-delta" in seen
    assert "finish" not in seen
    assert model.calls[0].closed_early


async def test_rule7_a_runs_block_is_entered_once() -> None:
    block = Agent(id="a", model=ScriptedModel([text_turn("a")])).stream("hi")
    async with block as stream:
        assert [c.type async for c in stream][-1] == "finish"
        with pytest.raises(RuntimeError, match="a run's stream is entered once"):
            await block.__aenter__()
