"""Durable runs against their sequential reference (issue 24): Hypothesis
draws a run (tool steps of one to three calls, some idempotent, then an
answer) and a schedule of crashes (before a step's model call, in the middle
of its stream, while one of its tools runs), crashes the run at each
(``crash_run``: as ``kill -9`` with the lease lapsed at once) and has a new
``Agent`` on a new storage object take it over, as another process would, until
it finishes. Every interleaving must give what the run without crashes gives:

* the answer, and memory holding the turn once;
* a follower reading every process's stream in turn sees one run: once each
  ``step-retry`` (reason ``takeover``) has withdrawn what it withdraws, every
  tool result once and the answer's text once;
* the model asked again only for an attempt that was cut off before its
  answer was recorded, never for one whose tools it had called;
* a recorded tool never run again; a tool cut off mid-call run again only if
  it is idempotent (else its result is a ``ToolInterruptedError``).

The real ``kill -9`` of a process is in ``test_durable.py``."""

from __future__ import annotations

import pathlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from procession import Agent, tool
from procession.data import PromptAssistantMessage
from procession.memory import Memory, SqliteStorage
from procession.runtime import Durable
from procession.testing import (
    ScriptedModel,
    assert_run_shape,
    crash_run,
    text_turn,
    tool_call_turn,
)

pytestmark = pytest.mark.procession_real_clock

THREAD = {"thread": "t-1", "resource": "ada"}
ANSWER = "The answer, after every tool."


@attrs.frozen
class Call:
    id: str
    idempotent: bool


@attrs.frozen
class Crash:
    """Where a crash happens: at step ``step``, ``where`` is ``model``
    (before the model answers), ``stream`` (after its first chunk) or
    ``tool`` (while call ``call`` of the step runs)."""

    step: int
    where: str
    call: int = 0


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[list[Call]], list[Crash]]:
    steps = [
        [Call(f"s{i}c{j}", draw(st.booleans())) for j in range(draw(st.integers(1, 3)))]
        for i in range(draw(st.integers(0, 3)))
    ]
    points = [Crash(i, w) for i in range(len(steps) + 1) for w in ("model", "stream")]
    # At most one crash mid-tool per step (which call: drawn), so that what
    # it cuts off is known: the call it crashes in.
    points += [
        Crash(i, "tool", draw(st.integers(0, len(calls) - 1)))
        for i, calls in enumerate(steps)
    ]
    crashes = draw(st.lists(st.sampled_from(points), max_size=4, unique=True))
    return steps, crashes


@attrs.define
class World:
    """What the processes share: the script, the crashes still to come, and
    what happened."""

    steps: list[list[Call]]
    crashes: list[Crash]
    fired: list[Crash] = attrs.field(factory=list)
    crashing: trio.Event = attrs.field(factory=trio.Event)
    executed: Counter[str] = attrs.field(factory=Counter)
    asked: Counter[int] = attrs.field(factory=Counter)
    run_id: list[str] = attrs.field(factory=list)

    async def maybe_crash(self, point: Crash) -> None:
        """Crash here if the schedule says so (once per point): tell the
        controller, and wait to be cancelled by the crash."""
        if self.crashing.is_set():
            await trio.sleep_forever()  # this process is dying
        if point in self.crashes:
            self.crashes.remove(point)
            self.fired.append(point)
            self.crashing.set()
            await trio.sleep_forever()

    def turn(self, step: int) -> list[Any]:
        if step == len(self.steps):
            return text_turn(ANSWER)
        return [
            chunk
            for call in self.steps[step]
            for chunk in tool_call_turn(
                "idempotent" if call.idempotent else "once",
                {"id": call.id},
                tool_call_id=call.id,
            )
        ]


class _Response:
    def __init__(self, inner: Any, world: World, step: int) -> None:
        self._inner = inner
        self._world = world
        self._step = step

    @property
    def finish(self) -> Any:
        return self._inner.finish

    async def __aiter__(self) -> AsyncIterator[Any]:
        first = True
        async for chunk in self._inner:
            yield chunk
            if first:
                first = False
                await self._world.maybe_crash(Crash(self._step, "stream"))


class StepModel:
    """Answers step N (the number of assistant messages in the prompt) with
    the script's turn N, whichever process asks."""

    provider = "test"
    model_id = "steps"

    def __init__(self, world: World) -> None:
        self.world = world

    @asynccontextmanager
    async def stream(self, request: Any) -> AsyncIterator[Any]:
        step = sum(isinstance(m, PromptAssistantMessage) for m in request.prompt)
        self.world.asked[step] += 1
        await self.world.maybe_crash(Crash(step, "model"))
        async with ScriptedModel([self.world.turn(step)]).stream(request) as response:
            yield _Response(response, self.world, step)


@attrs.frozen
class Id:
    id: str


