"""What the parts of one output pipeline share: its ``Flow``.

A pipeline's items flow from the source, through an entry (``admit``), into
the stages and on to the buffer the client end reads. Who moves them depends
on the mode: the consumer's task (``"fused"``, and ``"adaptive"`` until it
splits: ``_pipeline``), the segment tasks of an adaptive pipeline once split
(``_split``), or the reader and stage tasks of ``"actors"`` mode
(``_actors_mode``). Every one of them reads the same source, decides entry the
same way and keeps the same counters, so that state is this one object, which
each of them holds (a stage too, for the retry it raises and the boundary it
asks for): none of them writes another's fields.

Everything here runs in one trio thread; nothing is locked.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Set
from typing import Any, Final

import attrs
import trio

from .._errors import ConfigurationError
from ..data import CHUNK_CLASSES, ErrorChunk
from ._interface import InlineSource, PipelineDriver
from ._markers import _SOURCE_MARKERS, Inline, NewAttempt, _Marker

__all__: list[str] = []

NOTHING: Final = object()
"""``Flow.take_nowait``: no source item at hand."""
NO_INDICES: Final[frozenset[int]] = frozenset()
"""``Flow.boundaries`` and ``Flow.wanted`` before a run's first split."""


@attrs.define(eq=False)
class Flow:
    """One pipeline's shared state: the source and its entry control, the
    counters, the buffer at the client end, the last link's ends and the
    boundaries of an adaptive pipeline. Made by ``open_output_pipeline``."""

    driver: PipelineDriver | None
    """Asked about error chunks at the entry (``recovered``)."""
    iterator: AsyncIterator[Any] | None = None
    """The source's iterator (set once the pipeline is open)."""
    inline: InlineSource | None = None
    """The ``Inline`` source the next items come from, if any (``next_source``)."""
    queued: Callable[[], Any] | None = None
    """The source's ``take_nowait`` if it has one (a run's ``ControlSource``):
    its next item if that is queued, else ``NOTHING``. An adaptive fill runs
    what is queued with the item it read (``_pipeline``)."""
    ramp: int = 0
    """Items run since the current ``Inline`` source came (``"adaptive"``, fused:
    a batch from it is at most one longer, so the first chunk of a response
    goes out alone, then 2, 4, 8, ...)."""
    retry_raised: int = -1
    """The latest attempt in which a stage raised a retry (``note_retry``)."""
    entry_attempt: int = 0
    """The attempt the entry is in (counted at each ``NewAttempt``)."""
    finished: bool = False
    """The client end has delivered the stream's end (or its terminal item)."""
    buffer: deque[Any] = attrs.field(factory=deque)
    """What the client end delivers next, in order (a deque: a hook's list
    result goes in whole, however long)."""
    receive: trio.MemoryReceiveChannel[Any] | None = None
    """The last link's receiving end, once tasks fill the buffer (``"actors"``
    mode; ``"adaptive"`` once split)."""
    cancel_scope: trio.CancelScope | None = None
    """The scope of the tasks that fill the buffer, if any."""
    # Replaced, not changed in place: most runs never split, and share one
    # empty frozenset instead of two sets (~430 B an open stream).
    boundaries: Set[int] = NO_INDICES
    """``"adaptive"``: stage indices with a boundary before them (in force)."""
    wanted: Set[int] = NO_INDICES
    """``"adaptive"``: stage indices found blocking (or asking), not yet split."""
    pulled: int = 0
    """Source items read."""
    settled: int = 0
    """Source items settled: delivered, or dropped on the way."""
    peak: int = 0
    """The most source items read and not settled at once."""

    # what the stages say ------------------------------------------------------

    def note_retry(self, attempt: int) -> None:
        """A stage raised a retry in ``attempt``: the entry drops the rest of it."""
        if attempt > self.retry_raised:
            self.retry_raised = attempt

    def blocked(self, index: int) -> None:
        """Stage ``index``'s hook parked: a boundary goes in before its next item."""
        if index not in self.boundaries and index not in self.wanted:
            self.wanted = {*self.wanted, index}

    # the source --------------------------------------------------------------

    def pull_count(self) -> None:
        """Count a source item read."""
        self.pulled += 1
        in_flight = self.pulled - self.settled
        if in_flight > self.peak:
            self.peak = in_flight

    def admit(self, item: Any) -> Any:
        """Decide what to do with a source item before any stage sees it. Returns
        the item, or None to drop it."""
        if isinstance(item, _Marker):
            if item.__class__ is NewAttempt:
                self.entry_attempt += 1
                return item
            if item.__class__ is Inline:
                self.inline = item.source  # read from there on (next_source)
                self.ramp = 0
                return None
            if item.__class__ in _SOURCE_MARKERS:
                return item
            raise ConfigurationError(
                f"the source yielded {item!r}; only chunks and the markers "
                f"NewAttempt, Barrier, Deliver, EndRun and Inline may come from "
                f"a source"
            )
        if item.__class__ not in CHUNK_CLASSES:
            raise ConfigurationError(
                f"the source yielded {item!r}, which is not a chunk; expected chunk "
                f"objects (see procession.chunks; use from_wire for JSON)"
            )
        if self.retry_raised >= self.entry_attempt:
            return None  # after the cut of a retried attempt
        return item

    async def recovered(self, chunk: ErrorChunk) -> bool:
        """Ask the driver whether the attempt that failed with ``chunk`` is
        recovered. Called only once everything before the error has reached the
        client end, so the decision is taken in stream position (an earlier
        tripwire or retry request always wins). Checkpoints if the driver does;
        cancellation propagates (the fused fill awaits it shielded)."""
        if self.driver is None:
            return False
        if self.retry_raised >= self.entry_attempt or self.finished:
            return True  # already cut: the error belongs to a discarded attempt
        if await self.driver.on_error_chunk(chunk):
            self.note_retry(self.entry_attempt)
            return True
        return False

    async def next_source(self) -> Any:
        """The next source item: from the ``Inline`` source while there is one
        (no task switch when its item is at hand), else from the source.
        Raises ``StopAsyncIteration`` at the source's end. A cancelled call
        loses nothing (neither ``pull`` nor the source's read does)."""
        inline = self.inline
        if inline is not None:
            waiting = False
            try:
                return inline.pull_nowait()
            except trio.WouldBlock:
                waiting = True  # waited for outside the handler (no exception kept)
            except trio.EndOfChannel:
                self.inline = None
            if waiting:
                try:
                    return await inline.pull()
                except trio.EndOfChannel:
                    self.inline = None
        assert self.iterator is not None
        return await self.iterator.__anext__()

    def take_nowait(self) -> Any:
        """The next source item if one is at hand without waiting (only an
        ``Inline`` source can say), else ``NOTHING``."""
        inline = self.inline
        if inline is None:
            return NOTHING
        try:
            return inline.pull_nowait()
        except trio.WouldBlock:
            return NOTHING
        except trio.EndOfChannel:
            self.inline = None
            return NOTHING
