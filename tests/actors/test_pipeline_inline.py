"""The ``Inline`` marker: a driver's source lets the pipeline pull items from
an ``InlineSource`` in its reading task, then goes on; in every mode the items
come out in source order, through the stages."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from procession import Processor
from procession.actors import ExecutionMode, open_output_pipeline
from procession.actors._markers import Inline
from procession.actors._pipeline import AT_HAND
from procession.chunks import Chunk, ErrorChunk, TextDeltaChunk, error, text_delta
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


# --- adaptive mode: the items at hand run as one batch -----------------------------


class AtHand:
    """``items`` all at hand, then the end."""

    def __init__(self, items: list[Any]) -> None:
        self._items = list(items)

    def pull_nowait(self) -> Any:
        if self._items:
            return self._items.pop(0)
        raise trio.EndOfChannel

    async def pull(self) -> Any:
        await trio.lowlevel.checkpoint()
        return self.pull_nowait()


class Seen(Processor):
    """Records the text of every delta its async hook is shown; awaits a
    checkpoint (a yield, not a park) on the texts in ``yield_on``."""

    id = "seen"

    def __init__(self, yield_on: frozenset[str] = frozenset()) -> None:
        self.texts: list[str] = []
        self.yield_on = yield_on

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk):
            self.texts.append(part.payload.text)
            if part.payload.text in self.yield_on:
                await trio.lowlevel.checkpoint()
        return part


def _inline(items: list[Any]) -> AsyncIterator[Any]:
    async def source() -> AsyncIterator[Any]:
        yield Inline(AtHand(items))

    return source()


def _fills(total: int) -> list[int]:
    """How many items each fill runs: one, then one more than ran before (1,
    2, 4, 8...), up to AT_HAND (the first chunk of a response never waits
    behind a batch)."""
    sizes: list[int] = []
    while sum(sizes) < total:
        sizes.append(min(AT_HAND, sum(sizes) + 1, total - sum(sizes)))
    return sizes


@pytest.mark.parametrize("mode", ["adaptive", "fused"])
async def test_adaptive_runs_the_chunks_at_hand_ahead_of_the_client_in_batches(
    mode: ExecutionMode,
) -> None:
    seen = Seen()
    # 48 items: within the first checkpoint_every (64) source items, where a
    # batch also ends.
    texts = [str(i) for i in range(3 * AT_HAND)]
    run_after_each_read: list[int] = []
    async with open_output_pipeline(
        [seen], _inline([text_delta(t) for t in texts]), mode=mode
    ) as stream:
        got = []
        async for chunk in stream:
            got.append(chunk.payload.text)
            run_after_each_read.append(len(seen.texts))
    assert got == texts
    assert seen.texts == texts
    if mode == "fused":  # one at a time: nothing runs ahead of the client
        assert run_after_each_read == list(range(1, len(texts) + 1))
        return
    expected: list[int] = []
    for size in _fills(len(texts)):
        expected.extend([len(expected) + size] * size)
    assert run_after_each_read == expected
    assert max(_fills(len(texts))) == AT_HAND


async def test_a_batch_ends_after_a_hook_that_yields() -> None:
    seen = Seen(yield_on=frozenset({"2"}))
    # The batches before the first of AT_HAND items.
    ramp = list(itertools.takewhile(lambda n: n < AT_HAND, _fills(4 * AT_HAND)))
    warm = [f"w{i}" for i in range(sum(ramp))]
    texts = [str(i) for i in range(AT_HAND)]
    async with open_output_pipeline(
        [seen], _inline([text_delta(t) for t in warm + texts]), mode="adaptive"
    ) as stream:
        for _ in warm:
            await stream.__anext__()
        assert seen.texts == warm
        await stream.__anext__()
        # "2"'s hook yielded: nothing after it ran before the client read on.
        assert seen.texts[len(warm) :] == ["0", "1", "2"]
        rest = [chunk async for chunk in stream]
    assert len(rest) == AT_HAND - 1


@pytest.mark.parametrize("mode", ["adaptive", "fused"])
async def test_a_batch_stops_before_an_error_until_the_chunks_before_it_are_read(
    mode: ExecutionMode,
) -> None:
    delivered_at_error: list[int] = []

    class Recorder:
        stream: Any = None

        async def on_retry_request(self, tripwire: Any) -> bool:
            return False

        async def on_error_chunk(self, chunk: ErrorChunk) -> bool:
            delivered_at_error.append(self.stream.statistics().delivered)
            return False  # not recovered: it goes on to the client

        def on_attempt(self, marker: Any) -> None:
            pass  # one attempt here

        def on_terminal(self, outcome: Any) -> None:
            pass  # nothing of its own to stop

    driver = Recorder()
    items = [text_delta("a"), text_delta("b"), error("boom"), text_delta("never")]
    async with open_output_pipeline(
        [Seen()], _inline(items), mode=mode, driver=driver
    ) as stream:
        driver.stream = stream
        got = [chunk async for chunk in stream]
    # The error was decided only once "a" and "b" had reached the client.
    assert delivered_at_error == [2]
    assert [c.type for c in got] == ["text-delta", "text-delta", "error", "text-delta"]
