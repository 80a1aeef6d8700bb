"""``RedisRunBus``: run logs in Redis Streams, shared by several server
processes (replicas) behind one load balancer.

Per run key ``K`` (``run:<owner>:<runId>``, ``chat:<owner>:<chatId>``: the
resource that started the run is part of its key), under ``prefix``:

* ``K:frames``: a stream, one entry per SSE frame (fields ``n``, the frame's
  number from 1, and ``f``, the frame), then one ``end`` entry. ``XADD`` with
  ``MAXLEN ~ buffer_frames``; after the run ends the stream expires in
  ``keep_s``. The SSE ``id:`` of a frame is its entry id.
* ``K:lease``: the id of the replica executing the run, with a ``lease_s``
  expiry renewed every ``lease_s / 3``. Taken with ``SET NX`` (Lua), so no
  run key runs twice at once. Every publish checks it (Lua): a replica that
  lost its lease stops writing (``RunBusError``).
* ``K:lost``: the frames to write if the replica dies (``error``,
  ``step-finish``, ``finish``, ``[DONE]``). A follower that waits and finds
  the lease gone appends them and the end (Lua, once: the list is deleted).
* ``K:attached``: how many clients read the run, per replica (the grace
  before a run nobody follows is cancelled). Only the clients of live
  replicas count: each replica's heartbeat (``<prefix>replicas``, renewed with
  its leases, expiring in ``lease_s``) says it is alive, so the clients of a
  replica that died stop counting within ``lease_s``.
* ``K:start``: where the key's newest log begins (``"<entry id> <n>"``: the
  end entry of the log before it). A key's logs follow one another in one
  stream (``_bus``'s docstring: a key's logs): a new run under a key whose
  ended log is still kept (a continuation after a pause; a chat's next turn)
  appends its frames after that log's end, numbered on, and ``K:start`` moves
  to that end. A reader with no ``Last-Event-ID`` starts there; a reader whose
  first entry is an end (it had read that log to its last frame) goes on into
  the next log, one that ends after frames it read stops there.
* ``<prefix>cancel``: a pub/sub channel; a cancel on any replica publishes the
  run key, the replica that executes it cancels it (latency: one pub/sub hop).

Frames numbers (``n``) let a reader see a gap exactly: a resumer whose
``Last-Event-ID`` entry was trimmed, or a reader the trimming overtook, gets
``ReplayGap``, never a silent gap. Redis unreachable: a publish or read
retries for ``outage_s``, then ``RunBusError``. Needs the ``redis`` extra
(``coredis``, which runs on trio).
"""

from __future__ import annotations

import functools
import math
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, TypeVar

import attrs
import trio

from .._errors import ConfigurationError
from .._secrets import get_logger, redact, redact_url
from . import _redis_scripts as lua
from ._bus import CancelHere, ReplayGap, RunBusError

__all__ = ["RedisRunBus"]

logger: Final = get_logger("procession.server")

_T = TypeVar("_T")
_ENTRY_ID: Final = re.compile(r"\d+-\d+")


def _coredis() -> Any:
    try:
        import coredis
    except ImportError as exc:  # pragma: no cover - the extra is in dev
        raise ConfigurationError(
            f'RedisRunBus needs the redis extra: pip install "procession[redis]" '
            f"({exc})"
        ) from exc
    return coredis


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found += _leaves(exc)
        else:
            found.append(exc)
    return found


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@attrs.define(eq=False)
class _Keys:
    lease: str
    frames: str
    lost: str
    attached: str
    start: str

    @classmethod
    def of(cls, prefix: str, key: str) -> _Keys:
        base = f"{prefix}{key}:"
        return cls(
            base + "lease",
            base + "frames",
            base + "lost",
            base + "attached",
            base + "start",
        )

    @property
    def run(self) -> list[str]:
        """The keys of the run's scripts (open, close, reap), in order."""
        return [self.lease, self.frames, self.lost, self.attached, self.start]


