"""Mapping provider failures to ``ProviderError``, at the provider edge.

Every provider module raises only ``ProviderError`` (with the original exception
as ``__cause__``) out of ``model.stream(...)`` and out of iteration, and always
one of its kinds, which this module chooses:

* ``ProviderStatusError`` for an HTTP error status: ``RateLimitError`` for 429,
  ``OverloadedError`` for 529 and for a 503 whose error code or message says
  "overloaded" (OpenAI's wording; Anthropic's type is ``overloaded_error``);
* ``ProviderTimeoutError`` for a connect or read timeout;
* ``ProviderConnectionError`` for a refused, reset or dropped connection;
* ``ProviderStreamError`` for a 200 response that failed as a stream (an error
  event, data that is not JSON, JSON instead of events, no terminal event).

It also decides the fields error processors read:

* ``status_code``: the HTTP status when the server answered with an error
  status; ``None`` for an error event inside a 200 stream and for transport
  failures (there was no error status to report);
* ``headers``: the response headers (``Retry-After`` lives there);
* ``body``: the provider's error JSON (or an OpenAI Responses ``error`` /
  ``response.failed`` event as a whole);
* ``code``: the provider's error type/code, or for transport failures one of
  ``ECONNREFUSED``, ``ECONNRESET``, ``incomplete_chunked_read``, ``timeout``, and
  ``incomplete_stream`` for a stream that ended without its terminal event;
* ``is_retryable``: ``x-should-retry`` when the server sent it; otherwise
  408/409/429/5xx (529 included), transient error types, and every transport
  failure are retryable; other 4xx and permanent types are not.

The SDK packages are optional extras, so they are imported inside the functions
that need them (by then the calling provider module has imported them anyway).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._errors import (
    RETRYABLE_OPENAI_ERROR_CODES,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    ProviderStatusError,
    ProviderStreamError,
    ProviderTimeoutError,
    RateLimitError,
)

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "anthropic_error",
    "headers_of",
    "http_error",
    "incomplete_stream",
    "openai_error_code",
    "openai_payload_retryable",
    "parse_error_body",
    "retryable_status",
    "status_error_class",
    "stream_error",
    "transport_error",
]

_RETRYABLE_ANTHROPIC_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}
)
"""Anthropic ``error.type`` values that name a transient failure."""

_PERMANENT_OPENAI_CODES = frozenset({"insufficient_quota"})
"""OpenAI codes sent with a retryable status (429) that no retry will fix."""


def headers_of(response: httpx2.Response | None) -> dict[str, str]:
    """The response's headers as a plain dict (repeated headers joined by ``, ``)."""
    if response is None:
        return {}
    return dict(response.headers.items())


def _should_retry_header(headers: Mapping[str, str]) -> bool | None:
    for key, value in headers.items():
        if key.lower() == "x-should-retry":
            if value.strip().lower() == "true":
                return True
            if value.strip().lower() == "false":
                return False
    return None


def retryable_status(status_code: int, headers: Mapping[str, str]) -> bool:
    """Whether an HTTP error status is worth retrying: the server's
    ``x-should-retry`` header decides when present; otherwise 408, 409, 429 and
    every 5xx (529 included) are retryable and other statuses are not."""
    verdict = _should_retry_header(headers)
    if verdict is not None:
        return verdict
    return status_code in (408, 409, 429) or status_code >= 500


