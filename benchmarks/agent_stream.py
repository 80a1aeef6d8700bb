"""Per-chunk cost of a whole agent run (``agent.stream`` over a ScriptedModel),
with 0 and 5 async pass-through output processors, beside the bare output
pipeline fed the same chunks in the same run (the baseline the ratio is
against). Not part of the test suite; a smoke test runs ``--quick``.

    python benchmarks/agent_stream.py          # 40k chunks, 5 rounds
    python benchmarks/agent_stream.py --quick  # tiny, to check it runs
    python benchmarks/agent_stream.py --chunks 200000 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import attrs
import trio

from procession import Agent
from procession.actors import open_output_pipeline
from procession.chunks import Chunk, text_delta
from procession.testing import PassThrough, ScriptedModel


@attrs.frozen
class Row:
    setup: str
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


async def _agent(n: int, k: int, tracer_provider: Any = None) -> float:
    chunks: list[Chunk] = [text_delta("x ") for _ in range(n)]
    agent = Agent(
        id="bench",
        model=ScriptedModel([chunks]),
        output_processors=[PassThrough(i) for i in range(k)],
        tracer_provider=tracer_provider,
    )
    start = time.perf_counter()
    async with agent.stream("hi") as stream:
        async for _ in stream:
            pass
    return (time.perf_counter() - start) / n * 1e6


async def _pipeline(n: int, k: int) -> float:
    async def source() -> AsyncIterator[Chunk]:
        for _ in range(n):
            yield text_delta("x ")
            await trio.lowlevel.checkpoint()

    start = time.perf_counter()
    async with open_output_pipeline(
        [PassThrough(i) for i in range(k)], source()
    ) as stream:
        async for _ in stream:
            pass
    return (time.perf_counter() - start) / n * 1e6


async def _agent_traced(n: int, k: int) -> float:
    return await _agent(n, k, _recording_provider())


async def _measure(n: int, rounds: int) -> list[Row]:
    rows: list[Row] = []
    setups: tuple[tuple[str, Any], ...] = (
        ("pipeline", _pipeline),
        ("agent.stream", _agent),
        ("agent+otel sdk", _agent_traced),
    )
    for k in (0, 5):
        times: dict[str, list[float]] = {name: [] for name, _ in setups}
        for _ in range(rounds):  # interleaved, so drift hits every setup alike
            for name, run in setups:
                times[name].append(await run(n, k))
        rows.extend(Row(name, k, statistics.median(times[name])) for name, _ in setups)
    return rows


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--chunks", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    n, rounds = (200, 1) if args.quick else (args.chunks, args.rounds)
    rows = trio.run(_measure, n, rounds)
    base = {r.processors: r.us_per_chunk for r in rows if r.setup == "pipeline"}
    agent = {r.processors: r.us_per_chunk for r in rows if r.setup == "agent.stream"}
    print(
        f"{'setup':<16}{'processors':>11}{'us/chunk':>10}{'vs pipeline':>13}"
        f"{'vs agent':>10}"
    )
    for r in rows:
        ratio = r.us_per_chunk / base[r.processors]
        vs_agent = r.us_per_chunk / agent[r.processors]
        print(
            f"{r.setup:<16}{r.processors:>11}{r.us_per_chunk:>10.2f}{ratio:>12.1f}x"
            f"{vs_agent:>9.2f}x"
        )
    return rows


if __name__ == "__main__":
    main()
