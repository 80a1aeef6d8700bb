"""Issue 10 §1: in ``"fused"`` mode the consumer's task pulls the model's
chunks that are at hand (``next_nowait``), with no task switch per chunk; every
await on the model stays in the coordinator's task, so a cancelled read of the
stream never cancels the model source."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent
from procession.actors import ExecutionMode
from procession.chunks import Chunk, TextDeltaChunk, text_delta
from procession.models import ModelFinish, ModelRequest
from procession.testing import ScriptedModel

MODES: tuple[ExecutionMode, ...] = ("adaptive", "fused", "actors")


class BurstResponse:
    """Chunks in bursts: a burst's first chunk is awaited (after ``gap``
    seconds, inside an async generator: ``Cancelled`` there ends it for good),
    the rest of the burst is at hand (``next_nowait``). Records which task
    made each kind of read."""

    def __init__(self, bursts: list[list[str]], gap: float) -> None:
        self.finish: ModelFinish | None = None
        self._bursts = bursts
        self._gap = gap
        self._buffer: list[Chunk] = []
        self._gen = self._generate()
        self.nowait_tasks: list[Any] = []
        self.awaited_tasks: list[Any] = []

    async def _generate(self) -> AsyncIterator[Chunk]:
        for burst in self._bursts:
            await trio.sleep(self._gap)
            self._buffer.extend(text_delta(t) for t in burst[1:])
            yield text_delta(burst[0])
        self.finish = ModelFinish(finish_reason="stop")

    def __aiter__(self) -> BurstResponse:
        return self

    async def __anext__(self) -> Chunk:
        self.awaited_tasks.append(trio.lowlevel.current_task())
        if self._buffer:
            await trio.lowlevel.checkpoint()
            return self._buffer.pop(0)
        return await self._gen.__anext__()

    def next_nowait(self) -> Chunk:
        if not self._buffer:
            raise trio.WouldBlock
        self.nowait_tasks.append(trio.lowlevel.current_task())
        return self._buffer.pop(0)


class BurstModel:
    provider = "test"
    model_id = "bursts"

    def __init__(self, bursts: list[list[str]], gap: float = 2.0) -> None:
        self.response = BurstResponse(bursts, gap)

    @asynccontextmanager
    async def stream(self, request: ModelRequest) -> AsyncIterator[BurstResponse]:
        yield self.response


BURSTS = [["a", "b", "c"], [" d", "e", "f"], [" g", "h", "i"]]


@pytest.mark.parametrize("mode", MODES)
async def test_chunks_at_hand_are_pulled_in_the_consumers_task_in_fused_mode(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    model = BurstModel(BURSTS)
    agent = Agent(id="a", model=model, execution_mode=mode)
    consumer = trio.lowlevel.current_task()
    async with agent.stream("hi") as stream:
        result = await stream.result()
    assert result.text == "abc def ghi"
    response = model.response
    if mode != "actors":
        # Six chunks were at hand: taken without waiting by the run's task,
        # right after the burst's first chunk it awaited (READ_AHEAD), and
        # handed over with it, one wake-up per burst.
        assert len(response.nowait_tasks) == 6
        assert consumer not in response.nowait_tasks
    else:
        # Actors mode: every chunk is read by the coordinator and sent over.
        assert response.nowait_tasks == []
    # Every await on the model ran in the coordinator's task, never here:
    # in fused mode only the 3 bursts' first chunks and the end were awaited.
    awaited = 4 if mode != "actors" else 10
    assert len(response.awaited_tasks) == awaited
    assert consumer not in response.awaited_tasks


@pytest.mark.parametrize("mode", MODES)
async def test_a_heartbeat_timeout_while_the_model_waits_loses_nothing(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    # The model is quiet for 2 s before each burst; the consumer gives up on
    # each read after 0.5 s (an SSE heartbeat). Had a cancelled read reached
    # the model's generator, it would have ended there: the rest missing.
    model = BurstModel(BURSTS)
    agent = Agent(id="a", model=model, execution_mode=mode)
    got: list[str] = []
    heartbeats = 0
    async with agent.stream("hi") as stream:
        reader = stream.__aiter__()
        while True:
            with trio.move_on_after(0.5) as scope:
                try:
                    chunk = await reader.__anext__()
                except StopAsyncIteration:
                    break
                if isinstance(chunk, TextDeltaChunk):
                    got.append(chunk.payload.text)
            if scope.cancelled_caught:
                heartbeats += 1
        result = await stream.result()
    assert "".join(got) == "abc def ghi"
    assert result.text == "abc def ghi"
    assert result.finish_reason == "stop"
    assert heartbeats >= 9  # three quiet 2 s waits, at least 3 heartbeats each


async def test_a_backlog_read_in_the_consumers_task_still_checkpoints(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # 2,000 chunks at hand and no checkpoint in the model's fast path: the
    # pipeline's checkpoint budget (every 64 source items) lets others run.
    model = ScriptedModel([[text_delta("x ") for _ in range(2_000)]])
    agent = Agent(id="a", model=model, execution_mode="fused")
    turns = 0
    done = False

    async def other_task() -> None:
        nonlocal turns
        while not done:
            turns += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other_task)
        await trio.lowlevel.checkpoint()  # let it start
        turns = 0
        result = await agent.generate("hi")
        done = True
    assert result.text == "x " * 2_000
    assert turns >= 2_000 // 64 - 1


async def test_cancel_from_another_task_stops_a_backlog_read_within_the_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([[text_delta("x ") for _ in range(100_000)]])
    agent = Agent(id="a", model=model, execution_mode="fused")
    started = trio.Event()
    async with agent.stream("hi") as stream:

        async def canceller() -> None:
            await started.wait()
            await stream.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(canceller)
            types = []
            async for chunk in stream:
                types.append(chunk.type)
                if len(types) == 10:
                    started.set()
    assert types[-1] == "abort"
    assert model.calls[0].closed_early
    # Read on for at most one checkpoint budget (64 items) after the cancel.
    assert model.calls[0].chunks_streamed < 10 + 2 * 64


@pytest.mark.parametrize("mode", ["adaptive", "fused"])
async def test_a_stream_waiting_for_the_model_keeps_no_exception_alive(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    # While the model is quiet, the read waits for the coordinator to hand
    # the next chunk over; it must not wait inside the handler of the
    # WouldBlock that sent it there (each waiting stream would keep the
    # exception and its traceback's frames alive).
    model = BurstModel(BURSTS)
    agent = Agent(id="a", model=model, execution_mode=mode)
    async with agent.stream("hi") as stream:
        got = ""
        while got != "abc":
            chunk = await stream.__anext__()
            if isinstance(chunk, TextDeltaChunk):
                got += chunk.payload.text
        nexts: list[Chunk] = []

        async def read_next() -> None:
            nexts.append(await stream.__anext__())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_next)
            await trio.testing.wait_all_tasks_blocked()
            assert nexts == []  # the read waits for the model's next burst
            gc.collect()
            alive = [o for o in gc.get_objects() if isinstance(o, trio.WouldBlock)]
            assert alive == []
        assert isinstance(nexts[0], TextDeltaChunk)
        assert nexts[0].payload.text == " d"
        result = await stream.result()
    assert result.text == "abc def ghi"
