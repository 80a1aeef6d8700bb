"""Server-sent events over an ``httpx2`` response, and the streaming response
every provider returns.

Why not the SDKs' own stream iterators: each is a chain of async generators
(the ``anthropic`` SDK nests seven), and leaving one early leaves the inner
generators suspended. Under trio each of those is finalised later by the
garbage collector with a ``ResourceWarning``, and the socket is closed whenever
that happens. Here the only generator is ``httpx2.Response.aiter_bytes()``,
which closes its own inner generators, and ``ProviderResponse.aclose`` closes
it, then the response, at once.
"""

from __future__ import annotations

import abc
import json
from collections import deque
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Required, TypedDict

import attrs
import trio

from .._errors import (
    ConfigurationError,
    EventTooLargeError,
    ProviderError,
    ProviderStreamError,
)
from .._secrets import get_logger
from ..data import Chunk, Usage
from ..models import FinishReason, ModelFinish
from . import _json

if TYPE_CHECKING:
    import httpx2

__all__ = [
    "CLOSE_DEADLINE",
    "DEFAULT_MAX_EVENT_BYTES",
    "ProviderCall",
    "ProviderResponse",
    "ResponseOptions",
    "SSEDecoder",
    "ServerSentEvent",
    "check_max_event_bytes",
]

logger = get_logger("procession.providers")

CLOSE_DEADLINE = 2.0
"""Seconds a close may take (shielded from cancellation) before it is abandoned."""

DEFAULT_MAX_EVENT_BYTES = 16 * 1024 * 1024
"""The largest server-sent event a provider model accepts by default (16 MiB):
far above any real event (a whole tool-call argument or text block), low enough
that a broken or hostile server cannot fill the memory."""


