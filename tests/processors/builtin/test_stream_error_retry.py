"""``StreamErrorRetryProcessor`` (seed ``stream-error-retry-processor.zh-TW.md``,
reference mastra-semantics §2): which errors it retries, the budget, the delay
(configured, Retry-After, capped), ``on_retry``, abort, and the stability
defaults of §2.5 expressed as its options.

Every wait is measured on trio's ``MockClock`` (``autojump_clock``): the
processor sleeps on trio's clock, so the virtual time advances by exactly the
delay and no test really sleeps.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from procession import ConfigurationError, ProviderError
from procession.messages import Message
from procession.processors import (
    AbortSignal,
    Headers,
    MessageList,
    ProcessAPIErrorArgs,
    ProcessAPIErrorResult,
    RetryMatcher,
    StreamErrorRetryProcessor,
    get_retry_after_ms,
    is_bad_request_error,
    is_retryable_openai_responses_stream_error,
    is_terminal_auth_error,
)
from procession.processors._contract import HOOK_NAMES

RETRY = ProcessAPIErrorResult(retry=True)
NOW = dt.datetime(2025, 1, 1, 12, 0, 0, tzinfo=dt.UTC)

# The payloads of Mastra's tests (reference wire-formats §3.4).
OPENAI_ERROR_EVENT = {
    "type": "error",
    "sequence_number": 1,
    "error": {
        "type": "server_error",
        "code": "internal_error",
        "message": "An internal error occurred.",
    },
}
OPENAI_FAILED_EVENT = {
    "type": "response.failed",
    "response": {
        "error": {
            "code": "unknown_error",
            "message": "An error occurred while processing your request. You can "
            "retry your request, or contact us through our help center if the "
            "error persists.",
        }
    },
}
OPENAI_INVALID_PROMPT = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "code": "invalid_prompt",
        "message": "Invalid prompt.",
    },
}


# --- helpers -----------------------------------------------------------------------


def make_args(
    error: Any, *, retry_count: int = 0, abort_signal: AbortSignal | None = None
) -> ProcessAPIErrorArgs:
    message_list = MessageList()
    message_list.add(Message.user("hi"), "input")
    return ProcessAPIErrorArgs(
        processor_id=StreamErrorRetryProcessor.id,
        state={},
        retry_count=retry_count,
        abort_signal=abort_signal,
        error=error,
        messages=message_list.get.all.db(),
        message_list=message_list,
        step_number=0,
        steps=(),
    )


async def decide(
    processor: StreamErrorRetryProcessor, error: Any, retry_count: int = 0
) -> ProcessAPIErrorResult | None:
    return await processor.process_api_error(make_args(error, retry_count=retry_count))


async def retried_at(
    processor: StreamErrorRetryProcessor, error: Any, counts: range = range(4)
) -> list[int]:
    """The retry counts at which the processor asks for a retry."""
    return [n for n in counts if await decide(processor, error, n) == RETRY]


async def timed(
    processor: StreamErrorRetryProcessor, error: Any, retry_count: int = 0
) -> tuple[ProcessAPIErrorResult | None, float]:
    """The decision and how much trio time it took, in ms."""
    start = trio.current_time()
    result = await decide(processor, error, retry_count)
    return result, (trio.current_time() - start) * 1000


def chained(outer: BaseException, cause: BaseException) -> BaseException:
    outer.__cause__ = cause
    return outer


def with_cause(outer: BaseException, cause: object) -> BaseException:
    """An exception with a plain ``cause`` attribute (not ``__cause__``)."""
    outer.cause = cause  # type: ignore[attr-defined]
    return outer


def is_econnreset(error: object) -> bool:
    """The seed's ``isECONNRESET`` matcher, in Python."""
    code = (
        error.get("code")
        if isinstance(error, Mapping)
        else getattr(error, "code", None)
    )
    if isinstance(code, str) and code.upper() == "ECONNRESET":
        return True
    return isinstance(error, BaseException) and bool(
        re.search(r"econnreset|socket hang up", str(error), re.IGNORECASE)
    )


# --- identity -----------------------------------------------------------------------


def test_identity_and_hooks() -> None:
    processor = StreamErrorRetryProcessor()
    assert processor.id == "stream-error-retry-processor"
    assert processor.name == "Stream Error Retry Processor"
    hooks = [name for name in HOOK_NAMES if callable(getattr(processor, name, None))]
    assert hooks == ["process_api_error"]


