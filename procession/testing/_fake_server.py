"""A loopback fake LLM provider server that speaks the real wire formats.

``open_fake_provider(script)`` serves, on ``127.0.0.1`` and a port the OS picks,
the three streaming endpoints procession's providers call:

* ``POST /v1/messages`` (Anthropic Messages: ``event:`` + ``data:`` SSE),
* ``POST /v1/chat/completions`` (OpenAI Chat Completions: data-only SSE, ``[DONE]``),
* ``POST /v1/responses`` (OpenAI Responses: ``event:`` + ``data:`` SSE with
  ``sequence_number``).

All three take their answers from **one ordered script of turns**, so a test reads
as a conversation. A turn is a ``Stream`` (provider-neutral content, rendered into
the exact events of whichever endpoint was called), an ``HttpError`` (a JSON error
in the endpoint's shape), or a callable that receives the ``RecordedRequest`` and
returns one of those. Either kind can carry a ``Fault``: delays, a stall, an abrupt
drop mid-body, a clean truncation, a close without any response, or events
written in small pieces.

Why trio sockets and h11 rather than an ASGI server: the point of this server is
fault injection, and several faults need byte- and socket-level control that ASGI
cannot express (close after reading the request without answering, stop inside a
chunked body, split an event across writes, stall after the headers). ``h11`` is
a small sans-I/O HTTP/1.1 state machine; it is already a dependency of
``httpcore2`` (and so of the ``anthropic`` SDK and ``httpx2``), so it adds nothing
to an install with the provider extras; the ``testing`` extra names it
explicitly. Everything else is trio: the server lives in a nursery owned by the
``async with`` block and is gone when the block ends.

Writes go through ``SocketStream.send_all``: a client that stops reading stalls
the server once the socket buffers fill, and ``ConnectionLog.events_sent`` shows
how far the stream got (backpressure reaches the socket, nothing is queued here).

Use the real clock with this server: under ``MockClock(autojump_threshold=0)`` a
task blocked on socket I/O counts as idle and the clock would jump, firing the
client's timeouts early.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import (
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, Literal, TypeAlias

import attrs
import h11
import trio

from .._errors import ProcessionError
from .._headers import Headers

__all__ = [
    "ConnectionLog",
    "Endpoint",
    "FakeProvider",
    "FakeProviderError",
    "Fault",
    "HttpError",
    "RecordedRequest",
    "Stream",
    "Turn",
    "Usage",
    "anthropic_events",
    "chat_events",
    "open_fake_provider",
    "responses_events",
]

Endpoint: TypeAlias = Literal["anthropic", "chat", "responses"]

_ROUTES: dict[str, Endpoint] = {
    "/v1/messages": "anthropic",
    "/v1/chat/completions": "chat",
    "/v1/responses": "responses",
}
_READ_SIZE = 65536
_SSE_CONTENT_TYPE = "text/event-stream; charset=utf-8"


class FakeProviderError(ProcessionError, AssertionError):
    """The fake provider's script did not match what the client did.

    Raised when the ``open_fake_provider`` block exits: the script ran out (a
    request got the scripted 500), turns were left unused, or a callable turn
    raised. It derives from ``AssertionError`` because it is a failed test
    expectation, not a library error.
    """


# --------------------------------------------------------------------------
# Neutral content


@attrs.frozen
class Usage:
    """Token counts, rendered per endpoint (Anthropic ``usage``, Chat
    ``prompt_tokens``/``completion_tokens``, Responses ``input_tokens``...)."""

    input_tokens: int = 10
    output_tokens: int = 5
    cached_input_tokens: int = 0


def _to_usage(value: Usage | Mapping[str, int] | None) -> Usage | None:
    if value is None or isinstance(value, Usage):
        return value
    return Usage(**value)


@attrs.frozen
class _Text:
    pieces: tuple[str, ...]


@attrs.frozen
class _Thinking:
    pieces: tuple[str, ...]
    signature: str


@attrs.frozen
class _ToolCall:
    name: str
    arguments: str  # JSON text, possibly deliberately invalid
    id: str | None
    chunks: int


@attrs.frozen
class _Error:
    type: str
    message: str
    code: str | None
    nested: bool
    responses: Literal["error", "failed", "both"]


@attrs.frozen
class _Raw:
    events: tuple[bytes, ...]


_Part: TypeAlias = _Text | _Thinking | _ToolCall | _Error | _Raw


def _check_non_negative(instance: object, attribute: Any, value: float | None) -> None:
    if value is not None and value < 0:
        raise ValueError(f"Fault.{attribute.name} must be >= 0, got {value!r}")


def _check_positive(instance: object, attribute: Any, value: int | None) -> None:
    if value is not None and value < 1:
        raise ValueError(f"Fault.{attribute.name} must be >= 1, got {value!r}")


@attrs.frozen(kw_only=True)
class Fault:
    """What goes wrong while a turn is answered.

    Event counts ``n`` count the SSE events of the rendered stream (an
    ``HttpError`` body counts as one event); an ``n`` past the end applies at the
    end, before the terminating chunk.

    Args:
        headers_delay: seconds to wait after reading the request and before the
            status line (a client read timeout shorter than this gives
            ``APITimeoutError``).
        delay_between_events: seconds to wait between two events.
        stall_after: send ``n`` events, then nothing more; keep the connection
            open until the client goes away (a mid-body read timeout).
        drop_after: send ``n`` events, then close the socket inside the chunked
            body (the client sees an incomplete chunked read).
        truncate_after: send ``n`` events, then end the body cleanly, without
            the terminal events.
        close_without_response: read the request, then close the socket without
            a status line.
        split_frames: write each event in pieces of at most this many bytes, one
            ``send_all`` (and one HTTP chunk) per piece.
    """

    headers_delay: float = attrs.field(default=0.0, validator=_check_non_negative)
    delay_between_events: float = attrs.field(
        default=0.0, validator=_check_non_negative
    )
    stall_after: int | None = attrs.field(default=None, validator=_check_non_negative)
    drop_after: int | None = attrs.field(default=None, validator=_check_non_negative)
    truncate_after: int | None = attrs.field(
        default=None, validator=_check_non_negative
    )
    close_without_response: bool = False
    split_frames: int | None = attrs.field(default=None, validator=_check_positive)

    def __attrs_post_init__(self) -> None:
        ends = [
            name
            for name in ("stall_after", "drop_after", "truncate_after")
            if getattr(self, name) is not None
        ]
        if len(ends) > 1:
            raise ValueError(
                f"Fault takes at most one of stall_after, drop_after and "
                f"truncate_after, got {', '.join(ends)}"
            )


def _split(text: str, chunks: int) -> list[str]:
    """``text`` in ``chunks`` nearly equal, non-empty pieces (fewer if short)."""
    if not text:
        return [""]
    count = max(1, min(chunks, len(text)))
    size, extra = divmod(len(text), count)
    pieces, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < extra else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def _flatten(items: Iterable[object]) -> Iterator[Stream | _Part]:
    for item in items:
        if isinstance(item, Stream | _Text | _Thinking | _ToolCall | _Error | _Raw):
            yield item
        elif isinstance(item, Iterable) and not isinstance(item, str | bytes):
            yield from _flatten(item)
        else:
            raise TypeError(
                f"Stream(...) takes Streams (from Stream.text, Stream.tool_call, "
                f"...) or lists of them, got {item!r}"
            )


@attrs.frozen(init=False)
class Stream:
    """A 200 streaming answer, written in provider-neutral terms.

    Build one with ``Stream.text``, ``Stream.thinking``, ``Stream.tool_call``,
    ``Stream.error`` or ``Stream.raw`` and compose with ``+`` or
    ``Stream(a, b, ...)`` / ``Stream([a, b])``: each part becomes one content
    block (Anthropic), one run of deltas (Chat) or one output item (Responses),
    in order. When two streams are composed, the right-hand side's ``usage``,
    ``stop``, ``fault``, ``model``, ``id`` and ``headers`` win where set.

    Args:
        usage: token counts; by default 10 in and one per delta out.
        stop: the stop reason, in Anthropic (``end_turn``, ``tool_use``,
            ``max_tokens``, ``stop_sequence``, ``refusal``, ...) or OpenAI
            (``stop``, ``tool_calls``, ``length``, ``content_filter``) terms;
            each endpoint gets its own spelling. By default ``tool_use`` if the
            stream has a tool call, else ``end_turn``.
        fault: what goes wrong while the stream is sent.
        model: the model named in the events; by default the request's.
        id: the message / completion / response id; by default a fake one.
        pings: send an Anthropic ``ping`` after the first block starts.
        headers: extra response headers.

    An ``error`` part must come last (the stream ends with it). A ``raw`` part
    cannot be mixed with others: it is sent verbatim, whichever endpoint is hit.
    """

    parts: tuple[_Part, ...]
    usage: Usage | None
    stop: str | None
    fault: Fault | None
    model: str | None
    id: str | None
    pings: bool
    headers: Mapping[str, str]

    def __init__(
        self,
        *parts: Stream | Iterable[Stream],
        usage: Usage | Mapping[str, int] | None = None,
        stop: str | None = None,
        fault: Fault | None = None,
        model: str | None = None,
        id: str | None = None,
        pings: bool = False,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        flat: list[_Part] = []
        merged: dict[str, Any] = {
            "usage": None,
            "stop": None,
            "fault": None,
            "model": None,
            "id": None,
        }
        merged_headers: dict[str, str] = {}
        merged_pings = False
        for item in _flatten(parts):
            if isinstance(item, Stream):
                flat.extend(item.parts)
                for name in merged:
                    if getattr(item, name) is not None:
                        merged[name] = getattr(item, name)
                merged_headers.update(item.headers)
                merged_pings = merged_pings or item.pings
            else:
                flat.append(item)
        own = {"usage": _to_usage(usage), "stop": stop, "fault": fault}
        own |= {"model": model, "id": id}
        for name, value in own.items():
            if value is not None:
                merged[name] = value
        merged_headers.update(headers or {})
        _check_parts(flat)
        self.__attrs_init__(
            parts=tuple(flat),
            pings=pings or merged_pings,
            headers=merged_headers,
            **merged,
        )

    def __add__(self, other: Stream) -> Stream:
        if not isinstance(other, Stream):
            return NotImplemented
        return Stream(self, other)

    # The builders -----------------------------------------------------------

    @classmethod
    def _of(
        cls,
        part: _Part,
        *,
        usage: Usage | Mapping[str, int] | None = None,
        stop: str | None = None,
        fault: Fault | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Stream:
        stream = cls.__new__(cls)
        stream.__attrs_init__(
            parts=(part,),
            usage=_to_usage(usage),
            stop=stop,
            fault=fault,
            model=None,
            id=None,
            pings=False,
            headers=dict(headers or {}),
        )
        return stream

    @classmethod
    def text(
        cls,
        *pieces: str,
        usage: Usage | Mapping[str, int] | None = None,
        stop: str | None = None,
        fault: Fault | None = None,
    ) -> Stream:
        """A text block whose deltas are ``pieces``, in order."""
        if not pieces:
            raise ValueError("Stream.text needs at least one piece of text")
        return cls._of(_Text(tuple(pieces)), usage=usage, stop=stop, fault=fault)

    @classmethod
    def thinking(
        cls,
        *pieces: str,
        signature: str = "fake-signature",
        usage: Usage | Mapping[str, int] | None = None,
        stop: str | None = None,
        fault: Fault | None = None,
    ) -> Stream:
        """A thinking block (deltas ``pieces``) closed by ``signature``.

        Anthropic: ``thinking_delta``s then one ``signature_delta``. Chat:
        ``delta.reasoning_content`` pieces (the de-facto extension), no
        signature. Responses: a ``reasoning`` item with summary-text deltas and
        the signature as ``encrypted_content``.
        """
        if not pieces:
            raise ValueError("Stream.thinking needs at least one piece of text")
        return cls._of(
            _Thinking(tuple(pieces), signature), usage=usage, stop=stop, fault=fault
        )

    @classmethod
    def tool_call(
        cls,
        name: str,
        args: Mapping[str, Any] | str,
        *,
        id: str | None = None,
        chunks: int = 3,
        usage: Usage | Mapping[str, int] | None = None,
        stop: str | None = None,
        fault: Fault | None = None,
    ) -> Stream:
        """A tool call whose JSON arguments arrive in ``chunks`` pieces.

        ``args`` is a mapping (serialised compactly) or JSON text, sent as is
        (so a test can send invalid JSON). ``id`` defaults to a fake id in the
        endpoint's style (``toolu_...`` / ``call_...``).
        """
        if chunks < 1:
            raise ValueError(f"Stream.tool_call: chunks must be >= 1, got {chunks!r}")
        text = args if isinstance(args, str) else _dumps(args)
        return cls._of(
            _ToolCall(name, text, id, chunks), usage=usage, stop=stop, fault=fault
        )

    @classmethod
    def error(
        cls,
        type_or_code: str,
        message: str = "Overloaded",
        *,
        code: str | None = None,
        nested: bool = True,
        responses: Literal["error", "failed", "both"] = "error",
        fault: Fault | None = None,
    ) -> Stream:
        """An error event mid-stream; the stream ends with it.

        Anthropic: ``event: error`` with ``{"type": "error", "error": {"type":
        type_or_code, "message": message}}``. Chat: a data chunk ``{"error":
        {"message", "type": type_or_code, "param": null, "code": code}}``.
        Responses: ``responses="error"`` sends an ``error`` event, nested (the
        live API's ``{"error": {...}}``) or flat (the spec's ``code``/``message``
        at the top level) by ``nested``; ``"failed"`` sends ``response.failed``
        instead; ``"both"`` sends the error then ``response.failed``. The
        Responses ``code`` is ``code`` if given, else ``type_or_code``.
        """
        part = _Error(type_or_code, message, code, nested, responses)
        return cls._of(part, fault=fault)

    @classmethod
    def raw(
        cls,
        events: bytes | str | Sequence[bytes | str],
        *,
        fault: Fault | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Stream:
        """Bytes sent verbatim as the body of a 200 ``text/event-stream``.

        One ``bytes``/``str`` is one event; a sequence is one event per item
        (faults count these). Nothing is added: no framing, no terminal event.
        """
        items = [events] if isinstance(events, bytes | str) else list(events)
        encoded = tuple(e.encode() if isinstance(e, str) else bytes(e) for e in items)
        return cls._of(_Raw(encoded), fault=fault, headers=headers)


def _check_parts(parts: Sequence[_Part]) -> None:
    for i, part in enumerate(parts):
        if isinstance(part, _Error) and i != len(parts) - 1:
            raise ValueError(
                f"Stream.error must be the last part (the stream ends with it), "
                f"but {parts[i + 1]!r} follows it"
            )
    if any(isinstance(p, _Raw) for p in parts) and not all(
        isinstance(p, _Raw) for p in parts
    ):
        raise ValueError(
            "Stream.raw cannot be combined with rendered parts: raw bytes are sent "
            "verbatim, so write the whole body with Stream.raw"
        )


_OPENAI_STATUS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: (
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: test.",
    ),
    403: ("invalid_request_error", "permission_denied", "Permission denied."),
    404: ("invalid_request_error", "not_found", "Not found."),
    429: (
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for requests. Please try again later.",
    ),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    503: (
        "server_error",
        None,
        "That model is currently overloaded with other requests. You can retry "
        "your request.",
    ),
    529: (
        "server_error",
        None,
        "That model is currently overloaded with other requests. You can retry "
        "your request.",
    ),
}
_ANTHROPIC_STATUS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request."),
    401: ("authentication_error", "invalid x-api-key"),
    402: ("billing_error", "Your credit balance is too low."),
    403: ("permission_error", "Your API key does not have permission."),
    404: ("not_found_error", "Not found."),
    413: ("request_too_large", "Request exceeds the maximum allowed size."),
    429: ("rate_limit_error", "This request would exceed the rate limit."),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out"),
    529: ("overloaded_error", "Overloaded"),
}


def _str_headers(headers: Mapping[str, str] | None) -> Mapping[str, str]:
    return dict(headers or {})


@attrs.frozen
class HttpError:
    """A JSON error response.

    Args:
        status: the HTTP status.
        body: the exact body (a mapping is sent as JSON, bytes/str as is); by
            default one in the shape of the endpoint hit, from ``error_type``
            and ``message`` (defaults chosen by status).
        headers: extra headers, e.g. ``{"retry-after-ms": "1"}``.
        provider: the default body's shape: ``"auto"`` (Anthropic for
            ``/v1/messages``, OpenAI otherwise), ``"anthropic"`` or ``"openai"``.
        error_type: the error type (Anthropic ``error.type``, OpenAI
            ``error.type``).
        message: the error message.
        code: the OpenAI ``error.code``.
        fault: what goes wrong while the error is sent (the body is one event).
    """

    status: int
    body: Mapping[str, Any] | bytes | str | None = None
    headers: Mapping[str, str] = attrs.field(default=None, converter=_str_headers)
    provider: Literal["auto", "anthropic", "openai"] = attrs.field(
        default="auto", kw_only=True
    )
    error_type: str | None = attrs.field(default=None, kw_only=True)
    message: str | None = attrs.field(default=None, kw_only=True)
    code: str | None = attrs.field(default=None, kw_only=True)
    fault: Fault | None = attrs.field(default=None, kw_only=True)

    @classmethod
    def overloaded(
        cls, *, headers: Mapping[str, str] | None = None, fault: Fault | None = None
    ) -> HttpError:
        """529 ``overloaded_error``."""
        return cls(529, headers=headers, error_type="overloaded_error", fault=fault)

    @classmethod
    def rate_limited(
        cls,
        retry_after: float | str | None = None,
        *,
        retry_after_ms: float | str | None = None,
        headers: Mapping[str, str] | None = None,
        fault: Fault | None = None,
    ) -> HttpError:
        """429 with ``retry-after`` (seconds or an HTTP-date) and/or
        ``retry-after-ms``, as given."""
        extra = dict(headers or {})
        if retry_after is not None:
            extra["retry-after"] = str(retry_after)
        if retry_after_ms is not None:
            extra["retry-after-ms"] = str(retry_after_ms)
        return cls(429, headers=extra, fault=fault)

    @classmethod
    def unauthorized(
        cls, *, headers: Mapping[str, str] | None = None, fault: Fault | None = None
    ) -> HttpError:
        """401 ``authentication_error`` (OpenAI: ``invalid_api_key``)."""
        return cls(401, headers=headers, fault=fault)

    @classmethod
    def bad_request(
        cls,
        message: str = "Invalid request.",
        *,
        headers: Mapping[str, str] | None = None,
        fault: Fault | None = None,
    ) -> HttpError:
        """400 ``invalid_request_error`` with ``message``."""
        return cls(400, headers=headers, message=message, fault=fault)

    @classmethod
    def server_error(
        cls, *, headers: Mapping[str, str] | None = None, fault: Fault | None = None
    ) -> HttpError:
        """500 ``api_error`` (OpenAI: ``server_error``)."""
        return cls(500, headers=headers, fault=fault)

    def render_body(self, endpoint: Endpoint, *, request_id: str) -> bytes:
        """The body sent for a request to ``endpoint``."""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        if self.body is not None:
            return _dumps(self.body).encode()
        shape = self.provider
        if shape == "auto":
            shape = "anthropic" if endpoint == "anthropic" else "openai"
        if shape == "anthropic":
            default_type, default_message = _ANTHROPIC_STATUS.get(
                self.status,
                ("api_error", "Internal server error")
                if self.status >= 500
                else ("invalid_request_error", "Invalid request."),
            )
            return _anthropic_error_body(
                self.error_type or default_type,
                self.message or default_message,
                request_id,
            )
        o_type, o_code, o_message = _OPENAI_STATUS.get(
            self.status,
            _OPENAI_STATUS[500] if self.status >= 500 else _OPENAI_STATUS[400],
        )
        error = {
            "message": self.message or o_message,
            "type": self.error_type or o_type,
            "param": None,
            "code": self.code if self.code is not None else o_code,
        }
        return _dumps({"error": error}).encode()


def _anthropic_error_body(error_type: str, message: str, request_id: str) -> bytes:
    body = {
        "type": "error",
        "error": {"type": error_type, "message": message},
        "request_id": request_id,
    }
    return _dumps(body).encode()


# --------------------------------------------------------------------------
# Renderers


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _sse(event: str, data: Mapping[str, Any]) -> str:
    return f"event: {event}\ndata: {_dumps(data)}\n\n"


def _data(data: Mapping[str, Any] | str) -> str:
    return f"data: {data if isinstance(data, str) else _dumps(data)}\n\n"


def _rendered_parts(stream: Stream, renderer: str) -> tuple[_Part, ...]:
    if any(isinstance(p, _Raw) for p in stream.parts):
        raise ValueError(
            f"{renderer}: a Stream.raw is sent verbatim, there is nothing to render"
        )
    return stream.parts


def _usage_of(stream: Stream) -> Usage:
    if stream.usage is not None:
        return stream.usage
    pieces = 0
    for part in stream.parts:
        if isinstance(part, _Text | _Thinking):
            pieces += len(part.pieces)
        elif isinstance(part, _ToolCall):
            pieces += part.chunks
    return Usage(output_tokens=max(1, pieces))


_FROM_OPENAI_STOP = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}
_TO_CHAT_STOP = {
    "end_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "stop_sequence": "stop",
    "refusal": "content_filter",
    "pause_turn": "stop",
    "model_context_window_exceeded": "length",
}
_TO_INCOMPLETE_REASON = {
    "max_tokens": "max_output_tokens",
    "model_context_window_exceeded": "max_output_tokens",
    "refusal": "content_filter",
}


def _anthropic_stop(stream: Stream) -> str:
    if stream.stop is not None:
        return _FROM_OPENAI_STOP.get(stream.stop, stream.stop)
    if any(isinstance(p, _ToolCall) for p in stream.parts):
        return "tool_use"
    return "end_turn"


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
    parts = _rendered_parts(stream, "anthropic_events")
    usage = _usage_of(stream)
    model = stream.model or model
    events = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {
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
                },
            },
        )
    ]

    def delta(index: int, body: Mapping[str, Any]) -> str:
        data = {"type": "content_block_delta", "index": index, "delta": body}
        return _sse("content_block_delta", data)

    for index, part in enumerate(parts):
        if isinstance(part, _Error):
            error = {
                "type": "error",
                "error": {"type": part.type, "message": part.message},
                "request_id": f"req_fake_{ordinal}",
            }
            events.append(_sse("error", error))
            return events
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
        events.append(_sse("content_block_start", start))
        if index == 0 and stream.pings:
            events.append(_sse("ping", {"type": "ping"}))
        if isinstance(part, _Text):
            events += [
                delta(index, {"type": "text_delta", "text": t}) for t in part.pieces
            ]
        elif isinstance(part, _Thinking):
            events += [
                delta(index, {"type": "thinking_delta", "thinking": t})
                for t in part.pieces
            ]
            signature = {"type": "signature_delta", "signature": part.signature}
            events.append(delta(index, signature))
        else:
            events += [
                delta(index, {"type": "input_json_delta", "partial_json": piece})
                for piece in _split(part.arguments, part.chunks)
            ]
        stop = {"type": "content_block_stop", "index": index}
        events.append(_sse("content_block_stop", stop))
    message_delta = {
        "type": "message_delta",
        "delta": {"stop_reason": _anthropic_stop(stream), "stop_sequence": None},
        "usage": {"output_tokens": usage.output_tokens},
    }
    events.append(_sse("message_delta", message_delta))
    events.append(_sse("message_stop", {"type": "message_stop"}))
    return events


def chat_events(
    stream: Stream,
    *,
    model: str = "fake-model",
    include_usage: bool = False,
    ordinal: int = 1,
) -> list[str]:
    """The OpenAI Chat Completions SSE events (data-only) for ``stream``.

    A role chunk (merged into the first tool call's header when the stream
    starts with one), content / ``reasoning_content`` / ``tool_calls`` deltas
    (tool calls by ``index``: a header with id, type and name, then argument
    pieces), a chunk with ``finish_reason``, with ``include_usage`` one chunk
    with ``choices: []`` and ``usage`` (and ``"usage": null`` on every earlier
    chunk), then ``data: [DONE]``. An error part ends the list with a
    ``{"error": {...}}`` chunk and no ``[DONE]``.
    """
    parts = _rendered_parts(stream, "chat_events")
    model = stream.model or model
    completion_id = stream.id or f"chatcmpl-fake{ordinal}"

    def chunk(delta: Mapping[str, Any], finish_reason: str | None = None) -> str:
        data: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": 1_700_000_000 + ordinal,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": finish_reason,
                }
            ],
        }
        if include_usage:
            data["usage"] = None
        return _data(data)

    events: list[str] = []
    role_pending = True
    tool_index = 0
    for index, part in enumerate(parts):
        if isinstance(part, _Error):
            error = {
                "message": part.message,
                "type": part.type,
                "param": None,
                "code": part.code,
            }
            events.append(_data({"error": error}))
            return events
        if isinstance(part, _ToolCall):
            header: dict[str, Any] = {
                "tool_calls": [
                    {
                        "index": tool_index,
                        "id": part.id or f"call_fake_{ordinal}_{index}",
                        "type": "function",
                        "function": {"name": part.name, "arguments": ""},
                    }
                ]
            }
            if role_pending:
                header = {"role": "assistant", "content": None, **header}
                role_pending = False
            events.append(chunk(header))
            for piece in _split(part.arguments, part.chunks):
                args = {"index": tool_index, "function": {"arguments": piece}}
                events.append(chunk({"tool_calls": [args]}))
            tool_index += 1
            continue
        if role_pending:
            events.append(chunk({"role": "assistant", "content": "", "refusal": None}))
            role_pending = False
        if isinstance(part, _Text):
            events += [chunk({"content": t}) for t in part.pieces]
        elif isinstance(part, _Thinking):
            events += [chunk({"reasoning_content": t}) for t in part.pieces]
    if role_pending:
        events.append(chunk({"role": "assistant", "content": "", "refusal": None}))
    stop = _anthropic_stop(stream)
    events.append(chunk({}, _TO_CHAT_STOP.get(stop, stop)))
    if include_usage:
        usage = _usage_of(stream)
        events.append(
            _data(
                {
                    "id": completion_id,
                    "object": "chat.completion.chunk",
                    "created": 1_700_000_000 + ordinal,
                    "model": model,
                    "choices": [],
                    "usage": {
                        "prompt_tokens": usage.input_tokens,
                        "completion_tokens": usage.output_tokens,
                        "total_tokens": usage.input_tokens + usage.output_tokens,
                        "prompt_tokens_details": {
                            "cached_tokens": usage.cached_input_tokens
                        },
                    },
                }
            )
        )
    events.append(_data("[DONE]"))
    return events


def responses_events(
    stream: Stream, *, model: str = "fake-model", ordinal: int = 1
) -> list[str]:
    """The OpenAI Responses SSE events (``event:`` + ``data:``) for ``stream``.

    ``response.created``, ``response.in_progress``, per part one output item
    (``message`` with ``output_text`` deltas, ``reasoning`` with summary-text
    deltas, ``function_call`` with argument deltas) from ``output_item.added``
    to ``output_item.done``, then ``response.completed`` with the output and
    usage (``response.incomplete`` for a ``max_tokens``/``refusal`` stop).
    ``sequence_number`` counts from 0. An error part ends the list as
    ``Stream.error`` describes.
    """
    parts = _rendered_parts(stream, "responses_events")
    model = stream.model or model
    response_id = stream.id or f"resp_fake{ordinal}"
    events: list[str] = []
    done_items: list[dict[str, Any]] = []

    def emit(event_type: str, **fields: Any) -> None:
        data = {"type": event_type, "sequence_number": len(events), **fields}
        events.append(_sse(event_type, data))

    def response(status: str, **fields: Any) -> dict[str, Any]:
        return {
            "id": response_id,
            "object": "response",
            "created_at": 1_700_000_000 + ordinal,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": model,
            "output": list(done_items),
            "usage": None,
            **fields,
        }

    emit("response.created", response=response("in_progress"))
    emit("response.in_progress", response=response("in_progress"))
    for index, part in enumerate(parts):
        if isinstance(part, _Error):
            code = part.code if part.code is not None else part.type
            if part.responses in ("error", "both"):
                if part.nested:
                    error = {
                        "type": part.type,
                        "code": code,
                        "message": part.message,
                        "param": None,
                    }
                    emit("error", error=error)
                else:
                    emit("error", code=code, message=part.message, param=None)
            if part.responses in ("failed", "both"):
                failed = response(
                    "failed", error={"code": code, "message": part.message}
                )
                emit("response.failed", response=failed)
            return events
        at = {"output_index": index}
        if isinstance(part, _Text):
            item_id = f"msg_fake_{ordinal}_{index}"
            item: dict[str, Any] = {
                "id": item_id,
                "type": "message",
                "status": "in_progress",
                "role": "assistant",
                "content": [],
            }
            emit("response.output_item.added", item=item, **at)
            where = {"item_id": item_id, **at, "content_index": 0}
            text_part: dict[str, Any] = {
                "type": "output_text",
                "text": "",
                "annotations": [],
                "logprobs": [],
            }
            emit("response.content_part.added", part=text_part, **where)
            for t in part.pieces:
                emit("response.output_text.delta", delta=t, logprobs=[], **where)
            text = "".join(part.pieces)
            emit("response.output_text.done", text=text, logprobs=[], **where)
            text_part = {**text_part, "text": text}
            emit("response.content_part.done", part=text_part, **where)
            item = {**item, "status": "completed", "content": [text_part]}
        elif isinstance(part, _Thinking):
            item_id = f"rs_fake_{ordinal}_{index}"
            item = {"id": item_id, "type": "reasoning", "summary": []}
            emit("response.output_item.added", item=item, **at)
            where = {"item_id": item_id, **at, "summary_index": 0}
            summary: dict[str, Any] = {"type": "summary_text", "text": ""}
            emit("response.reasoning_summary_part.added", part=summary, **where)
            for t in part.pieces:
                emit("response.reasoning_summary_text.delta", delta=t, **where)
            text = "".join(part.pieces)
            emit("response.reasoning_summary_text.done", text=text, **where)
            summary = {**summary, "text": text}
            emit("response.reasoning_summary_part.done", part=summary, **where)
            item = {**item, "summary": [summary], "encrypted_content": part.signature}
        else:
            assert isinstance(part, _ToolCall)
            item_id = f"fc_fake_{ordinal}_{index}"
            item = {
                "id": item_id,
                "type": "function_call",
                "status": "in_progress",
                "arguments": "",
                "call_id": part.id or f"call_fake_{ordinal}_{index}",
                "name": part.name,
            }
            emit("response.output_item.added", item=item, **at)
            for piece in _split(part.arguments, part.chunks):
                emit(
                    "response.function_call_arguments.delta",
                    item_id=item_id,
                    delta=piece,
                    **at,
                )
            emit(
                "response.function_call_arguments.done",
                item_id=item_id,
                arguments=part.arguments,
                **at,
            )
            item = {**item, "status": "completed", "arguments": part.arguments}
        emit("response.output_item.done", item=item, **at)
        done_items.append(item)
    usage = _usage_of(stream)
    wire_usage = {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    reason = _TO_INCOMPLETE_REASON.get(_anthropic_stop(stream))
    if reason is None:
        emit("response.completed", response=response("completed", usage=wire_usage))
    else:
        incomplete = response(
            "incomplete", usage=wire_usage, incomplete_details={"reason": reason}
        )
        emit("response.incomplete", response=incomplete)
    return events


# --------------------------------------------------------------------------
# The server


@attrs.frozen
class RecordedRequest:
    """One request the server received, in full.

    ``headers`` is read case-insensitively; ``body`` is the parsed JSON, or the
    raw bytes when it is not JSON; ``path`` excludes the query string, which is
    ``query`` (without ``?``); ``received_at`` is ``trio.current_time()`` when
    the body was complete.
    """

    method: str
    path: str
    headers: Headers
    body: Any
    received_at: float
    query: str = ""


Turn: TypeAlias = Stream | HttpError | Callable[[RecordedRequest], Stream | HttpError]
"""One scripted answer: a stream, an HTTP error, or a callable that picks one
from the request (called once, when the request has been read in full)."""


@attrs.define
class ConnectionLog:
    """What happened on one TCP connection; updated while it is open.

    ``events_sent`` counts SSE events (and error bodies) handed to
    ``send_all``: with a client that stops reading it stops growing once the
    socket buffers are full. ``finished_response`` is True when the last
    response started on the connection was sent completely. ``closed_by_client``
    is True when the client went away (EOF, reset) rather than the server
    closing or shutting down.
    """

    opened_at: float
    closed_by_client: bool = False
    bytes_sent: int = 0
    events_sent: int = 0
    finished_response: bool = False
    responses: int = 0
    closed_at: float | None = None


class _ClientLeft(Exception):
    """The client went away in the middle of something (internal)."""


class FakeProvider:
    """The running server; get one from ``open_fake_provider``.

    Attributes:
        base_url: ``http://127.0.0.1:PORT``, the Anthropic SDK's ``base_url``.
        anthropic_base_url: the same.
        openai_base_url: ``base_url + "/v1"``, the OpenAI ``base_url``.
        requests: every request received, in order (unknown paths included).
        connections: one log per TCP connection, in order of opening.
        problems: what went wrong with the script so far (the script ran out, a
            malformed request), in words; ``strict`` turns these into a
            ``FakeProviderError`` at exit.
    """

    def __init__(self, script: Iterable[Turn], port: int) -> None:
        self.base_url = f"http://127.0.0.1:{port}"
        self.anthropic_base_url = self.base_url
        self.openai_base_url = f"{self.base_url}/v1"
        self.requests: list[RecordedRequest] = []
        self.connections: list[ConnectionLog] = []
        self._script: list[Turn] = list(script)
        self._next_turn = 0
        self._arrival = trio.Event()
        self.problems: list[str] = []
        self._callable_errors: list[Exception] = []

    @property
    def remaining(self) -> list[Turn]:
        """The turns not used yet, in order."""
        return self._script[self._next_turn :]

    def push(self, *turns: Turn) -> None:
        """Append turns to the script."""
        self._script.extend(turns)

    async def wait_for_requests(self, n: int) -> None:
        """Park until at least ``n`` requests have been received (read in full).

        Always checkpoints. Cancel it with a cancel scope around the call.
        """
        await trio.lowlevel.checkpoint()
        while len(self.requests) < n:
            await self._arrival.wait()

    def __repr__(self) -> str:
        return (
            f"<FakeProvider {self.base_url} requests={len(self.requests)} "
            f"remaining={len(self.remaining)}>"
        )

    # Per connection -----------------------------------------------------

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        log = ConnectionLog(opened_at=trio.current_time())
        self.connections.append(log)
        conn = h11.Connection(h11.SERVER)
        try:
            while True:
                request = await self._read_request(conn, stream)
                if request is None:
                    log.closed_by_client = True
                    return
                keep_open = await self._answer(conn, stream, log, request)
                if not keep_open or conn.our_state is h11.MUST_CLOSE:
                    return
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, _ClientLeft):
            log.closed_by_client = True
        except h11.RemoteProtocolError as exc:
            # A malformed request: not a scripted situation, so it is a problem.
            self.problems.append(f"a client sent a malformed request: {exc}")
        finally:
            log.closed_at = trio.current_time()
            await trio.aclose_forcefully(stream)

    async def _read_request(
        self, conn: h11.Connection, stream: trio.SocketStream
    ) -> RecordedRequest | None:
        """The next request, read to the end of its body; None on a clean EOF."""
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some(_READ_SIZE))
            elif isinstance(event, h11.ConnectionClosed):
                return None
            elif isinstance(event, h11.Request):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return self._record(head, bytes(body))

    def _record(self, head: h11.Request, body: bytes) -> RecordedRequest:
        target = head.target.decode("latin-1")
        path, _, query = target.partition("?")
        headers = Headers(
            {k.decode("latin-1"): v.decode("latin-1") for k, v in head.headers}
        )
        parsed: Any = body
        if body:
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = body
        request = RecordedRequest(
            method=head.method.decode("ascii"),
            path=path,
            headers=headers,
            body=parsed,
            received_at=trio.current_time(),
            query=query,
        )
        self.requests.append(request)
        self._arrival.set()
        self._arrival = trio.Event()
        return request

    def _next(self, request: RecordedRequest) -> Stream | HttpError | str:
        """The turn for ``request``, or the text of the 500 to send instead."""
        if self._next_turn >= len(self._script):
            problem = (
                f"the script ran out: request #{len(self.requests)} "
                f"({request.method} {request.path}) found no turn; the script had "
                f"{len(self._script)} turn(s)"
            )
            self.problems.append(problem)
            return f"fake provider: {problem}"
        turn = self._script[self._next_turn]
        self._next_turn += 1
        if isinstance(turn, Stream | HttpError):
            return turn
        try:
            answer: object = turn(request)
        except Exception as exc:
            self._callable_errors.append(exc)
            return f"fake provider: the callable turn {turn!r} raised {exc!r}"
        if not isinstance(answer, Stream | HttpError):
            error = TypeError(
                f"a callable turn must return a Stream or an HttpError, "
                f"{turn!r} returned {answer!r}"
            )
            self._callable_errors.append(error)
            return f"fake provider: {error}"
        return answer

    async def _answer(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        log: ConnectionLog,
        request: RecordedRequest,
    ) -> bool:
        """Answer one request; False when the connection must be closed."""
        ordinal = len(self.requests)
        endpoint = _ROUTES.get(request.path) if request.method == "POST" else None
        if endpoint is None:
            shape: Literal["anthropic", "openai"] = (
                "anthropic"
                if "anthropic-version" in request.headers
                or request.path.startswith("/v1/messages")
                else "openai"
            )
            not_found = HttpError(
                404,
                provider=shape,
                message=f"fake provider: no route for {request.method} {request.path}",
            )
            where: Endpoint = "anthropic" if shape == "anthropic" else "chat"
            return await self._send_error(conn, stream, log, not_found, where, ordinal)
        turn = self._next(request)
        if isinstance(turn, str):
            failure = HttpError(500, message=turn)
            return await self._send_error(conn, stream, log, failure, endpoint, ordinal)
        if isinstance(turn, HttpError):
            return await self._send_error(conn, stream, log, turn, endpoint, ordinal)
        return await self._send_stream(
            conn, stream, log, turn, endpoint, request, ordinal
        )

    async def _send_error(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        log: ConnectionLog,
        error: HttpError,
        endpoint: Endpoint,
        ordinal: int,
    ) -> bool:
        request_id = f"req_fake_{ordinal}"
        body = error.render_body(endpoint, request_id=request_id)
        fault = error.fault or Fault()
        headers = {"content-type": "application/json"}
        if fault.truncate_after is None:
            headers["content-length"] = str(len(body))
        headers |= _id_headers(endpoint, request_id)
        headers |= {k.lower(): v for k, v in error.headers.items()}
        return await self._respond(
            conn, stream, log, error.status, headers, [body], fault
        )

    async def _send_stream(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        log: ConnectionLog,
        turn: Stream,
        endpoint: Endpoint,
        request: RecordedRequest,
        ordinal: int,
    ) -> bool:
        body = request.body if isinstance(request.body, dict) else {}
        model = body.get("model")
        model = model if isinstance(model, str) else "fake-model"
        events: list[bytes]
        if turn.parts and isinstance(turn.parts[0], _Raw):
            events = [e for p in turn.parts if isinstance(p, _Raw) for e in p.events]
        elif endpoint == "anthropic":
            rendered = anthropic_events(turn, model=model, ordinal=ordinal)
            events = [e.encode() for e in rendered]
        elif endpoint == "chat":
            options = body.get("stream_options")
            include_usage = isinstance(options, dict) and bool(
                options.get("include_usage")
            )
            rendered = chat_events(
                turn, model=model, include_usage=include_usage, ordinal=ordinal
            )
            events = [e.encode() for e in rendered]
        else:
            rendered = responses_events(turn, model=model, ordinal=ordinal)
            events = [e.encode() for e in rendered]
        headers = {"content-type": _SSE_CONTENT_TYPE, "cache-control": "no-cache"}
        headers |= _id_headers(endpoint, f"req_fake_{ordinal}")
        headers |= {k.lower(): v for k, v in turn.headers.items()}
        return await self._respond(
            conn, stream, log, 200, headers, events, turn.fault or Fault()
        )

    async def _respond(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        log: ConnectionLog,
        status: int,
        headers: Mapping[str, str],
        events: Sequence[bytes],
        fault: Fault,
    ) -> bool:
        if fault.close_without_response:
            log.finished_response = False
            return False
        if fault.headers_delay:
            await trio.sleep(fault.headers_delay)
        log.responses += 1
        log.finished_response = False
        await self._send(
            conn,
            stream,
            log,
            h11.Response(status_code=status, headers=[*headers.items()]),
        )
        for i in range(len(events) + 1):
            if fault.stall_after is not None and i == min(
                fault.stall_after, len(events)
            ):
                await _wait_for_client_to_leave(stream)
                raise _ClientLeft
            if fault.drop_after is not None and i == min(fault.drop_after, len(events)):
                # Closing the socket inside the chunked body: the client sees
                # EOF without the terminating chunk ("incomplete chunked read").
                return False
            if i == len(events) or i == fault.truncate_after:
                break
            if i and fault.delay_between_events:
                await trio.sleep(fault.delay_between_events)
            data = events[i]
            size = fault.split_frames or len(data) or 1
            for start in range(0, max(len(data), 1), size):
                await self._send(
                    conn, stream, log, h11.Data(data=data[start : start + size])
                )
            log.events_sent += 1
        await self._send(conn, stream, log, h11.EndOfMessage())
        log.finished_response = True
        return True

    async def _send(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        log: ConnectionLog,
        event: h11.Response | h11.Data | h11.EndOfMessage,
    ) -> None:
        data = conn.send(event)
        if data:
            await stream.send_all(data)
            log.bytes_sent += len(data)

    def _check(self, *, strict: bool, allow_unused: bool) -> None:
        problems = [f"a callable turn failed: {e!r}" for e in self._callable_errors]
        if strict:
            problems += self.problems
            if self.remaining and not allow_unused:
                problems.append(
                    f"{len(self.remaining)} scripted turn(s) were never used: "
                    f"{self.remaining!r} (pass allow_unused=True if that is expected)"
                )
        if problems:
            error = FakeProviderError(
                "the fake provider's script did not match the requests:\n- "
                + "\n- ".join(problems)
            )
            cause = self._callable_errors[0] if self._callable_errors else None
            raise error from cause


def _id_headers(endpoint: Endpoint, request_id: str) -> dict[str, str]:
    if endpoint == "anthropic":
        return {"request-id": request_id}
    return {"x-request-id": request_id}


async def _wait_for_client_to_leave(stream: trio.SocketStream) -> None:
    """Read (and ignore) until the client closes the connection."""
    while await stream.receive_some(_READ_SIZE):
        pass


@contextlib.asynccontextmanager
async def open_fake_provider(
    script: Iterable[Turn] = (),
    *,
    strict: bool = True,
    allow_unused: bool = False,
) -> AsyncIterator[FakeProvider]:
    """Serve ``script`` on ``127.0.0.1`` (a free port) for the ``async with`` block.

    Each request to one of the three endpoints takes the next turn; any other
    path gets a 404 in the provider's error shape and takes none. When the
    script has run out a request gets a 500 whose message says so.

    On exit the server and its connections are cancelled (a stalled stream
    included). Then, if the block raised nothing, ``FakeProviderError`` is
    raised when a callable turn failed and, with ``strict`` (the default), when
    the script ran out or turns were left unused (unless ``allow_unused``). An
    exception from the block itself propagates unchanged (not in a group).
    """
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    server = FakeProvider(script, port)
    body_error: BaseException | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(trio.serve_listeners, server._serve_connection, listeners)
        try:
            yield server
        except BaseException as exc:
            # Re-raised below, outside the nursery, so the caller sees the
            # block's own exception rather than an ExceptionGroup around it.
            body_error = exc
        nursery.cancel_scope.cancel()
    if body_error is not None:
        raise body_error
    server._check(strict=strict, allow_unused=allow_unused)
