"""A read whose deadline has already passed still gets a chunk that is ready,
in every mode (README, "Cancelled reads"): a consumer whose every read is
cancelled before it begins (a sub-microsecond heartbeat deadline) gets every
chunk, in order, once, and the same outcome as the sequential reference.

Before, actors mode (and a split adaptive run) never gave such a read a chunk
(trio's ``receive`` raises ``Cancelled`` before it looks), fused and adaptive
mode were cancelled at every ``checkpoint_every`` boundary, and a hook that
awaits was cut off before it could finish. Such a consumer spun for ever.

On trio's MockClock the clock moves only when every task waits, so the
consumer here lets 1 ms pass after a read that got nothing (its heartbeat):
otherwise a hook sleeping in a task of its own would never wake."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import trio
import trio.testing

from procession import Processor, TripWire
from procession.actors import ExecutionMode, OutputPipeline, open_output_pipeline
from procession.chunks import (
    Chunk,
    TextDeltaChunk,
    step_finish,
    step_start,
    text_delta,
    text_end,
    text_start,
    to_wire,
)
from procession.processors import ProcessorViolation, ProcessOutputStreamArgs
from procession.testing import run_sequential

MODES: tuple[ExecutionMode, ...] = ("fused", "adaptive", "actors")
EMPTY_READS = 1000  # in a row: the consumer spins (it took 2 or 3 here)


class Through(Processor):
    def __init__(self, id: str = "through") -> None:
        self.id = id

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        return args.part


class Checkpointing(Processor):
    def __init__(self, id: str) -> None:
        self.id = id

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        await trio.lowlevel.checkpoint()
        return args.part


class Sleeping(Processor):
    id = "sleeping"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        await trio.sleep(0.25)
        return args.part


class Guard(Processor):
    """Trips on the delta "stop"; its on_violation sleeps, then notes it."""

    id = "guard"

    def __init__(self, noted: list[str]) -> None:
        self.noted = noted

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk) and part.payload.text == "stop":
            raise TripWire("stopped")
        return part

    async def on_violation(self, violation: ProcessorViolation) -> None:
        await trio.sleep(0.1)
        self.noted.append(violation.message)


CHAINS: dict[str, Callable[[list[str]], list[object]]] = {
    "no processor": lambda noted: [],
    "a sync hook": lambda noted: [Through("a"), Through("b")],
    "hooks that checkpoint": lambda noted: [Checkpointing("a"), Checkpointing("b")],
    "a hook that sleeps": lambda noted: [Sleeping(), Through()],
    "a tripwire": lambda noted: [Sleeping(), Guard(noted)],
}


def chunks() -> list[Chunk]:
    deltas = [text_delta(str(n)) for n in range(7)]
    return [step_start(), text_start(), *deltas, text_delta("stop"), text_end(),
            step_finish()]  # fmt: skip


async def source() -> AsyncIterator[Chunk]:
    for chunk in chunks():
        yield chunk


async def read_expired(stream: OutputPipeline) -> list[Any]:
    seen: list[Any] = []
    empty = 0
    while True:
        with trio.CancelScope(deadline=-math.inf) as scope:
            try:
                seen.append(to_wire(await stream.__anext__()))
            except StopAsyncIteration:
                return seen
        if scope.cancelled_caught:
            empty += 1
            if empty >= EMPTY_READS:
                pytest.fail(f"no chunk in {EMPTY_READS} reads; {len(seen)} so far")
            await trio.sleep(0.001)
        else:
            empty = 0


async def run(
    chain: str, mode: ExecutionMode | None, checkpoint_every: int
) -> tuple[list[Any], str, list[str]]:
    noted: list[str] = []
    processors = CHAINS[chain](noted)
    if mode is None:
        reference = await run_sequential(processors, source())
        return [to_wire(c) for c in reference.chunks], reference.outcome.kind, noted
    async with open_output_pipeline(
        processors, source(), mode=mode, checkpoint_every=checkpoint_every
    ) as stream:
        seen = await read_expired(stream)
    assert stream.outcome is not None
    return seen, stream.outcome.kind, noted


@pytest.mark.parametrize("chain", CHAINS)
@pytest.mark.parametrize("checkpoint_every", [2, 64])
@pytest.mark.parametrize("mode", MODES)
def test_reads_whose_deadline_has_passed_get_every_chunk(
    mode: ExecutionMode, checkpoint_every: int, chain: str
) -> None:
    clock = trio.testing.MockClock(autojump_threshold=0)
    expected = trio.run(run, chain, None, checkpoint_every, clock=clock)
    got = trio.run(run, chain, mode, checkpoint_every, clock=clock)
    assert got == expected
    if chain == "a tripwire":
        assert got[1:] == ("tripwire", ["stopped"])
