"""What the three renderers share: SSE framing, default usage, stop reasons."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._script import (
    Stream,
    TokenCounts,
    _dumps,
    _Part,
    _Raw,
    _Text,
    _Thinking,
    _ToolCall,
)

__all__ = [
    "TO_CHAT_STOP",
    "TO_INCOMPLETE_REASON",
    "data",
    "neutral_stop",
    "rendered_parts",
    "sse",
    "usage_of",
]


def sse(event: str, payload: Mapping[str, Any]) -> str:
    """One ``event:`` + ``data:`` SSE block (Anthropic, Responses)."""
    return f"event: {event}\ndata: {_dumps(payload)}\n\n"


def data(payload: Mapping[str, Any] | str) -> str:
    """One data-only SSE block (Chat Completions); a string is sent as is."""
    text = payload if isinstance(payload, str) else _dumps(payload)
    return f"data: {text}\n\n"


def rendered_parts(stream: Stream, renderer: str) -> tuple[_Part, ...]:
    """The parts of ``stream``; ValueError for a ``Stream.raw`` (nothing to render)."""
    if any(isinstance(p, _Raw) for p in stream.parts):
        raise ValueError(
            f"{renderer}: a Stream.raw is sent verbatim, there is nothing to render"
        )
    return stream.parts


def usage_of(stream: Stream) -> TokenCounts:
    """The stream's counts, or 10 in and one out per delta (at least one)."""
    if stream.usage is not None:
        return stream.usage
    pieces = 0
    for part in stream.parts:
        if isinstance(part, _Text | _Thinking):
            pieces += len(part.pieces)
        elif isinstance(part, _ToolCall):
            pieces += part.chunks
    return TokenCounts(output_tokens=max(1, pieces))


_FROM_OPENAI_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
TO_CHAT_STOP = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "stop_sequence": "stop",
    "refusal": "content_filter",
    "pause_turn": "stop",
    "model_context_window_exceeded": "length",
}
TO_INCOMPLETE_REASON = {
    "max_tokens": "max_output_tokens",
    "model_context_window_exceeded": "max_output_tokens",
    "refusal": "content_filter",
}


def neutral_stop(stream: Stream) -> str:
    """The stop reason in Anthropic terms (the script's neutral spelling)."""
    if stream.stop is not None:
        return _FROM_OPENAI_STOP.get(stream.stop, stream.stop)
    if any(isinstance(p, _ToolCall) for p in stream.parts):
        return "tool_use"
    return "end_turn"
