"""The ``Inline`` marker: a driver's source lets the pipeline pull items from
an ``InlineSource`` in its reading task, then goes on; in every mode the items
come out in source order, through the stages."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from procession import Processor
from procession.actors import ExecutionMode, open_output_pipeline
from procession.actors._markers import Inline
from procession.chunks import Chunk, TextDeltaChunk, text_delta
from procession.processors import ProcessOutputStreamArgs


class Upper(Processor):
    id = "upper"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk):
            return text_delta(part.payload.text.upper())
        return part


class Handed:
    """``b`` and ``c`` at hand; then ``d`` after a second (handed over by
    another task); then done."""

    def __init__(self) -> None:
        self._at_hand = [text_delta("b"), text_delta("c")]
        self._later: Chunk | None = None
        self._done = False
        self._arrived = trio.Event()
        self.waited = 0

    async def produce(self) -> None:
        await trio.sleep(1)
        self._later = text_delta("d")
        self._arrived.set()

    def pull_nowait(self) -> Any:
        if self._at_hand:
            return self._at_hand.pop(0)
        if self._later is not None:
            later, self._later = self._later, None
            self._done = True
            return later
        if self._done:
            raise trio.EndOfChannel
        raise trio.WouldBlock

    async def pull(self) -> Any:
        self.waited += 1
        await self._arrived.wait()
        return self.pull_nowait()


@pytest.mark.parametrize("mode", ["adaptive", "fused", "actors"])
async def test_inline_items_come_in_source_order_through_the_stages(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    handed = Handed()

    async def source() -> AsyncIterator[Any]:
        yield text_delta("a")
        yield Inline(handed)
        yield text_delta("e")

    got: list[str] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(handed.produce)
        async with open_output_pipeline([Upper()], source(), mode=mode) as stream:
            async for chunk in stream:
                assert isinstance(chunk, TextDeltaChunk)
                got.append(chunk.payload.text)
    assert got == ["A", "B", "C", "D", "E"]
    assert handed.waited == 1
    assert stream.statistics().delivered == 5
