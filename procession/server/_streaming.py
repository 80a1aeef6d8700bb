"""One streamed response: the run read and its body written by one task of
the response's own (``_write_body``), while the request's task watches the
client (its disconnect, keepalives, the graceful shutdown), in one nursery
per request. (The writer is the side task, not the request's: a paced
chunk's every wait wakes the writer's short chain of frames, not each frame
of the app's dispatch above the response.)

* The path of a chunk is one task: the writer reads the run
  (``AgentStream.__anext__``, where fused processors run too), encodes the
  chunk and awaits the ASGI ``send``. No task hop, no cancel scope per chunk.
* Coalescing without read-ahead: the chunks the run already holds at hand
  (``AgentStream.next_ready``: an adaptive batch, a burst the model sent in
  one read) leave with the chunk just read in one ``send``; a lone chunk
  leaves at once. Nothing waits for more.
* Backpressure end to end: the next chunk is read only after the ``send``
  of the last returned, so a client that stops reading stalls the model
  read. Per connection the server holds the chunks the run had at hand (at
  most the output pipeline's batch, ``AT_HAND``), their frames, and what the
  socket buffer holds.
* A client that disconnects (ASGI ``http.disconnect``; hypercorn drops writes
  to a closed connection silently, so it must be watched for) cancels the
  nursery at once: leaving the run's ``async with`` cancels the run, its
  processors and the provider's stream.
* While nothing was sent for ``keepalive_s``, the watcher sends an SSE
  comment (never in the middle of a frame: the two take turns).
* A cancel (the cancel route, a chat's stop, the graceful shutdown) cancels
  the run (``stream.cancel()``) and cuts off a read in progress, which may be
  a processor hook blocked in this very task (``RunReader``); the run's last
  chunk is then its ``abort``, written like any other, then ``data: [DONE]``.
* ``create_app(step_text="hold")`` reads the run through ``HeldSteps``: each
  step leaves at its ``step-finish``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Final

import attrs
import trio

from .._secrets import get_logger
from ..chunks import Chunk
from ..runtime import AgentResult, AgentStream
from ._hold import HeldSteps
from ._http import Headers, Message, Receive, Send
from ._mastra import DONE_FRAME, KEEPALIVE_FRAME

__all__ = [
    "MAX_COALESCED",
    "RETRY_FRAME",
    "WATCHER_NAME",
    "WRITER_NAME",
    "BodyWriter",
    "RunReader",
    "RunRegistry",
    "Shutdown",
    "StreamSettings",
    "moved_away",
    "stream_response",
    "WatchEnd",
    "watch_client",
    "watch_disconnect",
]

logger: Final = get_logger("procession.server")

MAX_COALESCED: Final = 64
"""At most this many chunks (or log frames) at hand go out in one ``send``."""

WATCHER_NAME: Final = "procession.watch_client"
"""The response watcher task's name, given (not a string trio derives from
the function per task)."""

WRITER_NAME: Final = "procession.write_body"
"""The task that writes a streamed response's body (``stream_response``)."""

LAST_TYPES: Final = frozenset({"finish", "tripwire", "abort"})
"""The chunks a run's stream may end with (an ``error`` is followed by the
chunks that close the run): after one of them the writer asks whether the
end is at hand, to send it with them."""

RETRY_FRAME: Final = b"retry: 1000\n\n"
"""How a response of a run that moved to another process ends: no event and
no ``[DONE]`` (the run is not over), but the time (ms) after which an
``EventSource`` reconnects (with its ``Last-Event-ID``, to resume)."""