def test_defaults() -> None:
    processor = StreamErrorRetryProcessor()
    assert processor.max_retries == 1
    assert processor.matchers == ()
    assert processor.retry_unknown_errors is False
    assert processor.delay_ms is None
    assert processor.max_retry_after_ms == 30_000


# --- the built-in OpenAI Responses matcher ------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (OPENAI_ERROR_EVENT, True),
        (OPENAI_FAILED_EVENT, True),
        (OPENAI_INVALID_PROMPT, False),
        ({"type": "error", "error": {"code": "rate_limit_exceeded"}}, True),
        ({"type": "error", "error": {"code": "SERVER_ERROR"}}, True),
        ({"type": "error", "error": {"code": None, "type": "server_error"}}, True),
        # A code that is not a string falls back to the type.
        ({"type": "error", "error": {"code": 500, "type": "server_error"}}, True),
        # A non-matching string code is not rescued by a matching type.
        (
            {
                "type": "error",
                "error": {"code": "unknown_error", "type": "server_error"},
            },
            False,
        ),
        ({"type": "error", "error": {"code": "insufficient_quota"}}, False),
        (
            {
                "type": "error",
                "error": {"code": "x", "message": "YOU CAN RETRY YOUR REQUEST"},
            },
            True,
        ),
        (
            {"type": "error", "error": {"code": "x", "message": "please do not retry"}},
            False,
        ),
        (
            {"type": "response.failed", "response": {"error": {"code": "overloaded"}}},
            True,
        ),
        ({"type": "response.failed", "response": {"error": "server_error"}}, False),
        ({"type": "response.failed", "response": None}, False),
        ({"type": "error", "error": "server_error"}, False),
        ({"type": "other", "error": {"code": "server_error"}}, False),
        (
            {"error": {"code": "server_error"}},
            False,
        ),  # no event type: not a stream error
        # The AI SDK forwards the raw event wrapped in another error event.
        ({"type": "error", "error": OPENAI_ERROR_EVENT}, True),
        ("server_error", False),
        (None, False),
        (42, False),
    ],
)
def test_openai_payloads(payload: Any, expected: bool) -> None:
    assert is_retryable_openai_responses_stream_error(payload) is expected


@pytest.mark.parametrize(
    "code",
    [
        "rate_limit",
        "server_error",
        "internal_error",
        "timeout",
        "temporarily_unavailable",
        "service_unavailable",
        "overloaded",
    ],
)
def test_every_retryable_openai_code(code: str) -> None:
    event = {"type": "error", "error": {"code": f"upstream_{code}_x"}}
    assert is_retryable_openai_responses_stream_error(event)
    failed = {"type": "response.failed", "response": {"error": {"type": code}}}
    assert is_retryable_openai_responses_stream_error(failed)


@pytest.mark.parametrize(
    "carrier",
    [
        lambda event: ProviderError("stream failed", body=event),
        lambda event: ProviderError("stream failed", body=json.dumps(event)),
        lambda event: ProviderError("stream failed", body=json.dumps(event).encode()),
        lambda event: SimpleNamespace(
            type=event["type"],
            error=event.get("error"),
            response=event.get("response"),
        ),
        lambda event: SimpleNamespace(body=event),
        lambda event: event,
    ],
    ids=["body-dict", "body-json", "body-bytes", "attributes", "object-body", "dict"],
)
@pytest.mark.parametrize(
    ("event", "expected"),
    [
        (OPENAI_ERROR_EVENT, True),
        (OPENAI_FAILED_EVENT, True),
        (OPENAI_INVALID_PROMPT, False),
    ],
)
def test_openai_payload_carriers(
    carrier: Callable[[dict[str, Any]], Any], event: dict[str, Any], expected: bool
) -> None:
    assert is_retryable_openai_responses_stream_error(carrier(event)) is expected


def test_an_unparsable_body_is_not_a_stream_error() -> None:
    assert not is_retryable_openai_responses_stream_error(
        ProviderError("x", body="{not json")
    )


async def test_openai_response_failed_retries_once_by_default() -> None:
    """Pinned: retryable ``response.failed`` → retry at 0; at 1 (default max 1) no."""
    processor = StreamErrorRetryProcessor()
    error = ProviderError("stream failed", body=OPENAI_FAILED_EVENT)
    assert error.is_retryable is None  # the payload alone is enough
    assert await decide(processor, error, 0) == RETRY
    assert await decide(processor, error, 1) is None


async def test_openai_plain_dict_event_is_retried() -> None:
    processor = StreamErrorRetryProcessor()
    assert await decide(processor, dict(OPENAI_ERROR_EVENT)) == RETRY
    assert await decide(processor, dict(OPENAI_INVALID_PROMPT)) is None


