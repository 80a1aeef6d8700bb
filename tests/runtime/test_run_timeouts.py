"""Issue 9 §2.5: two run policies a user can set, on trio's clock: a model-stream
idle timeout measured between events (default 60 s) and a total run deadline
(off by default). Each failed before: a stalled stream hung forever."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent, ConfigurationError, ModelIdleTimeout, RunDeadlineExceeded
from procession.processors import StreamErrorRetryProcessor
from procession.testing import (
    Delay,
    ScriptedModel,
    assert_run_shape,
    drip,
    stall,
    text_turn,
)


async def run(agent: Agent, **options: Any) -> tuple[list[Any], Any]:
    async with agent.stream("hi", **options) as stream:
        chunks = [c async for c in stream]
        result = await stream.result()
    return chunks, result


async def test_a_stalled_stream_ends_with_model_idle_timeout_after_60_s(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent = Agent(id="a", model=ScriptedModel([stall(text_turn("one two three"), 2)]))
    start = trio.current_time()
    chunks, result = await run(agent)
    assert trio.current_time() - start == pytest.approx(60)
    assert isinstance(result.error, ModelIdleTimeout)
    assert "60 s" in str(result.error)
    assert "idle_timeout" in str(result.error)
    assert result.text == "one"  # what the client was shown
    assert assert_run_shape(chunks) == "error"


async def test_the_idle_timer_counts_between_events_not_in_total(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Every event 59 s apart: slow, never idle for 60 s; 5 minutes in all.
    turn = drip(text_turn("a b c d e"), 59)
    result = await Agent(id="a", model=ScriptedModel([turn])).generate("hi")
    assert result.error is None
    assert result.text == "a b c d e"


async def test_the_idle_timer_does_not_run_while_the_consumer_holds_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent = Agent(id="a", model=ScriptedModel([text_turn("one two three")]))
    async with agent.stream("hi") as stream:
        async for _chunk in stream:
            await trio.sleep(600)  # the consumer is slow, not the model
        result = await stream.result()
    assert result.error is None
    assert result.text == "one two three"


async def test_stream_error_retry_retries_an_idle_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([stall(text_turn("lost"), 1), "recovered"])
    agent = Agent(
        id="a",
        model=model,
        idle_timeout=5,
        error_processors=[StreamErrorRetryProcessor(delay_ms=0)],
    )
    result = await agent.generate("hi")
    assert len(model.calls) == 2
    assert result.text == "recovered"
    assert result.retry_count == 1


async def test_the_idle_timeout_can_be_set_per_call_and_turned_off(
    autojump_clock: trio.testing.MockClock,
) -> None:
    turn: list[Any] = ["slow", Delay(90), " answer"]
    agent = Agent(id="a", model=ScriptedModel([turn, turn]), idle_timeout=10)
    first = await agent.generate("hi")
    assert isinstance(first.error, ModelIdleTimeout)
    assert first.error.idle_timeout == 10
    second = await agent.generate("hi", idle_timeout=None)
    assert second.text == "slow answer"


async def test_a_run_deadline_ends_the_run_with_run_deadline_exceeded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    turn: list[Any] = ["a", Delay(20), "b", Delay(20), "c"]
    model = ScriptedModel([turn])
    agent = Agent(
        id="a",
        model=model,
        run_deadline=30,
        error_processors=[StreamErrorRetryProcessor(retry_unknown_errors=True)],
    )
    start = trio.current_time()
    chunks, result = await run(agent)
    assert trio.current_time() - start == pytest.approx(30)
    assert isinstance(result.error, RunDeadlineExceeded)
    assert "30 s" in str(result.error)
    assert len(model.calls) == 1  # never retried
    assert result.text == "ab"
    assert assert_run_shape(chunks) == "error"


async def test_a_callers_own_cancel_scope_still_works(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent = Agent(id="a", model=ScriptedModel([["a", Delay(50), "b"]]))
    with trio.move_on_after(10) as scope:
        await agent.generate("hi")
    assert scope.cancelled_caught


@pytest.mark.parametrize("value", [0, -1, "60", True, float("nan")])
def test_a_bad_policy_value_is_refused_at_once(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="idle_timeout must be a positive"):
        Agent(id="a", model=ScriptedModel(["x"]), idle_timeout=value)
    agent = Agent(id="a", model=ScriptedModel(["x"]))
    with pytest.raises(ConfigurationError, match="run_deadline must be a positive"):
        agent.generate("hi", run_deadline=value).close()
