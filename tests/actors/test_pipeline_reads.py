"""What a consumer that cancels its own reads gets: every chunk, once.

The README's heartbeat pattern puts a deadline on each read and keeps reading.
In fused mode the stages run in the consumer's task, so such a deadline can
fire anywhere inside the pipeline: while a hook awaits, or at the pipeline's
own every-``checkpoint_every`` checkpoint. Whatever it interrupts, the item
taken from the source must reach the client on a later read (issue 9, §2.1).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from procession.actors import ExecutionMode, open_output_pipeline
from procession.chunks import TextDeltaChunk, text_delta
from procession.processors import ProcessOutputStreamArgs

MODES: tuple[ExecutionMode, ...] = ("adaptive", "fused", "actors")
each_mode = pytest.mark.parametrize("mode", MODES)


async def numbered(count: int) -> AsyncIterator[Any]:
    for n in range(count):
        yield text_delta(str(n))


async def read_with_deadlines(stream: Any, deadline: float) -> list[str]:
    """The heartbeat pattern: each read under its own deadline; a read that
    times out is simply tried again."""
    seen: list[str] = []
    iterator = stream.__aiter__()
    while True:
        with trio.move_on_after(deadline):
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                return seen
            assert isinstance(chunk, TextDeltaChunk)
            seen.append(chunk.payload.text)


class SlowDropper:
    """Drops chunk number ``at``, after sleeping ``seconds`` on it; passes the
    rest on."""

    def __init__(self, at: int, seconds: float) -> None:
        self.id = "slow-dropper"
        self.at = at
        self.seconds = seconds

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        if len(args.stream_parts) - 1 == self.at:
            await trio.sleep(self.seconds)
            return None
        return args.part


@each_mode
@pytest.mark.parametrize("at", [0, 30, 62, 63, 64, 127])
async def test_a_read_cancelled_at_the_checkpoint_loses_no_chunk(
    mode: ExecutionMode, at: int, autojump_clock: trio.testing.MockClock
) -> None:
    """A slow hook that drops chunk 63 (index 62) outlives two reads: the
    second read runs on to the pipeline's checkpoint after the 64th source
    item was taken, and is cancelled there. That item still reaches the client,
    on the next read; only the dropped chunk is missing."""
    async with open_output_pipeline(
        [SlowDropper(at, seconds=2.0)], numbered(200), mode=mode
    ) as stream:
        seen = await read_with_deadlines(stream, deadline=1.0)
    assert seen == [str(n) for n in range(200) if n != at]
