"""The in-band markers: what travels through the chain beside the chunks.

The coordinator's markers come from the source (``NewAttempt``, ``Barrier``,
``Deliver``, ``EndRun``, ``Inline``; the runtime sends them through ``RunControl``); the
stages' own (``_Violation``, ``_StageEnd``, ``_Raise``) are made inside the chain.
They are the pipeline's private protocol: not part of the public API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import trio

from .._errors import (
    TripWire,
)
from ..processors import (
    ProcessorViolation,
)
from ._actor import ProcessorActor

__all__ = [
    "Barrier",
    "Deliver",
    "EndRun",
    "Inline",
    "NewAttempt",
]

# --- in-band markers -----------------------------------------------------------


class _Marker:
    """Base of everything that travels in the chain but is not a chunk."""

    __slots__ = ()


class NewAttempt(_Marker):
    """Yielded by a driver's source where an attempt (a model step, or its retry)
    begins.

    With ``discard=True`` (after an accepted retry request, or a recovered error)
    the previous attempt is discarded: whatever of it is still in the chain after
    the cut is dropped, every stage's ``stream_parts`` forget it, and a stage that
    ended that attempt (its signal lost to an earlier one) takes part again. With
    ``discard=False`` it only marks where the next rollback would go back to.
    ``retry_count`` is what hooks see as ``args.retry_count`` from here on.
    """

    __slots__ = ("context", "discard", "retry_count")

    def __init__(
        self, retry_count: int = 0, *, discard: bool = True, context: Any = None
    ) -> None:
        self.retry_count = retry_count
        self.discard = discard
        self.context = context
        """Whatever the driver attaches (handed back by ``on_attempt``)."""

    def __repr__(self) -> str:
        return f"NewAttempt(retry_count={self.retry_count}, discard={self.discard})"


class Barrier(_Marker):
    """Yielded by a driver's source to learn when everything before it has reached
    the client end (e.g. the end of a step, before ``process_output_step``).

    ``await barrier.wait()`` after yielding it (one task waits on a barrier),
    or give it ``then``: called once, in the task that reads the client end,
    when the barrier gets there (never if the stream ends before). Never
    discarded.
    """

    # A parked task instead of a trio.Event: a barrier is made for every
    # settle of every run, and an Event (an attrs object and a set) is most of
    # what one costs.
    __slots__ = ("_passed", "_then", "_waiter")

    def __init__(self, then: Callable[[], object] | None = None) -> None:
        self._passed = False
        self._waiter: trio.lowlevel.Task | None = None
        self._then = then

    async def wait(self) -> None:
        """Park until the barrier reached the client end. Always checkpoints;
        if cancelled (the run ended), ``Cancelled`` propagates."""
        if self._passed:
            await trio.lowlevel.checkpoint()
            return
        if self._waiter is not None:
            raise RuntimeError("another task is already waiting on this barrier")
        self._waiter = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, _: Any) -> trio.lowlevel.Abort:
        self._waiter = None
        return trio.lowlevel.Abort.SUCCEEDED

    @property
    def passed(self) -> bool:
        return self._passed

    def release(self) -> None:
        """The barrier reached the client end: wake its waiter and call its
        ``then`` (once)."""
        if self._passed:
            return
        self._passed = True
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            trio.lowlevel.reschedule(waiter)
        then = self._then
        if then is not None:
            self._then = None
            then()


class _DrainBarrier(Barrier):
    """A barrier the pipeline sends itself (not a source item, so not counted)."""

    __slots__ = ()


class Deliver(_Marker):
    """A chunk that goes to the client as-is, past every processor, at its
    position: what ``writer.custom`` produces. A driver's source may yield one
    (custom chunks written by hooks that run outside the stream)."""

    __slots__ = ("chunk",)

    def __init__(self, chunk: Any) -> None:
        self.chunk = chunk

    def __repr__(self) -> str:
        return f"Deliver({self.chunk!r})"


_Custom = Deliver


class EndRun(_Marker):
    """Yielded by a driver's source to end the run with a tripwire raised outside
    the stream (an input hook, a tool-result hook, ...). When it reaches the
    client end, ``actor``'s ``on_violation`` is awaited and the ``tripwire`` chunk
    delivered; the stream ends. If an earlier terminal already ended the stream,
    it is ignored (that one won, SPEC §2.10)."""

    __slots__ = ("actor", "tripwire")

    def __init__(self, tripwire: TripWire, actor: ProcessorActor | None = None) -> None:
        self.tripwire = tripwire
        self.actor = actor

    def __repr__(self) -> str:
        return f"EndRun({self.tripwire!r})"


class Inline(_Marker):
    """Yielded by a driver's source: the items that follow are pulled from
    ``source`` (an ``InlineSource``) in the pipeline's reading task, until it
    is done; then the driver's source is read again. Consumed at the entry
    (no stage sees it); the items it gives are admitted like source items."""

    __slots__ = ("source",)

    def __init__(self, source: Any) -> None:
        self.source = source

    def __repr__(self) -> str:
        return f"Inline({self.source!r})"


class _Violation(_Marker):
    __slots__ = ("actor", "violation")

    def __init__(self, actor: ProcessorActor, violation: ProcessorViolation) -> None:
        self.actor = actor
        self.violation = violation


class _StageEnd(_Marker):
    """A stage ended its attempt: a tripwire (``retry`` or not) or a failure."""

    __slots__ = ("actor", "error", "tripwire")

    def __init__(
        self,
        actor: ProcessorActor,
        tripwire: TripWire | None = None,
        error: BaseException | None = None,
    ) -> None:
        self.actor = actor
        self.tripwire = tripwire
        self.error = error

    @property
    def is_retry(self) -> bool:
        return self.tripwire is not None and self.tripwire.retry


class _Raise(_Marker):
    """The source (or the check of what it gave) raised, in ``"actors"`` mode:
    re-raised at the client end, in position, as fused mode raises it from the
    consumer's ``async for``. Never discarded."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


_SOURCE_MARKERS: Final = frozenset({NewAttempt, Barrier, Deliver, EndRun, Inline})
