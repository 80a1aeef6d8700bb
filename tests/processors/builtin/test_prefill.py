"""``PrefillErrorHandler`` (reference mastra-semantics §2.6, current Mastra's
signal, SPEC rule 18f): on an assistant-prefill rejection at the first attempt,
append a ``continue`` reminder as a user message, write a ``data-signal`` chunk
and retry."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

import pytest

from procession import ProviderError
from procession.messages import Message, TextPart
from procession.processors import (
    MessageList,
    PrefillErrorHandler,
    ProcessAPIErrorArgs,
    ProcessAPIErrorResult,
)
from procession.processors._contract import HOOK_NAMES

RETRY = ProcessAPIErrorResult(retry=True)
REMINDER = (
    '<system-reminder type="anthropic-prefill-processor-retry">continue'
    "</system-reminder>"
)


def make_args(
    error: Any, *, retry_count: int = 0, last: str = "assistant"
) -> ProcessAPIErrorArgs:
    message_list = MessageList()
    message_list.add(Message.user("hi"), "input")
    if last == "assistant":
        message_list.add(Message.assistant("Sure, here"), "response")
    return ProcessAPIErrorArgs(
        processor_id=PrefillErrorHandler.id,
        state={},
        retry_count=retry_count,
        error=error,
        messages=message_list.get.all.db(),
        message_list=message_list,
        step_number=0,
        steps=(),
    )


def snapshot(message_list: MessageList) -> list[tuple[str, str, str]]:
    return [(m.id, m.role, m.text) for m in message_list]


PREFILL_MESSAGES = [
    "This model does not support assistant message prefill. The conversation "
    "must end with a user message.",
    "DOES NOT SUPPORT ASSISTANT MESSAGE PREFILL",
    "Assistant response prefill is incompatible with enable_thinking.",
    "assistant response prefill is incompatible with enable-thinking",
    "assistant response prefill is incompatible with enable thinking",
    "assistant response prefill is incompatible with enablethinking",
    "Requests ending with a model turn are not supported for this model.",
]


def test_identity_and_hooks() -> None:
    handler = PrefillErrorHandler()
    assert handler.id == "prefill-error-handler"
    assert handler.name == "Prefill Error Handler"
    hooks = [name for name in HOOK_NAMES if callable(getattr(handler, name, None))]
    assert hooks == ["process_api_error"]


@pytest.mark.parametrize("text", PREFILL_MESSAGES)
def test_a_prefill_error_appends_a_reminder_and_retries(text: str) -> None:
    args = make_args(ProviderError(text, status_code=400))
    before = snapshot(args.message_list)
    assert PrefillErrorHandler().process_api_error(args) == RETRY
    after = list(args.message_list)
    assert snapshot(args.message_list)[:-1] == before
    reminder = after[-1]
    assert reminder.role == "user"
    assert reminder.content.parts == [TextPart(text=REMINDER)]
    assert reminder.text == REMINDER
    assert reminder.content.metadata == {
        "systemReminder": {"type": "anthropic-prefill-processor-retry"}
    }
    assert args.message_list.get_source(reminder) == "input"
    assert reminder.id not in {message_id for message_id, _, _ in before}


def test_each_reminder_has_a_fresh_id() -> None:
    ids = set()
    for _ in range(3):
        args = make_args(ProviderError(PREFILL_MESSAGES[0]))
        assert PrefillErrorHandler().process_api_error(args) == RETRY
        ids.add(list(args.message_list)[-1].id)
    assert len(ids) == 3


def test_it_retries_even_when_the_last_message_is_not_an_assistant_message() -> None:
    args = make_args(ProviderError(PREFILL_MESSAGES[0]), last="user")
    assert PrefillErrorHandler().process_api_error(args) == RETRY
    roles = [m.role for m in args.message_list]
    assert roles == ["user", "user"]
    assert list(args.message_list)[-1].text == REMINDER


@pytest.mark.parametrize("retry_count", [1, 2, 5])
def test_only_the_first_attempt_is_handled(retry_count: int) -> None:
    args = make_args(ProviderError(PREFILL_MESSAGES[0]), retry_count=retry_count)
    before = snapshot(args.message_list)
    assert PrefillErrorHandler().process_api_error(args) is None
    assert snapshot(args.message_list) == before


@pytest.mark.parametrize(
    "error",
    [
        ProviderError(
            "Rate limit reached for requests", status_code=429, is_retryable=True
        ),
        ProviderError("overloaded", status_code=529),
        RuntimeError("prefill is great"),
        # Only exceptions count: a plain object saying the words is not an error.
        {"message": PREFILL_MESSAGES[0]},
        SimpleNamespace(message=PREFILL_MESSAGES[0]),
        None,
    ],
)
def test_other_errors_are_left_alone(error: Any) -> None:
    args = make_args(error)
    before = snapshot(args.message_list)
    assert PrefillErrorHandler().process_api_error(args) is None
    assert snapshot(args.message_list) == before


@pytest.mark.parametrize(
    "error",
    [
        ProviderError(
            "invalid_request_error",
            status_code=400,
            body=json.dumps(
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": "This model does not support assistant message "
                        "prefill. The conversation must end with a user message.",
                    },
                }
            ),
        ),
        ProviderError(
            "Bad Request",
            status_code=400,
            body={
                "error": {
                    "code": 400,
                    "message": "Requests ending with a model turn are not supported.",
                }
            },
        ),
    ],
    ids=["string-body", "dict-body"],
)
def test_the_body_is_checked_too(error: ProviderError) -> None:
    args = make_args(error)
    assert PrefillErrorHandler().process_api_error(args) == RETRY
    assert list(args.message_list)[-1].text == REMINDER


def test_a_message_attribute_is_checked() -> None:
    class SdkError(Exception):
        def __init__(self) -> None:
            super().__init__("400")
            self.message = (
                "Assistant response prefill is incompatible with enable_thinking"
            )

    args = make_args(SdkError())
    assert PrefillErrorHandler().process_api_error(args) == RETRY


def test_an_unserialisable_body_is_skipped() -> None:
    body: dict[str, Any] = {}
    body["self"] = body  # json.dumps raises ValueError on the cycle
    args = make_args(ProviderError("nope", body=body))
    assert PrefillErrorHandler().process_api_error(args) is None
