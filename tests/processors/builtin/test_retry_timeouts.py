"""``StreamErrorRetryProcessor`` and the two run timeouts (issue 9, §2.5): a
model stream's idle timeout is retried like any transient failure; a passed run
deadline never is, whatever the options say (a retry cannot give time back)."""

from __future__ import annotations

from typing import Any

import pytest

from procession import (
    ModelIdleTimeout,
    ProcessorError,
    ProviderTimeoutError,
    RunDeadlineExceeded,
)
from procession.messages import Message
from procession.processors import (
    MessageList,
    ProcessAPIErrorArgs,
    ProcessAPIErrorResult,
    RetryMatcher,
    StreamErrorRetryProcessor,
)

RETRY = ProcessAPIErrorResult(retry=True)


def make_args(error: Any, *, retry_count: int = 0) -> ProcessAPIErrorArgs:
    message_list = MessageList()
    message_list.add(Message.user("hi"), "input")
    return ProcessAPIErrorArgs(
        processor_id=StreamErrorRetryProcessor.id,
        state={},
        retry_count=retry_count,
        abort_signal=None,
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


def wrapped(error: BaseException) -> ProcessorError:
    """``error`` as the cause of another error (how a wrapped failure arrives)."""
    outer = ProcessorError("upstream", "process_output_stream", error)
    outer.__cause__ = error
    return outer


async def test_an_idle_timeout_is_retried_by_default() -> None:
    processor = StreamErrorRetryProcessor()
    assert await decide(processor, ModelIdleTimeout(60.0)) == RETRY
    assert await decide(processor, wrapped(ModelIdleTimeout(60.0))) == RETRY


async def test_an_idle_timeout_is_retried_within_the_budget_only() -> None:
    processor = StreamErrorRetryProcessor(max_retries=2)
    decisions = [await decide(processor, ModelIdleTimeout(5), n) for n in range(4)]
    assert decisions == [RETRY, RETRY, None, None]


async def test_a_run_deadline_is_not_retried_by_default() -> None:
    processor = StreamErrorRetryProcessor(max_retries=5)
    assert await decide(processor, RunDeadlineExceeded(30.0)) is None


@pytest.mark.parametrize(
    "processor",
    [
        StreamErrorRetryProcessor(retry_unknown_errors=True, max_retries=5),
        StreamErrorRetryProcessor(
            matchers=[lambda error: isinstance(error, ProviderTimeoutError)]
        ),
        StreamErrorRetryProcessor(matchers=[RetryMatcher(lambda _e: True)]),
    ],
    ids=["retry_unknown_errors", "a timeout matcher", "a match-all matcher"],
)
async def test_nothing_retries_a_run_deadline(
    processor: StreamErrorRetryProcessor,
) -> None:
    """Options that retry every other timeout still leave a deadline alone,
    also when it arrives as the cause of another error."""
    assert await decide(processor, ProviderTimeoutError("read timed out")) == RETRY
    assert await decide(processor, RunDeadlineExceeded(30.0)) is None
    assert await decide(processor, wrapped(RunDeadlineExceeded(30.0))) is None
