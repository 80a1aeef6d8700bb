"""The model-stream idle timeout, for every run in a trio run: one watchdog.

A run's model read may go at most ``idle_timeout`` seconds without an event.
Each read has an ``IdleWatch``: ``since`` is when the run began to wait for
the model's next event (``None`` while it is not waiting), and the read's cancel
scope is what the timeout cancels. The watches of all runs in the same
``trio.run`` are looked after by one system task (``_Watchdog``) instead of a
task per run: a stream that waits for its model then holds no task, no cancel
scopes and no sleep of its own for it (~2.5 KiB a paced stream), and costs a
set insertion when it first waits and a removal when its read ends.

The watchdog sleeps until the earliest moment a watch could be due, looks at
every watch then, fires the ones due and sleeps again. ``since`` only moves
forward (or clears), so that moment is never later than a watch's true
deadline; a watch added with an earlier deadline brings the wake forward, and
when the last watch goes the watchdog sleeps with no deadline at all (trio's
autojump clock then has nothing of ours to jump to). With streams that each
wait briefly and often, it wakes about once per ``idle_timeout`` and looks at
each watch once then.
"""

from __future__ import annotations

import contextvars
import math

import trio

__all__ = ["IdleWatch"]


class IdleWatch:
    """One model read's idle timeout (see the module docstring). ``waiting``
    before each awaited read of the model, ``since = None`` after it, ``stop``
    when the read is over; ``fired`` once the timeout cancelled ``scope``."""

    __slots__ = ("_watched", "fired", "idle", "scope", "since")

    def __init__(self, idle: float, scope: trio.CancelScope) -> None:
        self.idle = idle
        self.scope = scope
        self.since: float | None = None
        self.fired = False
        self._watched = False

    def waiting(self) -> None:
        """The run is about to wait for the model's next event: the timer
        runs from now (the first time, the watchdog starts watching)."""
        now = self.since = trio.current_time()
        if not self._watched and self.idle != math.inf:
            self._watched = True
            _watchdog().add(self, now + self.idle)

    def stop(self) -> None:
        """The model call is over: no longer watched."""
        self.since = None
        if self._watched:
            self._watched = False
            _watchdog().discard(self)

    def fire(self) -> None:
        """The watchdog's call: the timeout ran out (cancels the read)."""
        self._watched = False
        self.fired = True
        self.scope.cancel()


class _Watchdog:
    """The one task of a trio run that fires idle timeouts (see the module
    docstring). Started, as a system task, the first time a watch is added."""

    __slots__ = ("_sleep", "_started", "_watches")

    def __init__(self) -> None:
        self._watches: set[IdleWatch] = set()
        self._sleep: trio.CancelScope | None = None
        self._started = False

    def add(self, watch: IdleWatch, due: float) -> None:
        self._watches.add(watch)
        sleep = self._sleep
        if sleep is not None:
            if due < sleep.deadline:
                sleep.deadline = due
        elif not self._started:
            self._started = True
            # An empty context: the task outlives the run that started it,
            # and must not keep that run's context variables alive.
            trio.lowlevel.spawn_system_task(
                self._run,
                name="procession.idle_watchdog",
                context=contextvars.Context(),
            )
        # else: started and not yet sleeping, it looks at every watch first.

    def discard(self, watch: IdleWatch) -> None:
        watches = self._watches
        watches.discard(watch)
        if not watches and self._sleep is not None:
            self._sleep.deadline = math.inf  # nothing to wake for

    async def _run(self) -> None:
        watches = self._watches
        while True:
            now = trio.current_time()
            wake = math.inf
            due: list[IdleWatch] = []
            for watch in watches:
                since = watch.since
                # Not waiting now: it cannot be due before a period from now.
                at = (now if since is None else since) + watch.idle
                if at <= now:
                    due.append(watch)
                elif at < wake:
                    wake = at
            for watch in due:
                watches.discard(watch)
                watch.fire()
            with trio.CancelScope(deadline=wake) as sleep:
                self._sleep = sleep
                try:
                    await trio.sleep_forever()
                finally:
                    self._sleep = None


_WATCHDOG: trio.lowlevel.RunVar[_Watchdog] = trio.lowlevel.RunVar(
    "procession_idle_watchdog"
)


def _watchdog() -> _Watchdog:
    """This trio run's watchdog."""
    try:
        return _WATCHDOG.get()
    except LookupError:
        watchdog = _Watchdog()
        _WATCHDOG.set(watchdog)
        return watchdog
