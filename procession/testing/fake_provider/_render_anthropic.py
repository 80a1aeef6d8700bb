"""A ``Stream`` as Anthropic Messages SSE events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._script import (
    Stream,
    TokenCounts,
    _Error,
    _Part,
    _split,
    _Text,
    _Thinking,
    _ToolCall,
)
from ._sse import neutral_stop, rendered_parts, sse, usage_of

__all__ = ["anthropic_events"]


def anthropic_events(
    stream: Stream, *, model: str = "fake-model", ordinal: int = 1
) -> list[str]:
    """The Anthropic Messages SSE events for ``stream``, one string per event.

    ``message_start``, then per part ``content_block_start`` / deltas /
    ``content_block_stop`` (an optional ``ping`` after the first start), then
    ``message_delta`` (stop reason, cumulative output tokens) and
    ``message_stop``; an error part ends the list with ``event: error``.
    ``ordinal`` numbers the fake ids (the server passes the request's number).
    """
    parts = rendered_parts(stream, "anthropic_events")
    usage = usage_of(stream)
    events = [_message_start(stream, stream.model or model, usage, ordinal)]
    for index, part in enumerate(parts):
        if isinstance(part, _Error):
            events.append(_error(part, ordinal))
            return events
        events += _block(part, index, ordinal, ping=index == 0 and stream.pings)
    message_delta = {
        "type": "message_delta",
        "delta": {"stop_reason": neutral_stop(stream), "stop_sequence": None},
        "usage": {"output_tokens": usage.output_tokens},
    }
    events.append(sse("message_delta", message_delta))
    events.append(sse("message_stop", {"type": "message_stop"}))
    return events


def _message_start(stream: Stream, model: str, usage: TokenCounts, ordinal: int) -> str:
    message: dict[str, Any] = {
        "id": stream.id or f"msg_fake_{ordinal}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {
            "input_tokens": usage.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": usage.cached_input_tokens,
            "output_tokens": 1,
        },
    }
    return sse("message_start", {"type": "message_start", "message": message})


def _error(part: _Error, ordinal: int) -> str:
    error = {
        "type": "error",
        "error": {"type": part.type, "message": part.message},
        "request_id": f"req_fake_{ordinal}",
    }
    return sse("error", error)


def _block(part: _Part, index: int, ordinal: int, *, ping: bool) -> list[str]:
    """One content block: its start, an optional ping, its deltas, its stop."""
    block: dict[str, Any]
    if isinstance(part, _Text):
        block = {"type": "text", "text": ""}
    elif isinstance(part, _Thinking):
        block = {"type": "thinking", "thinking": "", "signature": ""}
    else:
        assert isinstance(part, _ToolCall)
        block = {
            "type": "tool_use",
            "id": part.id or f"toolu_fake_{ordinal}_{index}",
            "name": part.name,
            "input": {},
        }
    start = {"type": "content_block_start", "index": index, "content_block": block}
    events = [sse("content_block_start", start)]
    if ping:
        events.append(sse("ping", {"type": "ping"}))
    events += [_delta(index, body) for body in _deltas(part)]
    stop = {"type": "content_block_stop", "index": index}
    events.append(sse("content_block_stop", stop))
    return events


def _deltas(part: _Part) -> list[dict[str, Any]]:
    if isinstance(part, _Text):
        return [{"type": "text_delta", "text": t} for t in part.pieces]
    if isinstance(part, _Thinking):
        deltas: list[dict[str, Any]] = [
            {"type": "thinking_delta", "thinking": t} for t in part.pieces
        ]
        return [*deltas, {"type": "signature_delta", "signature": part.signature}]
    assert isinstance(part, _ToolCall)
    return [
        {"type": "input_json_delta", "partial_json": piece}
        for piece in _split(part.arguments, part.chunks)
    ]


def _delta(index: int, body: Mapping[str, Any]) -> str:
    data = {"type": "content_block_delta", "index": index, "delta": body}
    return sse("content_block_delta", data)
