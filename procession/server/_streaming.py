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

import logging
import math
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Final

import attrs
import trio

from ..chunks import Chunk
from ..runtime import AgentStream
from ._http import Headers, Receive, Send
from ._mastra import DONE_FRAME, KEEPALIVE_FRAME

__all__ = ["RunRegistry", "StreamSettings", "stream_response", "watch_disconnect"]

logger: Final = logging.getLogger("procession.server")


@attrs.define
class RunRegistry:
    """The runs in flight, by run id (for the cancel route and the limit on
    concurrent runs)."""

    limit: int
    streams: dict[str, AgentStream] = attrs.field(factory=dict)
    reserved: int = 0

    @property
    def full(self) -> bool:
        return self.reserved >= self.limit


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
    shutdown: trio.Event,
) -> None:
    """Stream the run ``run`` (an ``agent.stream(...)`` not yet entered) as
    a 200 SSE response framed by ``settings``; returns when the response is
    complete or the client left. A run that ends (any outcome) is followed by
    ``data: [DONE]``; a failure of the server itself while streaming is one
    error frame, logged with its traceback, and no ``[DONE]``.

    Checkpoints throughout (each ``send`` waits while the client does not
    read: backpressure). A disconnect, or cancellation of the caller, cancels
    the run before this returns."""
    async with run as stream, trio.open_nursery() as nursery:
        registry.streams[stream.run_id] = stream
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
            nursery.start_soon(_cancel_on_shutdown, shutdown, stream)
            nursery.start_soon(_read_run, stream, to_writer)
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
            registry.streams.pop(stream.run_id, None)


async def _read_run(
    stream: AgentStream, to_writer: trio.MemorySendChannel[Chunk | _Failure]
) -> None:
    with to_writer:
        try:
            async for chunk in stream:
                await to_writer.send(chunk)
        except Exception as exc:
            logger.exception("run %s failed while streaming", stream.run_id)
            await to_writer.send(_Failure(f"{type(exc).__name__}: {exc}"))


async def _cancel_on_shutdown(shutdown: trio.Event, stream: AgentStream) -> None:
    await shutdown.wait()
    await stream.cancel()


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