def check_max_event_bytes(value: object, owner: str) -> int:
    """``value`` if it is a positive int (a ``max_event_bytes`` setting), else
    ``ConfigurationError`` naming ``owner`` (the class it was passed to)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(
            f"{owner}(max_event_bytes=) must be a positive int (bytes), got {value!r}"
        )
    return value


@attrs.frozen
class ServerSentEvent:
    """One SSE message: its ``event`` name (``None`` when the message had no
    ``event:`` line) and its ``data`` lines joined by newlines."""

    event: str | None
    data: str

    def json(self) -> Any:
        """``data`` parsed as JSON (raises ``ValueError`` if it is not)."""
        return _json.loads(self.data)


class SSEDecoder:
    """An incremental SSE parser (WHATWG ``text/event-stream``): feed it bytes as
    they arrive, in pieces of any size, and it returns the complete messages.

    Lines end in ``\\r\\n``, ``\\n`` or a lone ``\\r`` (also when a ``\\r\\n``
    is split between two pieces); comment lines (``:``) and ``id:`` /
    ``retry:`` fields are ignored; a message without ``data:`` lines is
    dropped; an unterminated message at the end of the body is discarded (as the
    standard says), which is how a truncated stream loses its last event.

    Linear in the body: each piece is scanned once for line endings, and a line
    that spans pieces is kept as a list of them and joined once, when it ends
    (``bytes_examined`` counts that work). A message larger than
    ``max_event_bytes`` (its field lines so far, comment lines excluded, plus
    the line still arriving) raises ``EventTooLargeError`` as soon as the bytes
    that cross the limit are fed, so a body without line breaks cannot fill the
    memory. ``provider`` and ``setting`` only word that error.
    """

    __slots__ = (
        "_data",
        "_event",
        "_event_bytes",
        "_examined",
        "_limit",
        "_line",
        "_line_bytes",
        "_provider",
        "_setting",
        "_skip_lf",
    )

    def __init__(
        self,
        *,
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
        provider: str = "the server",
        setting: str = "max_event_bytes=...",
    ) -> None:
        self._limit = max_event_bytes
        self._provider = provider
        self._setting = setting
        self._event: str | None = None
        self._data: list[str] = []
        self._event_bytes = 0  # the current message's complete lines
        self._line: list[bytes] = []  # the pieces of the line still arriving
        self._line_bytes = 0
        self._skip_lf = False  # the last piece ended in "\r": a "\n" may follow
        self._examined = 0

    @property
    def bytes_examined(self) -> int:
        """Bytes scanned for line endings plus bytes copied to join lines that
        spanned pieces, since this decoder was made: at most twice the bytes
        fed, however they were split (what a linearity test reads)."""
        return self._examined

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Take the next bytes of the body; return the messages they complete.

        Raises ``EventTooLargeError`` when the message being read grows past
        ``max_event_bytes``."""
        out: list[ServerSentEvent] = []
        if not chunk:
            return out
        self._examined += len(chunk)
        # bytes.splitlines breaks at exactly \r\n, \r and \n: SSE's line ends.
        lines = chunk.splitlines()
        if self._skip_lf and chunk[0] == 10:  # b"\n"
            del lines[0]  # the rest of a "\r\n" split after its "\r"
        last = chunk[-1]
        self._skip_lf = last == 13  # b"\r": a "\n" may follow
        # The last line is still arriving unless the piece ends a line.
        partial = lines.pop() if last != 10 and last != 13 else None
        if self._line and lines:
            self._line.append(lines[0])
            lines[0] = b"".join(self._line)
            self._examined += len(lines[0])
            self._line, self._line_bytes = [], 0
        data = self._data
        for raw in lines:
            # Inlined: one call per line would cost more than the line's work.
            if not raw:
                if data:
                    out.append(ServerSentEvent(self._event, "\n".join(data)))
                    data = self._data = []
                self._event, self._event_bytes = None, 0
            elif raw[0] != 58:  # b":" starts a comment line
                self._event_bytes += len(raw)
                if self._event_bytes > self._limit:
                    self._check_size()
                name, _, value = raw.decode("utf-8", errors="replace").partition(":")
                if value[:1] == " ":
                    value = value[1:]
                if name == "data":
                    data.append(value)
                elif name == "event":
                    self._event = value or None
        if partial is not None:
            self._line.append(partial)
            self._line_bytes += len(partial)
            self._check_size()
        return out

    def _check_size(self) -> None:
        size = self._event_bytes + self._line_bytes
        if size > self._limit:
            raise EventTooLargeError(
                provider=self._provider,
                limit=self._limit,
                size=size,
                setting=self._setting,
            )


class ResponseOptions(TypedDict, total=False):
    """What a model hands the response it opens besides the HTTP response (the
    keyword arguments of every ``ProviderResponse`` subclass)."""

    request_body: Required[dict[str, Any]]
    warnings: Required[list[Any]]
    max_event_bytes: int