async def test_non_retryable_openai_payload_is_not_retried() -> None:
    processor = StreamErrorRetryProcessor()
    error = ProviderError("bad prompt", status_code=400, body=OPENAI_INVALID_PROMPT)
    assert await decide(processor, error) is None


# --- provider metadata and the cause chain ------------------------------------------


async def test_status_codes_alone_are_not_retry_metadata() -> None:
    """Pinned: a 503 only in the cause, without retry metadata → no retry."""
    processor = StreamErrorRetryProcessor()
    error = chained(RuntimeError("wrapped"), ProviderError("down", status_code=503))
    assert await decide(processor, error) is None
    assert (
        await decide(processor, {"message": "x", "cause": {"statusCode": 503}}) is None
    )
    assert await decide(processor, ProviderError("down", status_code=503)) is None


async def test_bad_request_not_retryable_is_not_retried() -> None:
    """Pinned: 400 with ``is_retryable=False`` and default options → no retry."""
    processor = StreamErrorRetryProcessor()
    error = ProviderError("bad", status_code=400, is_retryable=False)
    assert await decide(processor, error) is None


@pytest.mark.parametrize(
    "error",
    [
        ProviderError("overloaded", status_code=529, is_retryable=True),
        chained(RuntimeError("wrapped"), ProviderError("x", is_retryable=True)),
        with_cause(RuntimeError("wrapped"), {"isRetryable": True}),
        with_cause(RuntimeError("wrapped"), {"is_retryable": True}),
        {"message": "x", "cause": {"message": "y", "cause": {"isRetryable": True}}},
        SimpleNamespace(isRetryable=True),
        chained(RuntimeError("wrapped"), ProviderError("x", body=OPENAI_ERROR_EVENT)),
    ],
    ids=[
        "provider-error",
        "__cause__",
        "cause-attr-camel",
        "cause-attr-snake",
        "dict-chain",
        "object-camel",
        "openai-on-cause",
    ],
)
async def test_retryable_metadata_anywhere_in_the_cause_chain(error: Any) -> None:
    assert await decide(StreamErrorRetryProcessor(), error) == RETRY


@pytest.mark.parametrize(
    "error",
    [
        ProviderError("x", is_retryable=False),
        {"isRetryable": "true"},  # must be the boolean True
        {"is_retryable": 1},
        SimpleNamespace(is_retryable=None),
    ],
)
async def test_metadata_must_be_true(error: Any) -> None:
    assert await decide(StreamErrorRetryProcessor(), error) is None


async def test_implicit_context_is_not_a_cause() -> None:
    try:
        try:
            raise ProviderError("x", is_retryable=True)
        except ProviderError:
            raise RuntimeError("while handling") from None
    except RuntimeError as caught:
        error = caught
    assert error.__context__ is not None
    assert await decide(StreamErrorRetryProcessor(), error) is None


async def test_cause_cycles_terminate() -> None:
    first = RuntimeError("a")
    second = RuntimeError("b")
    first.__cause__ = second
    second.__cause__ = first
    looped: dict[str, Any] = {"message": "c"}
    looped["cause"] = looped
    seen: list[Any] = []

    def spy(node: object) -> bool:
        seen.append(node)
        return False

    processor = StreamErrorRetryProcessor(matchers=[spy])
    assert await decide(processor, first) is None
    assert seen == [first, second]
    assert await decide(processor, looped) is None
    assert not is_terminal_auth_error(first)
    assert not is_terminal_auth_error(looped)
    assert get_retry_after_ms(first) is None
    assert get_retry_after_ms(looped) is None
    unknown = StreamErrorRetryProcessor(retry_unknown_errors=True)
    assert await decide(unknown, first) == RETRY


# --- matchers -----------------------------------------------------------------------


async def test_matchers_see_each_node_of_the_chain_in_order() -> None:
    inner = OSError("socket hang up")
    middle = chained(RuntimeError("middle"), inner)
    outer = chained(ProviderError("outer"), middle)
    seen: list[Any] = []

    def spy(node: object) -> bool:
        seen.append(node)
        return node is inner

    assert await decide(StreamErrorRetryProcessor(matchers=[spy]), outer) == RETRY
    assert seen == [outer, middle, inner]


async def test_a_predicate_matcher_uses_the_processor_policy() -> None:
    processor = StreamErrorRetryProcessor(matchers=[is_econnreset], max_retries=2)
    error = ProviderError("reset", code="ECONNRESET")
    assert await retried_at(processor, error) == [0, 1]
    assert await decide(processor, ProviderError("timed out", code="ETIMEDOUT")) is None


