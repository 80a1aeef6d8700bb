"""Many concurrent runs on one core: 1,000 ``agent.stream`` runs at once, each
200 text deltas through 5 async pass-through output processors, on one agent
(issue 10's "many runs per core" row). Reports chunks/s for the whole core and
the tracemalloc peak per run (KiB), in every execution mode, beside the floor
measured in the same run: one trio task per stream awaiting the same 5 hooks
on the same chunks.

"KiB per run" is the tracemalloc peak during the concurrent runs divided by
the number of runs; the scripted input (every run's chunks) is built before
tracing starts. Throughput is measured in a separate, untraced pass.

    python benchmarks/many_runs.py                 # 1,000 runs, 1 round
    python benchmarks/many_runs.py --modes fused --rounds 3
    python benchmarks/many_runs.py --runs 3000     # the 3,000-run row
    python benchmarks/many_runs.py --quick         # tiny, to check it runs
    python benchmarks/many_runs.py --profile       # where one fused round goes

``--profile`` runs the agent workload once per mode instead of the table: the
scheduler's counts per run (task steps, tasks spawned, gen-0 and full GC
collections), the allocations still held at the traced peak grouped by
source line, and a cProfile of the round sorted by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs
import trio

from procession import Agent
from procession.actors import ExecutionMode
from procession.chunks import Chunk, text_delta
from procession.testing import PassThrough, ScriptedModel

PROCESSORS = 5


@attrs.frozen
class Row:
    setup: str
    runs: int
    chunks_per_second: float
    kib_per_run: float


Workload = Callable[[int, int], Awaitable[Callable[[], Awaitable[None]]]]


def _agent_workload(mode: ExecutionMode) -> Workload:
    async def prepare(runs: int, chunks: int) -> Callable[[], Awaitable[None]]:
        turn: list[Chunk] = [text_delta("x ") for _ in range(chunks)]
        agent = Agent(
            id="bench",
            model=ScriptedModel([turn] * runs),
            output_processors=[PassThrough(i) for i in range(PROCESSORS)],
            execution_mode=mode,
        )

        async def one() -> None:
            async with agent.stream("hi") as stream:
                async for _ in stream:
                    pass

        async def all_runs() -> None:
            async with trio.open_nursery() as nursery:
                for _ in range(runs):
                    nursery.start_soon(one)

        return all_runs

    return prepare


async def _floor(runs: int, chunks: int) -> Callable[[], Awaitable[None]]:
    """One task per stream, awaiting the 5 hooks per chunk: no agent at all."""
    turn: list[Chunk] = [text_delta("x ") for _ in range(chunks)]
    hooks: list[Callable[[Any], Awaitable[Any]]] = [
        PassThrough(i).process_output_stream for i in range(PROCESSORS)
    ]

    class Args:
        part: Any = None

    async def one() -> None:
        args = Args()
        for index, chunk in enumerate(turn):
            args.part = chunk
            for hook in hooks:
                args.part = await hook(args)
            if index % 64 == 63:
                await trio.lowlevel.checkpoint()  # what a model read would do
        await trio.lowlevel.checkpoint()

    async def all_runs() -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(runs):
                nursery.start_soon(one)

    return all_runs


async def _measure_one(
    name: str, workload: Workload, runs: int, chunks: int
) -> tuple[float, float]:
    """(seconds, peak bytes) of one round: a timed pass, then a traced pass."""
    go = await workload(runs, chunks)
    gc.collect()
    start = time.perf_counter()
    await go()
    seconds = time.perf_counter() - start
    go = await workload(runs, chunks)  # built before tracing starts
    gc.collect()
    tracemalloc.start()
    try:
        await go()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return seconds, peak


async def _measure(
    runs: int, chunks: int, rounds: int, modes: Sequence[ExecutionMode]
) -> list[Row]:
    setups: tuple[tuple[str, Workload], ...] = (
        ("floor (task per stream)", _floor),
        *((f"agent {mode}", _agent_workload(mode)) for mode in modes),
    )
    times: dict[str, list[float]] = {name: [] for name, _ in setups}
    peaks: dict[str, list[float]] = {name: [] for name, _ in setups}
    for _ in range(rounds):  # interleaved, so drift hits every setup alike
        for name, workload in setups:
            seconds, peak = await _measure_one(name, workload, runs, chunks)
            times[name].append(seconds)
            peaks[name].append(peak)
    return [
        Row(
            name,
            runs,
            runs * chunks / statistics.median(times[name]),
            statistics.median(peaks[name]) / runs / 1024,
        )
        for name, _ in setups
    ]


class _Counts(trio.abc.Instrument):
    """Task steps and spawned tasks, while installed."""

    def __init__(self) -> None:
        self.steps = 0
        self.spawned = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned += 1


async def _profile(runs: int, chunks: int, modes: Sequence[ExecutionMode]) -> None:
    """Print, per mode, the counts, the held allocations and the profile."""
    for mode in modes:
        print(f"=== agent {mode}: {runs} runs x {chunks} chunks")
        go = await _agent_workload(mode)(runs, chunks)
        counts = _Counts()
        gc.collect()
        before = [s["collections"] for s in gc.get_stats()]
        trio.lowlevel.add_instrument(counts)
        try:
            await go()
        finally:
            trio.lowlevel.remove_instrument(counts)
        after = [s["collections"] for s in gc.get_stats()]
        print(
            f"per run: {counts.steps / runs:.1f} task steps, "
            f"{counts.spawned / runs:.1f} tasks spawned, "
            f"{(after[0] - before[0]) / runs:.2f} gen-0 collections; "
            f"{after[2] - before[2]} full collections in all"
        )
        go = await _agent_workload(mode)(runs, chunks)
        gc.collect()
        tracemalloc.start(1)
        try:
            await go()
            _, peak = tracemalloc.get_traced_memory()
            snapshot = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
        print(f"traced peak {peak / runs / 1024:.1f} KiB per run; still held after:")
        for stat in snapshot.statistics("lineno")[:10]:
            print(f"  {stat.size / runs:8.0f} B/run  {stat.traceback[0]}")
        go = await _agent_workload(mode)(runs, chunks)
        profiler = cProfile.Profile()
        profiler.enable()
        await go()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--runs", type=int, default=1_000)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile one round per mode instead of measuring the table",
    )
    parser.add_argument(
        "--modes",
        default="fused,actors",
        help="execution modes to run, comma-separated (actors is slow: minutes)",
    )
    args = parser.parse_args(argv)
    modes: list[ExecutionMode] = []
    for mode in args.modes.split(","):
        if mode not in ("fused", "actors"):
            parser.error(f"unknown mode {mode!r}")
        modes.append("fused" if mode == "fused" else "actors")
    runs, chunks, rounds = (
        (20, 20, 1) if args.quick else (args.runs, args.chunks, args.rounds)
    )
    if args.profile:
        trio.run(_profile, runs, chunks, modes)
        return []
    rows = trio.run(_measure, runs, chunks, rounds, modes)
    floor = rows[0].chunks_per_second
    print(f"{'setup':<26}{'runs':>6}{'chunks/s':>12}{'vs floor':>10}{'KiB/run':>10}")
    for r in rows:
        print(
            f"{r.setup:<26}{r.runs:>6}{r.chunks_per_second:>12,.0f}"
            f"{r.chunks_per_second / floor:>9.2f}x{r.kib_per_run:>10.1f}"
        )
    agent = rows[1:]
    print(
        f"summary: {runs} concurrent runs x {chunks} chunks x {PROCESSORS} "
        f"processors: "
        + "; ".join(
            f"{r.setup} {r.chunks_per_second:,.0f} chunks/s, "
            f"{r.kib_per_run:.1f} KiB/run"
            for r in agent
        )
    )
    return rows


if __name__ == "__main__":
    main()