class ProviderResponse(abc.ABC):
    """A streaming model response read from an SSE body (``ModelResponse``).

    Subclasses turn provider events into chunks in ``_on_event`` (pushing them
    with ``_emit``) and decide at the end of the body in ``_on_end``, which sets
    ``finish`` (``_finished`` builds it) or raises ``ProviderError``.

    Every ``__anext__`` reads the socket only when no converted chunk is
    waiting, so a consumer that stops reading stops the reads: the server is
    held back by TCP flow control (backpressure reaches the provider).
    ``next_nowait`` gives the chunks already decoded without reading (a
    ``ModelResponse``'s option: the agent's run takes them in the consumer's
    task). A transport failure or an error event is raised as
    ``ProviderError`` and ends the stream. ``aclose`` closes the HTTP response
    at once, shielded from cancellation for at most ``CLOSE_DEADLINE``
    seconds.
    """

    provider: str = "provider"
    model_class: str = "the model"
    """The model class that builds this response (words the size-limit error)."""

    def __init__(
        self,
        response: httpx2.Response,
        *,
        request_body: dict[str, Any],
        warnings: list[Any],
        max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
    ) -> None:
        self.finish: ModelFinish | None = None
        self._response = response
        self._request_body = request_body
        self._warnings = warnings
        self._bytes: AsyncGenerator[bytes, None] | None = None
        self._decoder = SSEDecoder(
            max_event_bytes=max_event_bytes,
            provider=self.provider,
            setting=f"{self.model_class}(..., max_event_bytes=...)",
        )
        self._events: deque[ServerSentEvent] = deque()
        self._pending: deque[Chunk] = deque()
        self._eof = False
        self._done = False
        self._closed = False
        self._busy = False

    @property
    def http_response(self) -> httpx2.Response:
        """The underlying HTTP response (headers, status)."""
        return self._response

    # -- for subclasses ------------------------------------------------------

    def _emit(self, chunk: Chunk) -> None:
        self._pending.append(chunk)

    @abc.abstractmethod
    def _on_event(self, event: ServerSentEvent) -> None:
        """Turn one server-sent event into chunks (``_emit``)."""

    @abc.abstractmethod
    def _on_end(self) -> None:
        """The body ended: close open blocks and set ``finish``, or raise."""

    def _map_error(self, exc: Exception) -> ProviderError | None:
        """Map an exception raised while reading the body (``None``: not ours)."""
        import httpx2

        from ._errors import transport_error

        if isinstance(exc, httpx2.TransportError):
            return transport_error(self.provider, exc)
        return None

    def _finished(
        self,
        finish_reason: FinishReason,
        usage: Usage | None,
        provider_metadata: Any,
        **raw_response: Any,
    ) -> ModelFinish:
        """The ``finish`` of this response: with its warnings, the request body
        and the raw response (status, headers and ``raw_response``'s items)."""
        return ModelFinish(
            finish_reason=finish_reason,
            usage=usage,
            warnings=tuple(self._warnings),
            provider_metadata=provider_metadata,
            request=self._request_body,
            raw_response={
                "status_code": self._response.status_code,
                "headers": dict(self._response.headers.items()),
                **raw_response,
            },
        )

    # -- iteration -------------------------------------------------------------

    def __aiter__(self) -> ProviderResponse:
        return self

    async def __anext__(self) -> Chunk:
        """The next chunk. Checkpoints when it has to read from the connection;
        chunks already decoded from an earlier read come without one. A
        cancelled read propagates ``Cancelled`` and loses nothing already
        decoded; a failure is a ``ProviderError`` (never an SDK exception)."""
        if self._closed:
            raise trio.ClosedResourceError(
                f"this {self.provider} response was iterated after its 'async with' "
                f"block exited"
            )
        if self._busy:
            raise trio.BusyResourceError(
                f"another task is already iterating this {self.provider} response"
            )
        self._busy = True
        try:
            while not self._pending:
                if self._done:
                    raise StopAsyncIteration
                try:
                    event = await self._next_event()
                except Exception as exc:
                    failure = self._failure(exc)
                    if failure is exc:
                        raise
                    raise failure from exc
                self._take(event)
            return self._pending.popleft()
        finally:
            self._busy = False

    def next_nowait(self) -> Chunk:
        """The next chunk if it is at hand without reading the connection: one
        already converted, or one converted now from the events an earlier
        read decoded (a read often carries several, an event often makes
        several chunks). Never checkpoints and never awaits, so a reader can
        take a burst without a task switch per chunk (the agent's fused run
        does).

        Raises ``trio.WouldBlock`` when the connection must be read for the
        next chunk (``await __anext__()`` reads it; so also while another task
        is in ``__anext__``, or after the block exited: ``__anext__`` says what
        is wrong), ``StopAsyncIteration`` at the end (``finish`` is then set),
        and the same ``ProviderError`` as ``__anext__`` where the stream
        fails. Chunks come in the same order whichever way they are read."""
        if self._closed or self._busy:
            raise trio.WouldBlock
        pending = self._pending
        while not pending:
            if self._done:
                raise StopAsyncIteration
            if self._events:
                self._take(self._events.popleft())
            elif self._eof:
                self._take(None)
            else:
                raise trio.WouldBlock
        return pending.popleft()

    def _take(self, event: ServerSentEvent | None) -> None:
        """Convert ``event`` (``None``: the end of the body) into chunks; a
        failure ends the stream and is raised as ``_failure`` says."""
        try:
            if event is None:
                self._done = True
                self._on_end()
            else:
                self._on_event(event)
        except Exception as exc:
            failure = self._failure(exc)
            if failure is exc:
                raise
            raise failure from exc

    def _failure(self, exc: Exception) -> Exception:
        """End the stream (nothing converted is given any more); what to raise
        for ``exc``: a ``ProviderError`` (``exc`` itself when it is one, or
        when it is not this provider's to map)."""
        self._done = True
        self._pending.clear()
        if isinstance(exc, ProviderError):
            return exc
        if isinstance(exc, json.JSONDecodeError):
            return ProviderStreamError(
                f"{self.provider} sent an event whose data is not JSON: {exc}",
                is_retryable=True,
                code="invalid_response",
            )
        mapped = self._map_error(exc)
        return exc if mapped is None else mapped

    async def _next_event(self) -> ServerSentEvent | None:
        while not self._events:
            if self._eof:
                return None
            if self._bytes is None:
                self._bytes = self._response.aiter_bytes()
            try:
                data = await self._bytes.__anext__()
            except StopAsyncIteration:
                self._eof = True
                continue
            self._events.extend(self._decoder.feed(data))
        return self._events.popleft()

    async def aclose(self) -> None:
        """Close the HTTP response (and its connection, if the body was not read
        to the end). Idempotent. Shielded from cancellation for at most
        ``CLOSE_DEADLINE`` seconds, so it completes even in a cancelled scope;
        errors while closing are logged, never raised (an exception in flight
        must not be replaced)."""
        if self._closed:
            return
        self._closed = True
        self._done = True
        with trio.CancelScope(shield=True) as scope:
            scope.deadline = trio.current_time() + CLOSE_DEADLINE
            try:
                if self._bytes is not None:
                    await self._bytes.aclose()
                await self._response.aclose()
            except Exception:
                logger.debug(
                    "closing a %s response failed", self.provider, exc_info=True
                )
        if scope.cancelled_caught:
            logger.warning(
                "closing a %s response took longer than %ss; abandoned",
                self.provider,
                CLOSE_DEADLINE,
            )


