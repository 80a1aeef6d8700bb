"""The example processors of the user's seed (``processor-interface.zh-TW.txt``),
ported to Python the way a user of procession would write them.

Each class keeps the seed's id, hooks and behaviour; only the spelling changes
(snake_case hooks, one ``args`` object, ``args.abort(reason, retry=...,
metadata=...)``, ``isinstance`` on chunk and part classes where TypeScript narrows
on ``type``). Tests import them from here (``from tests.seed_processors import
...``), so the agent-loop tests can reuse them.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

from procession import ProviderError
from procession.chunks import Chunk, DataChunk, FinishChunk, TextDeltaChunk
from procession.messages import Message, TextPart
from procession.processors import (
    MessageList,
    ProcessAPIErrorArgs,
    ProcessInputArgs,
    ProcessInputStepArgs,
    Processor,
    ProcessOutputStepArgs,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
    RequestContext,
)

__all__ = [
    "ContentFilter",
    "DynamicModelProcessor",
    "ErrorRecoveryProcessor",
    "LowercaseProcessor",
    "ModerationCollector",
    "QualityGuardrail",
    "ReasoningTransformer",
    "RedactToolResult",
    "ScanToolResult",
    "WordCounter",
    "contains_prompt_injection",
    "content_filter_for",
    "evaluate_response_quality",
]

logger = logging.getLogger("seed_processors")


class LowercaseProcessor(Processor):
    """Basic input processor: lower-cases the text parts of the input messages,
    returning new message objects (the seed spreads ``{...msg, content: ...}``)."""

    id = "lowercase"

    async def process_input(self, args: ProcessInputArgs) -> list[Message]:
        return [
            attrs.evolve(
                msg,
                content=attrs.evolve(
                    msg.content,
                    parts=[
                        attrs.evolve(part, text=part.text.lower())
                        if isinstance(part, TextPart)
                        else part
                        for part in msg.content.parts
                    ],
                ),
            )
            for msg in args.messages
        ]


class DynamicModelProcessor(Processor):
    """Per-step processor: picks the model (and tool choice) by step number."""

    id = "dynamic-model"

    async def process_input_step(self, args: ProcessInputStepArgs) -> dict[str, Any]:
        # Use a fast model for the initial response.
        if args.step_number == 0:
            return {"model": "openai/gpt-5-mini"}
        # Switch to a powerful model after tool calls.
        if args.steps and args.steps[-1].tool_calls:
            return {"model": "openai/gpt-5.6-sol"}
        # Disable tools after 5 steps to force completion.
        if args.step_number > 5:
            return {"tool_choice": "none"}
        return {}


class ReasoningTransformer(Processor):
    """Message transformer: renames ``reasoning`` parts to ``thinking`` in place
    at every step (useful when switching providers) and returns the list."""

    id = "reasoning-transformer"

    async def process_input_step(self, args: ProcessInputStepArgs) -> MessageList:
        for msg in args.messages:
            if msg.role == "assistant" and msg.content.parts:
                for part in msg.content.parts:
                    if part.type == "reasoning":
                        part.type = "thinking"
        return args.message_list


class ContentFilter(Processor):
    """Mixed input and output processor: blocks input or output that contains
    one of ``blocked_words``."""

    id = "content-filter"

    def __init__(self, blocked_words: Sequence[str]) -> None:
        self.blocked_words = list(blocked_words)

    async def process_input(self, args: ProcessInputArgs) -> list[Message]:
        for msg in args.messages:
            text = " ".join(
                part.text for part in msg.content.parts if isinstance(part, TextPart)
            )
            if any(word in text for word in self.blocked_words):
                args.abort("Blocked content detected in input")
        return args.messages

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Chunk:
        part = args.part
        if isinstance(part, TextDeltaChunk) and any(
            word in part.payload.text for word in self.blocked_words
        ):
            args.abort("Blocked content detected in output")
        return part


def content_filter_for(request_context: RequestContext) -> list[object]:
    """The seed's per-request processor list: a ``ContentFilter`` built from the
    request context's ``blockedWords``."""
    blocked_words = request_context.get("blockedWords") or []
    return [ContentFilter(blocked_words)]


