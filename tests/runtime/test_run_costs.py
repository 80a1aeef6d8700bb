"""Issue 10 §3: what one run costs the scheduler, counted (not timed).

The coordinator queues its markers and its own lifecycle chunks for the
pipeline instead of handing each over a zero-capacity channel (two task steps
a message), and the idle watchdog is a task only once the run waits for the
model. These tests pin the counts, and the order user code sees that the
queueing must keep.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio

from procession import Agent, Processor
from procession.actors import ExecutionMode
from procession.chunks import Chunk, TextDeltaChunk, text_delta
from procession.processors import (
    ProcessInputStepArgs,
    ProcessOutputStreamArgs,
)
from procession.testing import (
    Delay,
    PassThrough,
    SchedulerCounts,
    ScriptedModel,
    text_turn,
)

CHECKPOINT_EVERY = 64  # the pipeline's default cancellation-latency bound


async def _one_run(agent: Agent, **options: Any) -> tuple[SchedulerCounts, list[Chunk]]:
    """One streamed run, read to the end, with the scheduler counted."""
    counter = SchedulerCounts()
    trio.lowlevel.add_instrument(counter)
    try:
        async with agent.stream("hi", **options) as stream:
            chunks = [chunk async for chunk in stream]
    finally:
        trio.lowlevel.remove_instrument(counter)
    return counter, chunks


def _agent(chunks: int, runs: int = 1) -> Agent:
    turn: list[Chunk] = [text_delta("x ") for _ in range(chunks)]
    return Agent(
        id="costs",
        model=ScriptedModel([turn] * runs),
        output_processors=[PassThrough(i) for i in range(5)],
        execution_mode="fused",
    )


# The bound, for a one-step run whose chunks are all at hand, in fused mode.
# The consumer's task steps after its first read: the one that finds
# step-start, the Inline hand-over (the settle barrier queued behind it passes
# there), one per pipeline checkpoint, one for the settle barrier after
# step-finish, the source's end (queued with finish: nothing after finish
# awaits, RunControl.then) and the nursery's exit: 5 + checkpoints (7 before
# the barrier was queued ahead, 6 before the end came with finish). The
# coordinator's: its start, the model's entry checkpoint, the end of the
# hand-over (its settle then finds the barrier passed), the settle after
# step-finish, and its end: 5 (7, then 6, before). So 10 + checkpoints; 3
# more for slack (a scheduler detail, not a message). A zero-capacity channel
# made it 34 at 200 chunks.
_CONSTANT = 13
_CONSUMER = 5
_COORDINATOR = 5


@pytest.mark.parametrize("chunks", [0, 200, 1000])
async def test_a_run_takes_a_bounded_number_of_task_steps(chunks: int) -> None:
    counter, received = await _one_run(_agent(chunks))
    assert sum(c.type == "text-delta" for c in received) == chunks
    assert counter.steps <= _CONSTANT + math.ceil(chunks / CHECKPOINT_EVERY)


class _StepsOf(trio.abc.Instrument):
    """Counts the task steps of one task, and of the run's coordinator task,
    while installed."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0
        self.coordinator = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1
        elif task.name.endswith(".run_coordinator"):
            self.coordinator += 1


async def test_the_settle_after_the_model_costs_no_task_step() -> None:
    """The consumer's and the coordinator's steps in a one-step run of one
    chunk (the consumer's after the one that starts it; see ``_CONSUMER``):
    the barrier the coordinator settles on after the model read is queued
    behind the hand-over, so the consumer passes it without being woken for
    it, and the coordinator finds it passed."""
    counter = _StepsOf(trio.lowlevel.current_task())
    agent = _agent(1)
    trio.lowlevel.add_instrument(counter)
    try:
        async with agent.stream("hi") as stream:
            chunks = [chunk async for chunk in stream]
    finally:
        trio.lowlevel.remove_instrument(counter)
    assert [c.type for c in chunks].count("text-delta") == 1
    assert counter.steps <= _CONSUMER
    assert 0 < counter.coordinator <= _COORDINATOR


@pytest.mark.parametrize("mode", ["adaptive", "fused"])
async def test_without_a_stream_processor_step_finish_is_not_settled(
    mode: ExecutionMode,
) -> None:
    """Only a stream processor can ask for a retry on ``step-finish`` (or
    hold text back until it): without one the coordinator does not wait for
    it, one task step less for it and for the consumer."""
    steps = []
    for processors in ([], [PassThrough(0)]):
        counter = _StepsOf(trio.lowlevel.current_task())
        agent = Agent(
            id="costs",
            model=ScriptedModel([[text_delta("x ")]]),
            output_processors=processors,
            execution_mode=mode,
        )
        trio.lowlevel.add_instrument(counter)
        try:
            async with agent.stream("hi") as stream:
                types = [chunk.type async for chunk in stream]
        finally:
            trio.lowlevel.remove_instrument(counter)
        assert types[-2:] == ["step-finish", "finish"]
        steps.append((counter.steps, counter.coordinator))
    (bare_consumer, bare_coordinator), (consumer, coordinator) = steps
    assert consumer <= _CONSUMER
    assert coordinator <= _COORDINATOR
    assert bare_consumer < consumer
    assert bare_coordinator < coordinator


