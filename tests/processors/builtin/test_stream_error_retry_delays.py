"""``StreamErrorRetryProcessor`` (reference mastra-semantics §2): the retry
budget, the configured delay (fixed, a function, exponential backoff, clamped)
and ``on_retry``.

Every wait is measured on trio's ``MockClock`` (``autojump_clock``): the
processor sleeps on trio's clock, so the virtual time advances by exactly the
delay and no test really sleeps.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from procession import ProviderError
from procession.processors import (
    ProcessAPIErrorArgs,
    RetryMatcher,
    StreamErrorRetryProcessor,
)
from tests.processors.builtin.stream_error_retry_helpers import (
    RETRY,
    decide,
    is_econnreset,
    make_args,
    retried_at,
    timed,
)

# --- the budget ---------------------------------------------------------------------


async def test_the_budget_is_checked_before_any_delay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Pinned: past the budget, no delay is computed, no timer, no ``on_retry``."""
    events: list[str] = []

    def delay(args: ProcessAPIErrorArgs) -> float:
        events.append(f"delay@{args.retry_count}")
        return 5000

    processor = StreamErrorRetryProcessor(
        matchers=[
            RetryMatcher(
                lambda e: True,
                max_retries=1,
                delay_ms=delay,
                on_retry=lambda a, d: events.append(f"on_retry@{a.retry_count}"),
            )
        ],
    )
    error = ProviderError("x", headers={"retry-after": "10"})
    result, elapsed = await timed(processor, error, retry_count=1)
    assert result is None
    assert elapsed == 0
    assert events == []
    result, elapsed = await timed(processor, error, retry_count=0)
    assert result == RETRY
    assert elapsed == 10_000
    assert events == ["delay@0", "on_retry@0"]


async def test_max_retries_zero_never_retries() -> None:
    processor = StreamErrorRetryProcessor(max_retries=0, retry_unknown_errors=True)
    assert await retried_at(processor, ProviderError("x", is_retryable=True)) == []


async def test_retry_count_beyond_the_budget() -> None:
    processor = StreamErrorRetryProcessor(max_retries=3)
    error = ProviderError("x", is_retryable=True)
    assert await retried_at(processor, error, range(10)) == [0, 1, 2]


# --- delays -------------------------------------------------------------------------


async def test_no_delay_by_default(autojump_clock: trio.testing.MockClock) -> None:
    result, elapsed = await timed(
        StreamErrorRetryProcessor(), ProviderError("x", is_retryable=True)
    )
    assert result == RETRY
    assert elapsed == 0


async def test_a_fixed_delay(autojump_clock: trio.testing.MockClock) -> None:
    processor = StreamErrorRetryProcessor(delay_ms=1500)
    result, elapsed = await timed(processor, ProviderError("x", is_retryable=True))
    assert result == RETRY
    assert elapsed == 1500


async def test_a_sync_delay_function_receives_the_args_object(
    autojump_clock: trio.testing.MockClock,
) -> None:
    received: list[ProcessAPIErrorArgs] = []

    def delay(args: ProcessAPIErrorArgs) -> float:
        received.append(args)
        return 250

    processor = StreamErrorRetryProcessor(delay_ms=delay)
    args = make_args(ProviderError("x", is_retryable=True))
    start = trio.current_time()
    assert await processor.process_api_error(args) == RETRY
    assert trio.current_time() - start == 0.25
    assert len(received) == 1
    assert received[0] is args


async def test_an_async_delay_function_is_awaited(
    autojump_clock: trio.testing.MockClock,
) -> None:
    received: list[ProcessAPIErrorArgs] = []

    async def delay(args: ProcessAPIErrorArgs) -> float:
        received.append(args)
        await trio.lowlevel.checkpoint()  # a real async function
        return 750

    processor = StreamErrorRetryProcessor(delay_ms=delay)
    args = make_args(ProviderError("x", is_retryable=True))
    start = trio.current_time()
    assert await processor.process_api_error(args) == RETRY
    assert trio.current_time() - start == 0.75
    assert received == [args]
    assert received[0] is args