class WordCounter(Processor):
    """Stream accumulator: counts the words of ``text-delta`` chunks in ``state``
    and logs the total on ``finish``."""

    id = "word-counter"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Chunk:
        state, part = args.state, args.part
        state.setdefault("word_count", 0)
        if isinstance(part, TextDeltaChunk):
            state["word_count"] += len(part.payload.text.split())
        if isinstance(part, FinishChunk):
            logger.info("Total words: %d", state["word_count"])
        return part


class ModerationCollector(Processor):
    """Sees ``data-*`` chunks (``process_data_parts``) and collects the data of
    ``data-moderation`` ones into ``state["warnings"]``."""

    id = "moderation-collector"
    process_data_parts = True

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Chunk:
        part = args.part
        if isinstance(part, DataChunk) and part.type == "data-moderation":
            args.state.setdefault("warnings", []).append(part.data)
        return part


async def evaluate_response_quality(text: str) -> float:
    """A stand-in for the seed's external quality model: longer is better, 20
    words or more is perfect."""
    return min(1.0, len(text.split()) / 20)


class QualityGuardrail(Processor):
    """Retryable guardrail: asks for a retry (with the score as metadata) while
    the response scores below 0.7, and blocks once 3 retries were spent."""

    id = "quality-guardrail"

    def __init__(
        self,
        evaluate: Callable[[str], Awaitable[float]] = evaluate_response_quality,
    ) -> None:
        self.evaluate = evaluate

    async def process_output_step(self, args: ProcessOutputStepArgs) -> list[Message]:
        score = await self.evaluate(args.text)
        if score < 0.7:
            if args.retry_count < 3:
                # Request a retry with feedback for the LLM.
                args.abort(
                    "Response quality too low. Please provide more detail.",
                    retry=True,
                    metadata={"qualityScore": score},
                )
            else:
                # Max retries reached: block the response.
                args.abort("Response quality too low after multiple attempts.")
        return []


class RedactToolResult(Processor):
    """Redacts ``ssn`` and ``email`` from ``lookup-customer`` results, replacing
    the tool invocation in the message list (the seed's dict shape)."""

    id = "redact-tool-result"

    async def process_tool_result(self, args: ProcessToolResultArgs) -> None:
        if args.tool_name != "lookup-customer":
            return
        redacted = {**args.result, "ssn": "[REDACTED]", "email": "[REDACTED]"}
        args.message_list.update_tool_invocation(
            {
                "type": "tool-invocation",
                "toolInvocation": {
                    "state": "result",
                    "toolCallId": args.tool_call_id,
                    "toolName": args.tool_name,
                    "args": args.args,
                    "result": redacted,
                },
            }
        )


_INJECTION = re.compile(r"ignore (all )?(previous|prior) instructions", re.IGNORECASE)


def contains_prompt_injection(text: str) -> bool:
    """The seed's (deliberately simple) prompt-injection check."""
    return _INJECTION.search(text) is not None


class ScanToolResult(Processor):
    """Blocks the run when a tool result looks like a prompt injection."""

    id = "scan-tool-result"

    async def process_tool_result(self, args: ProcessToolResultArgs) -> None:
        result = args.result
        text = result if isinstance(result, str) else json.dumps(result)
        if contains_prompt_injection(text):
            args.abort("blocked by scan-tool-result: suspected prompt injection")


class ErrorRecoveryProcessor(Processor):
    """Custom error recovery: on "context length exceeded", drops the 2nd and 3rd
    messages and asks for one retry."""

    id = "error-recovery"

    def process_api_error(self, args: ProcessAPIErrorArgs) -> dict[str, bool] | None:
        # Only retry once.
        if args.retry_count > 0:
            return None
        error = args.error
        if isinstance(error, ProviderError) and "context length exceeded" in (
            error.message
        ):
            # Trim older messages to fit within the context.
            messages = args.message_list.get.all.db()
            if len(messages) > 4:
                args.message_list.remove_by_ids([messages[1].id, messages[2].id])
                return {"retry": True}
        return None
