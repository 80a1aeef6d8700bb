"""Counting what the scheduler does, for tests that pin a run's cost as counts
(the same on a loaded machine, unlike timings)."""

from __future__ import annotations

import trio

__all__ = ["SchedulerCounts"]


class SchedulerCounts(trio.abc.Instrument):
    """A trio instrument counting task steps and spawned tasks while it is
    installed (``trio.lowlevel.add_instrument`` / ``remove_instrument``)."""

    def __init__(self) -> None:
        self.steps = 0
        """Task steps run (each time a task was resumed)."""
        self.spawned = 0
        """Tasks started."""

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.steps += 1

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.spawned += 1