class ProviderCall(AbstractAsyncContextManager[ProviderResponse]):
    """What ``model.stream(request)`` returns: entering makes the call (and raises
    ``ProviderError`` if it is rejected); leaving closes the response before it
    returns, however the block is left (normally, by an exception, or by
    cancellation). Single use."""

    __slots__ = ("_entered", "_response", "_start")

    def __init__(self, start: Callable[[], Awaitable[ProviderResponse]]) -> None:
        self._start = start
        self._entered = False
        self._response: ProviderResponse | None = None

    async def __aenter__(self) -> ProviderResponse:
        """Send the request and wait for the response headers (``ProviderError``
        if the call is rejected or the connection fails). Checkpoints;
        cancellation propagates and nothing is left open."""
        if self._entered:
            raise RuntimeError(
                "a model.stream(...) context can be entered only once; call "
                "model.stream(request) again for another call"
            )
        self._entered = True
        self._response = await self._start()
        return self._response

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the HTTP response (``aclose``: shielded, bounded, never
        raising), even in a cancelled scope."""
        if self._response is not None:
            await self._response.aclose()


def usage_total(usage: Usage) -> Usage:
    """``usage`` with ``total_tokens`` filled in from input + output when unset."""
    if (
        usage.total_tokens is None
        and usage.input_tokens is not None
        and usage.output_tokens is not None
    ):
        return attrs.evolve(
            usage, total_tokens=usage.input_tokens + usage.output_tokens
        )
    return usage
