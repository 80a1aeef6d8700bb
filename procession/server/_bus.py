"""The run bus: where a resumable run's frames go, so a client that left can
come back and read what it missed, then follow the live run.

``RunBus`` is the interface (a Redis bus for several processes can implement
it); ``InProcessRunBus`` keeps each run's log in this process's memory.

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
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol, runtime_checkable

import attrs
import trio

__all__ = [
    "InProcessRunBus",
    "ReplayGap",
    "RunBus",
    "RunPublisher",
    "RunSubscription",
]


class ReplayGap(Exception):
    """The frames a resuming client asked for are no longer in the buffer."""

    def __init__(self, wanted: int, oldest: int) -> None:
        super().__init__(
            f"cannot resume from frame {wanted}: the replay buffer starts at "
            f"frame {oldest}; frames in between are gone"
        )
        self.wanted = wanted
        self.oldest = oldest


class RunSubscription(Protocol):
    """One client reading one run's log."""

    async def receive(self) -> tuple[int, bytes]:
        """The next frame and its number. Raises ``trio.EndOfChannel`` once
        the run ended and every frame was read, ``ReplayGap`` when the next
        frame was dropped. Checkpoints (waits for the run)."""
        ...


class RunPublisher(Protocol):
    """The run's side of its log."""

    @property
    def attached(self) -> int:
        """How many subscribers read the log now."""
        ...

    async def publish(self, frame: bytes) -> int:
        """Append ``frame``; its number. Waits while an attached subscriber
        would fall behind the buffer. Checkpoints."""
        ...

    def close(self) -> None:
        """The run ended: subscribers read what is left, then the end."""
        ...

    async def wait_unattended(self, grace_s: float) -> None:
        """Return once no subscriber has been attached for ``grace_s``
        seconds (trio's clock). Checkpoints."""
        ...

    def attach(self, after: int = 0) -> AbstractAsyncContextManager[RunSubscription]:
        """A subscription to the frames after number ``after``, attached for
        the block."""
        ...


@runtime_checkable
class RunBus(Protocol):
    """Run logs by key (``run:<runId>``, ``chat:<chatId>``)."""

    def open(self, key: str) -> RunPublisher:
        """A new log under ``key``; ``KeyError`` if a live run has the key."""
        ...

    def lookup(self, key: str) -> RunPublisher | None:
        """The live run's log under ``key``, or None."""
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


@attrs.define(eq=False)
class _Log:
    """One run's frames in memory (``InProcessRunBus``)."""

    capacity: int
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

    def close(self) -> None:
        self.closed = True
        self.changed()

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
    async def attach(self, after: int = 0) -> AsyncIterator[_Subscription]:
        subscription = _Subscription(self, after + 1)
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
