"""``StreamErrorRetryProcessor`` (reference mastra-semantics §2): the wait ends on
abort, the message list is left alone, ``is_bad_request_error``, and the
stability defaults of reference §2.5 expressed as its options.

Every wait is measured on trio's ``MockClock`` (``autojump_clock``): the
processor sleeps on trio's clock, so the virtual time advances by exactly the
delay and no test really sleeps.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from procession import ProviderError
from procession.processors import (
    AbortSignal,
    ProcessAPIErrorResult,
    RetryMatcher,
    StreamErrorRetryProcessor,
    is_bad_request_error,
)
from tests.processors.builtin.stream_error_retry_helpers import (
    RETRY,
    chained,
    decide,
    is_econnreset,
    make_args,
    timed,
)

# --- abort --------------------------------------------------------------------------


async def test_the_wait_ends_early_on_abort(
    autojump_clock: trio.testing.MockClock,
) -> None:
    signal = AbortSignal()
    processor = StreamErrorRetryProcessor(delay_ms=10_000)
    args = make_args(ProviderError("x", is_retryable=True), abort_signal=signal)
    outcome: list[ProcessAPIErrorResult | None] = []

    async def run() -> None:
        outcome.append(await processor.process_api_error(args))

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.sleep(1)
        assert outcome == []  # still waiting
        signal.set("cancelled by the caller")
    assert outcome == [RETRY]  # the loop notices the abort, not the processor
    assert trio.current_time() - start == 1


async def test_an_aborted_signal_skips_the_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    signal = AbortSignal()
    signal.set("gone")
    calls: list[float] = []
    processor = StreamErrorRetryProcessor(
        matchers=[
            RetryMatcher(
                lambda e: True, delay_ms=5000, on_retry=lambda a, d: calls.append(d)
            )
        ]
    )
    args = make_args(RuntimeError("x"), abort_signal=signal)
    start = trio.current_time()
    assert await processor.process_api_error(args) == RETRY
    assert trio.current_time() == start
    assert calls == [5000]


async def test_without_abort_the_full_delay_passes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    signal = AbortSignal()
    processor = StreamErrorRetryProcessor(delay_ms=10_000)
    args = make_args(ProviderError("x", is_retryable=True), abort_signal=signal)
    start = trio.current_time()
    assert await processor.process_api_error(args) == RETRY
    assert trio.current_time() - start == 10
    assert not signal.aborted


async def test_the_processor_is_cancellable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    processor = StreamErrorRetryProcessor(delay_ms=10_000)
    with trio.move_on_after(2) as scope:
        await decide(processor, ProviderError("x", is_retryable=True))
    assert scope.cancelled_caught
    assert trio.current_time() == 2


# --- messages are left alone --------------------------------------------------------


async def test_the_message_list_is_not_modified() -> None:
    args = make_args(ProviderError("x", is_retryable=True))
    before = [(m.id, m.text) for m in args.message_list]
    assert await StreamErrorRetryProcessor().process_api_error(args) == RETRY
    assert [(m.id, m.text) for m in args.message_list] == before
    assert args.state == {}


# --- is_bad_request_error -----------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ProviderError("bad", status_code=400), True),
        ({"statusCode": 400}, True),
        (SimpleNamespace(status=400), True),
        (ProviderError("bad", status_code=401), False),
        (chained(RuntimeError("x"), ProviderError("bad", status_code=400)), False),
        ({"cause": {"statusCode": 400}}, False),
        ({"statusCode": "400"}, False),
        (None, False),
    ],
)
def test_is_bad_request_error(error: Any, expected: bool) -> None:
    assert is_bad_request_error(error) is expected


# --- the stability defaults of reference §2.5, as our options -----------------------


def stability_retry() -> StreamErrorRetryProcessor:
    return StreamErrorRetryProcessor(
        retry_unknown_errors=True,
        max_retries=2,
        delay_ms=3000,
        matchers=[
            RetryMatcher(is_bad_request_error, max_retries=1, delay_ms=2000),
            RetryMatcher(
                is_econnreset,
                max_retries=2,
                delay_ms=lambda args: min(1000 * 2**args.retry_count, 30_000),
            ),
        ],
    )


async def waits(error: Any) -> list[float | None]:
    """Per retry count 0..3: the wait in ms if retried, else None."""
    processor = stability_retry()
    out: list[float | None] = []
    for count in range(4):
        result, elapsed = await timed(processor, error, count)
        out.append(elapsed if result == RETRY else None)
        if result is None:
            assert elapsed == 0
    return out


async def test_stability_400(autojump_clock: trio.testing.MockClock) -> None:
    assert await waits(ProviderError("bad", status_code=400)) == [
        2000,
        None,
        None,
        None,
    ]


@pytest.mark.parametrize(
    "error",
    [
        ProviderError("connection reset", code="ECONNRESET"),
        OSError("read ECONNRESET"),
        RuntimeError("socket hang up"),
        {"code": "econnreset"},
    ],
)
async def test_stability_econnreset(
    error: Any, autojump_clock: trio.testing.MockClock
) -> None:
    assert await waits(error) == [1000, 2000, None, None]


async def test_stability_etimedout_is_an_unknown_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    error = ProviderError("timed out", code="ETIMEDOUT")
    assert not is_econnreset(error)
    assert await waits(error) == [3000, 3000, None, None]


async def test_stability_401_never(autojump_clock: trio.testing.MockClock) -> None:
    error = ProviderError("unauthorized", status_code=401)
    assert await waits(error) == [None, None, None, None]


async def test_stability_unknown_500_retryable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    error = ProviderError("internal", status_code=500, is_retryable=True)
    assert await waits(error) == [3000, 3000, None, None]


async def test_stability_generic_error(autojump_clock: trio.testing.MockClock) -> None:
    error = Exception("completely unknown failure")
    assert await waits(error) == [3000, 3000, None, None]


def test_stability_instances_are_fresh() -> None:
    first, second = stability_retry(), stability_retry()
    assert first is not second
    assert first.matchers is not second.matchers
    assert callable(first.process_api_error)
