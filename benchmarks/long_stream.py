"""Long streams: does the per-chunk cost stay flat, and what does a run hold
per chunk? One ``agent.stream`` run of 20k and of 400k text deltas through 5
async pass-through output processors, in every execution mode (issue 10's
"per-chunk cost, 400k vs 20k chunks" and "memory held per chunk" rows), beside
the floor measured in the same run (the five hooks awaited in one task, flat by
construction: its ratio is the machine's own drift) and the same workload
through Mastra (``benchmarks/mastra/long_stream.mjs``) where node 22 can be
installed. Rounds are interleaved; each figure is the median.

Memory, in one separate pass per set-up at the long size: the script is built
before tracemalloc starts; "held" is the traced memory after a ``gc.collect()``
once the last chunk has been read, while the run is still open (what the run
keeps for the chunks it streamed), "kept" the same once the run is closed and
its stream dropped (what the agent keeps), both divided by the chunk count.
Mastra's figures are ``process.memoryUsage().heapUsed`` after a forced GC at the
same two points, less its value before the run.

    python benchmarks/long_stream.py           # 20k vs 400k chunks, 3 rounds
    python benchmarks/long_stream.py --modes fused --rounds 5
    python benchmarks/long_stream.py --quick --no-mastra  # tiny, to check it runs
"""

from __future__ import annotations

import functools
import gc
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
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
from procession.chunks import Chunk
from procession.testing import PassThrough, ScriptedModel

PROCESSORS = 5
FLOOR = "floor: awaited hooks"
MASTRA = "mastra"


@attrs.frozen
class Row:
    setup: str  # "agent", the floor or "mastra"
    mode: str  # an ExecutionMode, or "-"
    short_us: float  # per chunk, at the short size
    long_us: float  # per chunk, at the long size
    held_bytes: float | None  # per chunk, while the run is open (None: not measured)
    kept_bytes: float | None  # per chunk, after the run closed

    @property
    def growth(self) -> float:
        return self.long_us / self.short_us


def _agent(turn: list[Chunk], mode: ExecutionMode) -> Agent:
    return Agent(
        id="bench",
        model=ScriptedModel([turn]),
        output_processors=[PassThrough(i) for i in range(PROCESSORS)],
        execution_mode=mode,
    )


async def _timed_agent(turn: list[Chunk], mode: ExecutionMode) -> float:
    agent = _agent(turn, mode)
    start = time.perf_counter()
    await _common.drain(agent)
    return (time.perf_counter() - start) / len(turn) * 1e6


async def _timed_floor(turn: list[Chunk]) -> float:
    return await _common.awaited_floor(turn, PROCESSORS)


async def _held(agent: Agent) -> int:
    """Traced bytes after one whole run, read to its end but still open."""
    async with agent.stream("hi") as stream:
        async for _ in stream:
            pass
        gc.collect()
        return tracemalloc.get_traced_memory()[0]


async def _memory(turn: list[Chunk], mode: ExecutionMode) -> tuple[float, float]:
    """(held, kept) traced bytes per chunk of one run of ``turn``: while the
    run is open, and once it is closed and its stream dropped (what the agent
    keeps)."""
    agent = _agent(turn, mode)
    gc.collect()
    tracemalloc.start()
    try:
        held = await _held(agent)
        gc.collect()
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return held / len(turn), kept / len(turn)


def _measure(
    sizes: tuple[int, int],
    rounds: int,
    modes: Sequence[ExecutionMode],
    peer: Mastra | None,
) -> list[Row]:
    turns = [_common.text_turn(n) for n in sizes]
    setups: dict[tuple[str, str, int], Callable[[], Any]] = {}
    for size, turn in zip(sizes, turns, strict=True):
        setups[(FLOOR, "-", size)] = functools.partial(trio.run, _timed_floor, turn)
        for mode in modes:
            setups[("agent", mode, size)] = functools.partial(
                trio.run, _timed_agent, turn, mode
            )
    if peer is not None:  # one node process per round: both sizes
        setups[(MASTRA, "-", 0)] = lambda: peer.run(
            "long_stream", sizes=list(sizes), processors=PROCESSORS, measure="time"
        )["us_per_chunk"]
    results = _common.interleaved(rounds, setups)
    us = {key: _common.median(values) for key, values in results.items() if key[2]}
    rows = [
        Row(
            FLOOR,
            "-",
            us[(FLOOR, "-", sizes[0])],
            us[(FLOOR, "-", sizes[1])],
            None,
            None,
        )
    ]
    for mode in modes:
        held, kept = trio.run(_memory, turns[1], mode)
        rows.append(
            Row(
                "agent",
                mode,
                us[("agent", mode, sizes[0])],
                us[("agent", mode, sizes[1])],
                held,
                kept,
            )
        )
    if peer is not None:
        timed = results[(MASTRA, "-", 0)]
        memory = peer.run(
            "long_stream", sizes=[sizes[1]], processors=PROCESSORS, measure="memory"
        )
        rows.append(
            Row(
                MASTRA,
                "-",
                _common.median([t[str(sizes[0])] for t in timed]),
                _common.median([t[str(sizes[1])] for t in timed]),
                memory["held_bytes_per_chunk"],
                memory["kept_bytes_per_chunk"],
            )
        )
    return rows


def _report(rows: Sequence[Row], sizes: tuple[int, int]) -> None:
    short, long = (f"{n // 1000}k" if n >= 1000 else str(n) for n in sizes)
    print(
        f"{'setup':<22}{'mode':<10}{f'us/chunk {short}':>15}{f'us/chunk {long}':>15}"
        f"{'growth':>8}{'vs mastra':>11}{'held B/chunk':>14}{'kept B/chunk':>14}"
    )
    mastra = next((r for r in rows if r.setup == MASTRA), None)

    def size(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    for r in rows:
        versus = (
            "-"
            if mastra is None or r is mastra
            else _common.ratio(r.long_us, mastra.long_us)
        )
        print(
            f"{r.setup:<22}{r.mode:<10}{r.short_us:>15.2f}{r.long_us:>15.2f}"
            f"{r.growth:>7.2f}x{versus:>11}{size(r.held_bytes):>14}{size(r.kept_bytes):>14}"
        )
    figures = [
        f"{r.mode if r.setup == 'agent' else r.setup} {r.growth:.2f}x, "
        f"{size(r.held_bytes)} B/chunk held"
        for r in rows
        if r.setup != FLOOR
    ]
    floor = rows[0].growth
    print(
        f"summary: per-chunk cost {long} vs {short} chunks and memory held per chunk: "
        + "; ".join(figures)
        + f"; floor {floor:.2f}x"
    )


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = _common.parser(__doc__)
    parser.set_defaults(rounds=3)
    parser.add_argument("--short", type=int, default=20_000)
    parser.add_argument("--long", type=int, default=400_000)
    args = parser.parse_args(argv)
    modes = _common.modes(args, parser)
    sizes = (200, 4_000) if args.quick else (args.short, args.long)
    rounds = 1 if args.quick else args.rounds
    peer = _common.mastra(args)
    print(
        f"one run of {sizes[0]} and of {sizes[1]} text deltas, {PROCESSORS} "
        f"processors; {rounds} interleaved rounds, medians"
    )
    print(_common.versions(peer))
    rows = _measure(sizes, rounds, modes, peer)
    _report(rows, sizes)
    return rows


if __name__ == "__main__":
    main()
