"""ASGI 3 plumbing: typed HTTP errors, bounded body reads, JSON responses.

Framework-free on purpose: the app is a plain ASGI callable, so hypercorn
serves it directly and Starlette/FastAPI can mount it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from typing import Any, Final, TypeAlias

__all__ = [
    "ClientGone",
    "Headers",
    "HttpError",
    "Receive",
    "Scope",
    "Send",
    "dumps",
    "json_string",
    "parse_json_object",
    "read_body",
    "request_header",
    "send_json",
    "send_empty",
]

Scope: TypeAlias = MutableMapping[str, Any]
Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
Headers: TypeAlias = list[tuple[bytes, bytes]]


class ClientGone(Exception):
    """The client disconnected before its request was read."""


class HttpError(Exception):
    """An HTTP error answer: ``status``, a message for the client and, for a
    bad request body, the ``field`` at fault (``messages[1].role``)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        field: str | None = None,
        headers: Iterable[tuple[bytes, bytes]] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.headers = list(headers)

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": message}`` as Mastra's server answers,
        plus ``field`` when one field is at fault."""
        out: dict[str, Any] = {"error": self.message}
        if self.field is not None:
            out["field"] = self.field
        return out


# One encoder for every call: ``json.dumps`` with options builds a new
# JSONEncoder per call (~1.2 µs of a 3.7 µs chunk frame, measured).
_ENCODER: Final = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, default=str
)
_encode: Final = _ENCODER.encode
json_string: Final[Callable[[str], str]] = json.encoder.encode_basestring
"""A str as a JSON string literal, exactly as ``dumps`` writes one (the C
function ``json`` itself uses with ``ensure_ascii=False``)."""


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON text, as JavaScript's ``JSON.stringify`` writes
    it (no spaces, non-ASCII kept). A value JSON cannot hold is written as its
    ``str`` rather than failing the stream."""
    return _encode(value).encode()


def request_header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lower-case) in the request, or None."""
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value)
    return None


async def read_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole request body. Raises ``HttpError(413)`` as soon as it is seen
    to exceed ``limit`` bytes (from ``content-length``, or while reading), so a
    large body is never held in memory. Checkpoints while it waits."""
    declared = request_header(scope, b"content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HttpError(413, f"the request body is over the limit of {limit} bytes")
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise HttpError(413, f"the request body is over the limit of {limit} bytes")
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


MAX_JSON_DEPTH: Final = 64
"""How deeply a request body's arrays and objects may nest."""

# A JSON escape of a UTF-16 surrogate: only such a body can hold a lone one.
_SURROGATE_ESCAPE: Final = re.compile(rb"\\[uU][dD][89a-fA-F]")


def parse_json_object(body: bytes) -> Mapping[str, Any]:
    """The JSON object in ``body``; ``HttpError(400)`` for bad JSON, another
    JSON value, nesting deeper than ``MAX_JSON_DEPTH`` or a string that is not
    text (a lone UTF-16 surrogate, which no store or provider can take), the
    message naming where."""
    if body.count(b"[") + body.count(b"{") > MAX_JSON_DEPTH:
        _check_depth(body)
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HttpError(400, f"the request body is not valid JSON: {exc}") from exc
    except RecursionError:  # pragma: no cover - _check_depth stops it first
        raise _too_deep() from None
    if not isinstance(value, Mapping):
        raise HttpError(
            400, f"the request body must be a JSON object, got {type(value).__name__}"
        )
    if _SURROGATE_ESCAPE.search(body):
        _check_text(value)
    return value


def _too_deep() -> HttpError:
    return HttpError(
        400,
        f"the request body nests arrays and objects more than {MAX_JSON_DEPTH} "
        f"levels deep",
    )


_JSON_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS: Final = bytes(b for b in range(256) if b not in b"[]{}")


def _check_depth(body: bytes) -> None:
    """``HttpError(400)`` if the arrays and objects of ``body`` (JSON text not
    yet parsed: the parser, and what reads its value, recurse) nest deeper
    than ``MAX_JSON_DEPTH``. The strings are cut out and the brackets kept by
    the regex engine and ``bytes.translate``; only the brackets are walked."""
    brackets = _JSON_STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    depth = 0
    for byte in brackets:
        if byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > MAX_JSON_DEPTH:
                raise _too_deep()
        else:
            depth -= 1


def _check_text(value: Any) -> None:
    """``HttpError(400)`` naming the first string (key or value) of ``value``
    that holds a lone surrogate."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            _text(item, where or "the body")
        elif isinstance(item, Mapping):
            for key, inner in item.items():
                path = f"{where}.{key}" if where else str(key)
                _text(key, f"a key in {where or 'the body'}")
                stack.append((path, inner))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", inner) for i, inner in enumerate(item))


def _text(value: str, where: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise HttpError(
            400,
            f"'{where}' is not valid text: it holds a lone UTF-16 surrogate "
            f"(\\u{ord(value[_bad_index(value)]):04x})",
            field=where,
        ) from None


def _bad_index(value: str) -> int:
    return next(i for i, ch in enumerate(value) if 0xD800 <= ord(ch) <= 0xDFFF)


async def send_json(
    send: Send, status: int, value: Any, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    """A complete JSON response. Checkpoints in each ``send`` (waiting while
    the client does not read); cancellation leaves the response cut."""
    body = dumps(value)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def send_empty(
    send: Send, status: int, headers: Iterable[tuple[bytes, bytes]] = ()
) -> None:
    """A response with no body (204, a CORS preflight). Checkpoints in
    ``send``."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-length", b"0"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": b""})
