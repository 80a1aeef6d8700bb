"""``StreamErrorRetryProcessor`` (seed ``stream-error-retry-processor.zh-TW.md``,
reference mastra-semantics §2): its identity, and which errors it retries: the
built-in OpenAI Responses matcher, and provider retry metadata anywhere in the
cause chain.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from procession import ProviderError
from procession.processors import (
    StreamErrorRetryProcessor,
    get_retry_after_ms,
    is_retryable_openai_responses_stream_error,
    is_terminal_auth_error,
)
from procession.processors._contract import HOOK_NAMES
from tests.processors.builtin.stream_error_retry_helpers import (
    OPENAI_ERROR_EVENT,
    OPENAI_FAILED_EVENT,
    OPENAI_INVALID_PROMPT,
    RETRY,
    chained,
    decide,
    with_cause,
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
