"""Seeing whether an async hook really blocks (the ``"adaptive"`` mode).

A hook *blocks* when its call parks the task: it waits to be woken by someone
else (I/O, a sleep, an event, a lock, a thread), which trio expresses as its
``wait_task_rescheduled`` trap. A mere checkpoint (``await trio.sleep(0)``, a
channel send with room) is not blocking: the task is rescheduled at once. The
classification is by what the hook does, never by how long it took, so a run
on ``trio.testing.MockClock`` splits exactly where a run on the real clock
does, however loaded the machine.

The probe is in two steps, to stay cheaper than a hook call:

1. A hook is *driven* (``driven``) for its first ``PROBATION`` calls: its
   coroutine is stepped here and every trap it yields is looked at on its way
   to trio (~0.15 µs more per call). The first parked trap marks the stage as
   blocking. A hook that has not yielded once in those calls goes to step 2.
2. *Did the call yield at all?* One read of the current task's count of
   schedule points before and after the ``await`` (~0.02 µs): most hooks never
   yield, and stay here. One seen to yield is driven again from then on
   (beside the ~3 µs its own scheduling costs, the 0.15 µs do not matter).

So a hook that parks within its first ``PROBATION`` calls (an I/O hook on
every chunk, one every 50th) is found on its first park; one that starts
parking later is found on its second (the counter only says the first
yielded).

The calls on probation are counted across runs, on the processor's
registration (``ProcessorSpec.probe``, which an agent's runs share): once a
hook has had ``PROBATION`` quiet driven calls in a row, a new run's stage
starts at step 2, so short runs (a one-chunk answer has five calls per
stage) and paced ones stop paying step 1 on every call. A hook that starts
to park in a later run is then found on its second park, as one that starts
late in a run is; any yield or park starts its probation over.

Both steps read trio internals (the task's ``_schedule_points``, the trap's
class); where a trio version lacks them, every call is driven, and every
yield counts as a park (more boundaries, the same output).
"""

from __future__ import annotations

import types
from collections.abc import Coroutine, Generator
from typing import Any, Final

import trio

__all__: list[str] = []

_PARK_TRAP: type[Any] | None
try:  # trio's own trap for "park until rescheduled"
    from trio._core._traps import WaitTaskRescheduled

    _PARK_TRAP = WaitTaskRescheduled
except ImportError:  # pragma: no cover - a trio without it: every yield parks
    _PARK_TRAP = None


_COUNTS_SCHEDULE_POINTS: Final = any(
    field.name == "_schedule_points"
    for field in getattr(trio.lowlevel.Task, "__attrs_attrs__", ())
)
"""Whether this trio's tasks count their schedule points: read once from
trio's ``Task`` class (a run builds a stage per output processor, and each
asked)."""


def _has_schedule_points() -> bool:
    """Whether this trio's tasks count their schedule points (step 1)."""
    return _COUNTS_SCHEDULE_POINTS


COUNTED: Final = "counted"
"""Step 1: the stage's calls are awaited, the task's schedule points compared."""
DRIVEN: Final = "driven"
"""Step 2: the stage's calls are driven, their traps looked at."""


def schedule_points(task: Any) -> int:
    """The task's count of schedule points (step 1's probe)."""
    # Private to trio, read on purpose: _has_schedule_points checks it is there.
    count: int = task._schedule_points  # noqa: SLF001 - trio's, on purpose
    return count


PROBATION: Final = 64
"""The calls a watched hook is driven for before it may be only counted."""


def first_probation() -> int:
    """How many calls a watched stage is driven for first: ``PROBATION``, or
    for ever (0) where this trio does not count schedule points."""
    return PROBATION if _has_schedule_points() else 0


class Parked:
    """Set by ``driven``: whether the coroutine it drives yielded, and parked."""

    __slots__ = ("parked", "yielded")

    def __init__(self) -> None:
        self.parked = False
        self.yielded = False


def is_park(trap: Any) -> bool:
    """Whether a trap a coroutine yielded parks the task (see the module
    docstring); every trap does, where this trio's trap class is unknown."""
    return _PARK_TRAP is None or trap.__class__ is _PARK_TRAP


@types.coroutine
def driven(coro: Coroutine[Any, Any, Any], seen: Parked) -> Generator[Any, Any, Any]:
    """Await ``coro``, stepping it here: every trap it yields goes to trio
    unchanged (and what trio sends back, value or exception, goes back to it),
    and ``seen.parked`` is set once it yields a parking trap. Returns what
    ``coro`` returns; raises what it raises."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            trap = coro.send(value) if error is None else coro.throw(error)
        except StopIteration as stop:
            return stop.value
        seen.yielded = True
        if not seen.parked and is_park(trap):
            seen.parked = True
        value = error = None
        try:
            value = yield trap
        except BaseException as exc:  # Cancelled, KeyboardInterrupt, ...: to it
            error = exc
