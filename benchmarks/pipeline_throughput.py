"""Throughput of the output-stream pipeline against in-process baselines.

Five pass-through processors (sync hooks, then async hooks) over a backlog source
(an async generator that never blocks), in every execution mode, against two
baselines measured in the same run:

* ``sync calls``: the five hooks as plain function calls in a loop (the floor);
* ``awaited calls``: the five async hooks awaited in one trio task.

Reported per row: chunks/s through the whole chain, µs per chunk per stage, and
that cost as a ratio of each baseline (compare ratios across machines, not
absolute numbers). A second table gives the per-chunk cost of
``procession.chunks.to_wire`` (what a server pays to put a chunk on the wire), for
reference against the per-stage cost.

Run: ``python benchmarks/pipeline_throughput.py`` (about 30 s on 2 cores), or
``--quick`` for a smoke run (what the unit suite does, so this cannot rot).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, cast

import attrs
import trio

from procession.actors import ExecutionMode, open_output_pipeline
from procession.chunks import text_delta, to_wire
from procession.processors import ProcessOutputStreamArgs

STAGES = 5
LINK_CAPACITIES = (0, 1, 16)


@attrs.frozen
class Row:
    """One measured configuration."""

    name: str
    mode: str  # "baseline", "fused" or "actors"
    hooks: str  # "sync" or "async"
    link_capacity: int | None
    stages: int
    chunks: int
    seconds: float
    delivered: int

    @property
    def chunks_per_second(self) -> float:
        return self.chunks / self.seconds

    @property
    def us_per_chunk_stage(self) -> float:
        return self.seconds / (self.chunks * max(self.stages, 1)) * 1e6


@attrs.frozen
class Sizes:
    fused: int
    actors: int
    wire: int
    repeats: int


FULL = Sizes(fused=200_000, actors=20_000, wire=100_000, repeats=3)
QUICK = Sizes(fused=2_000, actors=300, wire=1_000, repeats=1)


# --- processors -------------------------------------------------------------------


class SyncPass:
    def __init__(self, n: int) -> None:
        self.id = f"sync-{n}"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        return args.part


class AsyncPass:
    def __init__(self, n: int) -> None:
        self.id = f"async-{n}"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        return args.part


def processors(hooks: str) -> list[Any]:
    kind = SyncPass if hooks == "sync" else AsyncPass
    return [kind(n) for n in range(STAGES)]


def _args() -> ProcessOutputStreamArgs:
    chunk = text_delta("x")
    return ProcessOutputStreamArgs(
        processor_id="baseline", state={}, part=chunk, stream_parts=[]
    )


async def backlog(chunks: int) -> AsyncIterator[Any]:
    """A source that never blocks (a fast local model, a cached replay)."""
    chunk = text_delta("x")
    for _ in range(chunks):
        yield chunk


# --- measurements ---------------------------------------------------------------


def best_of(
    repeats: int, measure: Callable[[], tuple[float, int]]
) -> tuple[float, int]:
    """The fastest of ``repeats`` runs (the least disturbed by the machine)."""
    results = [measure() for _ in range(repeats)]
    return min(results, key=lambda r: r[0])


def baseline_sync(chunks: int) -> tuple[float, int]:
    hooks = [p.process_output_stream for p in processors("sync")]
    h0, h1, h2, h3, h4 = hooks
    args = _args()
    delivered = 0
    start = time.perf_counter()
    for _ in range(chunks):
        # As the fused pipeline does: one args object, only ``part`` changes.
        args.part = h0(args)
        args.part = h1(args)
        args.part = h2(args)
        args.part = h3(args)
        args.part = h4(args)
        delivered += 1
    return time.perf_counter() - start, delivered


def baseline_async(chunks: int) -> tuple[float, int]:
    hooks = [p.process_output_stream for p in processors("async")]
    h0, h1, h2, h3, h4 = hooks
    args = _args()

    async def run() -> tuple[float, int]:
        delivered = 0
        start = time.perf_counter()
        for _ in range(chunks):
            args.part = await h0(args)
            args.part = await h1(args)
            args.part = await h2(args)
            args.part = await h3(args)
            args.part = await h4(args)
            delivered += 1
        return time.perf_counter() - start, delivered

    return trio.run(run)


def pipeline(
    mode: str, hooks: str, chunks: int, link_capacity: int, stages: int
) -> tuple[float, int]:
    chain = processors(hooks)[:stages]

    async def run() -> tuple[float, int]:
        start = time.perf_counter()
        async with open_output_pipeline(
            chain,
            backlog(chunks),
            mode=cast(ExecutionMode, mode),
            link_capacity=link_capacity,
        ) as stream:
            async for _ in stream:
                pass
        elapsed = time.perf_counter() - start
        return elapsed, stream.statistics().delivered

    return trio.run(run)


def measure_chain(sizes: Sizes) -> list[Row]:
    n, m, k = sizes.fused, sizes.actors, sizes.repeats
    # (name, mode, hooks, link capacity, stages, chunks, repeats, measure)
    plan: list[tuple[str, str, str, int | None, int, int, int, Any]] = [
        ("sync calls", "baseline", "sync", None, STAGES, n, k, baseline_sync),
        ("awaited calls", "baseline", "async", None, STAGES, n, k, baseline_async),
    ]
    for hooks in ("sync", "async"):
        plan.append(("fused, no stages", "fused", hooks, None, 0, n, k, None))
        plan.append(("fused", "fused", hooks, None, STAGES, n, k, None))
        for link in LINK_CAPACITIES:
            # One run: a task hop per chunk per stage is slow, and steady.
            plan.append(
                (f"actors, link {link}", "actors", hooks, link, STAGES, m, 1, None)
            )
    rows: list[Row] = []
    for name, mode, hooks, cap, stages, chunks, repeats, baseline in plan:
        if baseline is not None:
            measure = functools.partial(baseline, chunks)
        else:
            measure = functools.partial(
                pipeline, mode, hooks, chunks, 1 if cap is None else cap, stages
            )
        seconds, delivered = best_of(repeats, measure)
        rows.append(Row(name, mode, hooks, cap, stages, chunks, seconds, delivered))
    return rows


def measure_wire(sizes: Sizes) -> list[tuple[str, float]]:
    """µs per chunk: ``to_wire`` alone, and ``to_wire`` + ``json.dumps``."""
    chunk = text_delta("hello, world")
    n = sizes.wire

    def wire_only() -> tuple[float, int]:
        start = time.perf_counter()
        for _ in range(n):
            to_wire(chunk)
        return time.perf_counter() - start, n

    def wire_json() -> tuple[float, int]:
        dumps = json.dumps
        start = time.perf_counter()
        for _ in range(n):
            dumps(to_wire(chunk), separators=(",", ":"))
        return time.perf_counter() - start, n

    results = []
    for name, fn in (("to_wire(chunk)", wire_only), ("json.dumps(to_wire)", wire_json)):
        seconds, _ = best_of(sizes.repeats, fn)
        results.append((name, seconds / n * 1e6))
    return results


# --- report -------------------------------------------------------------------


def print_report(rows: Sequence[Row], wire: Sequence[tuple[str, float]]) -> None:
    sync_floor = next(r for r in rows if r.name == "sync calls").us_per_chunk_stage
    async_floor = next(r for r in rows if r.name == "awaited calls").us_per_chunk_stage
    print(
        f"{STAGES} pass-through stages, backlog source; python "
        f"{sys.version.split()[0]}, trio {trio.__version__}"
    )
    header = (
        f"{'way to run':<20} {'hooks':<6} {'chunks':>8} {'chunks/s':>12} "
        f"{'µs/chunk/stage':>15} {'x sync':>8} {'x await':>8} {'marginal µs':>12}"
    )
    empty = {r.hooks: r for r in rows if r.mode == "fused" and r.stages == 0}
    print(header)
    print("-" * len(header))
    for r in rows:
        per_stage = r.us_per_chunk_stage
        marginal = "-"
        if r.mode == "fused" and r.stages:
            # What one more stage adds, the pipeline's fixed per-chunk cost aside.
            fixed = empty[r.hooks].us_per_chunk_stage
            marginal = f"{(per_stage * r.stages - fixed) / r.stages:.3f}"
        print(
            f"{r.name:<20} {r.hooks:<6} {r.chunks:>8} {r.chunks_per_second:>12,.0f} "
            f"{per_stage:>15.3f} {per_stage / sync_floor:>8.1f} "
            f"{per_stage / async_floor:>8.1f} {marginal:>12}"
        )
    print(
        "'fused, no stages': the pipeline's own cost per chunk (source, entry "
        "checks, client end).\nRatios: µs per chunk per stage over the baseline's. "
        "Marginal: µs one more fused stage adds per chunk."
    )
    print()
    print(f"{'serialisation':<22} {'µs/chunk':>9} {'x one sync stage':>17}")
    for name, us in wire:
        print(f"{name:<22} {us:>9.3f} {us / sync_floor:>17.1f}")


def main(argv: Sequence[str] | None = None) -> list[Row]:
    """Measure, print the tables, return the chain rows (for the smoke test)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny sizes: a smoke run, not a result"
    )
    options = parser.parse_args(argv)
    sizes = QUICK if options.quick else FULL
    gc.collect()
    rows = measure_chain(sizes)
    for row in rows:
        if row.delivered != row.chunks:
            raise AssertionError(f"{row.name}: delivered {row.delivered}/{row.chunks}")
    print_report(rows, measure_wire(sizes))
    return rows


if __name__ == "__main__":
    main()
