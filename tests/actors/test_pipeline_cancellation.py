"""The output-stream pipeline in every execution mode: a reader leaving early,
the abort signal, and cancelling a source that never blocks within the
checkpoint budget; every task is cleaned up.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

from procession.actors import (
    ExecutionMode,
    open_output_pipeline,
)
from procession.chunks import (
    text_delta,
)
from procession.processors import (
    AbortSignal,
    ProcessOutputStreamArgs,
)
from tests.actors.pipeline_helpers import (
    Recorder,
    Scripted,
    each_mode,
    run,
    texts,
)

# --- leaving early, cancellation ----------------------------------------------------


@each_mode
@pytest.mark.parametrize("stalls", [False, True])
async def test_leaving_early_closes_the_source_and_every_task(
    mode: ExecutionMode, stalls: bool, autojump_clock: trio.testing.MockClock
) -> None:
    events: list[str] = []
    tasks: set[trio.lowlevel.Task] = set()

    async def source() -> AsyncIterator[Any]:
        tasks.add(trio.lowlevel.current_task())
        try:
            for n in range(1_000_000):
                if stalls and n == 3:
                    await trio.sleep_forever()
                yield text_delta(str(n))
        finally:
            events.append("source closed")

    def hook(args: ProcessOutputStreamArgs) -> Any:
        tasks.add(trio.lowlevel.current_task())
        return args.part

    signal = AbortSignal()
    start = trio.current_time()
    async with open_output_pipeline(
        [Scripted("p", hook), Scripted("q", hook, is_async=True)],
        source(),
        mode=mode,
        abort_signal=signal,
    ) as stream:
        async for _chunk in stream:
            break
        assert events == []
    events.append("block left")
    assert events == ["source closed", "block left"]
    assert trio.current_time() == start  # nothing waited for a grace period
    assert trio.lowlevel.current_task().child_nurseries == []
    me = trio.lowlevel.current_task()
    assert len(tasks - {me}) == (0 if mode != "actors" else 3)
    for task in tasks - {me}:
        assert inspect.getcoroutinestate(task.coro) == inspect.CORO_CLOSED
    assert stream.outcome is not None
    assert stream.outcome.kind == "cancelled"
    assert signal.aborted
    assert signal.reason == "the output stream was closed early"


@each_mode
async def test_reading_to_the_end_does_not_set_the_abort_signal(
    mode: ExecutionMode,
) -> None:
    signal = AbortSignal()
    chunks, stream = await run(
        [Recorder()], map(text_delta, "ab"), mode, abort_signal=signal
    )
    assert texts(chunks) == ["a", "b"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "completed"
    assert not signal.aborted


@each_mode
@pytest.mark.parametrize("checkpoint_every", [1, 16, 64])
async def test_a_source_that_never_blocks_is_cancelled_within_the_budget(
    mode: ExecutionMode,
    checkpoint_every: int,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A backlog (an async generator with no awaits) never reaches a checkpoint
    of its own; the pipeline must take one at least every ``checkpoint_every``
    source items, or a deadline would be ignored until the stream ends."""
    deadline_passes_at = 1000
    produced = 0
    chunk = text_delta("x")

    async def backlog() -> AsyncIterator[Any]:
        nonlocal produced
        for _ in range(300_000):
            produced += 1
            if produced == deadline_passes_at:
                autojump_clock.jump(60)  # the deadline passes while we are busy
            yield chunk

    delivered = 0
    with trio.move_on_after(1) as scope:
        async with open_output_pipeline(
            [Recorder("p"), Scripted("q", lambda args: args.part, is_async=False)],
            backlog(),
            mode=mode,
            checkpoint_every=checkpoint_every,
        ) as stream:
            async for _ in stream:
                delivered += 1
    assert scope.cancelled_caught
    assert deadline_passes_at <= produced <= deadline_passes_at + checkpoint_every
    assert delivered <= produced
    assert stream.outcome is not None
    assert stream.outcome.kind == "cancelled"