def _agent(world: World, db: str) -> Agent:
    def find(call_id: str) -> tuple[int, int]:
        for i, calls in enumerate(world.steps):
            for j, call in enumerate(calls):
                if call.id == call_id:
                    return i, j
        raise AssertionError(call_id)

    async def work(args: Id) -> dict[str, str]:
        world.executed[args.id] += 1
        step, call = find(args.id)
        point = Crash(step, "tool", call)
        if point in world.crashes:
            # The crash comes once the step's other calls have returned and
            # been recorded (a slow tool beside fast ones): their records
            # must keep them from running again.
            siblings = {c.id for c in world.steps[step]} - {args.id}
            storage: Any = agent.run_storage
            with trio.move_on_after(5):
                while True:
                    records = await storage.tool_records(run_of[0])
                    done = {r.tool_call_id for r in records if r.state == "done"}
                    if siblings <= done:
                        break
                    await trio.sleep(0.01)
        await world.maybe_crash(point)
        return {"done": args.id}

    @tool(idempotent=True)
    async def idempotent(args: Id) -> dict[str, str]:
        """Safe to run twice."""
        return await work(args)

    @tool
    async def once(args: Id) -> dict[str, str]:
        """Not safe to run twice."""
        return await work(args)

    agent = Agent(
        id="scribe",
        model=StepModel(world),
        tools=[idempotent, once],
        memory=Memory(storage=SqliteStorage(db)),
        durable=Durable(lease_s=30),
    )
    run_of = world.run_id
    return agent


def _follower_view(chunks: Sequence[Any]) -> list[tuple[int, Any]]:
    """What a follower keeps: each chunk with the step it belongs to, minus
    what each ``step-retry`` withdrew (its step and after)."""
    kept: list[tuple[int, Any]] = []
    step = -1
    for chunk in chunks:
        if chunk.type == "step-retry":
            withdrawn = chunk.payload.step_number
            kept = [(s, c) for s, c in kept if s < withdrawn]
            step = withdrawn - 1
            continue
        if chunk.type == "step-start":
            step += 1
        kept.append((step, chunk))
    return kept


async def _run(world: World, db: str) -> tuple[Any, list[Any], int]:
    """Run to the end through every crash; the result, every chunk every
    process streamed, and how many processes it took."""
    chunks: list[Any] = []
    agents: list[Agent] = []
    processes = 0
    try:
        agent = _agent(world, db)
        agents.append(agent)
        opening = agent.stream("go", memory=THREAD)
        while True:
            processes += 1
            world.crashing = trio.Event()
            async with opening as stream:
                world.run_id[:] = [stream.run_id]
                done = trio.Event()

                async def read(stream: Any = stream, done: trio.Event = done) -> None:
                    async for chunk in stream:
                        chunks.append(chunk)
                    done.set()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(read)
                    async with trio.open_nursery() as race:

                        async def on_crash(
                            stream: Any = stream, race: Any = race
                        ) -> None:
                            await world.crashing.wait()
                            assert await crash_run(stream)
                            race.cancel_scope.cancel()

                        async def on_done(done: Any = done, race: Any = race) -> None:
                            await done.wait()
                            race.cancel_scope.cancel()

                        race.start_soon(on_crash)
                        race.start_soon(on_done)
                result = await stream.result()
            if result.finish_reason != "moved":
                return result, chunks, processes
            agent = _agent(world, db)  # another process
            agents.append(agent)
            (record,) = await agent.lapsed_runs()
            opening = agent.take_over(record)
    finally:
        for a in agents:
            storage: Any = a.run_storage
            await storage.aclose()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(scenario=scenarios())
def test_any_crash_schedule_gives_what_the_run_without_crashes_gives(
    tmp_path: pathlib.Path, scenario: tuple[list[list[Call]], list[Crash]]
) -> None:
    steps, crashes = scenario
    world = World(steps, list(crashes))
    db = str(tmp_path / f"{uuid.uuid4().hex}.db")
    result, chunks, processes = trio.run(_run, world, db)

    assert result.finish_reason == "stop"
    assert result.text == ANSWER
    assert processes == len(world.fired) + 1
    event(f"crashes fired: {len(world.fired)}")

    # One run, as a follower reads it across every process.
    assert assert_run_shape(chunks) == "finish"
    view = [c for _s, c in _follower_view(chunks)]
    text = "".join(c.payload.text for c in view if c.type == "text-delta")
    assert text == ANSWER
    outcomes = [c for c in view if c.type in ("tool-result", "tool-error")]
    calls = [call for step in steps for call in step]
    assert sorted(c.payload.tool_call_id for c in outcomes) == sorted(
        call.id for call in calls
    )
    # A crash while a tool runs cuts that call off (it comes once the
    # step's other calls are recorded).
    cut = {f"s{p.step}c{p.call}" for p in world.fired if p.where == "tool"}
    by_id = {c.payload.tool_call_id: c for c in outcomes}
    for call in calls:
        outcome, runs = by_id[call.id], world.executed[call.id]
        if call.id in cut and not call.idempotent:
            # Told it was interrupted, and never run again.
            assert outcome.type == "tool-error"
            assert "interrupted" in str(outcome.payload.error)
            assert runs == 1
        else:
            assert outcome.type == "tool-result"
            assert outcome.payload.result == {"done": call.id}
            # A recorded outcome is never run again; a call cut off runs
            # again only if it is idempotent.
            assert runs == 1 + (call.id in cut)

    # The model: asked again only for an attempt cut off before its answer.
    for step in range(len(steps) + 1):
        redone = sum(
            1 for p in world.fired if p.step == step and p.where in ("model", "stream")
        )
        assert world.asked[step] == 1 + redone
