"""Helpers of the tests that run the seed's example processors
(``tests/seed_processors.py``) inside a real ``Agent`` loop
(tests/runtime/test_agent_seed_*.py): streaming a run, reading a prompt's texts
and tool results, and a weather tool.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from procession import Agent, AgentResult, ProviderError
from procession.actors import ExecutionMode
from procession.messages import (
    Message,
    ToolInvocationPart,
)
from procession.processors import (
    PromptAssistantMessage,
    PromptMessage,
    PromptSystemMessage,
    PromptTextPart,
    PromptToolMessage,
    PromptUserMessage,
)
from procession.runtime.tools import tool

FEEDBACK = (
    "Your previous response was not accepted: Response quality too low. Please "
    "provide more detail.. Please try again with the feedback in mind."
)
"""SPEC §2.5's feedback message for QualityGuardrail's retry reason (the reason
ends with a period, so two follow)."""

MODES: tuple[ExecutionMode, ...] = ("adaptive", "fused", "actors")
"""Stream-hook tests run in both execution modes: the client must see the same
(SPEC §2.10)."""

GOOD_ANSWER = (
    "It is 21 degrees in Paris with a light westerly breeze, clear skies all "
    "afternoon and no rain expected before the evening."
)
"""Twenty words: QualityGuardrail scores it 1.0."""


# --- helpers ------------------------------------------------------------------------


async def run_stream(
    agent: Agent, prompt: Any, **options: Any
) -> tuple[list[Any], AgentResult]:
    """Stream a run to the end; return every chunk the client read and the result."""
    async with agent.stream(prompt, **options) as stream:
        chunks = [chunk async for chunk in stream]
        result = await stream.result()
    return chunks, result


def of_type(chunks: Sequence[Any], cls: type[Any]) -> list[Any]:
    return [chunk for chunk in chunks if isinstance(chunk, cls)]


def system_texts(prompt: Sequence[PromptMessage]) -> list[str]:
    return [m.content for m in prompt if isinstance(m, PromptSystemMessage)]


def user_texts(prompt: Sequence[PromptMessage]) -> list[str]:
    return [
        part.text
        for m in prompt
        if isinstance(m, PromptUserMessage)
        for part in m.content
        if isinstance(part, PromptTextPart)
    ]


def conversation_texts(prompt: Sequence[PromptMessage]) -> list[str]:
    """The text of each user and assistant message of a prompt, in order."""
    out: list[str] = []
    for m in prompt:
        if isinstance(m, PromptUserMessage | PromptAssistantMessage):
            out.append(
                "".join(p.text for p in m.content if isinstance(p, PromptTextPart))
            )
    return out


def tool_results_in(prompt: Sequence[PromptMessage]) -> list[Any]:
    return [
        part.result
        for m in prompt
        if isinstance(m, PromptToolMessage)
        for part in m.content
    ]


def tool_parts(messages: Sequence[Message]) -> list[ToolInvocationPart]:
    return [
        part
        for m in messages
        for part in m.content.parts
        if isinstance(part, ToolInvocationPart)
    ]


@attrs.frozen
class CityInput:
    city: str


@tool
async def get_weather(args: CityInput) -> str:
    """The current weather in a city."""
    return f"21 degrees in {args.city}"


HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "Hi, I'm planning a trip."},
    {"role": "assistant", "content": "Great! Where to?"},
    {"role": "user", "content": "Somewhere warm, maybe Spain."},
    {"role": "assistant", "content": "Spain is lovely in May."},
    {"role": "user", "content": "What should I pack?"},
]


def context_length_error() -> ProviderError:
    return ProviderError(
        "This model's maximum context length exceeded: 9000 tokens requested",
        status_code=400,
        body={"error": {"code": "context_length_exceeded"}},
    )
