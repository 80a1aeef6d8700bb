"""One streamed response: the run, a disconnect watcher and the writer in one
nursery per request.

* A client that disconnects (ASGI ``http.disconnect``; hypercorn drops writes
  to a closed connection silently, so it must be watched for) cancels the
  nursery: leaving the run's ``async with`` cancels the run, its processors
  and the provider's stream.
* Backpressure end to end: the run's reader hands chunks to the writer over
  an unbuffered channel and the writer awaits each ``send``, so a client that
  stops reading stalls the model read. Per connection at most one chunk is in
  hand in the reader, one in the writer, plus the frames of that chunk and
  what the server's socket buffer holds.
* While no chunk comes for ``keepalive_s``, the writer sends an SSE comment.
* A graceful shutdown cancels the run (``stream.cancel()``): its last chunk is
  an ``abort``, written like any other, then ``data: [DONE]``.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Final

import attrs
import trio

from .._secrets import get_logger
from ..chunks import Chunk
from ..runtime import AgentResult, AgentStream
from ._hold import HeldSteps
from ._http import Headers, Receive, Send
from ._mastra import DONE_FRAME, KEEPALIVE_FRAME

__all__ = [
    "RunReader",
    "RunRegistry",
    "StreamSettings",
    "stream_response",
    "watch_disconnect",
]

logger: Final = get_logger("procession.server")


@attrs.define(eq=False)
class RunReader:
    """The one task that reads a served run, and the cancel scope that lets a
    cancel cut off a read blocked in a processor hook running inline in that
    task (``stream.cancel()`` alone ends the run when such a hook returns:
    the hook is the reader's, not the run's). One scope per run, none per
    chunk; the scope is cancelled only while a read is in progress, so a
    chunk already read is never lost in its hand-over."""

    stream: AgentStream
    hold: bool = False
    """Hold each step until its ``step-finish`` (``create_app(step_text=)``)."""
    chunks: AsyncIterator[Chunk] = attrs.field(init=False)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    reading: bool = False

    def __attrs_post_init__(self) -> None:
        self.chunks = HeldSteps(self.stream) if self.hold else self.stream

    async def cancel(self) -> None:
        """Cancel the run (``stream.cancel()``) and cut off the read in
        progress, if any. Checkpoints."""
        await self.stream.cancel()
        if self.reading:
            self.scope.cancel()

    async def relay(self, put: Callable[[Chunk], Awaitable[object]]) -> None:
        """Hand every chunk of the run to ``put``, in order, each once; after
        a cancel, the run's last chunk is its ``abort``. What ``put`` or the
        run raises goes up. Checkpoints (each read and ``put``)."""
        chunk: Chunk | None = None
        with self.scope:
            self.reading = True
            async for chunk in self.chunks:
                self.reading = False
                if self.scope.cancel_called:
                    break  # put it outside the scope: never cut off
                await put(chunk)
                chunk = None
                self.reading = True
        self.reading = False
        if chunk is not None:
            await put(chunk)
        # A read cut off loses nothing (the run's guarantee): the next one is
        # the abort.
        async for chunk in self.chunks:
            await put(chunk)

    async def result(self) -> AgentResult:
        """``stream.result()``, cut off by a cancel like ``relay``."""
        with self.scope:
            self.reading = True
            return await self.stream.result()
        self.reading = False
        return await self.stream.result()


@attrs.define
class RunRegistry:
    """The runs in flight, by their owner-scoped key (``run_key``: for the
    cancel route) and the limit on concurrent runs."""

    limit: int
    streams: dict[str, RunReader] = attrs.field(factory=dict)
    reserved: int = 0

    @property
    def full(self) -> bool:
        return self.reserved >= self.limit

    async def cancel(self, key: str) -> bool:
        """Cancel the run under ``key`` if this process executes it; True if
        so. Checkpoints."""
        reader = self.streams.get(key)
        if reader is None:
            await trio.lowlevel.checkpoint()
            return False
        await reader.cancel()
        return True


@attrs.frozen(kw_only=True)
class StreamSettings:
    """How a streamed response is framed: its headers, the frames of a chunk,
    the frame for a failure of the server itself, and the keepalive period."""

    headers: Headers
    encode: Callable[[Chunk], Iterable[bytes]]
    failure_frame: Callable[[str], bytes]
    keepalive_s: float


@attrs.frozen
class _Failure:
    message: str


async def watch_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    """Wait for ``http.disconnect`` and cancel ``scope`` then. Other messages
    (a body the client still sends) are read and dropped."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


async def stream_response(
    send: Send,
    receive: Receive,
    run: AbstractAsyncContextManager[AgentStream],
    settings: StreamSettings,
    *,
    registry: RunRegistry,
    key: str,
    shutdown: trio.Event,
    hold: bool = False,
) -> None:
    """Stream the run ``run`` (an ``agent.stream(...)`` not yet entered) as
    a 200 SSE response framed by ``settings``, registered in ``registry``
    under ``key`` while it runs; returns when the response is
    complete or the client left. A run that ends (any outcome) is followed by
    ``data: [DONE]``; a failure of the server itself while streaming is one
    error frame, logged with its traceback, and no ``[DONE]``.

    Checkpoints throughout (each ``send`` waits while the client does not
    read: backpressure). A disconnect, or cancellation of the caller, cancels
    the run before this returns."""
    async with run as stream, trio.open_nursery() as nursery:
        reader = registry.streams[key] = RunReader(stream, hold)
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": settings.headers,
                }
            )
            to_writer, from_reader = trio.open_memory_channel[Chunk | _Failure](0)
            nursery.start_soon(watch_disconnect, receive, nursery.cancel_scope)
            nursery.start_soon(_cancel_on_shutdown, shutdown, reader)
            nursery.start_soon(_read_run, reader, to_writer)
            clean = await _write(send, from_reader, settings)
            await send(
                {
                    "type": "http.response.body",
                    "body": DONE_FRAME if clean else b"",
                    "more_body": False,
                }
            )
            nursery.cancel_scope.cancel()
        finally:
            registry.streams.pop(key, None)


async def _read_run(
    reader: RunReader, to_writer: trio.MemorySendChannel[Chunk | _Failure]
) -> None:
    with to_writer:
        try:
            await reader.relay(to_writer.send)
        except Exception as exc:
            logger.exception("run %s failed while streaming", reader.stream.run_id)
            await to_writer.send(_Failure(f"{type(exc).__name__}: {exc}"))


async def _cancel_on_shutdown(shutdown: trio.Event, reader: RunReader) -> None:
    await shutdown.wait()
    await reader.cancel()


async def _write(
    send: Send,
    from_reader: trio.MemoryReceiveChannel[Chunk | _Failure],
    settings: StreamSettings,
) -> bool:
    """Write frames until the run ends; True if it ended cleanly."""
    period = settings.keepalive_s if settings.keepalive_s > 0 else math.inf
    while True:
        item: Chunk | _Failure | None = None
        with trio.move_on_after(period):
            try:
                item = await from_reader.receive()
            except trio.EndOfChannel:
                return True
        if item is None:
            await send(
                {
                    "type": "http.response.body",
                    "body": KEEPALIVE_FRAME,
                    "more_body": True,
                }
            )
            continue
        if isinstance(item, _Failure):
            await send(
                {
                    "type": "http.response.body",
                    "body": settings.failure_frame(item.message),
                    "more_body": True,
                }
            )
            return False
        body = b"".join(settings.encode(item))
        if body:
            await send({"type": "http.response.body", "body": body, "more_body": True})
