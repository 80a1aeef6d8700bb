"""Slow processors: do their waits overlap? Five async output processors, each
awaiting ``trio.sleep(0.001)`` on every 50th text delta (and tagging that
delta's text with its index, so the order they ran in shows in the output),
through ``agent.stream`` with default options in every execution mode (issue
10's I/O-bound row).

Each agent run's time is given relative to the nominal sum of the waits
(5 x chunks/50 x 1 ms), to the same run without the waits, and to the sequential
floor measured in the same run (one task awaiting the five hooks per chunk: no
overlap at all); the overlapped floor (the five hooks in five tasks linked by
channels of 64) is the bound a pipeline can reach. "same output" compares the
text deltas the client saw with ``run_sequential``'s. The same workload runs
through Mastra (``benchmarks/mastra/io_overlap.mjs``, ``setTimeout(1)``) where
node 22 can be installed, against its own sequential floor.

    python benchmarks/io_overlap.py            # 2,000 chunks, 5 rounds
    python benchmarks/io_overlap.py --chunks 5000 --rounds 3
    python benchmarks/io_overlap.py --quick --no-mastra  # tiny, to check it runs
    python benchmarks/io_overlap.py --trace  # where one adaptive run's time goes

``--trace`` runs one ``agent.stream`` per mode asked for (adaptive by default)
under a trio instrument and says where its time goes: busy (task steps) against
idle (the run loop waiting in epoll, which is where the waits happen), per task
and per segment, the messages each segment took and their sizes, task steps per
chunk, the parks before the split, how full each link was when a stage parked,
and what ``trio.sleep(0.001)`` really takes here alone and after a busy
stretch. It reads adaptive internals (``procession.actors._split``) for the
segment figures: a diagnostic, not a measurement to compare across versions.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import statistics
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
from procession.actors import ExecutionMode
from procession.actors import _split as split_internals
from procession.chunks import Chunk, TextDeltaChunk
from procession.testing import ScriptedModel, run_sequential

PROCESSORS = 5
EVERY = 50
WAIT = 0.001
SEQUENTIAL = "floor: sequential"
OVERLAPPED = "floor: overlapped"
MASTRA = "mastra"


@attrs.frozen
class Row:
    setup: str
    mode: str  # an ExecutionMode, or "-" for the floors and Mastra
    waits: bool
    seconds: float
    same_output: bool | None  # None where not checked (the floors)


class Waiting:
    """On every ``EVERY``-th text delta it sees, awaits ``WAIT`` seconds (if
    ``wait``) and appends its index to the delta's text; passes the rest."""

    def __init__(self, index: int, *, wait: bool) -> None:
        self.id = f"wait-{index}"
        self.tag = str(index)
        self.wait = wait

    async def process_output_stream(self, args: Any) -> Any:
        part = args.part
        if not isinstance(part, TextDeltaChunk):
            return part
        seen = args.state["seen"] = args.state.get("seen", 0) + 1
        if seen % EVERY:
            return part
        if self.wait:
            await trio.sleep(WAIT)
        return attrs.evolve(
            part, payload=attrs.evolve(part.payload, text=part.payload.text + self.tag)
        )


def _chain(*, wait: bool) -> list[Waiting]:
    return [Waiting(i, wait=wait) for i in range(PROCESSORS)]


def _texts(chunks: Sequence[Any]) -> list[str]:
    return [c.payload.text for c in chunks if isinstance(c, TextDeltaChunk)]


class _Args:
    def __init__(self) -> None:
        self.part: Any = None
        self.state: dict[str, Any] = {}


async def _sequential(turn: list[Chunk]) -> tuple[float, list[str]]:
    """The no-overlap floor: one task awaits the five hooks on each chunk."""
    hooks = [p.process_output_stream for p in _chain(wait=True)]
    states = [_Args() for _ in hooks]
    out: list[Any] = []
    start = time.perf_counter()
    for chunk in turn:
        part = chunk
        for hook, args in zip(hooks, states, strict=True):
            args.part = part
            part = await hook(args)
        out.append(part)
    return time.perf_counter() - start, _texts(out)


