"""Many concurrent runs on one core: 1,000 ``agent.stream`` runs at once, each
200 text deltas through 5 async pass-through output processors, on one agent
(issue 10's "many runs per core" row). Reports chunks/s for the whole core and
the tracemalloc peak per run (KiB), in every execution mode, beside the floor
measured in the same run: one trio task per stream awaiting the same 5 hooks
on the same chunks; and the same workload through Mastra
(``benchmarks/mastra/many_runs.mjs``) where node 22 can be installed.

"KiB per run" is the tracemalloc peak during the concurrent runs divided by
the number of runs; the scripted input (every run's chunks) is built before
tracing starts. Throughput is measured in a separate, untraced pass. Mastra's
"KiB per run" is not tracemalloc (node has none): it is the peak of
``process.memoryUsage().heapUsed`` during the runs minus its value after a
forced GC before them, over the number of runs (it includes garbage not yet
collected, so it is an upper bound of what the runs hold).

    python benchmarks/many_runs.py                 # 1,000 runs, 1 round, all modes
    python benchmarks/many_runs.py --modes fused --rounds 3
    python benchmarks/many_runs.py --runs 3000     # the 3,000-run row
    python benchmarks/many_runs.py --quick --no-mastra  # tiny, to check it runs
    python benchmarks/many_runs.py --profile       # where one round goes, per mode
    python benchmarks/many_runs.py --gc-gen0 50000 # as a server tuned for it runs

``--profile`` runs the agent workload once per mode instead of the table: the
scheduler's counts per run (task steps, tasks spawned, gen-0 and full GC
collections), the allocations still held at the traced peak grouped by
source line, and a cProfile of the round sorted by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import pstats
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Sequence
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
from procession.actors import ExecutionMode
from procession.testing import PassThrough, SchedulerCounts, ScriptedModel

PROCESSORS = 5
FLOOR = "floor (task per stream)"
MASTRA = "mastra"


@attrs.frozen
class Row:
    setup: str
    runs: int
    chunks_per_second: float
    kib_per_run: float


Workload = Callable[[int, int], Awaitable[Callable[[], Awaitable[None]]]]


def _agent_workload(mode: ExecutionMode) -> Workload:
    async def prepare(runs: int, chunks: int) -> Callable[[], Awaitable[None]]:
        turn = _common.text_turn(chunks)
        agent = Agent(
            id="bench",
            model=ScriptedModel([turn] * runs),
            output_processors=[PassThrough(i) for i in range(PROCESSORS)],
            execution_mode=mode,
        )

        async def all_runs() -> None:
            async with trio.open_nursery() as nursery:
                for _ in range(runs):
                    nursery.start_soon(_common.drain, agent)

        return all_runs

    return prepare


async def _floor(runs: int, chunks: int) -> Callable[[], Awaitable[None]]:
    """One task per stream, awaiting the 5 hooks per chunk: no agent at all."""
    turn = _common.text_turn(chunks)
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
    workload: Workload, runs: int, chunks: int
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


def _measure(
    runs: int,
    chunks: int,
    rounds: int,
    modes: Sequence[ExecutionMode],
    peer: Mastra | None,
) -> list[Row]:
    setups: dict[str, Callable[[], tuple[float, float]]] = {
        FLOOR: functools.partial(trio.run, _measure_one, _floor, runs, chunks),
    }
    for mode in modes:
        setups[f"agent {mode}"] = functools.partial(
            trio.run, _measure_one, _agent_workload(mode), runs, chunks
        )
    if peer is not None:  # figures already per second and per run: see the .mjs
        setups[MASTRA] = lambda: _from_mastra(peer, runs, chunks)
    results = _common.interleaved(rounds, setups)
    rows = []
    for name, measured in results.items():
        seconds = _common.median([m[0] for m in measured])
        peak = _common.median([m[1] for m in measured])
        if name == MASTRA:
            rows.append(Row(name, runs, 1 / seconds, peak))
        else:
            rows.append(Row(name, runs, runs * chunks / seconds, peak / runs / 1024))
    return rows


def _from_mastra(peer: Mastra, runs: int, chunks: int) -> tuple[float, float]:
    """(seconds per chunk, KiB per run) from one node process."""
    figures = peer.run("many_runs", runs=runs, chunks=chunks, processors=PROCESSORS)
    return 1 / figures["chunks_per_second"], figures["kib_per_run"]


async def _profile(runs: int, chunks: int, modes: Sequence[ExecutionMode]) -> None:
    """Print, per mode, the counts, the held allocations and the profile."""
    for mode in modes:
        print(f"=== agent {mode}: {runs} runs x {chunks} chunks")
        go = await _agent_workload(mode)(runs, chunks)
        counts = SchedulerCounts()
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
    parser = _common.parser(__doc__)
    parser.set_defaults(rounds=1)
    parser.add_argument("--runs", type=int, default=1_000)
    parser.add_argument("--chunks", type=int, default=200)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="profile one round per mode instead of measuring the table",
    )
    parser.add_argument(
        "--gc-gen0",
        type=int,
        default=None,
        help="the cyclic GC's generation-0 threshold for the whole run, every "
        "row alike (what a server may set at start-up; default Python's, 700)",
    )
    args = parser.parse_args(argv)
    if args.gc_gen0 is not None:
        before = gc.get_threshold()
        gc.set_threshold(args.gc_gen0, *before[1:])
        try:
            return _main(args, parser)
        finally:
            gc.set_threshold(*before)
    return _main(args, parser)


def _main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> list[Row]:
    modes = _common.modes(args, parser)
    runs, chunks, rounds = (
        (20, 20, 1) if args.quick else (args.runs, args.chunks, args.rounds)
    )
    if args.profile:
        trio.run(_profile, runs, chunks, modes)
        return []
    peer = _common.mastra(args)
    print(
        f"{runs} concurrent runs x {chunks} chunks x {PROCESSORS} processors, "
        f"{rounds} interleaved rounds, medians"
    )
    print(f"{_common.versions(peer)}; gc thresholds {gc.get_threshold()}")
    rows = _measure(runs, chunks, rounds, modes, peer)
    floor = rows[0].chunks_per_second
    mastra = next((r for r in rows if r.setup == MASTRA), None)
    print(
        f"{'setup':<26}{'runs':>6}{'chunks/s':>12}{'vs floor':>10}{'vs mastra':>11}"
        f"{'KiB/run':>10}"
    )
    peer_rate = None if mastra is None else mastra.chunks_per_second
    for r in rows:
        versus = _common.ratio(r.chunks_per_second, peer_rate)
        print(
            f"{r.setup:<26}{r.runs:>6}{r.chunks_per_second:>12,.0f}"
            f"{r.chunks_per_second / floor:>9.2f}x{versus:>11}{r.kib_per_run:>10.1f}"
        )
    agent = [r for r in rows if r.setup.startswith("agent ")]
    peer_line = (
        ""
        if mastra is None
        else f"; mastra {mastra.chunks_per_second:,.0f} chunks/s, "
        f"{mastra.kib_per_run:.0f} KiB/run (heapUsed)"
    )
    print(
        f"summary: {runs} concurrent runs x {chunks} chunks x {PROCESSORS} "
        "processors: "
        + "; ".join(
            f"{r.setup} {r.chunks_per_second:,.0f} chunks/s, "
            f"{r.kib_per_run:.1f} KiB/run"
            for r in agent
        )
        + f"; floor {floor:,.0f} chunks/s"
        + peer_line
    )
    return rows


if __name__ == "__main__":
    main()
