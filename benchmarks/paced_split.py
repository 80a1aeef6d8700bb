"""Where a paced delta's CPU goes, in one process: each set-up streams
answers of ``--deltas`` text deltas, the model waiting ``--pace-ms`` before
each (``trio.sleep``, as the scripted model of ``server_load.py`` does),
``--streams`` answers at once, and its reader checkpointing once per delta (a
socket send's schedule point). CPU per delta (``time.process_time``), the
set-ups in interleaved rounds, the least and the median of the rounds:

* ``floor: sleep + checkpoint``: one task per answer, what any paced stream
  costs at least (the served floors' own model);
* ``floor: two tasks, hand-over``: a task that sleeps and hands each delta to
  the answer's reading task (``reschedule``): the least a run whose model is
  read by another task than its client costs (with the nursery and the task
  an answer's second task takes, spread over its deltas);
* ``agent, 0 processors`` / ``agent, 5 pass-through``: ``agent.stream`` in
  each ``--modes`` mode, read to its end (the model of
  ``benchmarks/_served.py``, its turn checked once per workload);
* ``served app, 5 pass-through``: the same agent in ``create_app``'s ASGI app
  (as ``server_load.py`` serves it) called directly, its ``send`` a
  checkpoint: what the server adds to the agent, without sockets.

The "added" column is each set-up less the one it builds on: the hand-over's
cost, the engine's (the run's fixed cost spread over the answer's deltas,
and its per-delta path), the five processors', the server's.
``server_load.py`` measures the same workload over sockets, where every
figure is larger (hypercorn, h11, the kernel) but the engine does the same
work.

    python benchmarks/paced_split.py                 # 40 streams x 50 deltas, 2 ms
    python benchmarks/paced_split.py --deltas 100 --pace-ms 20 --streams 200
    python benchmarks/paced_split.py --quick         # tiny, to check it runs
"""

from __future__ import annotations

import functools
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

# Run as a script, only benchmarks/ is on sys.path: add the repository root
# (ruff allows imports after a sys.path change).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import _common, _served
from procession import Agent
from procession.actors import ExecutionMode
from procession.server import create_app, tune_gc
from procession.testing import PassThrough

FLOOR = "floor: sleep + checkpoint"
HAND_OVER = "floor: two tasks, hand-over"
AGENT_0 = "agent, 0 processors"
AGENT_5 = "agent, 5 pass-through"
SERVED = "served app, 5 pass-through"

_BASE: dict[str, str] = {
    HAND_OVER: FLOOR,
    AGENT_0: HAND_OVER,
    AGENT_5: AGENT_0,
    SERVED: AGENT_5,
}
"""The set-up each one builds on: its "added" column is the difference."""


@attrs.frozen
class Row:
    setup: str
    mode: str  # an execution mode, or "-" for a floor
    least_us: float  # CPU per delta, the least of the rounds
    median_us: float


Answer = Callable[[], Awaitable[None]]
"""One answer, streamed to its end."""


def _sleeping(deltas: int, pace_s: float) -> Answer:
    async def answer() -> None:
        for _ in range(deltas):
            await trio.sleep(pace_s)
            await trio.lowlevel.checkpoint()

    return answer


def _handed_over(deltas: int, pace_s: float) -> Answer:
    async def answer() -> None:
        ready: list[int | None] = []
        parked: list[trio.lowlevel.Task] = []

        def hand(item: int | None) -> None:
            ready.append(item)
            if parked:
                trio.lowlevel.reschedule(parked.pop())

        def abort(_: Any) -> trio.lowlevel.Abort:
            parked.clear()
            return trio.lowlevel.Abort.SUCCEEDED

        async def model() -> None:
            for index in range(deltas):
                await trio.sleep(pace_s)
                hand(index)
            hand(None)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(model)
            while True:
                while not ready:
                    parked.append(trio.lowlevel.current_task())
                    await trio.lowlevel.wait_task_rescheduled(abort)
                if ready.pop(0) is None:
                    return
                await trio.lowlevel.checkpoint()

    return answer


def _agent(processors: int, mode: ExecutionMode) -> Agent:
    return Agent(
        id="load",
        model=_served.model(),
        output_processors=[PassThrough(i) for i in range(processors)],
        execution_mode=mode,
    )


def _streamed(agent: Agent, prompt: str) -> Answer:
    async def answer() -> None:
        async with agent.stream(prompt) as stream:
            async for _chunk in stream:
                await trio.lowlevel.checkpoint()

    return answer


