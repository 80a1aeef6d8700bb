"""Resumable streams: a run that outlives its client's connection.

With resume on, the request that starts a run holds it in its own nursery
and pumps its frames into a run log on the bus (``_bus``); the client reads
that log like any resumer. When the client leaves, the run keeps going until
it ends, an explicit cancel arrives (the cancel route, a graceful
shutdown), or ``grace_s`` passes with no client attached; then it is
cancelled. A client that comes back (``Last-Event-ID``: the last frame it
read) gets what it missed, then follows the live run. Every frame carries an
SSE ``id:``; keepalive comments do not.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Final

import trio

from ..runtime import AgentStream
from ._bus import ReplayGap, RunPublisher, RunSubscription
from ._http import HttpError, Receive, Scope, Send, request_header
from ._mastra import DONE_FRAME, KEEPALIVE_FRAME
from ._streaming import RunRegistry, StreamSettings, watch_disconnect

__all__ = ["GAP_ERROR_NAME", "follow_log", "last_event_id", "stream_resumable"]

logger: Final = logging.getLogger("procession.server")

GAP_ERROR_NAME: Final = "ReplayGapError"
"""The error name in the frame a resumer behind the replay buffer gets."""


def last_event_id(scope: Scope) -> int:
    """The ``Last-Event-ID`` header's frame number (0 when absent); a value
    that is not a frame number is a 400."""
    raw = request_header(scope, b"last-event-id")
    if raw is None or not raw.strip():
        return 0
    text = raw.decode("latin-1").strip()
    if not text.isdigit():
        raise HttpError(400, f"Last-Event-ID must be a frame number, got {text[:40]!r}")
    return int(text)


def _with_id(seq: int, frame: bytes) -> bytes:
    return b"id: %d\n" % seq + frame


async def follow_log(
    send: Send,
    receive: Receive,
    subscription: RunSubscription,
    settings: StreamSettings,
    gap_frame: Callable[[str], bytes],
) -> None:
    """Write the log's frames (each with its ``id:``) to a started response
    until the run's log ends, then end the body; a keepalive comment while
    idle. Behind the buffer: one ``gap_frame`` and the end. Returns early,
    leaving the body cut, when the client disconnects. Checkpoints."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch_disconnect, receive, nursery.cancel_scope)
        period = settings.keepalive_s if settings.keepalive_s > 0 else math.inf
        tail = b""
        while True:
            item: tuple[int, bytes] | None = None
            with trio.move_on_after(period):
                try:
                    item = await subscription.receive()
                except trio.EndOfChannel:
                    break
                except ReplayGap as gap:
                    tail = gap_frame(str(gap))
                    break
            body = KEEPALIVE_FRAME if item is None else _with_id(*item)
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": tail, "more_body": False})
        nursery.cancel_scope.cancel()


async def _pump(
    stream: AgentStream,
    publisher: RunPublisher,
    settings: StreamSettings,
    done: trio.Event,
) -> None:
    """Read the run into its log: its frames, then ``[DONE]`` at a clean end
    or one failure frame."""
    try:
        try:
            async for chunk in stream:
                for frame in settings.encode(chunk):
                    await publisher.publish(frame)
        except Exception as exc:
            logger.exception("run %s failed while streaming", stream.run_id)
            await publisher.publish(
                settings.failure_frame(f"{type(exc).__name__}: {exc}")
            )
        else:
            await publisher.publish(DONE_FRAME)
    finally:
        publisher.close()
        done.set()


async def _cancel_when(
    stream: AgentStream, shutdown: trio.Event, publisher: RunPublisher, grace_s: float
) -> None:
    async with trio.open_nursery() as nursery:

        async def on_shutdown() -> None:
            await shutdown.wait()
            nursery.cancel_scope.cancel()

        async def when_unattended() -> None:
            await publisher.wait_unattended(grace_s)
            logger.info("run %s: no client for %s s; cancelled", stream.run_id, grace_s)
            nursery.cancel_scope.cancel()

        nursery.start_soon(on_shutdown)
        nursery.start_soon(when_unattended)
    await stream.cancel()


async def stream_resumable(
    send: Send,
    receive: Receive,
    run: AbstractAsyncContextManager[AgentStream],
    settings: StreamSettings,
    *,
    publisher: RunPublisher,
    registry: RunRegistry,
    shutdown: trio.Event,
    grace_s: float,
    gap_frame: Callable[[str], bytes],
) -> None:
    """Stream ``run`` as a 200 SSE response through its log ``publisher``.
    Returns when the run has ended (not when the client leaves): the run
    outlives its client until it ends, is cancelled, or ``grace_s`` passes
    with nobody attached. Checkpoints throughout."""
    async with run as stream, trio.open_nursery() as nursery:
        registry.streams[stream.run_id] = stream
        try:
            done = trio.Event()
            async with publisher.attach(0) as subscription:
                nursery.start_soon(_pump, stream, publisher, settings, done)
                nursery.start_soon(_cancel_when, stream, shutdown, publisher, grace_s)
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": settings.headers,
                    }
                )
                await follow_log(send, receive, subscription, settings, gap_frame)
            await done.wait()
            nursery.cancel_scope.cancel()
        finally:
            registry.streams.pop(stream.run_id, None)