@pytest.mark.parametrize(
    "entry",
    [
        RetryMatcher(is_econnreset, max_retries=3),
        {"match": is_econnreset, "max_retries": 3},
        {"match": is_econnreset, "maxRetries": 3},
    ],
    ids=["RetryMatcher", "dict-snake", "dict-camel"],
)
async def test_a_matcher_policy_overrides_the_budget(entry: Any) -> None:
    processor = StreamErrorRetryProcessor(matchers=[entry])
    error = chained(ProviderError("failed"), OSError("read ECONNRESET"))
    assert await retried_at(processor, error, range(6)) == [0, 1, 2]
    # Errors it did not match keep the processor's budget.
    other = ProviderError("x", is_retryable=True)
    assert await retried_at(processor, other) == [0]


async def test_the_first_matching_entry_wins(
    autojump_clock: trio.testing.MockClock,
) -> None:
    calls: list[str] = []
    processor = StreamErrorRetryProcessor(
        matchers=[
            RetryMatcher(
                lambda e: True,
                delay_ms=100,
                on_retry=lambda a, d: calls.append("first"),
            ),
            RetryMatcher(
                lambda e: True,
                delay_ms=900,
                on_retry=lambda a, d: calls.append("second"),
            ),
        ]
    )
    result, elapsed = await timed(processor, RuntimeError("x"))
    assert result == RETRY
    assert elapsed == 100
    assert calls == ["first"]


async def test_the_builtin_matcher_comes_first() -> None:
    """A user matcher that also matches an OpenAI event does not get to set the
    policy: the built-in one matched first (with the processor's budget)."""
    processor = StreamErrorRetryProcessor(
        matchers=[RetryMatcher(lambda e: True, max_retries=5)]
    )
    error = ProviderError("stream failed", body=OPENAI_ERROR_EVENT)
    assert await retried_at(processor, error, range(6)) == [0]
    assert await retried_at(processor, RuntimeError("x"), range(6)) == [0, 1, 2, 3, 4]


async def test_metadata_on_an_outer_node_beats_a_matcher_on_a_cause() -> None:
    processor = StreamErrorRetryProcessor(
        matchers=[RetryMatcher(is_econnreset, max_retries=3)]
    )
    error = chained(
        ProviderError("failed", is_retryable=True), OSError("ECONNRESET happened")
    )
    assert await retried_at(processor, error) == [0]  # the processor's default 1
    # Without the metadata the matcher (on the cause) supplies the policy.
    plain = chained(ProviderError("failed"), OSError("ECONNRESET happened"))
    assert await retried_at(processor, plain) == [0, 1, 2]


async def test_a_matcher_at_a_node_beats_metadata_at_the_same_node() -> None:
    processor = StreamErrorRetryProcessor(
        matchers=[RetryMatcher(is_econnreset, max_retries=2)]
    )
    error = ProviderError("reset", code="ECONNRESET", is_retryable=True)
    assert await retried_at(processor, error) == [0, 1]


async def test_a_matcher_policy_wins_over_unknown_error_settings() -> None:
    """Seed: 特定比對器的原則仍會優先於未知錯誤設定值."""
    processor = StreamErrorRetryProcessor(
        retry_unknown_errors=True,
        max_retries=3,
        matchers=[RetryMatcher(is_bad_request_error, max_retries=1)],
    )
    assert await retried_at(processor, ProviderError("bad", status_code=400)) == [0]
    assert await retried_at(processor, RuntimeError("odd")) == [0, 1, 2]


