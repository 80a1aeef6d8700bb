"""Load on the server, loopback only: N concurrent SSE clients, each streaming
a 200-chunk answer through 5 pass-through processors on the scripted model,
over hypercorn's trio worker; then the same with 20% of the clients leaving
at random points; then the same runs through the library without HTTP (the
ratio is the server's cost). Not part of the test suite (a smoke test runs
``--quick``); bounded in count and time.

    python benchmarks/server_load.py               # 1,000 clients x 200 chunks
    python benchmarks/server_load.py --clients 200
    python benchmarks/server_load.py --quick       # tiny, to check it runs

Prints total chunks/s (text deltas delivered, over the time after the
model's initial hold), time to first byte p50/p99 (the response's first
bytes; in the library, the first chunk), memory per open stream (what is
allocated while every stream is open, traced with tracemalloc, divided by
the streams; both ends of each connection are in this process), errors, and for the
disconnect round how many clients left and how many runs were cancelled
(a run the server had already written whole into the socket buffers when
its client left ends normally; ``--pace-ms`` rules that out).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
import tracemalloc
from collections.abc import Sequence
from typing import Any

import attrs
import trio

from procession import Agent
from procession.chunks import TextDeltaChunk, TextDeltaPayload
from procession.server import create_app, serve
from procession.testing import Delay, PassThrough, ScriptedModel

HOLD_S = 1.0  # every stream waits this long before its first delta: all open


@attrs.frozen
class Row:
    setup: str
    clients: int
    chunks: int
    seconds: float
    ttfb_p50_ms: float
    ttfb_p99_ms: float
    kib_per_stream: float
    errors: int
    cancelled: int = 0
    reserved_after: int = 0
    left: int = 0

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds else 0.0


def _turn(chunks: int, pace_s: float) -> list[Any]:
    items: list[Any] = [Delay(HOLD_S)]
    for i in range(chunks):
        if pace_s:
            items.append(Delay(pace_s))
        items.append(TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} ")))
    return items


def _agent(
    clients: int, chunks: int, pace_s: float = 0.0
) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([_turn(chunks, pace_s) for _ in range(clients)])
    agent = Agent(
        id="load",
        model=model,
        output_processors=[PassThrough(i) for i in range(5)],
    )
    return agent, model


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@attrs.define
class _Client:
    ttfb: float | None = None
    chunks: int = 0
    error: str | None = None
    left_at: int | None = None  # leave after this many deltas


async def _one_client(host: str, port: int, state: _Client, started: float) -> None:
    body = b'{"messages": "Hi"}'
    try:
        stream = await trio.open_tcp_stream(host, port)
    except OSError as exc:
        state.error = repr(exc)
        return
    async with stream:
        await stream.send_all(
            b"POST /api/agents/load/stream HTTP/1.1\r\nhost: x\r\n"
            b"content-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        seen = b""
        while True:
            data = await stream.receive_some(65536)
            if not data:
                if b"[DONE]" not in seen:
                    state.error = "closed before [DONE]"
                return
            if state.ttfb is None:
                state.ttfb = time.perf_counter() - started
            seen = seen[-16:] + data
            state.chunks += data.count(b'"text-delta"')
            if state.left_at is not None and state.chunks >= state.left_at:
                return  # leaving: the connection closes
            if b"data: [DONE]" in seen:
                return


async def _over_http(
    clients: int, chunks: int, leaving: float, seed: int, pace_s: float
) -> Row:
    agent, model = _agent(clients, chunks, pace_s)
    app = create_app([agent], max_concurrent_runs=clients + 10, keepalive_s=0)
    rng = random.Random(seed)
    states = [_Client() for _ in range(clients)]
    for state in states:
        if rng.random() < leaving:
            state.left_at = rng.randrange(1, chunks)
    stop = trio.Event()
    held = 0
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            lambda task_status: serve(
                app,
                port=0,
                shutdown_trigger=stop.wait,
                task_status=task_status,
                backlog=max(2048, clients * 2),
            )
        )
        host, port = urls[0].removeprefix("http://").rsplit(":", 1)
        started = time.perf_counter()
        # Traced only while the streams open (it slows everything): what is
        # still allocated mid-hold, when every stream is open and none has a
        # delta yet, is what the open streams hold (server and clients).
        tracemalloc.start()
        with trio.fail_after(120 + clients / 10):
            async with trio.open_nursery() as load:
                for state in states:
                    load.start_soon(_one_client, host, int(port), state, started)
                await trio.sleep(HOLD_S * 0.8)
                held = tracemalloc.get_traced_memory()[0]
                tracemalloc.stop()
        seconds = time.perf_counter() - started - HOLD_S
        # The server notices each departure: wait for the runs to settle.
        with trio.move_on_after(10):
            while app.runs.reserved:  # noqa: ASYNC110 - no event for this
                await trio.sleep(0.05)
        stop.set()
    cancelled = sum(1 for call in model.calls if call.closed_early)
    ttfbs = [s.ttfb for s in states if s.ttfb is not None]
    row = Row(
        setup="http, 20% leave" if leaving else "http",
        clients=clients,
        chunks=sum(s.chunks for s in states),
        seconds=seconds,
        ttfb_p50_ms=statistics.median(ttfbs) * 1000 if ttfbs else 0.0,
        ttfb_p99_ms=_percentile(ttfbs, 0.99) * 1000,
        kib_per_stream=held / 1024 / clients,
        errors=sum(1 for s in states if s.error is not None and s.left_at is None),
        cancelled=cancelled,
        reserved_after=app.runs.reserved,
        left=sum(1 for s in states if s.left_at is not None),
    )
    return row


async def _in_library(clients: int, chunks: int, pace_s: float) -> Row:
    agent, _model = _agent(clients, chunks, pace_s)
    counts = [0] * clients
    firsts: list[float] = []
    started = time.perf_counter()

    async def one(index: int) -> None:
        async with agent.stream("Hi") as stream:
            first = True
            async for chunk in stream:
                if first:
                    firsts.append(time.perf_counter() - started)
                    first = False
                if isinstance(chunk, TextDeltaChunk):
                    counts[index] += 1

    async with trio.open_nursery() as nursery:
        for index in range(clients):
            nursery.start_soon(one, index)
    return Row(
        setup="library",
        clients=clients,
        chunks=sum(counts),
        seconds=time.perf_counter() - started - HOLD_S,
        ttfb_p50_ms=statistics.median(firsts) * 1000 if firsts else 0.0,
        ttfb_p99_ms=_percentile(firsts, 0.99) * 1000,
        kib_per_stream=0.0,
        errors=sum(1 for c in counts if c != chunks),
    )


async def _measure(clients: int, chunks: int, pace_s: float) -> list[Row]:
    plain = await _over_http(clients, chunks, 0.0, seed=1, pace_s=pace_s)
    leaving = await _over_http(clients, chunks, 0.2, seed=2, pace_s=pace_s)
    library = await _in_library(clients, chunks, pace_s)
    return [plain, leaving, library]


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument(
        "--pace-ms",
        type=float,
        default=0.0,
        help="the model waits this long before each chunk (default: none)",
    )
    args = parser.parse_args(argv)
    clients, chunks = (5, 20) if args.quick else (args.clients, args.chunks)
    # --quick paces the model (5 ms a chunk), so a client that leaves always
    # leaves a run still streaming: an unpaced run may be in the socket
    # buffers whole before its client reads far enough to leave.
    pace_s = 0.005 if args.quick else args.pace_ms / 1000
    rows = trio.run(_measure, clients, chunks, pace_s)
    library = rows[-1].chunks_per_s
    print(
        f"{'setup':<16}{'clients':>8}{'chunks/s':>11}{'TTFB p50':>10}{'p99':>9}"
        f"{'KiB/stream':>11}{'errors':>7}{'left':>6}{'cancelled':>10}{'vs library':>11}"
    )
    for r in rows:
        ratio = library / r.chunks_per_s if r.chunks_per_s else float("inf")
        print(
            f"{r.setup:<16}{r.clients:>8}{r.chunks_per_s:>11,.0f}"
            f"{r.ttfb_p50_ms:>8.0f}ms{r.ttfb_p99_ms:>7.0f}ms"
            f"{r.kib_per_stream:>11.1f}{r.errors:>7}{r.left:>6}{r.cancelled:>10}"
            f"{ratio:>10.1f}x"
        )
    return rows


if __name__ == "__main__":
    main()