_END: Final = object()
"""What ``_Subscription._take`` returns for a log's end entry."""
_MOVED: Final = object()
"""... and for a moved end (a durable run's log, its run taken over)."""


@attrs.define(eq=False)
class _Subscription:
    bus: RedisRunBus
    keys: _Keys
    cursor: str
    expected: int  # the number of the next frame wanted
    pending: list[Any] = attrs.field(factory=list)
    ended: bool = False
    gap: ReplayGap | None = None  # found on attach
    delivered: bool = False
    """Whether a frame was read: the end after it ends the subscription."""
    moved: bool = False
    """Never: a follower here reads on past a moved end, into the taker's
    log."""

    async def receive(self) -> tuple[str, bytes]:
        await trio.lowlevel.checkpoint()
        if self.gap is not None:
            raise self.gap
        while True:
            if self.pending:
                taken = self._take(self.pending.pop(0))
                if taken is _MOVED:
                    # A durable run's log, ended by the process that took
                    # the run over: its log follows (its first frame the
                    # ``step-retry`` that withdraws what was cut off).
                    continue
                if taken is _END:
                    # An end before any frame: the client had read that log
                    # to its last frame; the key's next log, if one follows.
                    if self.delivered or not await self._next_log():
                        self.pending.clear()
                        self.ended = True
                        raise trio.EndOfChannel
                elif taken is not None:
                    self.delivered = True
                    frame: tuple[str, bytes] = taken
                    return frame
                continue
            if self.ended:
                raise trio.EndOfChannel
            await self._fill()

    def receive_ready(self) -> tuple[str, bytes] | None:
        while self.gap is None and self.pending:
            fields = {_text(k): v for k, v in self.pending[0].field_values.items()}
            if "end" in fields or int(fields["n"]) > self.expected:
                return None  # the end or a gap: receive() says so
            taken = self._take(self.pending.pop(0))
            if taken is not None and taken is not _END:
                self.delivered = True
                frame: tuple[str, bytes] = taken
                return frame
        return None

    def _take(self, entry: Any) -> Any:
        """The entry's ``(id, frame)``; ``None`` for a repeat (skipped);
        ``_END`` for an end entry. ``ReplayGap`` for a gap before it."""
        fields = {_text(k): v for k, v in entry.field_values.items()}
        n = int(fields["n"])
        if n < self.expected:
            # A publish retried after Redis dropped the connection may have
            # landed twice: the number says this one was read already.
            self.cursor = _text(entry.identifier)
            return None
        if n != self.expected:
            self.pending.clear()
            raise ReplayGap(self.expected, n)
        self.expected += 1
        self.cursor = _text(entry.identifier)
        if "moved" in fields:
            return _MOVED
        if "end" in fields:
            return _END
        return self.cursor, bytes(fields["f"])

    async def _next_log(self) -> bool:
        """Whether the key's next log follows the end just read (at
        ``cursor``): entries after it (taken into ``pending``), or an open
        log that begins there. Checkpoints."""
        if self.pending:
            await trio.lowlevel.checkpoint()
            return True
        bus, keys = self.bus, self.keys
        start, lease = await bus.call(lambda c: c.mget([keys.start, keys.lease]))
        if (
            lease is not None
            and start is not None
            and _text(start).split(" ")[0] == self.cursor
        ):
            return True  # an open log begins at this end: its frames are to come
        result = await bus.call(lambda c: c.xread({keys.frames: self.cursor}, count=64))
        entries = next(iter(result.values()), ()) if result else ()
        self.pending.extend(entries)
        return bool(entries)

    async def _fill(self) -> None:
        bus = self.bus
        result = await bus.call(
            lambda client: client.xread(
                {self.keys.frames: self.cursor}, count=64, block=bus.poll_ms
            )
        )
        entries = next(iter(result.values()), ()) if result else ()
        if entries:
            self.pending.extend(entries)
            return
        # Nothing new within a poll: the run's replica may be gone.
        await bus.reap(self.keys)


