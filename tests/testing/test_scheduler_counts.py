"""``SchedulerCounts`` counts what trio did while it was installed, and only then."""

from __future__ import annotations

import trio

from procession.testing import SchedulerCounts


async def test_it_counts_the_steps_and_the_tasks_of_what_ran_while_installed() -> None:
    async def checkpoints(n: int) -> None:
        for _ in range(n):
            await trio.lowlevel.checkpoint()

    counts = SchedulerCounts()
    trio.lowlevel.add_instrument(counts)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(checkpoints, 3)
            nursery.start_soon(checkpoints, 5)
    finally:
        trio.lowlevel.remove_instrument(counts)
    assert counts.spawned == 2
    # Each task: its first step plus one per checkpoint; this task at least one.
    assert counts.steps >= (1 + 3) + (1 + 5) + 1
    seen = counts.steps
    await checkpoints(4)  # removed: nothing more is counted
    assert counts.steps == seen
