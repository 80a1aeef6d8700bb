"""Time to first chunk, and what five processors add to it: the time from
entering ``agent.stream`` to the first text delta the client reads, over many
runs on one agent, with 0 and 5 async pass-through output processors, in every
execution mode (issue 10's "time to first chunk added by 5 processors" row).
The 0-processor run in the same mode is the baseline (the floor of what
processors add is 0). Each sample is one run (20 text deltas, the rest read
after the clock stops); the set-ups take turns sample by sample, and each
round's Python samples are followed by the same through Mastra
(``benchmarks/mastra/first_chunk.mjs``) where node 22 can be installed.
Median and p90 per set-up; "added" is the difference of the medians.

    python benchmarks/first_chunk.py            # 2,000 samples per set-up
    python benchmarks/first_chunk.py --samples 5000 --rounds 5
    python benchmarks/first_chunk.py --quick --no-mastra  # tiny, to check it runs
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import trio

# Run as a script, only benchmarks/ is on sys.path: add the repository root
# (ruff allows imports after a sys.path change).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _common
from benchmarks._mastra import Mastra
from procession import Agent
from procession.actors import ExecutionMode
from procession.chunks import TextDeltaChunk
from procession.testing import PassThrough, ScriptedModel

PROCESSOR_COUNTS = (0, 5)
CHUNKS = 20  # per run: a short answer; only the first delta is timed
WARMUP = 20  # runs per set-up before sampling, not counted
MASTRA = "mastra"


@attrs.frozen
class Row:
    setup: str  # "agent" or "mastra"
    mode: str  # an ExecutionMode, or "-" for Mastra
    processors: int
    samples: int
    median_us: float
    p90_us: float


async def _first_chunk(agent: Agent) -> float:
    """µs from entering ``agent.stream`` to the first text delta; reads the
    rest of the run after the clock stops."""
    start = time.perf_counter()
    first = None
    async with agent.stream("hi") as stream:
        async for chunk in stream:
            if first is None and isinstance(chunk, TextDeltaChunk):
                first = time.perf_counter() - start
    assert first is not None, "the run streamed no text delta"
    return first * 1e6


async def _python_round(
    modes: Sequence[ExecutionMode], samples: int
) -> dict[tuple[str, str, int], list[float]]:
    """One round: a fresh agent per (mode, processors), warmed up, then
    ``samples`` runs of each, the set-ups taking turns run by run (in a
    rotating order)."""
    turn = _common.text_turn(CHUNKS)
    agents = {
        ("agent", mode, k): Agent(
            id="bench",
            model=ScriptedModel([turn] * (samples + WARMUP)),
            output_processors=[PassThrough(i) for i in range(k)],
            execution_mode=mode,
        )
        for mode in modes
        for k in PROCESSOR_COUNTS
    }
    for agent in agents.values():
        for _ in range(WARMUP):
            await _first_chunk(agent)
    times: dict[tuple[str, str, int], list[float]] = {key: [] for key in agents}
    order = list(agents.items())
    for sample in range(samples):
        # Rotated each time, so no set-up always follows the same other one
        # (whose garbage, say, it would always pay for).
        turn_order = order[sample % len(order) :] + order[: sample % len(order)]
        for key, agent in turn_order:
            times[key].append(await _first_chunk(agent))
    return times


def _mastra_round(
    peer: Mastra, samples: int
) -> dict[tuple[str, str, int], list[float]]:
    figures = peer.run(
        "first_chunk",
        samples=samples,
        warmup=WARMUP,
        chunks=CHUNKS,
        processors=list(PROCESSOR_COUNTS),
    )["us"]
    return {(MASTRA, "-", k): figures[str(k)] for k in PROCESSOR_COUNTS}


def _measure(
    samples: int, rounds: int, modes: Sequence[ExecutionMode], peer: Mastra | None
) -> list[Row]:
    per_round = max(1, samples // rounds)
    setups: dict[str, Callable[[], dict[tuple[str, str, int], list[float]]]] = {
        "procession": functools.partial(trio.run, _python_round, modes, per_round)
    }
    if peer is not None:
        setups[MASTRA] = functools.partial(_mastra_round, peer, per_round)
    pooled: dict[tuple[str, str, int], list[float]] = {}
    for measured in _common.interleaved(rounds, setups).values():
        for one_round in measured:
            for key, values in one_round.items():
                pooled.setdefault(key, []).extend(values)
    return [
        Row(
            *key,
            len(values),
            _common.median(values),
            _common.percentile(values, 0.9),
        )
        for key, values in pooled.items()
    ]


def _report(rows: Sequence[Row]) -> None:
    base = {(r.setup, r.mode): r.median_us for r in rows if r.processors == 0}
    print(
        f"{'setup':<8}{'mode':<10}{'processors':>11}{'samples':>9}{'median us':>11}"
        f"{'p90 us':>9}{'added us':>10}{'vs mastra':>11}"
    )
    added: dict[tuple[str, str], float] = {}
    for r in rows:
        extra = r.median_us - base[(r.setup, r.mode)]
        if r.processors:
            added[(r.setup, r.mode)] = extra
        mastra = [
            m.median_us
            for m in rows
            if m.setup == MASTRA and m.processors == r.processors
        ]
        versus = (
            "-"
            if r.setup == MASTRA
            else _common.ratio(r.median_us, mastra[0] if mastra else None)
        )
        print(
            f"{r.setup:<8}{r.mode:<10}{r.processors:>11}{r.samples:>9}"
            f"{r.median_us:>11.1f}{r.p90_us:>9.1f}"
            f"{extra if r.processors else 0:>10.1f}{versus:>11}"
        )
    peer = added.get((MASTRA, "-"))
    figures = []
    for (setup, mode), us in added.items():
        if setup == MASTRA:
            continue
        versus = "" if peer is None else f" ({_common.ratio(us, peer)} mastra's)"
        figures.append(f"{mode} {us:.1f}{versus}")
    tail = "" if peer is None else f"; mastra {peer:.1f}"
    print(
        f"summary: time to first chunk added by {PROCESSOR_COUNTS[-1]} processors "
        f"(median us): {', '.join(figures)}{tail}"
    )


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = _common.parser(__doc__)
    parser.add_argument("--samples", type=int, default=2_000)
    args = parser.parse_args(argv)
    modes = _common.modes(args, parser)
    samples, rounds = (10, 1) if args.quick else (args.samples, args.rounds)
    peer = _common.mastra(args)
    print(
        f"time to the first text delta, {samples} samples per set-up in "
        f"{rounds} interleaved rounds"
    )
    print(_common.versions(peer))
    rows = _measure(samples, rounds, modes, peer)
    _report(rows)
    return rows


if __name__ == "__main__":
    main()
