"""``StreamErrorRetryProcessor`` (reference mastra-semantics §2): the provider's
Retry-After (header forms, the cause chain, the cap, with the configured delay).

Every wait is measured on trio's ``MockClock`` (``autojump_clock``): the
processor sleeps on trio's clock, so the virtual time advances by exactly the
delay and no test really sleeps.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from procession import ProviderError
from procession.processors import (
    Headers,
    StreamErrorRetryProcessor,
    get_retry_after_ms,
)
from tests.processors.builtin.stream_error_retry_helpers import (
    NOW,
    RETRY,
    chained,
    timed,
    with_cause,
)

# --- Retry-After --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "2"}, 2000),
        ({"retry-after": " 7 "}, 7000),
        ({"retry-after": "0"}, 0),
        ({"Retry-After": "5"}, 5000),
        ({"ReTrY-AfTeR": "4"}, 4000),
        ({"retry-after-ms": "250"}, 250),
        ({"Retry-After-Ms": "1"}, 1),
        ({"retry-after-ms": "250", "retry-after": "9"}, 250),  # ms first
        ({"retry-after-ms": "1.5", "retry-after": "9"}, 9000),  # bad ms: seconds
        ({"retry-after-ms": "-1", "retry-after": "1"}, 1000),
        ({"retry-after-ms": "soon"}, None),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "+3"}, None),
        ({"retry-after": "1.5"}, None),
        ({"retry-after": "1e3"}, None),
        ({"retry-after": ""}, None),
        ({"retry-after": "   "}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "Wed, 01 Jan 2025 12:00:30 GMT"}, 30_000),
        ({"retry-after": "Wednesday, 01-Jan-25 12:00:02 GMT"}, 2000),  # RFC 850
        ({"retry-after": "Wed Jan  1 12:01:00 2025"}, 60_000),  # asctime
        ({"retry-after": "Wed, 01 Jan 2025 12:00:00 GMT"}, None),  # now: not future
        ({"retry-after": "Tue, 31 Dec 2024 23:59:59 GMT"}, None),  # past
        ({"x-ratelimit-reset-requests": "6m0s"}, None),
        ({}, None),
    ],
)
def test_retry_after_header_forms(
    headers: dict[str, str], expected: float | None
) -> None:
    error = ProviderError("x", headers=headers)
    assert get_retry_after_ms(error, now=NOW) == expected


def test_a_zero_retry_after_means_no_wait_not_absent() -> None:
    # '0' is a valid delta-seconds value: found (0 ms), so the walk stops there.
    error = chained(
        ProviderError("x", headers={"retry-after": "0"}),
        ProviderError("y", headers={"retry-after": "5"}),
    )
    assert get_retry_after_ms(error) == 0


def test_a_naive_now_counts_as_utc() -> None:
    error = ProviderError("x", headers={"retry-after": "Wed, 01 Jan 2025 12:00:10 GMT"})
    assert get_retry_after_ms(error, now=NOW.replace(tzinfo=None)) == 10_000


def test_retry_after_defaults_to_the_wall_clock() -> None:
    future = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    error = ProviderError(
        "x", headers={"retry-after": future.strftime("%a, %d %b %Y %H:%M:%S GMT")}
    )
    found = get_retry_after_ms(error)
    assert found is not None
    assert 3_500_000 < found <= 3_600_000


@pytest.mark.parametrize(
    "error",
    [
        chained(
            RuntimeError("wrapped"), ProviderError("x", headers={"retry-after": "3"})
        ),
        with_cause(RuntimeError("wrapped"), {"responseHeaders": {"Retry-After": "3"}}),
        {"message": "x", "cause": {"response_headers": {"retry-after": "3"}}},
        {"headers": {"RETRY-AFTER": "3"}},
        SimpleNamespace(headers=Headers({"Retry-After": "3"})),
        SimpleNamespace(response=SimpleNamespace(headers={"retry-after": "3"})),
        # The first node without a usable value is skipped.
        chained(
            ProviderError("x", headers={"retry-after": "later"}),
            ProviderError("y", headers={"retry-after-ms": "3000"}),
        ),
        {"headers": {"retry-after": 7}, "cause": {"headers": {"retry-after": "3"}}},
    ],
    ids=[
        "__cause__",
        "cause-attr",
        "dict-cause",
        "dict-headers",
        "object-headers",
        "response-headers",
        "skip-invalid",
        "skip-non-string",
    ],
)
def test_retry_after_is_found_through_the_cause_chain(error: Any) -> None:
    assert get_retry_after_ms(error, now=NOW) == 3000


class HttpxLikeHeaders:
    """Not a Mapping, but has ``items()`` (as multi-dicts do)."""

    def items(self) -> list[tuple[str, str]]:
        return [("Retry-After-Ms", "125")]


def test_retry_after_from_an_items_object() -> None:
    assert get_retry_after_ms(SimpleNamespace(headers=HttpxLikeHeaders())) == 125


class BrokenHeaders:
    def items(self) -> list[tuple[str, str]]:
        raise RuntimeError("boom")


def test_broken_headers_are_ignored() -> None:
    assert get_retry_after_ms(SimpleNamespace(headers=BrokenHeaders())) is None


@given(value=st.text(max_size=40))
def test_any_retry_after_value_is_read_without_error(value: str) -> None:
    found = get_retry_after_ms({"headers": {"retry-after": value}}, now=NOW)
    if value.strip().isascii() and value.strip().isdigit():
        # Milliseconds are a float: past 2**53 it holds the value to ~1e-16.
        assert found == pytest.approx(int(value.strip()) * 1000, rel=1e-15)
    else:
        assert found is None or found > 0


@given(seconds=st.integers(min_value=0, max_value=10**12))
def test_delta_seconds_are_exact(seconds: int) -> None:
    error = ProviderError("x", headers={"retry-after": str(seconds)})
    assert get_retry_after_ms(error) == seconds * 1000


async def test_the_processor_waits_for_retry_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    error = ProviderError(
        "overloaded", status_code=529, headers={"retry-after": "2"}, is_retryable=True
    )
    result, elapsed = await timed(StreamErrorRetryProcessor(), error)
    assert result == RETRY
    assert elapsed == 2000


async def test_retry_after_ms_header(autojump_clock: trio.testing.MockClock) -> None:
    error = ProviderError("x", headers={"retry-after-ms": "125"}, is_retryable=True)
    assert (await timed(StreamErrorRetryProcessor(), error))[1] == 125


async def test_an_http_date_uses_the_injected_now(
    autojump_clock: trio.testing.MockClock,
) -> None:
    processor = StreamErrorRetryProcessor(now=lambda: NOW)
    error = ProviderError(
        "x", headers={"retry-after": "Wed, 01 Jan 2025 12:00:04 GMT"}, is_retryable=True
    )
    assert (await timed(processor, error))[1] == 4000
    past = ProviderError(
        "x", headers={"retry-after": "Wed, 01 Jan 2025 11:00:00 GMT"}, is_retryable=True
    )
    assert await timed(processor, past) == (RETRY, 0)


@pytest.mark.parametrize(
    "value", ["-1", "", "soon", "1.5", "Tue, 31 Dec 2024 23:00:00 GMT"]
)
async def test_invalid_or_past_retry_after_is_ignored(
    value: str, autojump_clock: trio.testing.MockClock
) -> None:
    processor = StreamErrorRetryProcessor(now=lambda: NOW)
    error = ProviderError("x", headers={"retry-after": value}, is_retryable=True)
    assert await timed(processor, error) == (RETRY, 0)


@pytest.mark.parametrize(
    ("headers", "cap", "expected"),
    [
        ({"retry-after": "999999999"}, None, 30_000),
        ({"retry-after": "Fri, 01 Jan 2100 00:00:00 GMT"}, None, 30_000),
        ({"retry-after-ms": "45000"}, None, 30_000),
        ({"retry-after": "999999999"}, 1234, 1234),
        ({"retry-after": "1"}, 1234, 1000),
        ({"retry-after": "5"}, 0, 0),
    ],
)
async def test_the_provider_delay_is_capped(
    headers: dict[str, str],
    cap: float | None,
    expected: float,
    autojump_clock: trio.testing.MockClock,
) -> None:
    options: dict[str, Any] = {"now": lambda: NOW}
    if cap is not None:
        options["max_retry_after_ms"] = cap
    processor = StreamErrorRetryProcessor(**options)
    error = ProviderError("x", headers=headers, is_retryable=True)
    assert await timed(processor, error) == (RETRY, expected)


@pytest.mark.parametrize(
    ("delay_ms", "retry_after", "expected"),
    [
        (5000, "2", 5000),  # configured wins
        (1000, "3", 3000),  # provider wins
        (60_000, "2", 60_000),  # an explicit delay is not capped
        (1000, "999", 30_000),  # the provider's is
    ],
)
async def test_the_larger_of_configured_and_provider_delay_wins(
    delay_ms: float,
    retry_after: str,
    expected: float,
    autojump_clock: trio.testing.MockClock,
) -> None:
    processor = StreamErrorRetryProcessor(delay_ms=delay_ms)
    error = ProviderError("x", headers={"retry-after": retry_after}, is_retryable=True)
    assert await timed(processor, error) == (RETRY, expected)


async def test_exponential_backoff_with_retry_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    processor = StreamErrorRetryProcessor(
        max_retries=4, delay_ms=lambda args: 1000 * 2**args.retry_count
    )
    error = ProviderError("x", headers={"retry-after": "3"}, is_retryable=True)
    waits = [(await timed(processor, error, n))[1] for n in range(4)]
    assert waits == [3000, 3000, 4000, 8000]


async def test_retry_after_on_a_nested_cause_is_honoured(
    autojump_clock: trio.testing.MockClock,
) -> None:
    inner = ProviderError("429", status_code=429, headers={"RETRY-AFTER-MS": "1500"})
    error = chained(
        ProviderError("failed", is_retryable=True), chained(OSError(), inner)
    )
    assert await timed(StreamErrorRetryProcessor(), error) == (RETRY, 1500)


async def test_retry_after_does_not_make_an_error_retryable(
    autojump_clock: trio.testing.MockClock,
) -> None:
    error = ProviderError("x", status_code=429, headers={"retry-after": "2"})
    assert await timed(StreamErrorRetryProcessor(), error) == (None, 0)
