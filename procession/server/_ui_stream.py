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
``abort`` -> ``abort``; ``finish`` -> ``finish`` with its ``finishReason``;
``tool-call-approval`` -> ``tool-approval-request`` (``approvalId``
``<runId>::<toolCallId>``); ``tool-output-denied`` -> ``tool-output-denied``;
``tool-call-suspended`` -> a ``data-tool-call-suspended`` part.
Everything else (``raw``, ``response-metadata``, ...) is not sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from .._secrets import redact
from ..chunks import Chunk, TextDeltaChunk, to_wire
from ._http import dumps, json_string
from ._mastra import plain_delta

__all__ = [
    "UI_STREAM_HEADERS",
    "UiStreamEncoder",
    "approval_id",
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
            return redact(message)
    if isinstance(error, str):
        return redact(error)
    return "error" if error is None else redact(dumps(error).decode())


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
    "tool-output-denied": lambda p: [
        {"type": "tool-output-denied", "toolCallId": p["toolCallId"]}
    ],
    "tool-call-suspended": lambda p: [
        {
            "type": "data-tool-call-suspended",
            "id": p["toolCallId"],
            "data": {
                key: p[key]
                for key in (
                    "toolCallId",
                    "toolName",
                    "args",
                    "suspendPayload",
                    "resumeSchema",
                )
                if key in p
            },
        }
    ],
    "step-retry": lambda p: [{"type": "data-step-retry", "data": dict(p)}],
    "abort": lambda p: [{"type": "abort"}],
    "finish": lambda p: [{"type": "finish", "finishReason": _finish_reason(p)}],
}


def ui_chunks(chunk: Chunk) -> list[dict[str, Any]]:
    """The UI message stream chunks for one Mastra chunk (none, one or two),
    each with only the keys the AI SDK's strict schema allows. ``start``
    carries the run id as the UI message's ``messageId`` (without one the AI
    SDK's ``readUIMessageStream`` names the message ``""``)."""
    wire = to_wire(chunk)
    kind = wire["type"]
    if kind.startswith("data-"):
        return [
            _with({"type": kind, "data": wire.get("data")}, wire, "id", "transient")
        ]
    if kind == "start":
        return [_with({"type": "start"}, {"messageId": wire.get("runId")}, "messageId")]
    if kind == "tool-call-approval":
        # Only the keys ai 6.0.0's strict schema knows; the approval id names
        # the run and the call (Mastra's bridge does the same), so the answer
        # coming back in the next chat request finds its run.
        payload = wire.get("payload") or {}
        return [
            {
                "type": "tool-approval-request",
                "approvalId": approval_id(wire.get("runId"), payload["toolCallId"]),
                "toolCallId": payload["toolCallId"],
            }
        ]
    convert = _PAYLOAD_CONVERTERS.get(kind)
    if convert is None:
        return []
    return convert(wire.get("payload") or {})


_OPENS: Final = {"text-start": "text", "reasoning-start": "reasoning"}
_CLOSES: Final = frozenset({"text-end", "reasoning-end"})


class UiStreamEncoder:
    """One run's UI message stream (``ui_chunks``, plus what needs the run's
    history): the text and reasoning parts still open when a ``tripwire``
    ends the run are closed first (``text-end`` / ``reasoning-end``), so the
    AI SDK never leaves a part ``state: "streaming"``."""

    __slots__ = ("_continues", "_open")

    def __init__(self, *, continues: str | None = None) -> None:
        self._open: dict[str, str] = {}  # part id -> "text" | "reasoning"
        self._continues = continues
        """A continuation's stream (it has no ``start``) goes on writing the
        UI message with this id: its first frame is ``start`` naming it."""

    def __call__(self, chunk: Chunk) -> list[dict[str, Any]]:
        out = ui_chunks(chunk)
        if self._continues is not None:
            out = [{"type": "start", "messageId": self._continues}, *out]
            self._continues = None
        kind = chunk.type
        if kind in _OPENS:
            for part in out:
                self._open[part["id"]] = _OPENS[kind]
        elif kind in _CLOSES:
            for part in out:
                self._open.pop(part["id"], None)
        elif kind == "tripwire" and self._open:
            ends = [{"type": f"{k}-end", "id": i} for i, k in self._open.items()]
            self._open.clear()
            out = [*ends, *out]
        return out

    def frames(self, chunk: Chunk) -> bytes:
        """The SSE frames of ``self(chunk)``, joined (``b""`` for none); a
        plain text delta written straight from its two strings
        (``ui_frames``)."""
        if self._continues is None:
            delta = plain_delta(chunk)
            if delta is not None:
                return _delta_frame(delta)
        return b"".join([ui_frame(c) for c in self(chunk)])


def approval_id(run_id: str | None, tool_call_id: str) -> str:
    """The AI SDK ``approvalId`` of a waiting call: ``<runId>::<toolCallId>``
    (Mastra's bridge's form)."""
    return f"{run_id}::{tool_call_id}"


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
        return _delta_frame(delta)
    return b"".join([ui_frame(c) for c in ui_chunks(chunk)])


def _delta_frame(delta: TextDeltaChunk) -> bytes:
    return (
        'data: {"type":"text-delta","id":'
        + json_string(delta.payload.id)
        + ',"delta":'
        + json_string(delta.payload.text)
        + "}\n\n"
    ).encode()
