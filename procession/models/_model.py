"""The language-model interface that providers implement.

A model is called once per step with a ``ModelRequest`` (a provider-neutral
prompt, the tools on offer, the tool choice and settings) and answers with a
stream of raw chunks::

    async with model.stream(request) as response:
        async for chunk in response:   # text-*, reasoning-*, tool-call*, source,
            ...                        # file, response-metadata, raw
        response.finish                 # finish reason, usage, warnings, ...

Failures are ``ProviderError`` — raised by ``model.stream(...)`` on entry (the
call was rejected) or by ``__anext__`` (the stream broke mid-way). Leaving the
``async with`` early must close the provider's connection before it returns:
that is how cancellation reaches the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

import attrs

from ..data import Chunk, PromptMessage, Usage

__all__ = [
    "FinishReason",
    "LanguageModel",
    "ModelFinish",
    "ModelRequest",
    "ModelResponse",
    "ToolChoice",
    "ToolDefinition",
]

FinishReason: TypeAlias = str
"""``"stop"``, ``"length"``, ``"content-filter"``, ``"tool-calls"``, ``"error"``,
``"other"`` or ``"unknown"`` (AI SDK / Mastra finish reasons)."""

ToolChoice: TypeAlias = Literal["auto", "none", "required"] | Mapping[str, str]
"""``"auto"``, ``"none"``, ``"required"``, or ``{"type": "tool", "tool_name": ...}``."""


@attrs.frozen(kw_only=True)
class ToolDefinition:
    """A tool as the model is offered it."""

    name: str
    description: str = ""
    input_schema: Mapping[str, Any] = attrs.field(factory=dict)
    """JSON Schema of the tool's arguments (an object schema)."""
    provider_options: Mapping[str, Any] | None = None


@attrs.frozen(kw_only=True)
class ModelRequest:
    """One model call."""

    prompt: Sequence[PromptMessage]
    tools: Sequence[ToolDefinition] = ()
    tool_choice: ToolChoice = "auto"
    settings: Mapping[str, Any] = attrs.field(factory=dict)
    """Call settings: ``temperature``, ``max_tokens``, ``top_p``, ``top_k``,
    ``stop_sequences``, ``seed``, ... (provider-neutral names)."""
    provider_options: Mapping[str, Any] = attrs.field(factory=dict)
    """Provider-specific options keyed by provider, e.g. ``{"anthropic": {...}}``."""
    structured_output: Any = None


@attrs.frozen(kw_only=True)
class ModelFinish:
    """How a model response ended (known once the stream is exhausted)."""

    finish_reason: FinishReason = "unknown"
    usage: Usage | None = None
    warnings: Sequence[Any] = ()
    provider_metadata: Any = None
    request: Any = None
    """The provider request body, if known (for tracing)."""
    raw_response: Any = None
    """The raw provider response (headers, ids), if known (for tracing)."""


class ModelResponse(Protocol):
    """A streaming model response: an async iterator of raw chunks. ``finish``
    is set once iteration has ended normally.

    Optionally ``next_nowait()``: the next chunk if it is at hand without
    waiting (never checkpoints), else ``trio.WouldBlock``; ``StopAsyncIteration``
    at the end. A ``"fused"`` run then takes such chunks in the consumer's task
    (no task switch per chunk) and awaits ``__anext__`` only when one must be
    waited for."""

    finish: ModelFinish | None

    def __aiter__(self) -> AsyncIterator[Chunk]: ...


@runtime_checkable
class LanguageModel(Protocol):
    """What a model provider implements."""

    @property
    def provider(self) -> str:
        """The provider's name, e.g. ``"anthropic"``."""
        ...

    @property
    def model_id(self) -> str:
        """The model's id at that provider, e.g. ``"claude-sonnet-4-5"``."""
        ...

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[ModelResponse]:
        """Start the call. Entering raises ``ProviderError`` if the call is
        rejected; leaving closes the provider stream (even half-read)."""
        ...
