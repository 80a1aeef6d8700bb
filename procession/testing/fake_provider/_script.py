"""The fake provider's script: what a test says the server answers.

A script is an ordered list of turns. A turn is a ``Stream`` (provider-neutral
content, rendered into the exact events of whichever endpoint was called), an
``HttpError`` (a JSON error in the endpoint's shape), or a callable that receives
the ``RecordedRequest`` and returns one of those. Either kind can carry a
``Fault``: delays, a stall, an abrupt drop mid-body, a clean truncation, a close
without any response, or events written in small pieces.

Nothing here does I/O: the renderers (``_render_anthropic``, ``_render_openai``)
turn a ``Stream`` into events and the server (``_server``) sends them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import attrs

from ..._headers import Headers

__all__ = [
    "Endpoint",
    "Fault",
    "HttpError",
    "RecordedRequest",
    "Stream",
    "TokenCounts",
    "Turn",
]

Endpoint: TypeAlias = Literal["anthropic", "chat", "responses"]


def _dumps(value: object) -> str:
    """Compact JSON, as the providers send it (no spaces, UTF-8 kept)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@attrs.frozen
class TokenCounts:
    """The token counts a scripted stream reports, rendered per endpoint
    (Anthropic ``usage``, Chat ``prompt_tokens``/``completion_tokens``,
    Responses ``input_tokens``...).

    Not ``procession.chunks.Usage``: that is what a provider *parsed* (every
    count optional); these are what the fake server *sends*, with defaults.
    Called ``Usage`` until 0.1 (the old name still works, with a warning).
    """

    input_tokens: int = 10
    output_tokens: int = 5
    cached_input_tokens: int = 0


def _to_counts(value: TokenCounts | Mapping[str, int] | None) -> TokenCounts | None:
    if value is None or isinstance(value, TokenCounts):
        return value
    return TokenCounts(**value)


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
    usage: TokenCounts | None
    stop: str | None
    fault: Fault | None
    model: str | None
    id: str | None
    pings: bool
    headers: Mapping[str, str]

    def __init__(
        self,
        *parts: Stream | Iterable[Stream],
        usage: TokenCounts | Mapping[str, int] | None = None,
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
        own = {"usage": _to_counts(usage), "stop": stop, "fault": fault}
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
        usage: TokenCounts | Mapping[str, int] | None = None,
        stop: str | None = None,
        fault: Fault | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Stream:
        stream = cls.__new__(cls)
        stream.__attrs_init__(
            parts=(part,),
            usage=_to_counts(usage),
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
        usage: TokenCounts | Mapping[str, int] | None = None,
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
        usage: TokenCounts | Mapping[str, int] | None = None,
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
        usage: TokenCounts | Mapping[str, int] | None = None,
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