async def _overlapped(turn: list[Chunk]) -> tuple[float, list[str]]:
    """The overlapped bound: each hook in its own task, linked by channels of 64."""
    out: list[Any] = []

    async def stage(hook: Any, receive: Any, send: Any) -> None:
        args = _Args()
        async with receive, send:
            async for part in receive:
                args.part = part
                await send.send(await hook(args))

    async def feed(send: Any) -> None:
        async with send:
            for chunk in turn:
                await send.send(chunk)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        first_send, receive = trio.open_memory_channel[Any](64)
        for processor in _chain(wait=True):
            send, next_receive = trio.open_memory_channel[Any](64)
            nursery.start_soon(stage, processor.process_output_stream, receive, send)
            receive = next_receive
        nursery.start_soon(feed, first_send)
        async for part in receive:
            out.append(part)
    return time.perf_counter() - start, _texts(out)


async def _agent(
    turn: list[Chunk], mode: ExecutionMode, wait: bool
) -> tuple[float, list[str]]:
    agent = Agent(
        id="bench",
        model=ScriptedModel([turn]),
        output_processors=_chain(wait=wait),
        execution_mode=mode,
    )
    out: list[Any] = []
    start = time.perf_counter()
    async with agent.stream("hi") as stream:
        async for chunk in stream:
            out.append(chunk)
    return time.perf_counter() - start, _texts(out)


async def _reference(turn: list[Chunk]) -> list[str]:
    async def source() -> AsyncIterator[Chunk]:
        for chunk in turn:
            yield chunk

    return _texts((await run_sequential(_chain(wait=False), source())).chunks)


def _measure(
    chunks: int, rounds: int, modes: Sequence[ExecutionMode], peer: Mastra | None
) -> list[Row]:
    turn = _common.text_turn(chunks)
    reference = trio.run(_reference, turn)
    setups: dict[tuple[str, str, bool], Callable[[], Any]] = {
        (SEQUENTIAL, "-", True): functools.partial(trio.run, _sequential, turn),
        (OVERLAPPED, "-", True): functools.partial(trio.run, _overlapped, turn),
    }
    for mode in modes:
        for wait in (True, False):
            setups[("agent", mode, wait)] = functools.partial(
                trio.run, _agent, turn, mode, wait
            )
    if peer is not None:  # one node process per round: every Mastra set-up
        setups[(MASTRA, "-", True)] = lambda: peer.run(
            "io_overlap",
            chunks=chunks,
            processors=PROCESSORS,
            every=EVERY,
            wait_ms=WAIT * 1000,
        )
    results = _common.interleaved(rounds, setups)
    rows = []
    for (name, shown, wait), measured in results.items():
        if name == MASTRA:
            rows.extend(_mastra_rows(measured))
            continue
        same = all(texts == reference for _, texts in measured)
        seconds = _common.median([s for s, _ in measured])
        rows.append(Row(name, shown, wait, seconds, same if name == "agent" else None))
    return rows


def _mastra_rows(measured: Sequence[dict[str, Any]]) -> list[Row]:
    """Mastra's rows: its sequential floor and its agent with and without waits."""
    return [
        Row(
            SEQUENTIAL if key == "sequential" else MASTRA,
            "node" if key == "sequential" else "-",
            key != "nowait",
            _common.median([m[key] for m in measured]),
            None if key == "sequential" else all(m["same_output"] for m in measured),
        )
        for key in ("sequential", "waits", "nowait")
    ]


