"""Helpers of the ``StreamErrorRetryProcessor`` tests
(tests/processors/builtin/test_stream_error_retry_*.py): Mastra's OpenAI payloads,
an args object, asking the processor for its decision (and how long it waited on
trio's ``MockClock``), and cause chains.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

import trio
import trio.lowlevel
import trio.testing

from procession.messages import Message
from procession.processors import (
    AbortSignal,
    MessageList,
    ProcessAPIErrorArgs,
    ProcessAPIErrorResult,
    StreamErrorRetryProcessor,
)

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