@attrs.define(eq=False)
class RunReader:
    """The one task that reads a served run, and the cancel scope that lets a
    cancel cut off a read blocked in a processor hook running inline in that
    task (``stream.cancel()`` alone ends the run when such a hook returns:
    the hook is the reader's, not the run's). One scope per run, none per
    chunk; the scope is cancelled only while a read is in progress, so a
    chunk already read is never lost on its way out."""

    stream: AgentStream
    hold: bool = False
    """Hold each step until its ``step-finish`` (``create_app(step_text=)``)."""
    chunks: AsyncIterator[Chunk] = attrs.field(init=False)
    next_ready: Callable[[], Chunk | None] = attrs.field(init=False)
    end_nowait: Callable[[], bool] = attrs.field(init=False)
    tail: bytes = b""
    """What ``write`` read and left unsent because the run's end was at hand
    with it: the response's last write sends it with the end."""
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    reading: bool = False
    cut: bool = False
    """Whether ``cancel`` cancelled ``scope`` (read per chunk: trio's
    ``cancel_called`` reads the clock for the scope's deadline each time, and
    this scope has none)."""

    def __attrs_post_init__(self) -> None:
        held = HeldSteps(self.stream) if self.hold else None
        chunks = self.chunks = held if held is not None else self.stream
        self.next_ready = chunks.next_ready
        self.end_nowait = chunks.end_nowait

    async def cancel(self) -> None:
        """Cancel the run (``stream.cancel()``) and cut off the read in
        progress, if any. Checkpoints."""
        await self.stream.cancel()
        if self.reading:
            self.cut = True
            self.scope.cancel()

    async def relay(self, put: Callable[[Chunk], Awaitable[object]]) -> None:
        """Hand every chunk of the run to ``put``, in order, each once; after
        a cancel, the run's last chunk is its ``abort``. What ``put`` or the
        run raises goes up. Checkpoints (each read and ``put``)."""
        chunk: Chunk | None = None
        chunks = self.chunks
        with self.scope:
            while True:
                # The read in this frame, not a helper's: every wait for the
                # run resumes each frame of the reading task's chain.
                self.reading = True
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    return
                finally:
                    self.reading = False
                if self.cut:
                    break  # put it outside the scope: never cut off
                await put(chunk)
                chunk = None
        if chunk is not None:
            await put(chunk)
        # A read cut off loses nothing (the run's guarantee): the next one is
        # the abort.
        async for chunk in self.chunks:
            await put(chunk)

    async def write(
        self, writer: BodyWriter, encode: Callable[[Chunk], bytes]
    ) -> Exception | None:
        """Write the run's frames to ``writer`` until it ends: each chunk read
        with the chunks then at hand (``next_ready``, at most
        ``MAX_COALESCED``) in one ``write``; as ``relay`` after a cancel.
        None at the run's end, or the exception the run raised (what
        ``writer`` raises goes up). When the run's end is at hand with the
        last chunks (``end_nowait``), their frames are left in ``tail`` for
        the response's last write. Checkpoints in every read and write."""
        chunks, next_ready = self.chunks, self.next_ready
        body = b""
        with self.scope:
            while True:
                self.reading = True  # as in relay: the read in this frame
                try:
                    chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    return None
                except Exception as exc:
                    return exc
                finally:
                    self.reading = False
                body = encode(chunk)
                taken = 1
                while taken < MAX_COALESCED:
                    more = next_ready()
                    if more is None:
                        # Asked only after a chunk a run ends with: a paced
                        # delta pays no look at the end.
                        if chunk.type in LAST_TYPES and self.end_nowait():
                            self.tail = body
                            return None
                        break
                    body += encode(more)
                    chunk = more
                    taken += 1
                if self.cut:
                    break  # write it outside the scope: never cut off
                if body:
                    await writer.write(body)
                body = b""
        if body:
            await writer.write(body)
        while True:
            try:
                chunk = await self.chunks.__anext__()
            except StopAsyncIteration:
                return None
            except Exception as exc:
                return exc
            body = encode(chunk)
            if body:
                await writer.write(body)

    async def result(self) -> AgentResult:
        """``stream.result()``, cut off by a cancel like ``relay``."""
        with self.scope:
            self.reading = True
            try:
                return await self.stream.result()
            finally:
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

    def release(self, key: str, reader: RunReader) -> None:
        """Unregister ``reader`` from ``key`` if it still holds it: a run's
        continuation may already hold the key while the part of the run that
        paused is still leaving."""
        if self.streams.get(key) is reader:
            del self.streams[key]

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
    """How a streamed response is framed: its headers, the frames of a chunk
    (joined; ``b""`` for a chunk the protocol does not send), the frame for a
    failure of the server itself, and the keepalive period."""

    headers: Headers
    encode: Callable[[Chunk], bytes]
    failure_frame: Callable[[str], bytes]
    keepalive_s: float


class Shutdown:
    """An app's graceful shutdown: ``event`` is set once it began
    (``begin``), and the waits registered with ``cut`` are cut short
    then, so one task can wait for its client and for the shutdown at once
    (``watch_client``)."""

    __slots__ = ("_cut", "event")

    def __init__(self) -> None:
        self.event = trio.Event()
        self._cut: set[trio.CancelScope] = set()

    def begin(self) -> None:
        """Set ``event`` and cancel every scope registered with ``cut``.
        Idempotent."""
        self.event.set()
        for scope in self._cut:
            scope.cancel()
        self._cut.clear()

    def cut(self, scope: trio.CancelScope) -> None:
        """Until ``keep(scope)``, ``scope`` is cancelled when the shutdown
        begins (at once if it already has). Two calls, not a generator's
        context manager: ``watch_client`` registers each of its waits."""
        if self.event.is_set():
            scope.cancel()
        self._cut.add(scope)

    def keep(self, scope: trio.CancelScope) -> None:
        """``scope`` is no longer cancelled by the shutdown (see ``cut``)."""
        self._cut.discard(scope)


