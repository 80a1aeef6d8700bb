"""Resumable streams: a run that outlives its client's connection.

With resume on, the request that starts a run holds it in its own nursery
and pumps its frames into a run log on the bus (``_bus``); the client reads
that log like any resumer. When the client leaves, the run keeps going until
it ends, an explicit cancel arrives (the cancel route, a graceful
shutdown), or ``grace_s`` passes with no client attached; then it is
cancelled. A client that comes back (``Last-Event-ID``: the last frame it
read) gets what it missed, then follows the live run. Every frame carries an
SSE ``id:``; keepalive comments do not. A failure of the bus itself (Redis
gone past its outage budget, a lost lease) ends a follower's stream with one
error frame named ``RunBusError``; the run is cancelled when it can no longer
publish.

A durable run is not cancelled when its clients have gone, and a graceful
shutdown hands it over (``AgentStream.hand_over``) rather than cancelling it:
its log is left for the process that takes it over, and the responses of this
process end with no ``[DONE]`` (the run is not over) but an SSE ``retry:``
field (``RETRY_FRAME``), so the client reconnects, to another replica, where
its ``Last-Event-ID`` resumes the run.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Final

import trio

from .._secrets import get_logger
from ..chunks import (
    Chunk,
    ErrorChunk,
    ErrorPayload,
    FinishChunk,
    FinishPayload,
    StepFinishChunk,
    StepFinishPayload,
    StepResultInfo,
)
from ..runtime import AgentStream
from ._bus import ReplayGap, RunBusError, RunPublisher, RunSubscription
from ._http import Receive, Scope, Send, request_header
from ._mastra import DONE_FRAME
from ._streaming import (
    MAX_COALESCED,
    RETRY_FRAME,
    WATCHER_NAME,
    BodyWriter,
    RunReader,
    RunRegistry,
    StreamSettings,
    moved_away,
    watch_client,
)

__all__ = [
    "BUS_ERROR_NAME",
    "GAP_ERROR_NAME",
    "RETRY_FRAME",
    "RUN_LOST_ERROR_NAME",
    "follow_log",
    "last_event_id",
    "lost_frames",
    "publish_run",
    "stream_resumable",
]

logger: Final = get_logger("procession.server")

GAP_ERROR_NAME: Final = "ReplayGapError"
"""The error name in the frame a resumer behind the replay buffer gets."""
BUS_ERROR_NAME: Final = "RunBusError"
"""The error name in the frame a follower gets when the run bus failed."""


RUN_LOST_ERROR_NAME: Final = "RunLostError"
"""The error name in the frames followers get when the run's server died."""


def lost_frames(
    settings: StreamSettings, run_id: str, *, durable: bool = False
) -> list[bytes]:
    """The frames a run's followers get if the replica executing it dies:
    ``error``, ``step-finish``, ``finish`` (Mastra's order for a failed run),
    then ``[DONE]``; none for a durable run (another replica goes on with
    it)."""
    if durable:
        return []
    error = {
        "name": RUN_LOST_ERROR_NAME,
        "message": f"run {run_id} was lost: the server running it stopped",
    }
    chunks: list[Chunk] = [
        ErrorChunk(payload=ErrorPayload(error=error), run_id=run_id),
        StepFinishChunk(
            payload=StepFinishPayload(step_result=StepResultInfo(reason="error")),
            run_id=run_id,
        ),
        FinishChunk(
            payload=FinishPayload(step_result=StepResultInfo(reason="error")),
            run_id=run_id,
        ),
    ]
    return [*(settings.encode(chunk) for chunk in chunks), DONE_FRAME]


def last_event_id(scope: Scope) -> str | None:
    """The ``Last-Event-ID`` header's text (None when absent); the bus parses
    it (``RunBus.parse_event_id``)."""
    raw = request_header(scope, b"last-event-id")
    return None if raw is None else raw.decode("latin-1")


def _with_id(seq: int | str, frame: bytes) -> bytes:
    return b"id: " + str(seq).encode() + b"\n" + frame