async def test_exponential_backoff(autojump_clock: trio.testing.MockClock) -> None:
    processor = StreamErrorRetryProcessor(
        max_retries=3,
        delay_ms=lambda args: min(1000 * 2**args.retry_count, 30_000),
    )
    error = ProviderError("x", is_retryable=True)
    waits = [(await timed(processor, error, n))[1] for n in range(4)]
    assert waits == [1000, 2000, 4000, 0]


@pytest.mark.parametrize("value", [-5, -0.1, math.nan, math.inf, -math.inf, 0])
async def test_delay_function_results_are_clamped(
    value: float, autojump_clock: trio.testing.MockClock
) -> None:
    processor = StreamErrorRetryProcessor(delay_ms=lambda args: value)
    result, elapsed = await timed(processor, ProviderError("x", is_retryable=True))
    assert result == RETRY
    assert elapsed == 0


@pytest.mark.parametrize("value", [-100, math.nan, math.inf])
async def test_fixed_delays_are_clamped(
    value: float, autojump_clock: trio.testing.MockClock
) -> None:
    processor = StreamErrorRetryProcessor(delay_ms=value)
    assert processor.delay_ms == 0
    result, elapsed = await timed(processor, ProviderError("x", is_retryable=True))
    assert result == RETRY
    assert elapsed == 0


@pytest.mark.parametrize("value", ["1000", None, True])
async def test_a_delay_function_must_return_a_number(value: Any) -> None:
    processor = StreamErrorRetryProcessor(delay_ms=lambda args: value)
    with pytest.raises(
        TypeError, match="the delay_ms function's result must be a number"
    ):
        await decide(processor, ProviderError("x", is_retryable=True))


async def test_a_matcher_delay_overrides_the_processor_delay(
    autojump_clock: trio.testing.MockClock,
) -> None:
    processor = StreamErrorRetryProcessor(
        delay_ms=3000, matchers=[{"match": is_econnreset, "delayMs": 200}]
    )
    assert (await timed(processor, ProviderError("r", code="ECONNRESET")))[1] == 200
    assert (await timed(processor, ProviderError("x", is_retryable=True)))[1] == 3000


# --- on_retry -----------------------------------------------------------------------


async def test_on_retry_gets_the_args_and_the_final_delay_before_waiting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seen: list[tuple[ProcessAPIErrorArgs, float, float]] = []

    def on_retry(args: ProcessAPIErrorArgs, delay_ms: float) -> None:
        seen.append((args, delay_ms, trio.current_time()))

    processor = StreamErrorRetryProcessor(
        delay_ms=1000,
        matchers=[RetryMatcher(lambda e: True, on_retry=on_retry)],
    )
    args = make_args(ProviderError("x", headers={"Retry-After": "3"}))
    start = trio.current_time()
    assert await processor.process_api_error(args) == RETRY
    assert len(seen) == 1
    got_args, delay_ms, called_at = seen[0]
    assert got_args is args
    assert delay_ms == 3000  # the larger of configured 1000 and the provider's 3000
    assert called_at == start  # before waiting
    assert trio.current_time() - start == 3


async def test_an_async_on_retry_is_awaited_then_the_wait_follows(
    autojump_clock: trio.testing.MockClock,
) -> None:
    events: list[tuple[str, float]] = []

    async def on_retry(args: ProcessAPIErrorArgs, delay_ms: float) -> None:
        events.append(("on_retry", trio.current_time()))
        await trio.sleep(0.5)  # its own time counts before the wait
        events.append(("on_retry done", trio.current_time()))

    def delay(args: ProcessAPIErrorArgs) -> float:
        events.append(("delay", trio.current_time()))
        return 2000

    processor = StreamErrorRetryProcessor(
        matchers=[{"match": lambda e: True, "on_retry": on_retry, "delay_ms": delay}]
    )
    result, elapsed = await timed(processor, RuntimeError("x"))
    assert result == RETRY
    assert events == [("delay", 0), ("on_retry", 0), ("on_retry done", 0.5)]
    assert elapsed == 2500


async def test_an_error_in_on_retry_propagates() -> None:
    def on_retry(args: ProcessAPIErrorArgs, delay_ms: float) -> None:
        raise KeyError("on_retry broke")

    processor = StreamErrorRetryProcessor(
        matchers=[RetryMatcher(lambda e: True, on_retry=on_retry)]
    )
    with pytest.raises(KeyError, match="on_retry broke"):
        await decide(processor, RuntimeError("x"))