def _report(rows: Sequence[Row], chunks: int) -> None:
    waits = PROCESSORS * (chunks // EVERY) * WAIT

    def seconds(setup: str, mode: str, wait: bool) -> float | None:
        found = [
            r.seconds for r in rows if (r.setup, r.mode, r.waits) == (setup, mode, wait)
        ]
        return found[0] if found else None

    print(
        f"{'setup':<20}{'mode':<10}{'waits':<7}{'seconds':>9}{'x waits':>9}"
        f"{'x no-wait':>11}{'x sequential':>14}{'vs mastra':>11}  same output"
    )
    summary = []
    for r in rows:
        is_mastra = r.setup == MASTRA or r.mode == "node"
        sequential = seconds(SEQUENTIAL, "node" if is_mastra else "-", True)
        nowait = seconds(r.setup, r.mode, False) if r.waits else None
        mastra = seconds(MASTRA, "-", r.waits)
        same = {None: "-", True: "yes", False: "NO"}[r.same_output]
        print(
            f"{r.setup:<20}{r.mode:<10}{'yes' if r.waits else 'no':<7}"
            f"{r.seconds:>9.4f}{_common.ratio(r.seconds, waits):>9}"
            f"{_common.ratio(r.seconds, nowait):>11}"
            f"{_common.ratio(r.seconds, sequential):>14}"
            f"{_common.ratio(r.seconds, mastra) if not is_mastra else '-':>11}  {same}"
        )
        if r.waits and r.setup in ("agent", MASTRA):
            who = r.mode if r.setup == "agent" else "mastra"
            summary.append(
                f"{who} {_common.ratio(r.seconds, sequential)} ({same} same output)"
            )
    bound = _common.ratio(
        seconds(OVERLAPPED, "-", True), seconds(SEQUENTIAL, "-", True)
    )
    print(
        f"summary: {PROCESSORS} processors x {chunks // EVERY} waits of "
        f"{WAIT * 1000:g} ms over {chunks} chunks, time over the sequential floor: "
        + ", ".join(summary)
        + f"; overlapped floor {bound} (ideal {1 / PROCESSORS:.2f}x: one "
        "processor's waits, no per-chunk cost)"
    )


# --- --trace: where one run's time goes ---------------------------------------

IDLE = 2e-4  # an epoll wait this long is the loop idling, not a poll(0)


class _Tracer(trio.abc.Instrument):
    """Busy time and steps per task, and the run loop's idle stretches."""

    def __init__(self) -> None:
        self.busy: dict[str, float] = collections.defaultdict(float)
        self.steps: collections.Counter[str] = collections.Counter()
        self.idle: list[float] = []
        self.names: dict[trio.lowlevel.Task, str] = {}
        self._step = 0.0
        self._wait = 0.0

    def name(self, task: trio.lowlevel.Task) -> str:
        return self.names.get(task) or task.name.rsplit(".", 1)[-1]

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._step = time.perf_counter()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        name = self.name(task)
        self.busy[name] += time.perf_counter() - self._step
        self.steps[name] += 1

    def before_io_wait(self, timeout: float) -> None:
        self._wait = time.perf_counter()

    def after_io_wait(self, timeout: float) -> None:
        waited = time.perf_counter() - self._wait
        if waited > IDLE:
            self.idle.append(waited)


class _Traced(Waiting):
    """``Waiting``, noting each wait: when, which processor, the links' fill."""

    def __init__(self, index: int, trace: _Trace) -> None:
        super().__init__(index, wait=True)
        self.index = index
        self.trace = trace

    async def process_output_stream(self, args: Any) -> Any:
        seen = args.state.get("seen", 0) + 1
        if not isinstance(args.part, TextDeltaChunk) or seen % EVERY:
            return await super().process_output_stream(args)
        self.trace.parked(self.index)
        start = time.perf_counter()
        try:
            return await super().process_output_stream(args)
        finally:
            self.trace.waits.append(time.perf_counter() - start)


class _Trace:
    """One run's figures; ``patched()`` wraps the splitter's segment and
    ``_through`` to see segments, messages and links."""

    def __init__(self) -> None:
        self.tracer = _Tracer()
        self.start = 0.0
        self.split_at: float | None = None
        self.inline_parks = 0  # parks before the split
        self.first_park: float | None = None
        self.waits: list[float] = []
        self.links: dict[int, Any] = {}  # segment lo -> its receive channel
        self.fill: dict[int, list[int]] = collections.defaultdict(list)
        self.sizes: dict[str, list[int]] = collections.defaultdict(list)

    def parked(self, index: int) -> None:
        if self.first_park is None:
            self.first_park = time.perf_counter()
        if self.split_at is None:
            self.inline_parks += 1
            return
        receive = self.links.get(index)
        if receive is not None:
            self.fill[index].append(receive.statistics().current_buffer_used)

    @contextlib.contextmanager
    def patched(self) -> Any:
        cls = split_internals.Splitter
        segment, through, start = cls._segment, cls._through, cls.start
        trace = self

        async def traced_segment(self: Any, lo: int, *rest: Any) -> None:
            trace.links[lo] = rest[1]
            trace.tracer.names[trio.lowlevel.current_task()] = f"segment {lo}"
            await segment(self, lo, *rest)

        async def traced_through(self: Any, lo: int, hi: int, items: Any) -> Any:
            task = trio.lowlevel.current_task()
            trace.sizes[trace.tracer.name(task)].append(len(items))
            return await through(self, lo, hi, items)

        def traced_start(self: Any) -> None:
            trace.split_at = time.perf_counter()
            start(self)

        originals = {"_segment": segment, "_through": through, "start": start}
        tracing = {
            "_segment": traced_segment,
            "_through": traced_through,
            "start": traced_start,
        }
        for name, function in tracing.items():
            setattr(cls, name, function)
        try:
            yield
        finally:
            for name, function in originals.items():
                setattr(cls, name, function)


async def _traced_run(turn: list[Chunk], mode: ExecutionMode, trace: _Trace) -> int:
    agent = Agent(
        id="bench",
        model=ScriptedModel([turn]),
        output_processors=[_Traced(i, trace) for i in range(PROCESSORS)],
        execution_mode=mode,
    )
    count = 0
    trace.start = time.perf_counter()
    async with agent.stream("hi") as stream:
        async for _ in stream:
            count += 1
    return count


async def _sleep_after(busy: float) -> float:
    """How long ``trio.sleep(WAIT)`` takes when another task keeps the loop
    busy for ``busy`` seconds after it parks (the median of 50)."""
    taken = []
    for _ in range(50):
        parked: list[float] = []

        async def sleeper(parked: list[float] = parked) -> None:
            parked.append(time.perf_counter())
            await trio.sleep(WAIT)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleeper)
            while not parked:
                await trio.lowlevel.checkpoint()
            until = time.perf_counter() + busy
            while time.perf_counter() < until:
                pass
        taken.append(time.perf_counter() - parked[0])
    return statistics.median(taken)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def _trace(chunks: int, modes: Sequence[ExecutionMode]) -> None:
    turn = _common.text_turn(chunks)
    for busy in (0.0, WAIT / 4, WAIT / 2, WAIT * 0.9):
        print(
            f"trio.sleep({WAIT:g}) with the loop busy {_ms(busy)} after it parks: "
            f"{_ms(trio.run(_sleep_after, busy))}"
        )
    for mode in modes:
        trio.run(_agent, turn, mode, True)  # warm: the first run pays for imports
        trace = _Trace()
        with trace.patched():
            count = trio.run(_traced_run, turn, mode, trace, instruments=[trace.tracer])
        _trace_report(mode, trace, count, time.perf_counter() - trace.start)


