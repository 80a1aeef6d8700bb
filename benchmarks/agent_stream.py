"""Per-chunk cost of a whole agent run (``agent.stream`` over a ScriptedModel),
with 0 and 5 async pass-through output processors, in every execution mode,
beside baselines measured in the same run: two floors (the hooks awaited in one
task; the same plus a zero-capacity channel hop to the consumer, what one task
per stream costs), the bare output pipeline fed the same chunks, and the same
workload through Mastra (``benchmarks/mastra/agent_stream.mjs``) where node 22
can be installed. Rounds are interleaved; each figure is the median. Not part of
the test suite; a smoke test runs ``--quick --no-mastra``.

    python benchmarks/agent_stream.py          # 40k chunks, 5 rounds
    python benchmarks/agent_stream.py --quick  # tiny, to check it runs
    python benchmarks/agent_stream.py --chunks 200000 --rounds 3
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

# Run as a script, only benchmarks/ is on sys.path: add the repository root
# (ruff allows imports after a sys.path change).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _common
from benchmarks._mastra import Mastra
from procession import Agent
from procession.actors import ExecutionMode, open_output_pipeline
from procession.chunks import Chunk, text_delta
from procession.testing import PassThrough, ScriptedModel

PROCESSOR_COUNTS = (0, 5)
FLOORS = ("floor: awaited hooks", "floor: channel hop")
PER_MODE = ("pipeline", "agent.stream", "agent+otel sdk")
MASTRA = ("mastra", "-", -1)  # its round measures every processor count at once


@attrs.frozen
class Row:
    setup: str
    mode: str  # an ExecutionMode, or "-" for the floors and Mastra
    processors: int
    us_per_chunk: float


def _recording_provider() -> Any:
    """An OpenTelemetry SDK provider that records every span (and drops it):
    what a traced service pays, without an exporter's own cost."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
    return provider


def _hooks(k: int) -> list[Callable[[Any], Any]]:
    return [PassThrough(i).process_output_stream for i in range(k)]


class _Args:
    part: Any = None


async def _awaited(n: int, k: int) -> float:
    """The floor: the hooks awaited in one task (``_common.awaited_floor``)."""
    return await _common.awaited_floor(_common.text_turn(n), k)


async def _channel(n: int, k: int) -> float:
    """The floor of a task per stream: a producer task awaits the hooks and
    hands each chunk over a zero-capacity channel to the consumer."""
    turn = _common.text_turn(n)
    hooks = _hooks(k)
    send, receive = trio.open_memory_channel[Any](0)

    async def produce() -> None:
        args = _Args()
        async with send:
            for chunk in turn:
                args.part = chunk
                for hook in hooks:
                    args.part = await hook(args)
                await send.send(args.part)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce)
        async for _ in receive:
            pass
    return (time.perf_counter() - start) / n * 1e6


async def _agent(
    n: int, k: int, mode: ExecutionMode, tracer_provider: Any = None
) -> float:
    agent = Agent(
        id="bench",
        model=ScriptedModel([_common.text_turn(n)]),
        output_processors=[PassThrough(i) for i in range(k)],
        tracer_provider=tracer_provider,
        execution_mode=mode,
    )
    start = time.perf_counter()
    await _common.drain(agent)
    return (time.perf_counter() - start) / n * 1e6


async def _agent_traced(n: int, k: int, mode: ExecutionMode) -> float:
    return await _agent(n, k, mode, _recording_provider())


async def _pipeline(n: int, k: int, mode: ExecutionMode) -> float:
    async def source() -> AsyncIterator[Chunk]:
        for _ in range(n):
            yield text_delta("x ")
            await trio.lowlevel.checkpoint()

    start = time.perf_counter()
    async with open_output_pipeline(
        [PassThrough(i) for i in range(k)], source(), mode=mode
    ) as stream:
        async for _ in stream:
            pass
    return (time.perf_counter() - start) / n * 1e6


def _setups(
    n: int, modes: Sequence[ExecutionMode]
) -> dict[tuple[str, str, int], Callable[[], Any]]:
    """(setup, mode, processors) -> a callable measuring one round of it."""
    setups: dict[tuple[str, str, int], Callable[[], Any]] = {}
    for k in PROCESSOR_COUNTS:
        setups[(FLOORS[0], "-", k)] = functools.partial(trio.run, _awaited, n, k)
        setups[(FLOORS[1], "-", k)] = functools.partial(trio.run, _channel, n, k)
        for mode in modes:
            for name, run in zip(
                PER_MODE, (_pipeline, _agent, _agent_traced), strict=True
            ):
                setups[(name, mode, k)] = functools.partial(trio.run, run, n, k, mode)
    return setups


def _measure(
    n: int, rounds: int, modes: Sequence[ExecutionMode], peer: Mastra | None
) -> list[Row]:
    setups = _setups(n, modes)
    if peer is not None:  # one node process per round: both counts, warmed up
        setups[MASTRA] = lambda: peer.run(
            "agent_stream",
            chunks=n,
            processors=list(PROCESSOR_COUNTS),
            warmup=min(n, 20_000),
        )["us_per_chunk"]
    results = _common.interleaved(rounds, setups)
    mastra = results.pop(MASTRA, None)
    rows = [Row(*key, _common.median(times)) for key, times in results.items()]
    if mastra is not None:
        rows.extend(
            Row("mastra", "-", k, _common.median([r[str(k)] for r in mastra]))
            for k in PROCESSOR_COUNTS
        )
    return rows


def _report(rows: Sequence[Row], modes: Sequence[ExecutionMode], n: int) -> None:
    def find(setup: str, mode: str, k: int) -> float | None:
        found = [
            r.us_per_chunk
            for r in rows
            if (r.setup, r.mode, r.processors) == (setup, mode, k)
        ]
        return found[0] if found else None

    print(
        f"{'setup':<22}{'mode':<10}{'processors':>11}{'us/chunk':>10}"
        f"{'vs floor':>10}{'vs pipeline':>13}{'vs mastra':>11}"
    )
    for r in rows:
        k = r.processors
        print(
            f"{r.setup:<22}{r.mode:<10}{r.processors:>11}{r.us_per_chunk:>10.2f}"
            f"{_common.ratio(r.us_per_chunk, find(FLOORS[1], '-', k)):>10}"
            f"{_common.ratio(r.us_per_chunk, find('pipeline', r.mode, k)):>13}"
            f"{_common.ratio(r.us_per_chunk, find('mastra', '-', k)):>11}"
        )
    parts = []
    for k in PROCESSOR_COUNTS:
        mastra = find("mastra", "-", k)
        figures = []
        for mode in modes:
            us = find("agent.stream", mode, k)
            versus = "" if mastra is None else f" ({_common.ratio(us, mastra)} mastra)"
            figures.append(f"{mode} {us:.2f}{versus}")
        peer = "" if mastra is None else f"; mastra {mastra:.2f}"
        parts.append(f"N={k}: {', '.join(figures)}{peer}")
    print(f"summary: {n} chunks, agent.stream us/chunk " + "; ".join(parts))


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = _common.parser(__doc__)
    parser.add_argument("--chunks", type=int, default=40_000)
    args = parser.parse_args(argv)
    modes = _common.modes(args, parser)
    n, rounds = (200, 1) if args.quick else (args.chunks, args.rounds)
    peer = _common.mastra(args)
    print(f"{n} text deltas per run, {rounds} interleaved rounds, medians")
    print(_common.versions(peer))
    rows = _measure(n, rounds, modes, peer)
    _report(rows, modes, n)
    return rows


if __name__ == "__main__":
    main()