async def follow_log(
    send: Send,
    receive: Receive,
    subscription: RunSubscription,
    settings: StreamSettings,
    gap_frame: Callable[[str, str], bytes],
    *,
    moved: trio.Event | None = None,
) -> None:
    """Write the log's frames (each with its ``id:``) to a started response
    until the run's log ends, then end the body; the frames already at hand
    (a resumer's replay, a burst) in one ``send``, a lone frame at once; a
    keepalive comment while idle. Behind the buffer: one
    ``gap_frame(GAP_ERROR_NAME, message)`` and the end; the bus failing: one
    ``gap_frame(BUS_ERROR_NAME, message)`` and the end. When the run moved to
    another process (the log says so, or ``moved`` is set: this process
    handed it over): the frames at hand, then ``RETRY_FRAME`` and the end (a
    client that reconnects elsewhere resumes after the last id it read).
    Returns early, leaving the body cut, when the client disconnects.
    Checkpoints."""
    async with trio.open_nursery() as nursery:
        writer = BodyWriter(send, settings.keepalive_s)
        nursery.start_soon(
            watch_client, receive, nursery.cancel_scope, writer, name=WATCHER_NAME
        )
        tail = b""
        ready = subscription.receive_ready
        waiting = trio.CancelScope()
        if moved is not None:

            async def on_moved() -> None:
                assert moved is not None
                await moved.wait()
                waiting.cancel()  # a wait for the next frame; none is lost

            nursery.start_soon(on_moved)
        while True:
            item: tuple[int | str, bytes] | None = None
            if moved is not None and moved.is_set():
                item = ready()
                if item is None:
                    tail = RETRY_FRAME
                    break
            else:
                waiting = trio.CancelScope()
                if moved is not None and moved.is_set():
                    continue
                with waiting:
                    try:
                        item = await subscription.receive()
                    except trio.EndOfChannel:
                        if subscription.moved:
                            tail = RETRY_FRAME
                        break
                    except ReplayGap as gap:
                        tail = gap_frame(GAP_ERROR_NAME, str(gap))
                        break
                    except RunBusError as exc:
                        logger.error("a follower's run bus failed: %s", exc)
                        tail = gap_frame(BUS_ERROR_NAME, str(exc))
                        break
                if item is None:  # the wait was cut: the run moved
                    continue
            body = _with_id(*item)
            for _ in range(MAX_COALESCED - 1):
                item = ready()
                if item is None:
                    break
                body += _with_id(*item)
            await writer.write(body)
        await writer.end(tail)
        nursery.cancel_scope.cancel()


async def _pump(
    reader: RunReader,
    publisher: RunPublisher,
    settings: StreamSettings,
    done: trio.Event,
    moved: trio.Event,
) -> None:
    """Read the run into its log: its frames, then ``[DONE]`` at a clean end
    or one failure frame; a durable run that moved to another process: its
    frames, then the log is handed over (``moved`` is set). A log that can
    take no more (``RunBusError``) cancels the run (a durable run goes on,
    unpublished)."""
    stream = reader.stream
    went = False
    try:
        if publisher.batch_frames > 1:
            went = await _publish_batched(reader, publisher, settings)
        else:
            went = await _read_run(reader, settings, publisher.publish)
    except RunBusError as exc:
        if stream.durable:
            # Kept in storage, it need not die with the bus: it goes on to
            # its end (memory saves the turn), which nobody can follow here.
            logger.error(
                "run %s: the run bus failed (%s); it goes on unpublished",
                stream.run_id,
                exc,
            )
            async for _chunk in reader.chunks:
                pass
        else:
            logger.error(
                "run %s: the run bus failed (%s); cancelled", stream.run_id, exc
            )
            await stream.cancel()
    finally:
        try:
            with trio.CancelScope(shield=True):
                if went:
                    await publisher.hand_over()
                else:
                    await publisher.aclose()
        except RunBusError as exc:
            logger.error("run %s: its log was not closed: %s", stream.run_id, exc)
        if went:
            moved.set()
        done.set()


async def _read_run(
    reader: RunReader,
    settings: StreamSettings,
    put: Callable[[bytes], Awaitable[object]],
) -> bool:
    """Hand the run's frames to ``put``, in order: its chunks', then
    ``[DONE]`` at a clean end, or one failure frame when the run raised;
    True (and no ``[DONE]``) when the run moved to another process. What
    ``put`` raises goes up."""

    async def put_chunk(chunk: Chunk) -> None:
        frame = settings.encode(chunk)
        if frame:
            await put(frame)

    try:
        await reader.relay(put_chunk)
    except (RunBusError, trio.BrokenResourceError):
        raise  # from put: the log failed, not the run
    except Exception as exc:
        logger.exception("run %s failed while streaming", reader.stream.run_id)
        await put(settings.failure_frame(f"{type(exc).__name__}: {exc}"))
    else:
        if await moved_away(reader.stream):
            return True
        await put(DONE_FRAME)
    return False


