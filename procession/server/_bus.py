"""The run bus: where a resumable run's frames go, so a client that left can
come back and read what it missed, then follow the live run.

``RunBus`` is the interface; ``InProcessRunBus`` keeps each run's log in
this process's memory, ``RedisRunBus`` (``_bus_redis``) in Redis Streams
shared by several server processes. The app uses the async methods
(``open_run``, ``find``, ``cancel``, ``running``): across processes a lookup is
a network call.

A run's log is a sequence of SSE frames (already framed for the route's
protocol), numbered; the number is the frame's SSE ``id:``. The log
keeps the newest ``buffer_frames`` frames of each run (older ones are
dropped: memory per run is bounded by that many frames). An *attached*
subscriber (a client reading now) is never dropped behind: the publisher
waits for the slowest attached subscriber before it drops a frame that one
has not read (backpressure). A subscriber that attaches asking for frames
already dropped gets ``ReplayGap`` (the route writes a typed error frame),
never a silent gap.

A key's logs, one after another. A run that pauses for a person ends its log
(its followers read the pause, then the end); the continuation that an answer
starts, on any replica, opens a *new* log under the same key once the paused
one is closed (``open_run`` refuses a key only while its log is open). The
new log's frames are numbered on from the previous log's (an id is never
reused under a key), so a ``Last-Event-ID`` says which log a client read:

* attaching with no id reads the key's newest log from its first frame;
* attaching after the last frame of an earlier log (a client that read the
  pause through to its end) reads the next log from its first frame: no gap,
  no repeat;
* attaching after any other frame of an earlier log reads the rest of that
  log, then its end (``RedisRunBus``, which keeps ended logs), or gets
  ``ReplayGap`` (``InProcessRunBus``, which forgets a log when its run ends):
  never a frame of a later log in place of the ones missed.

A response follows one log: a follower of a paused run reconnects (with its
last id) to follow the continuation.

A durable run (``create_app(durable=True)``) that moves to another process
keeps its key: the process that takes it over opens the key's next log with
``open_run(..., take=True)``, which ends the log left open (its process died,
or handed the run over: ``RunPublisher.hand_over``) with a *moved* end. A
follower reads on past a moved end into the taker's log (``RedisRunBus``: on
any replica); a follower in the process that handed the run over (the log in
its memory goes with it) ends with ``moved`` set, and reconnects elsewhere.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, ClassVar, Final, Protocol, runtime_checkable

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

    @property
    def moved(self) -> bool:
        """After ``trio.EndOfChannel``: the log ended because its durable run
        went on in another process, which this subscription cannot follow
        (the client reconnects, to another replica)."""
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

    async def hand_over(self) -> None:
        """The durable run goes on in another process (``AgentStream
        .hand_over``): this process publishes no more and lets the run's
        key go at once; the log is left for the taker to end ``moved`` and
        follow (the module docstring). Checkpoints."""
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
        self,
        key: str,
        *,
        run_id: str,
        lost_frames: Sequence[bytes],
        take: bool = False,
    ) -> RunPublisher:
        """A new log under ``key`` for run ``run_id``, held by this process,
        after the key's previous log (the module docstring); ``KeyError``
        while the key's log is open. ``lost_frames`` are written in
        the run's place should this process die with it unfinished; none
        for a durable run, which another process goes on with. ``take``: a
        durable run taken over (its store decided who holds it): a log still
        open under the key, a dead or departed process's, ends ``moved``
        and this one follows it. Checkpoints; cancelled, no log was opened
        or the lease expires."""
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
        """Forget the key's log if its publisher closed (a newer log under
        the key, which a continuation may already have opened, is kept)."""
        ...


@attrs.define(eq=False)
class _Subscription:
    log: _Log
    cursor: int  # the number of the next frame wanted

    @property
    def moved(self) -> bool:
        return self.log.moved

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
    start: int = 1
    """The number of the log's first frame: one past the last of its key's
    previous log."""
    batch_frames: ClassVar[int] = 1  # in memory, one by one costs nothing
    frames: deque[bytes] = attrs.field(factory=deque)
    first: int = attrs.field(init=False)
    """The number of the oldest frame still held."""
    next: int = attrs.field(init=False)
    closed: bool = False
    moved: bool = False
    """Closed because its durable run went on in another process."""
    subscribers: list[_Subscription] = attrs.field(factory=list)
    _event: trio.Event | None = None

    def __attrs_post_init__(self) -> None:
        self.first = self.next = self.start

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

    async def hand_over(self) -> None:
        """Closed ``moved``: this process's followers end and reconnect
        elsewhere (a log in memory goes with its process). One checkpoint."""
        await trio.lowlevel.checkpoint()
        self.moved = True
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
        # No id: from this log's first frame. An id of an earlier log of the
        # key: its last frame is right before ``start`` (so, from the start);
        # any other is behind the buffer (``ReplayGap``).
        subscription = _Subscription(self, after + 1 if after else self.start)
        self.subscribers.append(subscription)
        self.changed()
        try:
            yield subscription
        finally:
            self.subscribers.remove(subscription)
            self.changed()


_NUMBERED_KEYS: Final = 10_000
"""How many keys whose log ended ``InProcessRunBus`` remembers the next
frame number of (about 100 bytes each)."""


@attrs.define
class InProcessRunBus:
    """Run logs in this process's memory: resume works for clients that come
    back to the same process. Each log keeps its newest ``buffer_frames``
    frames (so at most that many frames per live run are held); a log is
    forgotten when its run ends, its numbering is not (the module docstring:
    a key's logs): the next frame number of the last ``_NUMBERED_KEYS`` keys
    whose log ended, and for the keys forgotten a floor above every number
    they used, where a new key's log starts."""

    buffer_frames: int = 1024
    _logs: dict[str, _Log] = attrs.field(factory=dict, init=False)
    _ended: dict[str, int] = attrs.field(factory=dict, init=False)
    """Key -> the number after its last log's last frame (oldest first)."""
    _floor: int = attrs.field(default=1, init=False)

    def open(self, key: str, *, take: bool = False) -> _Log:
        """A new log under ``key``, numbered on from the key's previous log;
        ``KeyError`` while the key's log is open (unless ``take``: it ends
        ``moved`` first)."""
        previous = self._logs.get(key)
        if previous is not None and not previous.closed:
            if not take:
                raise KeyError(key)
            previous.moved = True
            previous.close()
        if previous is not None:
            start = previous.next
        else:
            start = self._ended.pop(key, self._floor)
        log = self._logs[key] = _Log(self.buffer_frames, start)
        return log

    def lookup(self, key: str) -> _Log | None:
        return self._logs.get(key)

    def remove(self, key: str) -> None:
        """Forget the key's log if it is closed (a newer one under the key is
        kept), remembering where the key's numbering goes on."""
        log = self._logs.get(key)
        if log is None or not log.closed:
            return
        del self._logs[key]
        self._ended.pop(key, None)
        self._ended[key] = log.next
        if len(self._ended) > _NUMBERED_KEYS:
            oldest = next(iter(self._ended))
            self._floor = max(self._floor, self._ended.pop(oldest))

    # --- the async RunBus face (the app's) --------------------------------------

    @asynccontextmanager
    async def running(self, cancel_here: CancelHere) -> AsyncIterator[None]:
        """Nothing to run: the process's own registry cancels its runs."""
        yield

    async def open_run(
        self,
        key: str,
        *,
        run_id: str,
        lost_frames: Sequence[bytes],
        take: bool = False,
    ) -> _Log:
        """``open(key, take=take)``: a process that dies takes its logs with
        it, so the lost frames have nobody to read them. One checkpoint
        first."""
        await trio.lowlevel.checkpoint()
        return self.open(key, take=take)

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
