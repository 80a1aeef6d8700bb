"""A key's logs on the run bus (``_bus``: a key's logs), on each bus: a new
log under a key opens once the one before it closed, numbered on from it; a
reader with no ``Last-Event-ID`` reads the newest, one that read an earlier
log to its end goes on into the next, one that stopped mid-way never gets a
later log's frames in place of those it missed. And a run's key released by
the part of a run that paused (its registry entry, its log) never drops the
continuation that already holds it."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from procession.server import InProcessRunBus, RedisRunBus, ReplayGap
from procession.server._streaming import RunReader, RunRegistry
from tests.server.redis_helpers import unique_prefix


def test_a_release_by_the_paused_part_keeps_the_continuation() -> None:
    registry = RunRegistry(limit=2)
    paused, continued = RunReader.__new__(RunReader), RunReader.__new__(RunReader)
    registry.streams["run:*:r-1"] = paused
    registry.streams["run:*:r-1"] = continued  # the continuation took the key
    registry.release("run:*:r-1", paused)  # the paused part leaves after
    assert registry.streams == {"run:*:r-1": continued}
    registry.release("run:*:r-1", continued)
    assert registry.streams == {}


async def test_a_keys_logs_follow_one_another_in_process() -> None:
    bus = InProcessRunBus(buffer_frames=8)
    first = bus.open("run:*:r-1")
    for frame in (b"a", b"b", b"c"):
        await first.publish(frame)
    with pytest.raises(KeyError, match=r"run:\*:r-1"):
        bus.open("run:*:r-1")  # open: one log at a time
    await first.aclose()
    second = bus.open("run:*:r-1")  # the continuation, before the paused
    bus.remove("run:*:r-1")  # part releases the key: the new log is kept
    assert bus.lookup("run:*:r-1") is second
    await second.publish(b"d")
    await second.aclose()
    bus.remove("run:*:r-1")
    assert bus.lookup("run:*:r-1") is None
    third = bus.open("run:*:r-1")  # numbered on though the log was forgotten
    await third.publish(b"e")
    await third.aclose()
    seen = {}
    for after in (None, 4, 3):
        async with third.attach(after) as subscription:
            got: list[Any] = []
            try:
                while True:
                    got.append(await subscription.receive())
            except (trio.EndOfChannel, ReplayGap) as end:
                got.append(type(end).__name__)
        seen[after] = got
    assert seen == {
        None: [(5, b"e"), "EndOfChannel"],  # the newest log from its start
        4: [(5, b"e"), "EndOfChannel"],  # after the end of the one before
        3: ["ReplayGap"],  # mid-way through an earlier log: never a silent gap
    }


async def _read_all(log: Any, after: Any) -> list[Any]:
    got: list[Any] = []
    async with log.attach(after) as subscription:
        try:
            while True:
                got.append(await subscription.receive())
        except (trio.EndOfChannel, ReplayGap) as end:
            got.append(type(end).__name__)
    return got


async def test_a_keys_logs_follow_one_another_on_redis(redis_url: str) -> None:
    bus = RedisRunBus(redis_url, lease_s=1.0, prefix=unique_prefix())

    async def never(key: str) -> bool:
        await trio.lowlevel.checkpoint()
        return False

    async with bus.running(never):
        key = "run:*:r-1"
        first = await bus.open_run(key, run_id="r-1", lost_frames=[b"lost"])
        ids = await first.publish_many([b"a", b"b", b"c"])
        with pytest.raises(KeyError, match=r"run:\*:r-1"):
            await bus.open_run(key, run_id="r-1", lost_frames=[])
        await first.aclose()
        second = await bus.open_run(key, run_id="r-1", lost_frames=[b"lost"])
        bus.remove(key)  # the paused part releases after: the new log stays
        log = await bus.find(key)
        assert log is not None
        with trio.fail_after(5):
            async with log.attach(ids[-1]) as waiting:
                # It read the pause to its end; the continuation's log is
                # open: its frames are to come.
                await second.publish(b"d")
                taken = await waiting.receive()
            await second.aclose()
            bus.remove(key)
            seen = {after: await _read_all(log, after) for after in (None, ids[0])}
    assert taken[1] == b"d"
    newest = [taken, "EndOfChannel"]
    assert seen == {
        None: newest,  # the newest log from its first frame
        # Mid-way through an earlier log: its rest and its end, never the
        # next log's frames in place of the ones missed.
        ids[0]: [(ids[1], b"b"), (ids[2], b"c"), "EndOfChannel"],
    }