async def _publish_batched(
    reader: RunReader, publisher: RunPublisher, settings: StreamSettings
) -> bool:
    """``_read_run`` into ``publisher`` with the frames that are ready
    together published at once: while one batch is on its way, the run's
    next frames wait (up to ``batch_frames`` of them, then the run waits
    too) and go in the next. Order, and each frame once, as one by one.
    True when the run moved to another process. ``RunBusError`` when the
    log failed."""
    size = publisher.batch_frames
    send, receive = trio.open_memory_channel[bytes](size)
    failed: list[RunBusError] = []

    async def write(cancel_scope: trio.CancelScope) -> None:
        with receive:
            try:
                async for frame in receive:
                    batch = [frame]
                    while len(batch) < size:
                        try:
                            batch.append(receive.receive_nowait())
                        except (trio.WouldBlock, trio.EndOfChannel):
                            break
                    await publisher.publish_many(batch)
            except RunBusError as exc:
                failed.append(exc)
                cancel_scope.cancel()  # the reader stops where it is

    went = False
    async with trio.open_nursery() as nursery:
        nursery.start_soon(write, nursery.cancel_scope)
        with send:
            went = await _read_run(reader, settings, send.send)
    if failed:
        raise failed[0]
    return went


async def _cancel_when(
    reader: RunReader, shutdown: trio.Event, publisher: RunPublisher, grace_s: float
) -> None:
    """Cancel the run at the graceful shutdown, or once ``grace_s`` passed
    with no client attached; a durable run is handed over at the shutdown
    instead, and never cancelled for want of clients (another replica goes on
    with it if this one dies)."""
    stream = reader.stream

    async with trio.open_nursery() as nursery:

        async def on_shutdown() -> None:
            await shutdown.wait()
            nursery.cancel_scope.cancel()

        async def when_unattended() -> None:
            await publisher.wait_unattended(grace_s)
            logger.info("run %s: no client for %s s; cancelled", stream.run_id, grace_s)
            nursery.cancel_scope.cancel()

        nursery.start_soon(on_shutdown)
        if not stream.durable:
            nursery.start_soon(when_unattended)
    if stream.durable and await stream.hand_over():
        logger.info("run %s: handed over to another replica", stream.run_id)
        return
    await reader.cancel()


async def stream_resumable(
    send: Send,
    receive: Receive,
    run: AbstractAsyncContextManager[AgentStream],
    settings: StreamSettings,
    *,
    publisher: RunPublisher,
    registry: RunRegistry,
    key: str,
    shutdown: trio.Event,
    grace_s: float,
    gap_frame: Callable[[str, str], bytes],
    hold: bool = False,
) -> None:
    """Stream ``run`` as a 200 SSE response through its log ``publisher``,
    registered in ``registry`` under ``key`` while it runs.
    Returns when the run has ended (not when the client leaves): the run
    outlives its client until it ends, is cancelled, or ``grace_s`` passes
    with nobody attached. Checkpoints throughout."""
    async with run as stream, trio.open_nursery() as nursery:
        reader = registry.streams[key] = RunReader(stream, hold)
        try:
            done, moved = trio.Event(), trio.Event()
            async with publisher.attach() as subscription:
                nursery.start_soon(_pump, reader, publisher, settings, done, moved)
                nursery.start_soon(_cancel_when, reader, shutdown, publisher, grace_s)
                await send(
                    {
                        "type": "http.response.start",
                        "status": 200,
                        "headers": settings.headers,
                    }
                )
                await follow_log(
                    send, receive, subscription, settings, gap_frame, moved=moved
                )
            await done.wait()
            nursery.cancel_scope.cancel()
        finally:
            registry.release(key, reader)


async def publish_run(
    stream: AgentStream,
    settings: StreamSettings,
    *,
    publisher: RunPublisher | None,
    registry: RunRegistry,
    key: str,
    shutdown: trio.Event,
    hold: bool = False,
) -> None:
    """Run ``stream`` (a durable run this process took over) to its end with
    no client of its own: into its log ``publisher``, where its followers on
    any replica read it (None: no bus; its end is in memory and storage),
    registered in ``registry`` under ``key`` (a cancel reaches it); handed
    over again at the graceful shutdown. Checkpoints throughout."""
    reader = registry.streams[key] = RunReader(stream, hold)
    try:
        async with trio.open_nursery() as nursery:
            if publisher is None:

                async def drain() -> None:
                    await reader.relay(_discard)
                    nursery.cancel_scope.cancel()

                async def on_shutdown() -> None:
                    await shutdown.wait()
                    if not await stream.hand_over():
                        await reader.cancel()

                nursery.start_soon(drain)
                nursery.start_soon(on_shutdown)
                return
            done, moved = trio.Event(), trio.Event()
            nursery.start_soon(_pump, reader, publisher, settings, done, moved)
            nursery.start_soon(_cancel_when, reader, shutdown, publisher, math.inf)
            await done.wait()
            nursery.cancel_scope.cancel()
    finally:
        registry.release(key, reader)


async def _discard(_chunk: Chunk) -> None:
    await trio.lowlevel.checkpoint()
