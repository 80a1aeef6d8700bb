"""Memory per open stream, by tracemalloc (workload (d) of issue 23): the
app ``server_load.py`` serves (``_served.py``: 5 async pass-through output
processors) and the bare ASGI floor (``_floors.py``'s hypercorn app, which
sends the same SSE bytes with no agent), each holding ``--streams`` paced
answers open at once in this process, driven by the same minimal ASGI
client (no sockets: what hypercorn holds per connection is the same for
both and not counted).

    python benchmarks/stream_memory.py                 # 1,000 streams, adaptive
    python benchmarks/stream_memory.py --streams 200 --top 15

Prints, per open stream, the bytes tracemalloc sees allocated once every
stream has sent its first delta (after a warm-up and a collection), for the
app and the floor, and the difference: what a stream of procession holds
beyond what any ASGI app streaming the same bytes holds. RSS cannot show a
few KiB per stream (the heap grows in steps), hence tracemalloc.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _common

PATH = "/api/agents/load/stream"
BODY = b'{"messages": "chunks=30 pace=1000"}'  # a delta a second, 30 s


class _Started:
    """How many streams sent their first delta; ``all`` is set at ``target``."""

    def __init__(self, target: int) -> None:
        self.count = 0
        self.target = target
        self.all = trio.Event()

    def one(self) -> None:
        self.count += 1
        if self.count >= self.target:
            self.all.set()


async def _stream(app: Any, started: _Started, stop: trio.Event) -> None:
    """One request to ``app`` that reads its body until ``stop`` is set."""
    scope = _common.post_scope(PATH)
    counted = False

    async def send(message: dict[str, Any]) -> None:
        nonlocal counted
        if b"text-delta" in message.get("body", b"") and not counted:
            counted = True
            started.one()

    await app(scope, _common.body_then(BODY, stop.wait), send)


async def _hold(app: Any, streams: int, top: int) -> tuple[float, Any]:
    """Bytes per open stream (tracemalloc) with ``streams`` open at once."""
    stop = trio.Event()
    started = _Started(min(50, streams))
    async with trio.open_nursery() as nursery:  # warm up: caches, pools
        for _ in range(started.target):
            nursery.start_soon(_stream, app, started, stop)
        await started.all.wait()
        stop.set()
        nursery.cancel_scope.cancel()  # the floor does not watch the client
    gc.collect()
    tracemalloc.start(1)
    base = tracemalloc.get_traced_memory()[0]
    stop = trio.Event()
    started = _Started(streams)
    async with trio.open_nursery() as nursery:
        for _ in range(streams):
            nursery.start_soon(_stream, app, started, stop)
        await started.all.wait()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - base
        snapshot = tracemalloc.take_snapshot() if top else None
        stop.set()
        nursery.cancel_scope.cancel()
    tracemalloc.stop()
    return held / streams, snapshot


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--mode", default="adaptive")
    parser.add_argument("--top", type=int, default=0, help="the app's top files")
    parser.add_argument("--quick", action="store_true", help="20 streams")
    args = parser.parse_args(argv)
    if args.quick:
        args.streams = 20
    os.environ["BENCH_MODE"] = args.mode
    from benchmarks._floors import hypercorn_app
    from benchmarks._served import app

    floor, _ = trio.run(_hold, hypercorn_app(1), args.streams, 0)
    ours, snapshot = trio.run(_hold, app, args.streams, args.top)
    print(f"{args.streams} open streams, bytes per stream (tracemalloc):")
    print(f"  procession app ({args.mode}, 5 processors) {ours / 1024:8.2f} KiB")
    print(f"  bare ASGI floor, same bytes              {floor / 1024:8.2f} KiB")
    print(
        f"  procession beyond the floor              {(ours - floor) / 1024:8.2f} KiB"
    )
    if snapshot is not None:
        print(f"  the app's top {args.top} files (B per stream):")
        for stat in snapshot.statistics("filename")[: args.top]:
            name = stat.traceback[0].filename.split("site-packages/")[-1]
            print(f"    {stat.size / args.streams:8.0f}  {name}")
    return {"app": ours, "floor": floor}


if __name__ == "__main__":
    main()