async def watch_disconnect(receive: Receive, scope: trio.CancelScope) -> None:
    """Wait for ``http.disconnect`` and cancel ``scope`` then. Other messages
    (a body the client still sends) are read and dropped."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scope.cancel()
            return


class WatchEnd:
    """How a response ends its watcher (``watch_client``) once the body is
    written: ``stop`` cuts short the watcher's wait for the client, and the
    task returns on its own. The response's nursery is cancelled only if the
    watcher is busy (a keepalive on its way, a run handed over at a
    shutdown): a watcher ended by a cancel of the nursery costs a
    ``Cancelled`` through the nursery, an exception group made and taken
    apart, per response."""

    __slots__ = ("busy", "stopped", "wait")

    def __init__(self) -> None:
        self.stopped = False
        self.busy = False
        self.wait: trio.CancelScope | None = None
        """The watcher's wait for the client, while it waits."""

    def stop(self, nursery: trio.CancelScope) -> None:
        """The body is written: end the watcher (see the class). Does not
        checkpoint."""
        self.stopped = True
        if self.wait is not None:
            self.wait.cancel()
        elif self.busy:
            nursery.cancel()


async def watch_client(
    receive: Receive,
    scope: trio.CancelScope,
    writer: BodyWriter,
    shutdown: Shutdown | None = None,
    on_shutdown: Callable[[], Awaitable[object]] | None = None,
    end: WatchEnd | None = None,
) -> None:
    """A streamed response's watch on its client (the request's own task in
    ``stream_response``, a side task of a follower's): cancel ``scope`` at the client's
    ``http.disconnect`` (and return; a body it still sends is read and
    dropped); while nothing was sent for the writer's keepalive period, send
    a keepalive comment; when ``shutdown`` begins, stop the keepalives and
    await ``on_shutdown()`` once, then watch only for the disconnect. With
    ``end``, it returns once ``end.stop()`` was called (a disconnect then
    cancels nothing: the response is complete).

    One cancel scope per wait for the client (a message, the keepalive's
    time, the shutdown or the end, whichever is first), none per chunk.
    Checkpoints."""
    watching = shutdown is not None and on_shutdown is not None
    keepalives = True
    while end is None or not end.stopped:
        deadline = writer.keepalive_at() if keepalives else math.inf
        message: Message | None = None
        with trio.CancelScope(deadline=deadline) as wait:
            if end is not None:
                end.wait = wait
            if watching:
                assert shutdown is not None
                shutdown.cut(wait)
                try:
                    message = await receive()
                finally:
                    shutdown.keep(wait)
            else:
                message = await receive()
        if end is not None:
            end.wait = None
        if message is not None:
            if message["type"] == "http.disconnect":
                # Once the body is complete (hypercorn says disconnect as
                # soon as it is), there is nothing left to cut short; until
                # its last bytes are sent, a disconnect cuts their send.
                if end is None or not (end.stopped or writer.ended):
                    scope.cancel()
                return
            continue
        if end is not None:
            if end.stopped:
                return
            end.busy = True
        try:
            if watching and shutdown is not None and shutdown.event.is_set():
                watching = keepalives = False
                assert on_shutdown is not None
                await on_shutdown()
            else:
                await writer.keep_alive_due()
        finally:
            if end is not None:
                end.busy = False