def _served_app(mode: ExecutionMode, body: bytes) -> Answer:
    app = create_app([_agent(5, mode)], max_concurrent_runs=100_000, keepalive_s=0)
    scope = _common.post_scope("/api/agents/load/stream")

    async def answer() -> None:
        async def send(message: Any) -> None:
            await trio.lowlevel.checkpoint()  # a socket send's schedule point

        # The client never leaves: the response ends when the run does.
        receive = _common.body_then(body, trio.sleep_forever)
        await app(dict(scope), receive, send)

    return answer


def _cpu_per_delta(answer: Answer, streams: int, repeats: int, deltas: int) -> float:
    async def main() -> None:
        for _ in range(repeats):
            async with trio.open_nursery() as nursery:
                for _ in range(streams):
                    nursery.start_soon(answer)

    started = time.process_time()
    trio.run(main)
    return (time.process_time() - started) / (streams * repeats * deltas) * 1e6


def _setups(
    modes: Sequence[ExecutionMode], deltas: int, pace_ms: float
) -> dict[tuple[str, str], Answer]:
    prompt = f"chunks={deltas} pace={pace_ms:g}"
    body = json.dumps({"messages": prompt}).encode()
    setups: dict[tuple[str, str], Answer] = {
        (FLOOR, "-"): _sleeping(deltas, pace_ms / 1000),
        (HAND_OVER, "-"): _handed_over(deltas, pace_ms / 1000),
    }
    for mode in modes:
        setups[AGENT_0, mode] = _streamed(_agent(0, mode), prompt)
        setups[AGENT_5, mode] = _streamed(_agent(5, mode), prompt)
        setups[SERVED, mode] = _served_app(mode, body)
    return setups


def _report(rows: list[Row], streams: int, deltas: int, pace_ms: float) -> None:
    least = {(r.setup, r.mode): r.least_us for r in rows}
    floor = least[FLOOR, "-"]
    print(
        f"{'set-up':28s} {'mode':9s} {'µs/delta':>9s} {'median':>8s} "
        f"{'vs floor':>9s} {'added':>7s}  to"
    )
    for row in rows:
        base = _BASE.get(row.setup)
        added = ""
        if base is not None:
            before = least.get((base, row.mode), least.get((base, "-")))
            if before is not None:
                added = f"{row.least_us - before:+7.1f}  {base}"
        print(
            f"{row.setup:28s} {row.mode:9s} {row.least_us:9.1f} "
            f"{row.median_us:8.1f} {_common.ratio(row.least_us, floor):>9s} "
            f"{added}"
        )
    served = next(r for r in rows if r.setup == SERVED)
    print(
        f"summary: a paced delta ({streams} streams x {deltas} deltas, "
        f"{pace_ms:g} ms apart) costs {served.least_us:.1f} µs served in one "
        f"process ({served.mode}), {_common.ratio(served.least_us, floor)} the "
        f"{floor:.1f} µs of a sleep and a checkpoint"
    )


def main(argv: Sequence[str] | None = None) -> list[Row]:
    parser = _common.parser(__doc__)
    parser.add_argument("--streams", type=int, default=40)
    parser.add_argument("--deltas", type=int, default=50)
    parser.add_argument("--pace-ms", type=float, default=2.0)
    parser.add_argument(
        "--repeats", type=int, default=10, help="answers each stream runs a round"
    )
    args = parser.parse_args(argv)
    modes = _common.modes(args, parser)
    streams, deltas, repeats, rounds, pace_ms = (
        (4, 5, 1, 1, 0.5)
        if args.quick
        else (args.streams, args.deltas, args.repeats, args.rounds, args.pace_ms)
    )
    print(
        f"CPU per paced delta in one process: {streams} streams x {repeats} "
        f"answers of {deltas} deltas, {pace_ms:g} ms apart; {rounds} "
        f"interleaved round(s), least and median"
    )
    print(_common.versions(None))
    if not args.quick:
        # As procession serve runs; not in a smoke run, which runs inside a
        # test process (tune_gc freezes what is alive and changes the
        # process's thresholds for good).
        tune_gc()
    setups = _setups(modes, deltas, pace_ms)
    for answer in setups.values():  # warm-up: imports, first calls
        _cpu_per_delta(answer, min(streams, 8), 1, deltas)
    measures: dict[tuple[str, str], Callable[[], float]] = {
        key: functools.partial(_cpu_per_delta, answer, streams, repeats, deltas)
        for key, answer in setups.items()
    }
    results = _common.interleaved(rounds, measures)
    rows = [
        Row(setup, mode, min(values), statistics.median(values))
        for (setup, mode), values in results.items()
    ]
    _report(rows, streams, deltas, pace_ms)
    return rows


if __name__ == "__main__":
    main()
