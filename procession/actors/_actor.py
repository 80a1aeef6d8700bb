"""The processor actor: one per processor per run.

An actor owns its processor's ``state`` for the whole call and runs that
processor's hooks one at a time, in the order they were asked for, whichever lane
asks (the coordinator's message hooks, a stream stage's per-chunk hook).
"""

from __future__ import annotations

from typing import Any

import trio

from .._secrets import get_logger
from ..processors import ProcessorSpec
from ..processors._calling import call_hook
from ..processors._contract import HookArgs

__all__ = ["ProcessorActor"]

logger = get_logger("procession")


class ProcessorActor:
    """A processor's identity within one run: its spec, its ``state`` dict and the
    rule that its hooks never overlap.

    Every hook call takes the actor's turn; an uncontended turn costs a few
    attribute reads and writes, which keeps the per-chunk path cheap.
    """

    __slots__ = ("_busy", "_idle", "_waiting", "spec", "state")

    def __init__(self, spec: ProcessorSpec) -> None:
        self.spec = spec
        self.state: dict[str, Any] = {}
        self._busy = False
        self._waiting = 0  # tasks parked in _idle (an int is cheaper to test)
        # Made on the first contended turn: most runs never contend, and a
        # ParkingLot per processor per run is a good part of an actor's cost.
        self._idle: trio.lowlevel.ParkingLot | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    async def call(self, hook: str, args: HookArgs) -> Any:
        """Run ``hook`` with ``args`` once no other hook of this processor is
        running; callers are served in the order they asked. Checkpoints if it has
        to wait or if the hook does.

        Raises whatever the hook raises (``TripWire`` included); the caller applies
        the processor's failure policy.
        """
        spec = self.spec.hooks[hook]
        if not self.take_turn_nowait():
            await self.acquire()
        try:
            return await call_hook(spec.fn, spec.is_async, args)
        finally:
            self.release_turn()

    def take_turn_nowait(self) -> bool:
        """Take the turn if it is free and nobody is waiting for it (the
        per-chunk fast path: two attribute reads and a write)."""
        if self._busy or self._waiting:
            return False
        self._busy = True
        return True

    async def acquire(self) -> None:
        """Wait for the turn, first come first served. Checkpoints."""
        if self.take_turn_nowait():
            await trio.lowlevel.checkpoint()
            return
        # release_turn hands the turn straight to the longest waiter, so nobody
        # can take it in between (a busy stream stage would otherwise starve a
        # coordinator hook).
        idle = self._idle
        if idle is None:
            idle = self._idle = trio.lowlevel.ParkingLot()
        self._waiting += 1
        try:
            await idle.park()
        finally:
            self._waiting -= 1

    def release_turn(self) -> None:
        """Give the turn to the longest waiter, or free it."""
        if self._waiting:
            assert self._idle is not None  # made by whoever waits
            self._idle.unpark()
        else:
            self._busy = False

    async def notify_violation(self, violation: Any) -> None:
        """Await ``on_violation`` with ``violation``; its errors are logged and
        swallowed (seed: they must not disturb the processor's logic).
        Checkpoints only if the callback does; cancellation propagates."""
        callback = self.spec.on_violation
        if callback is None:
            return
        try:
            result = callback(violation)
            if hasattr(result, "__await__"):
                await result
        except Exception:
            logger.exception("on_violation of processor %r failed", self.spec.id)

    def __repr__(self) -> str:
        return f"<ProcessorActor {self.spec.id!r} busy={self._busy}>"
