"""The idle timeout of every run in a trio run is kept by one watchdog task
(``procession.runtime._idle``): concurrent runs with their own timeouts each
time out at their own moment, a run that starts later with a shorter timeout
is not held up by the watchdog's later wake, a run that waits for its model
holds no task of its own for the timeout, and once no run waits the watchdog
leaves no deadline behind."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent, ModelIdleTimeout
from procession.testing import ScriptedModel, drip, stall, text_turn


async def _timed_run(agent: Agent, started: float, ended: dict[str, float]) -> None:
    result = await agent.generate("hi")
    assert isinstance(result.error, ModelIdleTimeout)
    ended[agent.id] = trio.current_time() - started


async def test_concurrent_runs_time_out_each_at_its_own_moment(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended: dict[str, float] = {}
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for name, idle in (("slow", 50.0), ("fast", 7.0), ("mid", 20.0)):
            agent = Agent(
                id=name,
                model=ScriptedModel([stall(text_turn("a b"), 1)]),
                idle_timeout=idle,
            )
            nursery.start_soon(_timed_run, agent, start, ended)
    assert ended == {
        "fast": pytest.approx(7.0),
        "mid": pytest.approx(20.0),
        "slow": pytest.approx(50.0),
    }


async def test_a_later_run_with_a_shorter_timeout_brings_the_wake_forward(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The watchdog sleeps towards the first run's deadline (100 s away); a
    run that starts waiting 10 s later with a 5 s timeout ends at 15 s."""
    ended: dict[str, float] = {}
    start = trio.current_time()
    long = Agent(
        id="long", model=ScriptedModel([stall(text_turn("a"), 0)]), idle_timeout=100
    )
    short = Agent(
        id="short", model=ScriptedModel([stall(text_turn("a"), 0)]), idle_timeout=5
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_timed_run, long, start, ended)
        await trio.sleep(10)
        nursery.start_soon(_timed_run, short, start, ended)
    assert ended == {"short": pytest.approx(15.0), "long": pytest.approx(100.0)}


async def test_a_watch_that_keeps_receiving_is_never_fired(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Events 4 s apart under a 5 s timeout, beside a run that times out:
    the watchdog's look at the busy run finds it waiting less than 5 s."""
    busy = Agent(
        id="busy",
        model=ScriptedModel([drip(text_turn("a b c d e f"), 4)]),
        idle_timeout=5,
    )
    stuck = Agent(
        id="stuck", model=ScriptedModel([stall(text_turn("x"), 0)]), idle_timeout=9
    )
    results: dict[str, Any] = {}

    async def run(agent: Agent) -> None:
        results[agent.id] = await agent.generate("hi")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, busy)
        nursery.start_soon(run, stuck)
    assert results["busy"].error is None
    assert results["busy"].text == "a b c d e f"
    assert isinstance(results["stuck"].error, ModelIdleTimeout)


class _Spawned(trio.abc.Instrument):
    def __init__(self) -> None:
        self.names: list[str] = []

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.names.append(task.name)


async def test_a_run_that_waits_for_its_model_spawns_no_task_for_the_timeout() -> None:
    """Three runs whose model waits between events: one coordinator task
    each, and one watchdog for the three (started by the first)."""
    spawned = _Spawned()
    agent = Agent(id="a", model=ScriptedModel([drip(text_turn("a b c"), 0.001)] * 3))
    trio.lowlevel.add_instrument(spawned)
    try:
        for _ in range(3):
            result = await agent.generate("hi")
            assert result.text == "a b c"
    finally:
        trio.lowlevel.remove_instrument(spawned)
    assert spawned.names.count("procession.idle_watchdog") <= 1
    assert [n for n in spawned.names if n != "procession.idle_watchdog"] == [
        "procession.run_coordinator"
    ] * 3


async def test_no_deadline_is_left_behind_once_no_run_waits() -> None:
    """After a run whose model waited, trio has no pending deadline of ours:
    a test on trio's autojump clock would not see time jump for it."""
    agent = Agent(
        id="a", model=ScriptedModel([drip(text_turn("a b"), 0.001)]), idle_timeout=30
    )
    result = await agent.generate("hi")
    assert result.text == "a b"
    await trio.testing.wait_all_tasks_blocked()
    assert trio.lowlevel.current_statistics().seconds_to_next_deadline == math.inf