@attrs.define(eq=False)
class _Publisher:
    bus: RedisRunBus
    key: str
    keys: _Keys
    run_id: str
    lost_frames: tuple[bytes, ...]
    next: int = 1
    lost: bool = False
    closed: bool = False

    @property
    def batch_frames(self) -> int:
        # At most a quarter of the buffer: a batch landing at once must not
        # trim away what a follower keeping up has not read yet.
        bus = self.bus
        return max(1, min(bus.batch_frames, bus.buffer_frames // 4))

    async def publish(self, frame: bytes) -> str:
        (entry,) = await self.publish_many((frame,))
        return entry

    async def publish_many(self, frames: Sequence[bytes]) -> list[str]:
        """Appends the frames in one round trip (one Lua call that checks the
        lease once)."""
        if self.lost:
            raise RunBusError(f"run {self.run_id}: this replica lost its lease")
        if not frames:
            await trio.lowlevel.checkpoint()
            return []
        bus = self.bus
        n = self.next
        entries = await self._append(n, frames)
        if entries is None and await bus.renew(self):
            # Redis lost the lease (a restart without persistence) and the
            # run was not reaped meanwhile: the lease is ours again.
            entries = await self._append(n, frames)
        if entries is None:
            self.lost = True
            raise RunBusError(f"run {self.run_id}: this replica lost its lease")
        self.next += len(frames)
        return [_text(entry) for entry in entries]

    async def _append(self, n: int, frames: Sequence[bytes]) -> Any:
        bus = self.bus
        return await bus.call(
            lambda client: bus.scripts["publish"](
                keys=[self.keys.lease, self.keys.frames],
                args=[bus.replica, n, bus.buffer_frames, *frames],
            )
        )

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        bus = self.bus
        if self.lost:
            await trio.lowlevel.checkpoint()
            return
        await bus.call(
            lambda client: bus.scripts["close"](
                keys=self.keys.run, args=[bus.replica, self.next, bus.keep_s]
            )
        )

    async def hand_over(self) -> None:
        """Lets the lease go at once and leaves the log open (no end): the
        replica that takes the run over ends it ``moved`` and goes on."""
        if self.closed:
            await trio.lowlevel.checkpoint()
            return
        self.closed = True
        bus = self.bus
        if self.lost:
            await trio.lowlevel.checkpoint()
            return
        await bus.call(
            lambda client: bus.scripts["hand_over"](
                keys=[self.keys.lease, self.keys.lost], args=[bus.replica]
            )
        )

    async def wait_unattended(self, grace_s: float) -> None:
        """Polls the attached count (the clients of every live replica)
        every ``poll_ms``."""
        bus = self.bus
        alone_since: float | None = None
        while True:
            raw = await bus.call(
                lambda client: bus.scripts["attached"](
                    keys=[self.keys.attached, bus.replicas_key], args=[]
                )
            )
            now = trio.current_time()
            if int(raw) > 0:
                alone_since = None
            elif alone_since is None:
                alone_since = now
            elif now - alone_since >= grace_s:
                return
            await trio.sleep(min(bus.poll_ms / 1000, max(grace_s, 0.01)))

    def attach(self, after: Any = None) -> Any:
        return _RedisLog(self.bus, self.keys).attach(after)


@attrs.define(eq=False)
class _RedisLog:
    bus: RedisRunBus
    keys: _Keys

    @asynccontextmanager
    async def attach(self, after: str | None = None) -> AsyncIterator[_Subscription]:
        bus, keys = self.bus, self.keys
        subscription = _Subscription(bus, keys, after or "0-0", 1)
        if after is None:
            # From the first frame of the key's newest log.
            start = await bus.call(lambda c: c.get(keys.start))
            if start is not None:
                entry, n = _text(start).split(" ")
                subscription.cursor, subscription.expected = entry, int(n) + 1
        else:
            found = await bus.call(lambda c: c.xrange(keys.frames, after, after))
            if found:
                subscription.expected = int(found[0].field_values[b"n"]) + 1
            else:
                first = await bus.call(
                    lambda c: c.xrange(keys.frames, "-", "+", count=1)
                )
                oldest = _text(first[0].identifier) if first else "nothing (gone)"
                subscription.gap = ReplayGap(after, oldest)
        await bus.call(
            lambda c: bus.scripts["attach"](
                keys=[keys.attached, bus.replicas_key],
                args=[bus.replica, bus.lease_ms],
            )
        )
        try:
            yield subscription
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(bus.outage_s or 1):
                await bus.call(
                    lambda c: bus.scripts["detach"](
                        keys=[keys.attached], args=[bus.replica]
                    )
                )


@attrs.define(eq=False)
class RedisRunBus:
    """Run logs in Redis Streams at ``url`` (``redis://host:port/db``): a
    client may resume, and cancel, a run on any replica sharing the Redis.

    Args:
        url: the Redis server.
        buffer_frames: each run's stream is trimmed to about this many frames
            (``MAXLEN ~``); a resumer asking for older ones gets
            ``ReplayGapError``.
        lease_s: a replica's hold on a run it executes, renewed every third
            of it; a run whose replica died is marked failed (its followers
            get ``error``, ``step-finish``, ``finish``) within about
            ``lease_s`` plus one poll.
        keep_s: how long an ended run's stream stays readable.
        outage_s: how long a read or publish retries an unreachable Redis
            before it fails with ``RunBusError`` (default ``lease_s``).
        prefix: the prefix of every key and channel.
        batch_frames: at most this many of a run's frames that are ready
            together go to Redis in one call (one round trip); at most a
            quarter of ``buffer_frames``.

    Enter ``running(...)`` (the app's ASGI lifespan does) before use."""

    url: str = attrs.field(repr=lambda url: repr(redact_url(url)))
    """The server; its password never shows (repr, errors, logs)."""
    buffer_frames: int = 1024
    lease_s: float = 10.0
    keep_s: int = 600
    outage_s: float | None = None
    prefix: str = "procession:"
    batch_frames: int = 64
    replica: str = attrs.field(factory=lambda: uuid.uuid4().hex, init=False)
    scripts: dict[str, Any] = attrs.field(factory=dict, init=False)
    _client: Any = attrs.field(default=None, init=False)
    _publishers: dict[str, _Publisher] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        where = redact_url(self.url)  # registers the password as a secret
        if not self.url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigurationError(f"a Redis bus URL is redis://..., got {where!r}")
        if self.lease_s <= 0 or self.buffer_frames < 1 or self.batch_frames < 1:
            raise ConfigurationError(
                "lease_s must be > 0, buffer_frames and batch_frames >= 1"
            )
        if self.outage_s is None:
            self.outage_s = self.lease_s

    @property
    def poll_ms(self) -> int:
        """How long a follower's read blocks before it checks the lease."""
        return max(10, min(250, int(self.lease_s * 1000 / 4)))

    @property
    def lease_ms(self) -> int:
        """``lease_s`` in whole milliseconds (at least 1)."""
        return max(1, math.ceil(self.lease_s * 1000))

    @property
    def replicas_key(self) -> str:
        """The sorted set of replica heartbeats (replica -> expiry, ms)."""
        return self.prefix + "replicas"

    async def call(self, command: Callable[[Any], Awaitable[_T]]) -> _T:
        """``command(client)``, retried while Redis is unreachable or does not
        answer, for ``outage_s`` at most in all (an attempt that hangs, as on
        a Redis that stopped answering, is cut off at that deadline); then
        ``RunBusError``. Checkpoints; cancelled, the command may or may not
        have run."""
        coredis = _coredis()
        if self._client is None:
            raise RunBusError("the Redis run bus is not running (enter bus.running())")
        assert self.outage_s is not None
        deadline = trio.current_time() + self.outage_s
        delay = 0.02
        while True:
            failure: BaseException
            with trio.move_on_at(deadline) as attempt:
                try:
                    return await command(self._client)
                except (coredis.exceptions.ConnectionError, OSError) as exc:
                    failure = exc
            if attempt.cancelled_caught:
                failure = TimeoutError(f"no answer within {self.outage_s} s")
            if trio.current_time() + delay > deadline:
                raise RunBusError(
                    f"Redis at {redact_url(self.url)} is unreachable: "
                    f"{redact(str(failure))}"
                ) from failure
            logger.warning("Redis unreachable (%s); retrying", failure)
            await trio.sleep(delay)
            delay = min(delay * 2, 0.5)

    @asynccontextmanager
    async def running(self, cancel_here: CancelHere) -> AsyncIterator[None]:
        """Connects (``RunBusError`` if Redis is unreachable for
        ``outage_s``), then renews this replica's leases and hands the remote
        cancels to ``cancel_here`` until the block ends; cancelling the block
        stops both (the leases then expire)."""
        coredis = _coredis()
        client = coredis.Redis.from_url(self.url, max_connections=4096)
        try:
            async with self._connected(client, cancel_here):
                yield
        except BaseExceptionGroup as group:
            # coredis runs the client in a task group of its own: a bus that
            # failed raises its RunBusError, not a group around it.
            leaves = _leaves(group)
            if len(leaves) == 1 and isinstance(leaves[0], RunBusError):
                raise leaves[0] from group
            raise

    @asynccontextmanager
    async def _connected(
        self, client: Any, cancel_here: CancelHere
    ) -> AsyncIterator[None]:
        async with client:
            self._client = client
            try:
                for name, source in (
                    ("open", lua.OPEN),
                    ("take", lua.TAKE),
                    ("hand_over", lua.HAND_OVER),
                    ("renew", lua.RENEW),
                    ("renew_all", lua.RENEW_ALL),
                    ("publish", lua.PUBLISH),
                    ("close", lua.CLOSE),
                    ("reap", lua.REAP),
                    ("attach", lua.ATTACH),
                    ("detach", lua.DETACH),
                    ("attached", lua.ATTACHED),
                ):
                    self.scripts[name] = client.register_script(source)
                # Unreachable at startup: RunBusError here, not in a group.
                # The first heartbeat: this replica's clients count at once.
                await self.call(functools.partial(self._renew_all, []))
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._renew_leases)
                    await nursery.start(self._listen_cancels, cancel_here)
                    yield
                    nursery.cancel_scope.cancel()
            finally:
                self._client = None

    async def _renew_leases(self) -> None:
        """Every ``lease_s / 3``: this replica's heartbeat (even with no run
        of its own: its clients count while it lives) and its leases."""
        while True:
            await trio.sleep(self.lease_s / 3)
            live = [p for p in self._publishers.values() if not (p.closed or p.lost)]
            try:
                missed = await self.call(
                    functools.partial(self._renew_all, [p.keys.lease for p in live])
                )
            except RunBusError:
                logger.exception("leases not renewed")
                continue
            for index in missed:
                await self._renew_or_lose(live[int(index) - 1])

    def _renew_all(self, leases: list[str], client: Any) -> Awaitable[Any]:
        renew: Any = self.scripts["renew_all"]
        result: Awaitable[Any] = renew(
            keys=[self.replicas_key, *leases], args=[self.replica, self.lease_ms]
        )
        return result

    async def _renew_or_lose(self, publisher: _Publisher) -> None:
        """A lease the batch did not renew: re-take it if Redis lost it
        (a restart), else the run's publishes fail from now on."""
        if publisher.closed or publisher.lost:
            return
        try:
            held = await self.renew(publisher)
        except RunBusError:
            logger.exception("run %s: lease not renewed", publisher.run_id)
            return
        if not held and not publisher.closed:
            logger.error("run %s: its lease was lost", publisher.run_id)
            publisher.lost = True

    async def renew(self, publisher: _Publisher) -> bool:
        """Renew (or, when Redis lost it, re-take) ``publisher``'s lease;
        False if another replica holds it or the run was ended.
        Checkpoints."""
        keys = publisher.keys
        held = await self.call(
            lambda c: self.scripts["renew"](
                keys=[keys.lease, keys.frames, keys.lost],
                args=[self.replica, self.lease_ms, *publisher.lost_frames],
            )
        )
        return bool(held)

    async def _listen_cancels(
        self, cancel_here: CancelHere, task_status: trio.TaskStatus[None]
    ) -> None:
        channel = self.prefix + "cancel"
        async with self._client.pubsub(channels=[channel]) as pubsub:
            task_status.started()
            async for message in pubsub:
                if message["type"] != "message":
                    continue
                # Every replica hears it; the one holding the key's run acts.
                key = _text(message["data"])
                publisher = self._publishers.get(key)
                if publisher is None or publisher.closed:
                    continue
                try:
                    await cancel_here(key)
                except Exception:
                    logger.exception("remote cancel of run %s failed", publisher.run_id)

    async def open_run(
        self,
        key: str,
        *,
        run_id: str,
        lost_frames: Sequence[bytes],
        take: bool = False,
    ) -> _Publisher:
        """As ``RunBus.open_run``: the lease is taken with ``SET NX``, so one
        replica at most runs the key (with ``take``, whoever held it: the
        store decided). Checkpoints."""
        keys = _Keys.of(self.prefix, key)
        script = self.scripts["take" if take else "open"]
        first = await self.call(
            lambda c: script(
                keys=keys.run, args=[self.replica, self.lease_ms, *lost_frames]
            )
        )
        if not first:
            raise KeyError(key)
        publisher = _Publisher(
            self, key, keys, run_id, tuple(lost_frames), next=int(first)
        )
        self._publishers[key] = publisher
        return publisher

    async def find(self, key: str) -> _RedisLog | None:
        """As ``RunBus.find``. Checkpoints."""
        keys = _Keys.of(self.prefix, key)
        found = await self.call(lambda c: c.exists([keys.frames, keys.lease]))
        return _RedisLog(self, keys) if found else None

    def parse_event_id(self, text: str | None) -> str | None:
        """A stream entry id (``<ms>-<seq>``), or None for no header."""
        if text is None or not text.strip():
            return None
        text = text.strip()
        if not _ENTRY_ID.fullmatch(text):
            raise ValueError(
                f"Last-Event-ID must be a stream entry id (<ms>-<seq>), got "
                f"{text[:40]!r}"
            )
        return text

    async def cancel(self, key: str) -> bool:
        """Publishes ``key`` on the cancel channel if the run under it holds
        a lease. Checkpoints; cancelled, it may or may not have gone out."""
        keys = _Keys.of(self.prefix, key)
        if not await self.call(lambda c: c.exists([keys.lease])):
            return False
        await self.call(lambda c: c.publish(self.prefix + "cancel", key))
        return True

    async def reap(self, keys: _Keys) -> bool:
        """Mark the run failed if its replica's lease expired; True if this
        call did (one Lua call: atomic, so once). Checkpoints."""
        done = await self.call(
            lambda c: self.scripts["reap"](keys=keys.run, args=[self.keep_s])
        )
        if done:
            logger.warning(
                "%s: its replica's lease expired; marked failed", keys.frames
            )
        return bool(done)

    def remove(self, key: str) -> None:
        """Forget the key's publisher if it closed (a continuation may have
        opened the key's next log here already)."""
        publisher = self._publishers.get(key)
        if publisher is not None and (publisher.closed or publisher.lost):
            del self._publishers[key]
