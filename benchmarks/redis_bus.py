"""The run bus's cost, loopback only: what a frame's trip from a run to a
client reading it adds through Redis Streams (``RedisRunBus``) vs in process
(``InProcessRunBus``), and the frames/s one Redis carries for many concurrent
runs, each with one client following it. Bus level (no HTTP: the server's own
cost is ``server_load.py``'s). Not part of the test suite (a smoke test runs
``--quick``); bounded in count and time.

    python benchmarks/redis_bus.py --redis redis://127.0.0.1:6379/0
    python benchmarks/redis_bus.py --runs 1000 --frames 100
    python benchmarks/redis_bus.py --quick        # tiny, to check it runs

The Redis URL defaults to $PROCESSION_TEST_REDIS_URL (``bash .ci/redis --
python benchmarks/redis_bus.py``); with none, only the in-process rows run.
Latency: one run, one follower, a frame published only once the previous one
was read (p50/p99 of publish-to-read). Throughput: ``--runs`` runs publishing
``--frames`` frames each as fast as the bus takes them, a follower each;
frames/s is every frame read over the wall time, with the frames published
as the server's pump publishes them: on Redis pipelined (the frames that are
ready while a batch is on its way go in the next, up to the bus's
``batch_frames``, in one call); "(per frame)", in the same run, a publish
(a round trip) per frame, as before pipelining.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Sequence
from typing import Any

import attrs
import trio

from procession.server import InProcessRunBus, RedisRunBus, RunBus

FRAME = b'data: {"type":"text-delta","payload":{"id":"t","text":"word "}}\n\n'


@attrs.frozen
class Row:
    bus: str
    runs: int
    frames: int
    p50_us: float
    p99_us: float
    frames_per_s: float  # published as the server does (pipelined on Redis)
    per_frame_frames_per_s: float  # a publish per frame (the in-process way)


async def _never(run_id: str) -> bool:
    await trio.lowlevel.checkpoint()
    return False


async def _latency(bus: RunBus, frames: int) -> list[float]:
    publisher = await bus.open_run(
        f"run:{uuid.uuid4().hex}", run_id="r", lost_frames=()
    )
    took: list[float] = []
    async with publisher.attach() as subscription:
        for _ in range(frames):
            start = time.perf_counter()
            await publisher.publish(FRAME)
            await subscription.receive()
            took.append(time.perf_counter() - start)
    await publisher.aclose()
    return took


async def _publish_each(publisher: Any, frames: int) -> None:
    for _ in range(frames):
        await publisher.publish(FRAME)


async def _publish_pipelined(publisher: Any, frames: int) -> None:
    """As the server's pump (``_resume._publish_batched``): the producer
    hands frames over a channel of ``batch_frames``; the writer takes what is
    ready and publishes it in one call."""
    size = publisher.batch_frames
    send, receive = trio.open_memory_channel[bytes](size)

    async def write() -> None:
        with receive:
            async for frame in receive:
                batch = [frame]
                while len(batch) < size:
                    try:
                        batch.append(receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                await publisher.publish_many(batch)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(write)
        with send:
            for _ in range(frames):
                await send.send(FRAME)


async def _one_run(bus: RunBus, frames: int, read: list[int], publish: Any) -> None:
    key = f"run:{uuid.uuid4().hex}"
    publisher = await bus.open_run(key, run_id=key, lost_frames=())

    async def follow() -> None:
        async with publisher.attach() as subscription:
            try:
                while True:
                    await subscription.receive()
                    read[0] += 1
            except trio.EndOfChannel:
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(follow)
        await publish(publisher, frames)
        await publisher.aclose()
    bus.remove(key)


async def _throughput(bus: RunBus, runs: int, frames: int, publish: Any) -> float:
    read = [0]
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(runs):
            nursery.start_soon(_one_run, bus, frames, read, publish)
    return read[0] / (time.perf_counter() - start)


async def _measure(name: str, bus: RunBus, runs: int, frames: int) -> Row:
    async with bus.running(_never):
        took = await _latency(bus, max(frames, 50))
        per_frame = await _throughput(bus, runs, frames, _publish_each)
        # The in-process bus publishes frame by frame (batch_frames 1), as
        # the server's pump then does.
        batched = (
            await _throughput(bus, runs, frames, _publish_pipelined)
            if isinstance(bus, RedisRunBus)
            else per_frame
        )
    cuts = statistics.quantiles(took, n=100)
    return Row(name, runs, frames, cuts[49] * 1e6, cuts[98] * 1e6, batched, per_frame)


async def _all(url: str | None, runs: int, frames: int) -> list[Row]:
    rows = [await _measure("in-process", InProcessRunBus(), runs, frames)]
    if url is not None:
        bus = RedisRunBus(url, prefix=f"procession-bench-{uuid.uuid4().hex[:8]}:")
        rows.append(await _measure("redis", bus, runs, frames))
    return rows


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument(
        "--redis", default=os.environ.get("PROCESSION_TEST_REDIS_URL") or None
    )
    args = parser.parse_args(argv)
    runs, frames = (10, 20) if args.quick else (args.runs, args.frames)
    if args.redis is None:
        print("no Redis URL (--redis or $PROCESSION_TEST_REDIS_URL): in-process only")
    rows: list[Any] = trio.run(_all, args.redis, runs, frames)
    print(
        f"{'bus':<12}{'runs':>6}{'frames':>8}{'p50':>10}{'p99':>10}{'frames/s':>12}"
        f"{'(per frame)':>14}"
    )
    for r in rows:
        print(
            f"{r.bus:<12}{r.runs:>6}{r.frames:>8}{r.p50_us:>8.0f}us{r.p99_us:>8.0f}us"
            f"{r.frames_per_s:>12,.0f}{r.per_frame_frames_per_s:>14,.0f}"
        )
    return rows


if __name__ == "__main__":
    main()
