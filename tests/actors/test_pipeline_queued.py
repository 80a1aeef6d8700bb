"""What a driver queued without waiting (a run's ``start``, ``NewAttempt``
and ``step-start``; ``step-finish`` and its barrier) runs through the chain in
one adaptive fill, and the client end hands it over without awaiting
(``next_ready``): a writer sends the lifecycle frames at hand in one send. A
hook that yields, or a marker the client end must await, ends the batch, and
``"fused"`` mode never runs ahead."""

from __future__ import annotations

from typing import Any

import pytest

from procession import Processor, TripWire
from procession.actors import ExecutionMode, open_output_pipeline
from procession.actors._control import ControlSource
from procession.actors._markers import Barrier, Deliver, EndRun, NewAttempt
from procession.chunks import DataChunk, TextDeltaChunk, TripwireChunk, text_delta
from procession.processors import ProcessOutputStreamArgs
from tests.actors.test_pipeline_inline import Seen


class Attempts:
    """A driver that records the attempts the client end began."""

    def __init__(self) -> None:
        self.began: list[Any] = []

    async def on_retry_request(self, tripwire: Any) -> bool:
        return False

    async def on_error_chunk(self, chunk: Any) -> bool:
        return False

    def on_attempt(self, marker: NewAttempt) -> None:
        self.began.append(marker.context)

    def on_terminal(self, outcome: Any) -> None:
        pass


def _queued(*items: Any) -> ControlSource:
    source = ControlSource()
    for item in items:
        source.put(item)
    source.close()
    return source


def _texts(chunks: list[Any]) -> list[str]:
    return [chunk.payload.text for chunk in chunks]


def _ready(stream: Any) -> list[Any]:
    """Everything ``next_ready`` hands over now."""
    got = []
    while (chunk := stream.next_ready()) is not None:
        got.append(chunk)
    return got


@pytest.mark.parametrize("mode", ["adaptive", "fused"])
async def test_the_items_a_driver_queued_run_in_one_fill_and_are_ready_together(
    mode: ExecutionMode,
) -> None:
    seen, driver = Seen(), Attempts()
    source = _queued(
        text_delta("start"),
        NewAttempt(0, discard=False, context="view"),
        text_delta("step"),
    )
    async with open_output_pipeline([seen], source, mode=mode, driver=driver) as stream:
        first = await stream.__anext__()
        ready = _ready(stream)
        rest = [chunk async for chunk in stream]
    assert first.payload.text == "start"
    if mode == "adaptive":
        # One fill ran both chunks; the attempt began between them, at the
        # client end, without an await.
        assert _texts(ready) == ["step"]
        assert rest == []
    else:  # fused: nothing runs ahead of the client
        assert ready == []
        assert _texts(rest) == ["step"]
    assert driver.began == ["view"]
    assert seen.texts == ["start", "step"]


async def test_a_hook_that_yields_on_a_queued_item_ends_the_batch() -> None:
    seen = Seen(yield_on=frozenset({"a"}))
    async with open_output_pipeline(
        [seen], _queued(text_delta("a"), text_delta("b"), text_delta("c"))
    ) as stream:
        first = await stream.__anext__()
        # "a"'s hook yielded: nothing after it ran before the client read on.
        assert seen.texts == ["a"]
        assert stream.next_ready() is None
        rest = [chunk async for chunk in stream]
    assert _texts([first, *rest]) == ["a", "b", "c"]


async def test_next_ready_releases_a_barrier_in_the_batch() -> None:
    barrier = Barrier()
    async with open_output_pipeline(
        [Seen()], _queued(text_delta("a"), barrier, text_delta("b"))
    ) as stream:
        first = await stream.__anext__()
        passed_before = barrier.passed  # "a" is delivered, the barrier is next
        ready = _ready(stream)
        assert (passed_before, barrier.passed) == (False, True)
        rest = [chunk async for chunk in stream]
    assert _texts([first, *ready, *rest]) == ["a", "b"]
    assert _texts(ready) == ["b"]


async def test_next_ready_hands_over_a_delivered_chunk_past_the_processors() -> None:
    seen = Seen()
    async with open_output_pipeline(
        [seen], _queued(text_delta("a"), Deliver(text_delta("custom")))
    ) as stream:
        first = await stream.__anext__()
        ready = _ready(stream)
    assert _texts([first, *ready]) == ["a", "custom"]
    assert seen.texts == ["a"]  # Deliver goes past every processor


async def test_a_marker_the_client_end_awaits_ends_the_batch() -> None:
    seen = Seen()
    tripwire = TripWire("stop here", processor_id="input-guard")
    async with open_output_pipeline(
        [seen], _queued(text_delta("a"), EndRun(tripwire), text_delta("b"))
    ) as stream:
        first = await stream.__anext__()
        assert stream.next_ready() is None  # EndRun is acted on by __anext__
        rest = [chunk async for chunk in stream]
    assert first.payload.text == "a"
    assert [type(chunk) for chunk in rest] == [TripwireChunk]
    assert seen.texts == ["a"]  # nothing after the run's end ran


class Announces(Processor):
    """Writes a custom chunk before each delta it passes (without a
    checkpoint: ``writer.custom`` takes one, and a hook that yields ends the
    batch anyway)."""

    id = "announces"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk):
            assert args.writer is not None
            args.writer.custom_nowait(
                DataChunk(type="data-note", data={"before": part.payload.text})
            )
        return part


async def test_a_custom_chunk_a_stage_writes_does_not_end_the_batch() -> None:
    async with open_output_pipeline(
        [Announces()], _queued(text_delta("a"), text_delta("b"))
    ) as stream:
        first = await stream.__anext__()
        ready = _ready(stream)
        rest = [chunk async for chunk in stream]
    assert [type(c).__name__ for c in [first, *ready]] == [
        "DataChunk",
        "TextDeltaChunk",
        "DataChunk",
        "TextDeltaChunk",
    ]
    assert rest == []
    assert [c.data["before"] for c in (first, ready[1])] == ["a", "b"]