async def test_a_matcher_may_opt_in_to_retrying_auth_errors() -> None:
    """Only ``retry_unknown_errors`` refuses auth errors; an explicit matcher is
    the user's decision."""
    error = ProviderError("unauthorized", status_code=401)
    opted_in = StreamErrorRetryProcessor(
        matchers=[lambda e: getattr(e, "status_code", None) == 401]
    )
    assert await decide(opted_in, error) == RETRY
    unknown = StreamErrorRetryProcessor(retry_unknown_errors=True)
    assert await decide(unknown, error) is None


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_retries": -1}, "max_retries must be an int >= 0"),
        ({"max_retries": True}, "max_retries must be an int >= 0"),
        ({"max_retries": 1.5}, "max_retries must be an int >= 0"),
        ({"max_retries": None}, "max_retries must be an int >= 0"),
        ({"matchers": "abc"}, "matchers must be a sequence"),
        ({"matchers": [42]}, r"matchers\[0\] must be a predicate"),
        (
            {"matchers": [{"max_retries": 1}]},
            r"matchers\[0\] is missing the key 'match'",
        ),
        ({"matchers": [{"match": bool, "retries": 1}]}, "unknown key 'retries'"),
        ({"matchers": [{"match": 3}]}, "RetryMatcher.match must be a predicate"),
        (
            {"matchers": [{"match": bool, "max_retries": -2}]},
            "RetryMatcher.max_retries must be an int >= 0",
        ),
        (
            {"matchers": [{"match": bool, "delay_ms": "5"}]},
            "RetryMatcher.delay_ms must",
        ),
        ({"matchers": [{"match": bool, "on_retry": 1}]}, "RetryMatcher.on_retry must"),
        ({"retry_unknown_errors": "yes"}, "retry_unknown_errors must be a bool"),
        ({"delay_ms": "3000"}, "delay_ms must be a number of milliseconds"),
        ({"delay_ms": True}, "delay_ms must be a number of milliseconds"),
        ({"max_retry_after_ms": "30s"}, "max_retry_after_ms must be a number"),
        ({"now": "2025-01-01"}, "now must be callable"),
    ],
)
def test_bad_options_are_rejected(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        StreamErrorRetryProcessor(**options)


# --- unknown errors and terminal authorization errors -------------------------------


async def test_unknown_errors_are_not_retried_by_default() -> None:
    processor = StreamErrorRetryProcessor()
    assert await decide(processor, RuntimeError("completely unknown failure")) is None
    assert await decide(processor, ProviderError("internal", status_code=500)) is None


async def test_retry_unknown_errors_uses_the_processor_budget() -> None:
    processor = StreamErrorRetryProcessor(retry_unknown_errors=True, max_retries=2)
    assert await retried_at(processor, RuntimeError("completely unknown")) == [0, 1]


async def test_422_not_retryable_is_retried_as_unknown() -> None:
    """Pinned: ``is_retryable=False`` alone is not terminal."""
    error = ProviderError("unprocessable", status_code=422, is_retryable=False)
    assert not is_terminal_auth_error(error)
    assert await decide(StreamErrorRetryProcessor(), error) is None
    unknown = StreamErrorRetryProcessor(retry_unknown_errors=True)
    assert await decide(unknown, error) == RETRY


TERMINAL_AUTH_ERRORS: list[Any] = [
    ProviderError("unauthorized", status_code=401),
    ProviderError("forbidden", status_code=403),
    {"statusCode": 401},
    {"status": 403},
    SimpleNamespace(status_code=401),
    with_cause(RuntimeError("wrapped"), {"status": 401}),
    chained(RuntimeError("wrapped"), ProviderError("no", status_code=403)),
    {"error": {"code": "invalid_api_key"}},
    {"data": {"type": " Forbidden "}},
    ProviderError("denied", code="access_denied"),
    ProviderError("auth", body='{"error":{"type":"authentication_error"}}'),
    ProviderError("auth", body={"error": {"code": "permission_denied"}}),
    ProviderError(
        "auth", body={"type": "error", "error": {"type": "authentication_error"}}
    ),
    {"responseBody": '{"error":{"type":"authentication_error"}}'},
    SimpleNamespace(response_body=b'{"error": {"code": "invalid_api_key"}}'),
    SimpleNamespace(response=SimpleNamespace(status_code=401)),
    {"type": "response.failed", "response": {"error": {"code": "invalid_api_key"}}},
    ProviderError("auth", body={"status": 401}),
]


@pytest.mark.parametrize("error", TERMINAL_AUTH_ERRORS)
async def test_terminal_auth_errors_are_never_retried_as_unknown(error: Any) -> None:
    assert is_terminal_auth_error(error)
    processor = StreamErrorRetryProcessor(retry_unknown_errors=True, max_retries=5)
    assert await decide(processor, error) is None


@pytest.mark.parametrize(
    "error",
    [
        ProviderError("x", status_code=422, is_retryable=False),
        ProviderError("x", status_code=429),
        ProviderError("x", status_code=500),
        ProviderError("x", status_code=None, code="ECONNRESET"),
        ProviderError("x", body="401 unauthorized"),  # not JSON: not read
        ProviderError("x", body={"error": {"code": "invalid_api_key_format_hint"}}),
        {"status": "401"},  # a string is not a status code
        {"status": True},
        RuntimeError("unauthorized"),
        None,
    ],
)
def test_not_terminal_auth_errors(error: Any) -> None:
    assert not is_terminal_auth_error(error)


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