class BodyWriter:
    """The body of one started response, written by the response's writer
    (``write``) and, while that task waits for the run, by the response's
    watcher (``keep_alive_due``, from ``watch_client``): the two never send
    at once.

    ``write`` costs one ASGI ``send`` and, with keepalives on, one clock
    read; it checkpoints in ``send`` (waiting while the client does not
    read)."""

    __slots__ = ("_free", "_keepalive", "_last", "_send", "_sending", "ended")

    def __init__(self, send: Send, keepalive_s: float) -> None:
        self.ended = False
        """Whether ``end`` sent the body's last bytes: the body is complete
        (a disconnect from here on cuts nothing short)."""
        self._send = send
        self._keepalive = keepalive_s if keepalive_s > 0 else math.inf
        self._last = trio.current_time() if keepalive_s > 0 else 0.0
        self._sending = False
        self._free: trio.Event | None = None

    async def write(self, body: bytes) -> None:
        """Send ``body`` (more to come), after a keepalive on its way.
        Checkpoints; cancelled, the body may be cut."""
        if self._sending:  # a keepalive is on its way: after it
            await self._wait_free()
        self._sending = True
        try:
            await self._send(
                {"type": "http.response.body", "body": body, "more_body": True}
            )
        finally:
            self._sending = False
            if self._keepalive != math.inf:
                self._last = trio.current_time()
            if self._free is not None:
                self._free.set()
                self._free = None

    async def end(self, body: bytes = b"") -> None:
        """Send the body's last bytes; nothing may be written after.
        Checkpoints."""
        if self._sending:
            await self._wait_free()
        self._sending = True
        await self._send(
            {"type": "http.response.body", "body": body, "more_body": False}
        )
        self.ended = True

    async def _wait_free(self) -> None:
        while self._sending:
            if self._free is None:
                self._free = trio.Event()
            await self._free.wait()

    def keepalive_at(self) -> float:
        """When a keepalive is due if nothing is sent before (trio's clock;
        ``inf`` with keepalives off)."""
        return self._last + self._keepalive

    async def keep_alive_due(self) -> None:
        """Send a keepalive comment if one is due now. A frame on its way
        counts as traffic: then the next is due a period from now.
        Checkpoints (waiting while the client does not read)."""
        now = trio.current_time()
        if self._sending:
            self._last = now
        elif now >= self._last + self._keepalive:
            await self.write(KEEPALIVE_FRAME)
        else:  # a frame went out meanwhile: due a period after it
            await trio.lowlevel.checkpoint()


async def stream_response(
    send: Send,
    receive: Receive,
    run: AbstractAsyncContextManager[AgentStream],
    settings: StreamSettings,
    *,
    registry: RunRegistry,
    key: str,
    shutdown: Shutdown,
    hold: bool = False,
) -> None:
    """Stream the run ``run`` (an ``agent.stream(...)`` not yet entered) as
    a 200 SSE response framed by ``settings``, registered in ``registry``
    under ``key`` while it runs; returns when the response is complete or
    the client left. A run that ends (any outcome) is followed by
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
            writer = BodyWriter(send, settings.keepalive_s)
            watched = WatchEnd()
            # The body is written by a task of its own, and this task (the
            # request's, deep in the app's dispatch) watches the client: a
            # paced chunk's every wait wakes the writer's short chain, not
            # each frame of the request's.
            nursery.start_soon(
                _write_body,
                reader,
                writer,
                settings,
                watched,
                nursery.cancel_scope,
                registry,
                key,
                name=WRITER_NAME,
            )
            await watch_client(
                receive,
                nursery.cancel_scope,
                writer,
                shutdown,
                functools.partial(_stop_for_shutdown, reader),
                watched,
            )
        finally:
            # Released when the body ends or the client leaves (here, or in
            # the writer: whichever is first), not once the run has closed:
            # its run id is free again and the cancel route finds nothing.
            registry.release(key, reader)


async def _write_body(
    reader: RunReader,
    writer: BodyWriter,
    settings: StreamSettings,
    watched: WatchEnd,
    response: trio.CancelScope,
    registry: RunRegistry,
    key: str,
) -> None:
    """The response's body: the run's frames, then ``[DONE]`` (or the end a
    failure or a moved run makes); then the watcher of the ``response`` is
    ended (``watched``). The run leaves ``registry`` once the body ended,
    however it did. Checkpoints in every read and write."""
    try:
        failure = await reader.write(writer, settings.encode)
        clean = failure is None or await write_failure(
            reader, writer, settings, failure
        )
        tail = reader.tail
        if clean and await moved_away(reader.stream):
            await writer.end(tail + RETRY_FRAME)
        else:
            await writer.end(tail + DONE_FRAME if clean else tail)
        watched.stop(response)
    finally:
        registry.release(key, reader)


async def _stop_for_shutdown(reader: RunReader) -> None:
    """At the graceful shutdown: hand a durable run over, cancel any other."""
    stream = reader.stream
    if stream.durable and await stream.hand_over():
        return
    await reader.cancel()


async def moved_away(stream: AgentStream) -> bool:
    """Whether the ended ``stream`` is of a durable run that went on in
    another process (it lost its lease, or was handed over): its response
    ends with no ``[DONE]``. Checkpoints."""
    return stream.durable and (await stream.result()).finish_reason == "moved"


async def write_failure(
    reader: RunReader,
    writer: BodyWriter,
    settings: StreamSettings,
    failure: Exception,
) -> bool:
    """After ``reader.write`` returned the run's ``failure``: log it with its
    traceback and write its failure frame. Returns False (the run did not
    end cleanly). Checkpoints (the ``send``)."""
    logger.error(
        "run %s failed while streaming",
        reader.stream.run_id,
        exc_info=(type(failure), failure, failure.__traceback__),
    )
    await writer.write(settings.failure_frame(f"{type(failure).__name__}: {failure}"))
    return False
