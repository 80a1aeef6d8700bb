"""The seed's error processors in a real ``Agent`` run: ``StreamErrorRetryProcessor``
waits for Retry-After on trio's clock and retries within its budget;
``PrefillErrorHandler`` makes the retried prompt end with a user turn."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from procession import Agent, ProviderError
from procession.chunks import (
    DataChunk,
    ErrorChunk,
    StepRetryChunk,
    TextDeltaChunk,
    to_wire,
)
from procession.processors import (
    PrefillErrorHandler,
    PromptTextPart,
    StreamErrorRetryProcessor,
)
from procession.processors.builtin import PREFILL_REMINDER_TEXT, PREFILL_SIGNAL
from procession.testing import ScriptedModel


def timed_turn(times: list[float], answer: Any) -> Any:
    """A scripted turn that records when the model was called."""

    def turn(request: Any) -> Any:
        times.append(trio.current_time())
        return answer

    return turn


async def test_retry_after_is_waited_on_trios_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    times: list[float] = []
    failure = ProviderError(
        "overloaded", status_code=529, headers={"retry-after": "2"}, is_retryable=True
    )
    model = ScriptedModel([timed_turn(times, failure), timed_turn(times, "recovered")])
    agent = Agent(id="a", model=model, error_processors=[StreamErrorRetryProcessor()])
    async with agent.stream("hi", run_id="r1") as stream:
        chunks = [chunk async for chunk in stream]
        result = await stream.result()
    assert len(model.calls) == 2
    assert times[1] - times[0] == 2.0
    assert not any(isinstance(c, ErrorChunk) for c in chunks)
    retries = [c for c in chunks if isinstance(c, StepRetryChunk)]
    assert len(retries) == 1
    payload = to_wire(retries[0])["payload"]
    assert payload["processorId"] == "stream-error-retry-processor"
    assert payload["retryCount"] == 1
    assert payload["stepNumber"] == 0
    assert [c.payload.text for c in chunks if isinstance(c, TextDeltaChunk)] == [
        "recovered"
    ]
    assert result.text == "recovered"
    assert result.finish_reason == "stop"
    assert result.error is None
    assert result.retry_count == 1


async def test_without_the_processor_the_error_is_terminal() -> None:
    failure = ProviderError(
        "overloaded", status_code=529, headers={"retry-after": "2"}, is_retryable=True
    )
    model = ScriptedModel([failure, "never"])
    result = await Agent(id="a", model=model).generate("hi")
    assert len(model.calls) == 1
    assert result.finish_reason == "error"
    assert result.error is failure


async def test_the_processor_budget_bounds_an_always_failing_model() -> None:
    """Reference §2.4 (SC-error-processor-retry-max-steps): 3 requests, the last
    error is the result's."""
    errors = [ProviderError(f"fail-{n}") for n in range(1, 6)]
    model = ScriptedModel(errors)
    processor = StreamErrorRetryProcessor(
        max_retries=2, delay_ms=0, retry_unknown_errors=True
    )
    agent = Agent(id="a", model=model, error_processors=[processor])
    result = await agent.generate("hi")
    assert len(model.calls) == 3
    assert result.error is errors[2]
    assert str(result.error) == "fail-3"
    assert result.finish_reason == "error"
    assert result.text == ""
    assert result.retry_count == 2


async def test_the_agent_budget_is_the_lower_one() -> None:
    errors = [ProviderError(f"fail-{n}", is_retryable=True) for n in range(1, 6)]
    model = ScriptedModel(errors)
    processor = StreamErrorRetryProcessor(max_retries=4)
    agent = Agent(
        id="a", model=model, error_processors=[processor], max_processor_retries=1
    )
    result = await agent.generate("hi")
    assert len(model.calls) == 2
    assert result.error is errors[1]


async def test_an_auth_error_is_not_retried() -> None:
    failure = ProviderError("unauthorized", status_code=401)
    model = ScriptedModel([failure, "never"])
    processor = StreamErrorRetryProcessor(retry_unknown_errors=True, max_retries=3)
    result = await Agent(id="a", model=model, error_processors=[processor]).generate(
        "hi"
    )
    assert len(model.calls) == 1
    assert result.error is failure


async def test_prefill_handler_retries_with_a_trailing_user_turn() -> None:
    failure = ProviderError(
        "This model does not support assistant message prefill.", status_code=400
    )
    model = ScriptedModel([failure, "continued"])
    agent = Agent(id="a", model=model, error_processors=[PrefillErrorHandler()])
    async with agent.stream(
        [
            {"role": "user", "content": "write a poem"},
            {"role": "assistant", "content": "Roses are"},
        ]
    ) as stream:
        chunks = [c async for c in stream]
        result = await stream.result()
    assert len(model.calls) == 2
    # Current Mastra's signal: the client is told, transiently.
    [signal] = [c for c in chunks if isinstance(c, DataChunk)]
    assert signal.type == "data-signal"
    assert signal.data == PREFILL_SIGNAL
    assert signal.transient is True
    assert [c.type for c in chunks].index("data-signal") < [
        c.type for c in chunks
    ].index("step-retry")
    assert result.text == "continued"
    retried = [m for m in model.calls[1].prompt if m.role != "system"]
    assert retried[-1].role == "user"
    assert retried[-1].content == (PromptTextPart(text=PREFILL_REMINDER_TEXT),)
    first = [m for m in model.calls[0].prompt if m.role != "system"]
    assert first[-1].role == "assistant"
