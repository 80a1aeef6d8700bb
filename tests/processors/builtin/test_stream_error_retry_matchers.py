"""``StreamErrorRetryProcessor`` (reference mastra-semantics §2): matchers (which
entry wins, and its policy over the processor's), bad options, unknown errors
and terminal authorization errors.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from procession import ConfigurationError, ProviderError
from procession.processors import (
    RetryMatcher,
    StreamErrorRetryProcessor,
    is_bad_request_error,
    is_terminal_auth_error,
)
from tests.processors.builtin.stream_error_retry_helpers import (
    OPENAI_ERROR_EVENT,
    RETRY,
    chained,
    decide,
    is_econnreset,
    retried_at,
    timed,
    with_cause,
)

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