def _trace_report(mode: str, trace: _Trace, count: int, wall: float) -> None:
    tracer = trace.tracer
    busy, idle = sum(tracer.busy.values()), sum(tracer.idle)
    steps = sum(tracer.steps.values())
    print(
        f"\n{mode}: wall {_ms(wall)}; busy (task steps) {_ms(busy)}; idle "
        f"{_ms(idle)} in {len(tracer.idle)} stretches of "
        f"{_ms(idle / max(len(tracer.idle), 1))}; the rest (scheduler, "
        f"instrument) {_ms(wall - busy - idle)}; {steps / count:.2f} task steps "
        f"per chunk ({count} chunks)"
    )
    if trace.waits and trace.first_park is not None:
        print(
            f"  waits: {len(trace.waits)}, median "
            f"{_ms(statistics.median(trace.waits))} from park to resume; the "
            f"first park after {_ms(trace.first_park - trace.start)}"
        )
    if trace.split_at is not None:
        print(
            f"  split after {_ms(trace.split_at - trace.start)}, "
            f"{trace.inline_parks} parks inline before it"
        )
    for name in sorted(tracer.busy, key=lambda n: -tracer.busy[n]):
        sizes = trace.sizes.get(name, [])
        fill = (
            trace.fill.get(int(name.split()[-1]), [])
            if name.startswith("segment ")
            else []
        )
        print(
            f"  {name:<24}{_ms(tracer.busy[name]):>10}{tracer.steps[name]:>7} steps"
            + (
                f"; {len(sizes)} messages of {statistics.mean(sizes):.1f} items"
                if sizes
                else ""
            )
            + (
                f"; its link held {statistics.mean(fill):.1f} messages when it parked"
                if fill
                else ""
            )
        )


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = _common.parser(__doc__)
    parser.add_argument("--chunks", type=int, default=2_000)
    parser.add_argument(
        "--trace", action="store_true", help="where one run's time goes (see above)"
    )
    args = parser.parse_args(argv)
    modes = _common.modes(args, parser)
    chunks, rounds = (100, 1) if args.quick else (args.chunks, args.rounds)
    if args.trace:
        asked = "--modes" in " ".join(sys.argv if argv is None else argv)
        _trace(chunks, modes if asked else ["adaptive"])
        return []
    peer = _common.mastra(args)
    print(
        f"{PROCESSORS} processors, each waiting {WAIT * 1000:g} ms on every "
        f"{EVERY}th of {chunks} text deltas; {rounds} interleaved rounds, medians"
    )
    print(_common.versions(peer))
    rows = _measure(chunks, rounds, modes, peer)
    _report(rows, chunks)
    return rows


if __name__ == "__main__":
    main()