async def test_a_run_enters_three_cancel_scopes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run whose model never waits enters its nursery's scope, the run's
    own (its end cancels the coordinator, not the caller) and the model
    read's (a granted retry stops the read): closing its source needs none."""
    entered: list[trio.CancelScope] = []
    real = trio.CancelScope.__enter__

    def counting(scope: trio.CancelScope) -> trio.CancelScope:
        entered.append(scope)
        return real(scope)

    agent = _agent(1)
    monkeypatch.setattr(trio.CancelScope, "__enter__", counting)
    async with agent.stream("hi") as stream:
        chunks = [chunk async for chunk in stream]
    monkeypatch.undo()
    assert [c.type for c in chunks].count("text-delta") == 1
    assert len(entered) == 3


async def test_task_steps_grow_only_with_the_checkpoints() -> None:
    """Chunks at hand cost no task step each: 800 more chunks cost at most
    their checkpoints (800 / 64, rounded up)."""
    short, _ = await _one_run(_agent(200))
    long, _ = await _one_run(_agent(1000))
    assert long.steps - short.steps <= math.ceil(800 / CHECKPOINT_EVERY)


async def test_a_run_whose_model_never_waits_spawns_only_its_coordinator() -> None:
    # The default idle timeout (60 s) is on: its watchdog is not a task until
    # the run has to wait for the model.
    counter, _ = await _one_run(_agent(200))
    assert counter.spawned == 1


async def test_a_run_that_waits_for_the_model_starts_its_watchdog(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent = Agent(id="costs", model=ScriptedModel([["a", Delay(1), "b"]]))
    counter, received = await _one_run(agent)
    text = [c.payload.text for c in received if isinstance(c, TextDeltaChunk)]
    assert text == ["a", "b"]
    assert counter.spawned == 2  # the coordinator and the idle watchdog


async def test_without_an_idle_timeout_no_watchdog_starts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    agent = Agent(id="costs", model=ScriptedModel([["a", Delay(1), "b"]]))
    counter, _ = await _one_run(agent, idle_timeout=None)
    assert counter.spawned == 1


# --- the order user code sees ------------------------------------------------------


class _SeesStart(Processor):
    """An output processor logging the chunks its stream hook sees."""

    id = "sees-start"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        self.log.append(f"stream:{args.part.type}")
        return args.part


class _InputStep(Processor):
    id = "input-step"

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def process_input_step(self, args: ProcessInputStepArgs) -> Any:
        self.log.append("process_input_step")
        return None


async def test_a_coordinator_hook_runs_only_once_what_was_sent_before_is_taken() -> (
    None
):
    """``start`` is queued without waiting, but the input-step hook that
    follows waits until the pipeline has taken it: in fused mode the stream
    hook has seen ``start`` first, as with a zero-capacity channel."""
    log: list[str] = []
    agent = Agent(
        id="costs",
        model=ScriptedModel([text_turn("hi")]),
        input_processors=[_InputStep(log)],
        output_processors=[_SeesStart(log)],
        execution_mode="fused",
    )
    await agent.generate("hi")
    assert log[:2] == ["stream:start", "process_input_step"]


class _AbortOnStart(Processor):
    id = "abort-on-start"

    def __init__(self, boundary: bool | None = None) -> None:
        self.stream_boundary = boundary  # True: behind a boundary (adaptive)

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        if args.part.type == "start":
            args.abort("no")
        return args.part


@pytest.mark.parametrize(
    ("mode", "boundary"),
    [("fused", None), ("actors", None), ("adaptive", None), ("adaptive", True)],
)
async def test_an_abort_on_start_still_comes_before_the_model_call(
    mode: ExecutionMode, boundary: bool | None
) -> None:
    """The model is called only once step-start has been taken by the
    pipeline: an output processor that rejects the run on ``start`` costs no
    model call."""
    model = ScriptedModel([text_turn("never")])
    agent = Agent(
        id="costs",
        model=model,
        output_processors=[_AbortOnStart(boundary)],
        execution_mode=mode,
    )
    result = await agent.generate("hi")
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert model.calls == []
