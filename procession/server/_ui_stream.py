"""The AI SDK UI message stream, protocol v1 (what ``useChat`` and
``readUIMessageStream`` read), from Mastra chunk JSON.

The AI SDK validates every chunk with strict zod schemas
(``uiMessageChunkSchema`` in ``ai``): a key it does not list fails the
client, and an optional key must be absent, never ``null``. So each chunk
here is built from exactly the keys its schema allows, and optional ones are
written only when they have a value.

Mapping (Mastra -> UI): ``start`` -> ``start``; ``step-start`` ->
``start-step``; ``step-finish`` -> ``finish-step``; ``text-*`` / ``reasoning-*``
keep their names (``text`` becomes ``delta``); ``tool-call-input-streaming-start``
-> ``tool-input-start``; ``tool-call-delta`` -> ``tool-input-delta``;
``tool-call`` -> ``tool-input-available``; ``tool-result`` ->
``tool-output-available`` (``tool-output-error`` when ``isError``);
``tool-error`` -> ``tool-output-error``; ``source`` -> ``source-url`` /
``source-document``; ``file`` -> ``file`` (a data URL); ``data-*`` as they
are; ``error`` -> ``error`` (``errorText``); ``tripwire`` -> a ``data-tripwire``
part, then ``finish`` with ``finishReason: "other"``; ``step-retry`` -> a
``data-step-retry`` part (the client drops the rejected attempt);
``abort`` -> ``abort``; ``finish`` -> ``finish`` with its ``finishReason``.
Everything else (``raw``, ``response-metadata``, ...) is not sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from ..chunks import Chunk, to_wire
from ._http import dumps, json_string
from ._mastra import plain_delta

__all__ = [
    "UI_STREAM_HEADERS",
    "ui_chunks",
    "ui_frame",
    "ui_frames",
]

UI_STREAM_HEADERS: Final = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"connection", b"keep-alive"),
    (b"x-vercel-ai-ui-message-stream", b"v1"),
    (b"x-accel-buffering", b"no"),
]

_FINISH_REASONS: Final = frozenset(
    {"stop", "length", "content-filter", "tool-calls", "error", "other"}
)

Wire = Mapping[str, Any]


def _with(out: dict[str, Any], source: Wire, *keys: str) -> dict[str, Any]:
    """``out`` plus each optional key of ``source`` that has a value."""
    for key in keys:
        value = source.get(key)
        if value is not None:
            out[key] = value
    return out


def _text_like(kind: str) -> Callable[[Wire], list[dict[str, Any]]]:
    def convert(p: Wire) -> list[dict[str, Any]]:
        out: dict[str, Any] = {"type": kind, "id": p["id"]}
        if kind.endswith("-delta"):
            out["delta"] = p["text"]
        return [_with(out, p, "providerMetadata")]

    return convert


def _tool_input_start(p: Wire) -> list[dict[str, Any]]:
    out = {"type": "tool-input-start", "toolCallId": p["toolCallId"]}
    out["toolName"] = p["toolName"]
    return [_with(out, p, "providerExecuted", "providerMetadata", "dynamic")]


def _tool_input_delta(p: Wire) -> list[dict[str, Any]]:
    return [
        {
            "type": "tool-input-delta",
            "toolCallId": p["toolCallId"],
            "inputTextDelta": p["argsTextDelta"],
        }
    ]


def _tool_call(p: Wire) -> list[dict[str, Any]]:
    out = {
        "type": "tool-input-available",
        "toolCallId": p["toolCallId"],
        "toolName": p["toolName"],
        "input": p.get("args"),
    }
    return [_with(out, p, "providerExecuted", "providerMetadata", "dynamic")]


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        message = error.get("message")
        if isinstance(message, str):
            return message
    if isinstance(error, str):
        return error
    return "error" if error is None else dumps(error).decode()


def _tool_result(p: Wire) -> list[dict[str, Any]]:
    if p.get("isError"):
        out = {
            "type": "tool-output-error",
            "toolCallId": p["toolCallId"],
            "errorText": _error_text(p.get("result")),
        }
        return [_with(out, p, "providerExecuted", "dynamic")]
    out = {
        "type": "tool-output-available",
        "toolCallId": p["toolCallId"],
        "output": p.get("result"),
    }
    return [_with(out, p, "providerExecuted", "dynamic")]


def _tool_error(p: Wire) -> list[dict[str, Any]]:
    out = {
        "type": "tool-output-error",
        "toolCallId": p["toolCallId"],
        "errorText": _error_text(p.get("error")),
    }
    return [_with(out, p, "providerExecuted")]


def _source(p: Wire) -> list[dict[str, Any]]:
    if p.get("sourceType") == "document":
        out = {
            "type": "source-document",
            "sourceId": p["id"],
            "mediaType": p.get("mimeType") or "application/octet-stream",
            "title": p.get("title") or "",
        }
        return [_with(out, p, "filename", "providerMetadata")]
    if not isinstance(p.get("url"), str):
        return []
    out = {"type": "source-url", "sourceId": p["id"], "url": p["url"]}
    return [_with(out, p, "title", "providerMetadata")]


def _file(p: Wire) -> list[dict[str, Any]]:
    data, mime = p["data"], p["mimeType"]
    is_url = isinstance(data, str) and data.startswith(("http:", "https:", "data:"))
    url = data if is_url else f"data:{mime};base64,{data}"
    return [
        _with({"type": "file", "url": url, "mediaType": mime}, p, "providerMetadata")
    ]


def _finish_reason(p: Wire) -> str:
    step = p.get("stepResult")
    reason = step.get("reason") if isinstance(step, Mapping) else None
    return reason if reason in _FINISH_REASONS else "other"


def _tripwire(p: Wire) -> list[dict[str, Any]]:
    data = {
        "reason": p.get("reason"),
        "retry": p.get("retry"),
        "metadata": p.get("metadata"),
        "processorId": p.get("processorId"),
    }
    return [
        {"type": "data-tripwire", "data": data},
        {"type": "finish", "finishReason": "other"},
    ]


_PAYLOAD_CONVERTERS: Final[dict[str, Callable[[Wire], list[dict[str, Any]]]]] = {
    "start": lambda p: [{"type": "start"}],
    "step-start": lambda p: [{"type": "start-step"}],
    "step-finish": lambda p: [{"type": "finish-step"}],
    "text-start": _text_like("text-start"),
    "text-delta": _text_like("text-delta"),
    "text-end": _text_like("text-end"),
    "reasoning-start": _text_like("reasoning-start"),
    "reasoning-delta": _text_like("reasoning-delta"),
    "reasoning-end": _text_like("reasoning-end"),
    "tool-call-input-streaming-start": _tool_input_start,
    "tool-call-delta": _tool_input_delta,
    "tool-call": _tool_call,
    "tool-result": _tool_result,
    "tool-error": _tool_error,
    "source": _source,
    "file": _file,
    "error": lambda p: [{"type": "error", "errorText": _error_text(p.get("error"))}],
    "tripwire": _tripwire,
    "step-retry": lambda p: [{"type": "data-step-retry", "data": dict(p)}],
    "abort": lambda p: [{"type": "abort"}],
    "finish": lambda p: [{"type": "finish", "finishReason": _finish_reason(p)}],
}


def ui_chunks(chunk: Chunk) -> list[dict[str, Any]]:
    """The UI message stream chunks for one Mastra chunk (none, one or two),
    each with only the keys the AI SDK's strict schema allows."""
    wire = to_wire(chunk)
    kind = wire["type"]
    if kind.startswith("data-"):
        return [
            _with({"type": kind, "data": wire.get("data")}, wire, "id", "transient")
        ]
    convert = _PAYLOAD_CONVERTERS.get(kind)
    if convert is None:
        return []
    return convert(wire.get("payload") or {})


def ui_frame(value: Mapping[str, Any]) -> bytes:
    """One SSE frame, ``data: <json>\\n\\n``, as the AI SDK's
    ``JsonToSseTransformStream`` writes it."""
    return b"data: " + dumps(value) + b"\n\n"


def ui_frames(chunk: Chunk) -> bytes:
    """The SSE frames of ``ui_chunks(chunk)``, joined (``b""`` for none). A
    plain text delta (no provider metadata, nothing extra) is written
    straight from its two strings; the bytes are always those of
    ``ui_frame`` over ``ui_chunks`` (a property test holds them equal)."""
    delta = plain_delta(chunk)
    if delta is not None:
        return (
            'data: {"type":"text-delta","id":'
            + json_string(delta.payload.id)
            + ',"delta":'
            + json_string(delta.payload.text)
            + "}\n\n"
        ).encode()
    return b"".join([ui_frame(c) for c in ui_chunks(chunk)])
