"""The run bus: where a resumable run's frames go, so a client that left can
come back and read what it missed, then follow the live run.

``RunBus`` is the interface; ``InProcessRunBus`` keeps each run's log in
this process's memory, ``RedisRunBus`` (``_bus_redis``) in Redis Streams
shared by several server processes. The app uses the async methods
(``open_run``, ``find``, ``cancel``, ``running``): across processes a lookup is
a network call.

A run's log is a sequence of SSE frames (already framed for the route's
protocol), numbered from 1; the number is the frame's SSE ``id:``. The log
keeps the newest ``buffer_frames`` frames of each run (older ones are
dropped: memory per run is bounded by that many frames). An *attached*
subscriber (a client reading now) is never dropped behind: the publisher
waits for the slowest attached subscriber before it drops a frame that one
has not read (backpressure). A subscriber that attaches asking for frames
already dropped gets ``ReplayGap`` (the route writes a typed error frame),
never a silent gap.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs
import trio

__all__ = [
    "InProcessRunBus",
    "ReplayGap",
    "RunBus",
    "RunBusError",
    "RunPublisher",
    "RunSubscription",
]


class ReplayGap(Exception):
    """The frames a resuming client asked for are no longer in the buffer."""

    def __init__(self, wanted: int | str, oldest: int | str) -> None:
        super().__init__(
            f"cannot resume from frame {wanted}: the replay buffer starts at "
            f"frame {oldest}; frames in between are gone"
        )
        self.wanted = wanted
        self.oldest = oldest


class RunBusError(Exception):
    """The run bus itself failed (Redis unreachable past the outage budget,
    the run's lease lost): the route ends the stream with a typed error frame
    named ``RunBusError``."""


class RunSubscription(Protocol):
    """One client reading one run's log."""

    async def receive(self) -> tuple[int | str, bytes]:
        """The next frame and its id (the SSE ``id:``). Raises
        ``trio.EndOfChannel`` once the run ended and every frame was read,
        ``ReplayGap`` when the next frame was dropped, ``RunBusError`` when
        the bus failed. Checkpoints (waits for the run)."""
        ...

    def receive_ready(self) -> tuple[int | str, bytes] | None:
        """The next frame and its id if it is at hand now (no wait, no
        round trip), else ``None``: then ``receive`` says what comes next
        (a frame to wait for, the end, a gap, a failure). Never checkpoints."""
        ...


class RunLog(Protocol):
    """A run's log as a resumer finds it (possibly on another process)."""

    def attach(self, after: Any = None) -> AbstractAsyncContextManager[RunSubscription]:
        """A subscription to the frames after id ``after`` (what the bus's
        ``parse_event_id`` returned; None: from the first frame), attached
        for the block."""
        ...


class RunPublisher(Protocol):
    """The run's side of its log."""

    async def publish(self, frame: bytes) -> int | str:
        """Append ``frame``; its id. The in-process bus waits while an
        attached subscriber would fall behind the buffer. ``RunBusError``
        when the bus failed. Checkpoints."""
        ...

    @property
    def batch_frames(self) -> int:
        """How many frames ``publish_many`` takes at once; 1 when batching
        gains nothing (the run's frames are then published one by one)."""
        ...

    async def publish_many(self, frames: Sequence[bytes]) -> Sequence[int | str]:
        """Append ``frames`` (at most ``batch_frames``) in order, as
        ``publish`` would one by one; their ids. ``RunBusError`` when the bus
        failed (some of them may have been appended). Checkpoints."""
        ...

    async def aclose(self) -> None:
        """The run ended: subscribers read what is left, then the end.
        Checkpoints."""
        ...

    async def wait_unattended(self, grace_s: float) -> None:
        """Return once no subscriber has been attached for ``grace_s``
        seconds (trio's clock). Checkpoints."""
        ...

    def attach(self, after: Any = None) -> AbstractAsyncContextManager[RunSubscription]:
        """As ``RunLog.attach``."""
        ...


CancelHere = Callable[[str], Awaitable[bool]]
"""Cancels the run under this bus key if this process executes it; True if
so."""


@runtime_checkable
class RunBus(Protocol):
    """Run logs by key: ``run:<owner>:<runId>``, ``chat:<owner>:<chatId>``
    (the owner is the resource that started the run, ``*`` for none: the
    owner travels with the run, and two resources' ids never meet)."""

    def running(self, cancel_here: CancelHere) -> AbstractAsyncContextManager[None]:
        """The bus's connections and background work (leases, remote
        cancels) for the app's lifetime (the ASGI lifespan)."""
        ...

    async def open_run(
        self, key: str, *, run_id: str, lost_frames: Sequence[bytes]
    ) -> RunPublisher:
        """A new log under ``key`` for run ``run_id``, held by this process;
        ``KeyError`` if a live run has the key. ``lost_frames`` are written in
        the run's place should this process die with it unfinished.
        Checkpoints; cancelled, no log was opened or the lease expires."""
        ...

    async def find(self, key: str) -> RunLog | None:
        """The run's log under ``key`` (live, or ended but still kept), or
        None. Checkpoints; nothing to undo when cancelled."""
        ...

    def parse_event_id(self, text: str | None) -> Any:
        """A ``Last-Event-ID`` header's value as ``attach`` takes it (None:
        no header); ``ValueError`` if it cannot be one of this bus's ids."""
        ...

    async def cancel(self, key: str) -> bool:
        """Ask whichever process executes the run under ``key`` to cancel it
        (its ``cancel_here`` gets ``key``); False if no live run has
        that key on the bus. Checkpoints; cancelled, the request may or may
        not have gone out."""
        ...

    def remove(self, key: str) -> None:
        """Forget the log (its run ended and its publisher closed)."""
        ...


@attrs.define(eq=False)
class _Subscription:
    log: _Log
    cursor: int  # the number of the next frame wanted

    async def receive(self) -> tuple[int, bytes]:
        # The checkpoint comes first: once a frame is taken nothing may be
        # cancelled, or the frame would be lost.
        await trio.lowlevel.checkpoint()
        log = self.log
        while True:
            if self.cursor < log.first:
                raise ReplayGap(self.cursor, log.first)
            if self.cursor < log.next:
                frame = log.frames[self.cursor - log.first]
                seq = self.cursor
                self.cursor += 1
                log.changed()
                return seq, frame
            if log.closed:
                raise trio.EndOfChannel
            await log.wait_change()

    def receive_ready(self) -> tuple[int, bytes] | None:
        log = self.log
        if log.first <= self.cursor < log.next:
            frame = log.frames[self.cursor - log.first]
            seq = self.cursor
            self.cursor += 1
            log.changed()
            return seq, frame
        return None


@attrs.define(eq=False)
class _Log:
    """One run's frames in memory (``InProcessRunBus``)."""

    capacity: int
    batch_frames: ClassVar[int] = 1  # in memory, one by one costs nothing
    frames: deque[bytes] = attrs.field(factory=deque)
    first: int = 1
    next: int = 1
    closed: bool = False
    subscribers: list[_Subscription] = attrs.field(factory=list)
    _event: trio.Event | None = None

    @property
    def attached(self) -> int:
        return len(self.subscribers)

    def changed(self) -> None:
        if self._event is not None:
            self._event.set()
            self._event = None

    async def wait_change(self) -> None:
        if self._event is None:
            self._event = trio.Event()
        await self._event.wait()

    async def publish(self, frame: bytes) -> int:
        await trio.lowlevel.checkpoint()
        # Never drop a frame an attached subscriber has not read yet.
        # (One already behind the buffer gets ReplayGap: not waited for.)
        while len(self.frames) >= self.capacity and any(
            s.cursor == self.first for s in self.subscribers
        ):
            await self.wait_change()
        if len(self.frames) >= self.capacity:
            self.frames.popleft()
            self.first += 1
        self.frames.append(frame)
        seq = self.next
        self.next += 1
        self.changed()
        return seq

    async def publish_many(self, frames: Sequence[bytes]) -> list[int]:
        """``publish`` each frame, in order."""
        return [await self.publish(frame) for frame in frames]

    def close(self) -> None:
        self.closed = True
        self.changed()

    async def aclose(self) -> None:
        """``close()`` after one checkpoint."""
        await trio.lowlevel.checkpoint()
        self.close()

    async def wait_unattended(self, grace_s: float) -> None:
        while True:
            while self.subscribers:
                await self.wait_change()
            with trio.move_on_after(grace_s):
                while not self.subscribers:
                    await self.wait_change()
            if not self.subscribers:
                return

    @asynccontextmanager
    async def attach(self, after: int | None = 0) -> AsyncIterator[_Subscription]:
        subscription = _Subscription(self, (after or 0) + 1)
        self.subscribers.append(subscription)
        self.changed()
        try:
            yield subscription
        finally:
            self.subscribers.remove(subscription)
            self.changed()


@attrs.define
class InProcessRunBus:
    """Run logs in this process's memory: resume works for clients that come
    back to the same process. Each log keeps its newest ``buffer_frames``
    frames (so at most that many frames per live run are held)."""

    buffer_frames: int = 1024
    _logs: dict[str, _Log] = attrs.field(factory=dict, init=False)

    def open(self, key: str) -> _Log:
        if key in self._logs:
            raise KeyError(key)
        log = _Log(self.buffer_frames)
        self._logs[key] = log
        return log

    def lookup(self, key: str) -> _Log | None:
        return self._logs.get(key)

    def remove(self, key: str) -> None:
        self._logs.pop(key, None)

    # --- the async RunBus face (the app's) --------------------------------------

    @asynccontextmanager
    async def running(self, cancel_here: CancelHere) -> AsyncIterator[None]:
        """Nothing to run: the process's own registry cancels its runs."""
        yield

    async def open_run(
        self, key: str, *, run_id: str, lost_frames: Sequence[bytes]
    ) -> _Log:
        """``open(key)``: a process that dies takes its logs with it, so the
        lost frames have nobody to read them. One checkpoint first."""
        await trio.lowlevel.checkpoint()
        return self.open(key)

    async def find(self, key: str) -> _Log | None:
        """``lookup(key)``, after one checkpoint."""
        await trio.lowlevel.checkpoint()
        return self.lookup(key)

    def parse_event_id(self, text: str | None) -> int:
        """The frame number (0 for no header)."""
        if text is None or not text.strip():
            return 0
        text = text.strip()
        if not text.isdigit():
            raise ValueError(f"Last-Event-ID must be a frame number, got {text[:40]!r}")
        return int(text)

    async def cancel(self, key: str) -> bool:
        """No other process to ask: False, after one checkpoint."""
        await trio.lowlevel.checkpoint()
        return False
