"""``PrefillErrorHandler``: recover from "assistant message prefill" rejections.

Some models refuse a conversation that ends with an assistant message (Anthropic
models with extended thinking, Claude 4.6-like models, Gemini 3+). On such an
error, at the first attempt only, this error processor sends the reactive
signal current Mastra sends (reference §2.6, SPEC rule 18f): a user message
``<system-reminder type="anthropic-prefill-processor-retry">continue
</system-reminder>`` (tagged in ``content.metadata["systemReminder"]``) so the
conversation ends with a user turn, and a ``data-signal`` chunk (transient) that
tells the client; then it asks for a retry.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ...data import Message, MessageContent, TextPart
from .._contract import ProcessAPIErrorArgs, ProcessAPIErrorResult, Processor

__all__ = [
    "PREFILL_ERROR_PATTERNS",
    "PREFILL_REMINDER_TEXT",
    "PREFILL_REMINDER_TYPE",
    "PREFILL_SIGNAL",
    "PrefillErrorHandler",
    "is_prefill_error",
]

PREFILL_ERROR_PATTERNS: Final = (
    re.compile(r"does not support assistant message prefill", re.IGNORECASE),
    re.compile(
        r"assistant response prefill is incompatible with enable[_\s-]?thinking",
        re.IGNORECASE,
    ),
    re.compile(r"requests ending with a model turn are not supported", re.IGNORECASE),
)
"""What a provider says when it rejects a conversation ending in an assistant
turn (the last one is Gemini 3+)."""

PREFILL_REMINDER_TYPE: Final = "anthropic-prefill-processor-retry"
PREFILL_REMINDER_TEXT: Final = (
    f'<system-reminder type="{PREFILL_REMINDER_TYPE}">continue</system-reminder>'
)
"""The signal as the model reads it (Mastra renders a signal as
``<tagName attr="...">contents</tagName>``)."""
PREFILL_SIGNAL: Final[Mapping[str, Any]] = {
    "type": "reactive",
    "tagName": "system-reminder",
    "contents": "continue",
    "attributes": {"type": PREFILL_REMINDER_TYPE},
    "metadata": {"message": "Continuing after prefill error"},
}
"""The ``data`` of the ``data-signal`` chunk, as Mastra's ``sendSignal`` sends it."""


def _texts(error: BaseException) -> list[str]:
    texts = [str(error)]
    message = getattr(error, "message", None)
    if isinstance(message, str):
        texts.append(message)
    for name in ("body", "response_body", "responseBody"):
        body = getattr(error, name, None)
        if isinstance(body, str):
            texts.append(body)
        elif isinstance(body, Mapping | Sequence) and not isinstance(
            body, bytes | bytearray
        ):
            with contextlib.suppress(TypeError, ValueError, RecursionError):
                texts.append(json.dumps(body, default=str))
    return texts


def is_prefill_error(error: object) -> bool:
    """Whether ``error`` (an exception; other objects never are) says the model
    does not accept an assistant prefill: its message, or its string (or JSON)
    ``body``, matches one of ``PREFILL_ERROR_PATTERNS``."""
    if not isinstance(error, BaseException):
        return False
    return any(
        pattern.search(text)
        for text in _texts(error)
        for pattern in PREFILL_ERROR_PATTERNS
    )


class PrefillErrorHandler(Processor):
    """An error processor: on an assistant-prefill rejection at ``retry_count ==
    0``, send the ``continue`` signal (a user message, source ``input``, and a
    transient ``data-signal`` chunk) and retry. Other errors, and later
    attempts, are left alone (``None``, the message list untouched)."""

    id = "prefill-error-handler"
    _name = "Prefill Error Handler"

    def process_api_error(
        self, args: ProcessAPIErrorArgs
    ) -> ProcessAPIErrorResult | None:
        """Send the ``continue`` signal and retry, for a prefill error at the first
        attempt."""
        if args.retry_count > 0 or not is_prefill_error(args.error):
            return None
        metadata: dict[str, Any] = {"systemReminder": {"type": PREFILL_REMINDER_TYPE}}
        reminder = Message(
            role="user",
            content=MessageContent(
                parts=[TextPart(text=PREFILL_REMINDER_TEXT)], metadata=metadata
            ),
        )
        args.message_list.add(reminder, "input")
        if args.writer is not None:
            args.writer.custom_nowait(
                {"type": "data-signal", "data": dict(PREFILL_SIGNAL), "transient": True}
            )
        return ProcessAPIErrorResult(retry=True)