def _dig(value: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _says_overloaded(body: object, code: str | None) -> bool:
    message = _dig(body, "error", "message")
    if not isinstance(message, str):
        message = body if isinstance(body, str) else ""
    return "overloaded" in (code or "").lower() or "overloaded" in message.lower()


def status_error_class(
    status_code: int, body: object, code: str | None
) -> type[ProviderStatusError]:
    """The kind of an HTTP error response: ``RateLimitError`` for 429,
    ``OverloadedError`` for 529 and for a 503 whose ``code`` or error message
    says "overloaded", else ``ProviderStatusError``."""
    if status_code == 429:
        return RateLimitError
    if status_code == 529 or (status_code == 503 and _says_overloaded(body, code)):
        return OverloadedError
    return ProviderStatusError


def stream_error(
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    body: object = None,
    is_retryable: bool | None,
    code: str | None,
) -> ProviderStreamError:
    """A ``ProviderStreamError``: a 200 response that failed as a stream (no
    ``status_code``: no error status came with it)."""
    return ProviderStreamError(
        message, headers=headers, body=body, is_retryable=is_retryable, code=code
    )


def http_error(
    provider: str,
    status_code: int,
    headers: Mapping[str, str],
    body: object,
    *,
    code: str | None = None,
    is_retryable: bool | None = None,
) -> ProviderStatusError:
    """The ``ProviderStatusError`` (of the kind ``status_error_class`` names)
    for an HTTP error response (status >= 400)."""
    if is_retryable is None:
        is_retryable = retryable_status(status_code, headers)
    message = _str_or_none(_dig(body, "error", "message"))
    if message is None and isinstance(body, str) and body:
        message = body[:500]
    described = f"{provider} API error {status_code}"
    if code:
        described += f" ({code})"
    if message:
        described += f": {message}"
    kind = status_error_class(status_code, body, code)
    return kind(
        described,
        status_code=status_code,
        headers=headers,
        body=body,
        is_retryable=is_retryable,
        code=code,
    )


def transport_error(
    provider: str, exc: BaseException
) -> ProviderTimeoutError | ProviderConnectionError:
    """A ``ProviderTimeoutError`` (any ``httpx2.TimeoutException``, connect
    timeouts included) or a ``ProviderConnectionError`` (every other
    ``httpx2.TransportError``: the connection failed or was dropped). Always
    retryable; ``code`` names the kind of failure. The caller raises it
    ``from exc``."""
    import httpx2

    text = str(exc)
    kind: type[ProviderTimeoutError | ProviderConnectionError]
    kind = ProviderConnectionError
    if isinstance(exc, httpx2.TimeoutException):
        code = "timeout"
        kind = ProviderTimeoutError
    elif isinstance(exc, httpx2.ConnectError):
        code = "ECONNREFUSED"
    elif isinstance(exc, httpx2.RemoteProtocolError) and "incomplete" in text:
        code = "incomplete_chunked_read"
    else:
        code = "ECONNRESET"
    what = text or type(exc).__name__
    return kind(
        f"{provider} connection failed ({code}): {what}",
        is_retryable=True,
        code=code,
    )


def incomplete_stream(provider: str, detail: str) -> ProviderStreamError:
    """The ``ProviderStreamError`` for a response body that ended cleanly but
    without the stream's terminal event (``detail`` names the missing event).
    Retryable, ``code="incomplete_stream"``."""
    return stream_error(
        f"{provider} stream ended without {detail}",
        is_retryable=True,
        code="incomplete_stream",
    )


def anthropic_error(exc: Exception) -> ProviderError | None:
    """Map an exception from the ``anthropic`` SDK (or a raw ``httpx2`` transport
    error escaping it mid-stream) to ``ProviderError``; ``None`` if it is neither.

    An ``APIStatusError`` with status 200 is an ``event: error`` inside the
    stream: a ``ProviderStreamError`` classified by ``body["error"]["type"]``,
    without a status code. A timeout is a ``ProviderTimeoutError``, any other
    connection failure a ``ProviderConnectionError``.
    """
    import anthropic
    import httpx2

    if isinstance(exc, anthropic.APIStatusError):
        body: object = exc.body
        error_type = _str_or_none(_dig(body, "error", "type")) or _str_or_none(exc.type)
        headers = headers_of(exc.response)
        if exc.status_code < 400:
            message = _str_or_none(_dig(body, "error", "message")) or str(exc)
            return stream_error(
                f"anthropic stream error ({error_type}): {message}",
                headers=headers,
                body=body,
                is_retryable=error_type in _RETRYABLE_ANTHROPIC_TYPES,
                code=error_type,
            )
        return http_error("anthropic", exc.status_code, headers, body, code=error_type)
    if isinstance(exc, anthropic.APIConnectionError):
        # APITimeoutError is a subclass; the httpx2 error is the cause.
        cause = exc.__cause__
        if isinstance(exc, anthropic.APITimeoutError):
            return ProviderTimeoutError(
                f"anthropic request timed out: {exc.message}",
                is_retryable=True,
                code="timeout",
            )
        if isinstance(cause, httpx2.TransportError):
            return transport_error("anthropic", cause)
        return ProviderConnectionError(
            f"anthropic connection failed: {exc.message}",
            is_retryable=True,
            code="ECONNRESET",
        )
    if isinstance(exc, httpx2.TransportError):
        return transport_error("anthropic", exc)
    return None


def openai_error_code(payload: object) -> str | None:
    """The code of an OpenAI error object or event: ``code`` if it is a string,
    else ``type``; looked up in ``payload`` itself, in ``payload["error"]``
    (HTTP error bodies and the nested ``error`` event) and in
    ``payload["response"]["error"]`` (``response.failed``)."""
    for inner in (
        _dig(payload, "error"),
        _dig(payload, "response", "error"),
        payload,
    ):
        if not isinstance(inner, Mapping):
            continue
        code = _str_or_none(inner.get("code"))
        if code is not None:
            return code
        kind = _str_or_none(inner.get("type"))
        if kind is not None and kind not in ("error", "response.failed"):
            return kind
    return None


def openai_payload_retryable(payload: object) -> bool:
    """Whether an OpenAI error payload names a transient failure: its code (or
    type) contains a known transient marker, or its message says "you can retry
    your request". Quota exhaustion is never retryable."""
    code = openai_error_code(payload)
    if code is not None:
        lowered = code.lower()
        if lowered in _PERMANENT_OPENAI_CODES:
            return False
        if any(marker in lowered for marker in RETRYABLE_OPENAI_ERROR_CODES):
            return True
    for inner in (_dig(payload, "error"), _dig(payload, "response", "error"), payload):
        message = _dig(inner, "message")
        if isinstance(message, str) and "you can retry your request" in message.lower():
            return True
    return False


def parse_error_body(raw: bytes) -> Any:
    """An error response body: its JSON, or its text when it is not JSON."""
    text = raw.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text
