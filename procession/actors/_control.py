"""The coordination protocol between a run's coordinator and its output pipeline.

The coordinator (``procession.runtime``) talks in *steps*: begin an attempt,
inject a chunk, settle the step, end the run. The pipeline talks in *markers*
that travel in-band with the chunks (``NewAttempt``, ``Barrier``, ``Deliver``,
``EndRun``) and calls its driver back at the client end. ``RunControl`` is both
sides of that conversation in one object, so neither layer sees the other's
vocabulary:

* the coordinator calls ``begin_attempt`` / ``inject`` / ``send_ahead`` /
  ``inline`` / ``deliver`` / ``settle`` / ``settle_ahead`` / ``caught_up`` /
  ``end`` / ``close``; ``settle`` raises ``RetryRequested`` when a stream processor's
  retry was granted meanwhile (a retry crosses the layer boundary twice: the
  grant, in the pipeline, and this raise);
* the pipeline calls the ``PipelineDriver`` methods (``on_retry_request``,
  ``on_error_chunk``, ``on_attempt``, ``on_terminal``, ``on_delivered``).

**The one place where a run's outcome is decided** is ``conclude``: the first
terminal reached at the client end wins (a tripwire or error raised on a chunk,
the coordinator's own end, the end of the stream, an abort) and later ones are
ignored. ``outcome`` is written there and only there.

**What the coordinator sends** goes into a ``ControlSource``, the pipeline's
source, in order. The markers and the coordinator's own lifecycle chunks are
queued without waiting for the pipeline to take them (a zero-capacity channel
cost two task switches per message, most of a short run's scheduling); what
must wait waits: ``inject`` returns once the pipeline has taken the chunk
(backpressure for model chunks and tool results), ``settle`` once its barrier
reached the client end, and ``caught_up`` (called before the coordinator runs
a hook) once the pipeline has taken everything queued. So no hook, no model
call and no tool runs while something the coordinator sent before it is still
queued: the order in which user code sees things is the channel's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import trio

from .._errors import TripWire
from .._secrets import get_logger
from ..data import (
    ErrorChunk,
    ErrorPayload,
    RunOutcome,
    TripwireInfo,
)
from ._actor import ProcessorActor
from ._flow import NOTHING
from ._interface import InlineSource, PipelineOutcome
from ._markers import Barrier, Deliver, EndRun, Inline, NewAttempt

__all__ = ["ControlSource", "RetryRequested", "RunControl", "RunObserver"]

logger = get_logger("procession")


class ControlSource:
    """The pipeline's source for one run: what the coordinator sends, in order.

    One task sends (the coordinator) and one reads (the pipeline). ``put``
    queues an item without waiting; ``wait_taken`` parks the sender until the
    reader has taken every queued item. Reading an item that is queued never
    checkpoints; a read that has to wait parks and, if cancelled, loses
    nothing. ``close`` ends the stream once the queued items are read;
    ``aclose`` (the pipeline leaving) drops what is queued, wakes the sender,
    and makes later puts raise ``trio.BrokenResourceError``.

    With ``yield_per_item`` every read is a full checkpoint, as a memory
    channel's receive is (a cancellation is taken before the item, the yield
    after it): a reader task then lets the tasks it feeds run between items.
    """

    __slots__ = (
        "_broken",
        "_closed",
        "_items",
        "_own",
        "_reader",
        "_reader_gone",
        "_sender",
        "_yield",
    )

    def __init__(self, *, yield_per_item: bool = False) -> None:
        # A list, not a deque: it holds a step's few items at most, and a
        # deque costs ten times as much memory (one is made per run).
        self._items: list[Any] = []
        self._reader: trio.lowlevel.Task | None = None
        self._sender: trio.lowlevel.Task | None = None
        self._own: Any = None  # the item of the send that waits (see wait_taken)
        self._broken = False  # the waiting sender was woken by aclose, not a take
        self._yield = yield_per_item
        self._closed = False
        self._reader_gone = False

    def yield_per_item(self) -> None:
        """Make every read a full checkpoint from now on (see the class)."""
        self._yield = True

    # --- the sender's side ---------------------------------------------------------

    @property
    def pending(self) -> bool:
        """Whether something sent has not been taken by the reader yet."""
        return bool(self._items) and not self._reader_gone

    def put(self, item: Any) -> None:
        """Queue ``item``. Never blocks. Raises ``trio.ClosedResourceError``
        after ``close`` and ``trio.BrokenResourceError`` once the reader left."""
        if self._closed:
            raise trio.ClosedResourceError("the run's source is closed")
        if self._reader_gone:
            raise trio.BrokenResourceError("the run's pipeline has closed")
        self._items.append(item)
        reader = self._reader
        if reader is not None:
            self._reader = None
            trio.lowlevel.reschedule(reader)

    async def wait_taken(self, own: Any = None) -> None:
        """Park until the reader has taken every queued item (at once if it
        has). Checkpoints only if it parks; a cancellation propagates, and
        takes ``own`` (the item this send just queued) back if it was not
        taken, as a cancelled channel send sends nothing; what was queued
        before it stays. Raises ``trio.BrokenResourceError`` if the reader
        leaves meanwhile."""
        if not self._items:
            return
        if self._reader_gone:
            raise trio.BrokenResourceError("the run's pipeline has closed")
        if self._sender is not None:
            raise RuntimeError("another task is already sending to this run")
        self._sender = trio.lowlevel.current_task()
        self._own = own
        try:
            await trio.lowlevel.wait_task_rescheduled(self._abort_send)
        finally:
            self._own = None
        if self._broken:
            # Not taken: the reader left while we waited (a take that woke us
            # first stands, even if the reader has left since).
            self._broken = False
            raise trio.BrokenResourceError("the run's pipeline has closed")

    def _abort_send(self, _: Any) -> trio.lowlevel.Abort:
        self._sender = None
        own, items = self._own, self._items
        if own is not None and items and items[-1] is own:
            items.pop()
        return trio.lowlevel.Abort.SUCCEEDED

    def close(self) -> None:
        """No more items: the reader's ``async for`` ends after the queued
        ones. Idempotent."""
        self._closed = True
        reader = self._reader
        if reader is not None:
            self._reader = None
            trio.lowlevel.reschedule(reader)

    # --- the reader's side ---------------------------------------------------------

    def __aiter__(self) -> ControlSource:
        return self

    async def __anext__(self) -> Any:
        """The next item; parks while there is none. Raises
        ``StopAsyncIteration`` once closed and read to the end. Checkpoints
        only if it parks; a cancelled read loses nothing."""
        items = self._items
        if self._yield:
            await trio.lowlevel.checkpoint_if_cancelled()
        while not items:
            if self._closed or self._reader_gone:
                raise StopAsyncIteration
            self._reader = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort_read)
        item = items.pop(0)
        if not items:
            self._wake_sender()
        if self._yield:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return item

    def take_nowait(self) -> Any:
        """The next item if one is queued, else ``NOTHING``: for a reader
        that runs what is at hand in one batch (an adaptive pipeline's fill).
        Always ``NOTHING`` once every read must be a checkpoint
        (``yield_per_item``). Never checkpoints."""
        items = self._items
        if not items or self._yield:
            return NOTHING
        item = items.pop(0)
        if not items:
            self._wake_sender()
        return item

    def take_barrier_nowait(self) -> Barrier | None:
        """The next item if it is a queued ``Barrier`` (none is then left
        for a read to find), else None; as ``take_nowait`` otherwise."""
        items = self._items
        if not items or self._yield or items[0].__class__ is not Barrier:
            return None
        barrier: Barrier = items.pop(0)
        if not items:
            self._wake_sender()
        return barrier

    def ended_nowait(self) -> bool:
        """Whether a read would raise ``StopAsyncIteration`` at once: closed
        (or left) with nothing queued, and reads are not checkpoints
        (``yield_per_item``). Never checkpoints."""
        return (
            not self._items and not self._yield and (self._closed or self._reader_gone)
        )

    def _abort_read(self, _: Any) -> trio.lowlevel.Abort:
        self._reader = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _wake_sender(self) -> None:
        sender = self._sender
        if sender is not None:
            self._sender = None
            trio.lowlevel.reschedule(sender)

    async def aclose(self) -> None:
        """The reader leaves (``leave``). Does not checkpoint."""
        self.leave()

    def leave(self) -> None:
        """The reader leaves: queued items are dropped and the sender is woken
        (its wait raises ``trio.BrokenResourceError``). Called when the
        pipeline closes, once per run (``aclose`` is the same, awaited)."""
        self._reader_gone = True
        self._items.clear()
        if self._sender is not None:
            self._broken = True
            self._wake_sender()


class RunObserver(Protocol):
    """Who keeps what the client received (the coordinator's bookkeeping)."""

    def attempt_began(self, view: Any) -> None:
        """An attempt began at the client end; ``view`` is what the coordinator
        attached to it in ``begin_attempt``."""

    def delivered(self, chunk: Any) -> None:
        """``chunk`` was handed to the client."""


class RetryRequested(Exception):
    """Raised by ``RunControl.settle``: a stream processor asked to retry the
    attempt and the request was granted (within the budget, in time)."""

    def __init__(self, tripwire: TripWire) -> None:
        super().__init__(tripwire.reason)
        self.tripwire = tripwire


class RunControl:
    """One run's coordination protocol; see the module docstring.

    Args:
        run_id: stamped on the chunks ``end`` makes.
        may_retry: whether the retry budget allows one more retry now.
        on_outcome: called once, with the outcome, the moment it is decided
            (the runtime cancels the run's scope there).
        observer: told which attempt the client is receiving and of every
            chunk delivered.
        queue_ahead: queue markers and the coordinator's own chunks without
            waiting (see the module docstring). ``False`` (for ``"actors"``
            mode) makes every message wait until the pipeline has taken it and
            every read of ``source`` yield, as a zero-capacity channel did: a
            reader task would otherwise take the coordinator's messages far
            ahead of the stages (the model called before a stage saw
            ``start``, say), and actors mode pays a task switch per chunk
            anyway.

    ``source`` is the pipeline's source (what the coordinator sends);
    ``close`` ends it.
    """

    def __init__(
        self,
        *,
        run_id: str,
        may_retry: Callable[[], bool],
        on_outcome: Callable[[RunOutcome], None],
        observer: RunObserver,
        queue_ahead: bool = True,
    ) -> None:
        self.source = ControlSource(yield_per_item=not queue_ahead)
        self._queue_ahead = queue_ahead
        self._run_id = run_id
        self._may_retry = may_retry
        self._on_outcome = on_outcome
        self._observer = observer
        self._accepting_retries = False
        self._retry: TripWire | None = None
        self._read_scope: trio.CancelScope | None = None
        self._proposed: RunOutcome | None = None
        self._proposed_tripwire: TripWire | None = None
        self._ahead: Barrier | None = None  # see settle_ahead
        self.outcome: RunOutcome | None = None
        """The run's outcome, once decided (see ``conclude``)."""

    # --- the coordinator's side ------------------------------------------------

    @property
    def ended(self) -> bool:
        """Whether the outcome is decided: nothing more may be produced."""
        return self.outcome is not None

    @property
    def retry_requested(self) -> bool:
        """Whether a stream processor's retry of the current attempt was granted
        (the coordinator stops reading the model; ``settle`` will raise)."""
        return self._retry is not None

    async def _post(self, item: Any) -> None:
        """Queue ``item`` without waiting (unless not ``queue_ahead``: then
        like ``inject``); a cancellation (the run ended) propagates with
        nothing sent."""
        await trio.lowlevel.checkpoint_if_cancelled()
        self._ahead = None
        self.source.put(item)
        if not self._queue_ahead:
            await self.source.wait_taken(item)

    async def begin_attempt(
        self, retry_count: int, *, discard: bool, view: Any
    ) -> None:
        """Start an attempt (a step, or its retry); with ``discard`` the previous
        attempt's chunks still in the chain are dropped. Chunks the client
        receives from here on are shown to ``view``. Retries are accepted until
        ``close_attempt``. Queued without waiting for the pipeline (see the
        module docstring); a cancellation propagates with nothing sent."""
        self._retry = None
        self._accepting_retries = True
        await self._post(NewAttempt(retry_count, discard=discard, context=view))

    async def mark_retry_count(self, retry_count: int, view: Any) -> None:
        """The input lane retried inside the attempt: hooks downstream see the
        new count (the attempt itself goes on). Queued like ``begin_attempt``: no
        checkpoint, a cancellation propagates with nothing sent."""
        await self._post(NewAttempt(retry_count, discard=False, context=view))

    def close_attempt(self) -> None:
        """Every chunk of the attempt is decided: a retry asked for on a later
        chunk (``finish``, say) is too late and becomes a tripwire."""
        self._accepting_retries = False

    def reading(self) -> trio.CancelScope:
        """A cancel scope for reading the model: cancelled when a retry is
        granted, so a rejected response is not read on."""
        self._read_scope = trio.CancelScope()
        return self._read_scope

    def read_done(self) -> None:
        """The model read is over: its scope is left, and no longer cancelled
        when a retry is granted or the run ends (each ``cancel`` of a scope
        costs trio a clock read and a reason made)."""
        self._read_scope = None

    async def inject(self, chunk: Any) -> None:
        """Send ``chunk`` through the output processors, at this position, and
        wait until the pipeline has taken it (backpressure). Checkpoints, and a
        cancellation (the run ended) propagates with ``chunk`` not sent."""
        await trio.lowlevel.checkpoint_if_cancelled()
        self._ahead = None
        source = self.source
        source.put(chunk)
        await source.wait_taken(chunk)

    async def send_ahead(self, chunk: Any) -> None:
        """Send ``chunk`` (one of the coordinator's own: ``start``,
        ``step-finish``, ``finish``...) through the output processors at this
        position, without waiting for the pipeline to take it. The caller
        waits later, before any user code runs (``settle``, ``inject`` or
        ``caught_up``), so nothing it queues this way is ever more than a
        step's few chunks. A cancellation propagates with nothing sent."""
        await self._post(chunk)

    async def caught_up(self) -> None:
        """Wait until the pipeline has taken everything sent so far: called
        before running a hook, so a hook never runs while something sent
        before it is still queued (as with a zero-capacity channel). Returns
        at once once the run has ended (nothing more is taken then; this may
        be the consumer's own task). Checkpoints only if it waits; a
        cancellation propagates."""
        if self.outcome is None and self.source.pending:
            await self.source.wait_taken()
        else:
            await trio.lowlevel.checkpoint_if_cancelled()

    async def inline(self, source: InlineSource) -> None:
        """Let the pipeline pull the next items from ``source`` in its own task
        (the consumer's, in ``"fused"`` mode) until ``source`` is done, instead
        of each one being sent here: no task switch per chunk. Queued without
        waiting (no checkpoint; a cancellation propagates with nothing sent):
        ``source`` itself makes the coordinator wait for the pipeline's
        hand-over (``InlineSource``)."""
        await self._post(Inline(source))

    async def deliver(self, chunk: Any) -> None:
        """Send ``chunk`` to the client past every processor, at this position
        (custom chunks written by hooks that run outside the stream).
        Waits (and checkpoints) like ``inject``."""
        await self.inject(Deliver(chunk))

    async def settle(self) -> None:
        """Wait until everything sent so far has reached the client end, then
        raise ``RetryRequested`` if a stream processor's retry was granted.

        Checkpoints; if the run is cancelled meanwhile, ``Cancelled`` propagates.
        A barrier queued by ``settle_ahead`` that has passed already is not
        waited for: then this is a cancellation point only (the coordinator
        waited for the read meanwhile).
        """
        barrier = self._ahead
        if barrier is None:
            barrier = Barrier()
            await self._post(barrier)
            await barrier.wait()
        else:
            # Queued by settle_ahead, and nothing sent since: waiting for it
            # is waiting for everything sent so far.
            self._ahead = None
            await trio.lowlevel.checkpoint_if_cancelled()
            if not barrier.passed:
                await barrier.wait()
        if self._retry is not None:
            raise RetryRequested(self._retry)

    async def then(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` in the task that reads the client end once
        everything sent so far has reached it, and do not wait for that: the
        coordinator's last word when nothing it does after its last chunk
        awaits (the run then ends without a hand-over back to it, and its
        end is at hand with that chunk: ``OutputPipeline.end_nowait``). Never
        called if the stream ends before (a terminal, the reader leaving).
        Queued like ``send_ahead``: no checkpoint, and a cancellation (the
        run ended) propagates with nothing queued."""
        await self._post(Barrier(then=callback))

    def settle_ahead(self) -> None:
        """Queue the barrier of the next ``settle`` now, when the coordinator
        knows it will settle next (after handing the pipeline a model stream
        to pull, say: ``inline``): the pipeline passes it as soon as it gets
        there, and the coordinator need not wake the pipeline's task to send
        it. Any send before that ``settle`` makes ``settle`` send a barrier of
        its own (this one then passes unwaited). Without ``queue_ahead`` it
        does nothing. Never blocks; does not checkpoint."""
        if self._queue_ahead and self._ahead is None:
            barrier = Barrier()
            self.source.put(barrier)
            self._ahead = barrier

    async def end(
        self,
        outcome: RunOutcome,
        *,
        tripwire: TripWire | None = None,
        actor: ProcessorActor | None = None,
    ) -> None:
        """Propose the run's end (a tripwire or an error the coordinator met).

        The proposal becomes the outcome when it reaches the client end, unless
        an earlier terminal won there; a tripwire's ``on_violation`` (``actor``'s)
        is awaited there, only if it wins. Queued without waiting (the
        coordinator sends nothing after it). Without a checkpoint if the run
        has ended already (the proposal is moot)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        self._proposed = outcome
        if outcome.kind == "tripwire":
            assert tripwire is not None
            self._proposed_tripwire = tripwire
            await self._post(EndRun(tripwire, actor))
        else:
            await self._post(
                ErrorChunk(
                    payload=ErrorPayload(error=outcome.error), run_id=self._run_id
                )
            )

    def close(self) -> None:
        """The coordinator is done: the pipeline's source ends once what was
        sent is read."""
        self.source.close()

    # --- the decision ---------------------------------------------------------------

    def conclude(self, outcome: RunOutcome) -> RunOutcome:
        """Decide the run's outcome: the first call wins; later ones return the
        decided outcome unchanged."""
        if self.outcome is None:
            self.outcome = outcome
            if self._read_scope is not None:
                self._read_scope.cancel()
            self._on_outcome(outcome)
        return self.outcome

    def conclude_stream_end(self, *, completed: bool, finish_reason: str) -> RunOutcome:
        """The stream ended without a terminal chunk: the coordinator's own
        proposal if it made one (its error chunk may have been dropped by a
        processor), else ``finish`` when it completed, else ``abort``."""
        if self._proposed is not None:
            return self.conclude(self._proposed)
        if completed:
            return self.conclude(RunOutcome(kind="finish", finish_reason=finish_reason))
        return self.abort()

    @property
    def proposed(self) -> RunOutcome | None:
        """The end the coordinator proposed and the client end has not decided
        yet, if any."""
        return self._proposed

    def suspend(self, outcome: RunOutcome) -> None:
        """The run waits for a person: when its stream ends (the coordinator
        sends nothing more), ``outcome`` (``suspended``) is how it ended, and
        no chunk follows the last one sent. Does not checkpoint."""
        self._proposed = outcome

    def abort(self) -> RunOutcome:
        """The caller cancelled the run or left the stream: ``abort``, unless the
        coordinator had already proposed an end that had not reached the client
        yet (that end is what happened)."""
        return self.conclude(
            self._proposed or RunOutcome(kind="abort", finish_reason="aborted")
        )

    # --- the pipeline's side (PipelineDriver) ------------------------------------

    async def on_retry_request(self, tripwire: TripWire) -> bool:
        """A stream processor asked for a retry (at the client end, in position).
        Grants it (and stops the model read) if the attempt still accepts
        retries and the budget allows. Does not checkpoint."""
        if not self._accepting_retries:
            logger.warning(
                "processor %r requested a retry after the step's chunks were "
                "settled (e.g. on the finish chunk); treating it as an abort",
                tripwire.processor_id,
            )
            return False
        if not self._may_retry():
            logger.warning(
                "processor %r requested a retry but the retry budget is exhausted "
                "or not set; treating it as an abort",
                tripwire.processor_id,
            )
            return False
        self._retry = tripwire
        if self._read_scope is not None:
            self._read_scope.cancel()  # stop reading a response that is rejected
        return True

    async def on_error_chunk(self, chunk: ErrorChunk) -> bool:
        """The coordinator decides about model errors before it sends anything;
        an error chunk it sends is terminal. Does not checkpoint."""
        return False

    def on_attempt(self, marker: NewAttempt) -> None:
        """A ``NewAttempt`` reached the client end: what is delivered from now on
        belongs to the attempt whose view it carries."""
        self._observer.attempt_began(marker.context)

    def on_terminal(self, outcome: PipelineOutcome) -> None:
        """The stream's terminal item reached the client end (before
        ``on_violation`` is awaited and the chunk delivered)."""
        if outcome.kind == "tripwire" and outcome.tripwire is not None:
            tripwire = outcome.tripwire
            self.conclude(
                RunOutcome(
                    kind="tripwire",
                    finish_reason="other",
                    tripwire=TripwireInfo.of(tripwire),
                    # Not the coordinator's EndRun: a stream processor's abort.
                    in_stream=tripwire is not self._proposed_tripwire,
                )
            )
        elif outcome.kind == "error":
            self.conclude(
                RunOutcome(
                    kind="error",
                    finish_reason="error",
                    error=outcome.error,
                    in_stream=True,
                )
            )

    def on_split(self) -> None:
        """An adaptive pipeline split: from now on a task of its own reads what
        the coordinator sends, ahead of the stages after its boundary. Like
        actors mode's reader it must then take one item at a time, a
        checkpoint after each, and the coordinator wait for each send to be
        taken: otherwise it would take a burst of queued markers at once and
        the coordinator call the model before a stage saw ``start``."""
        self._queue_ahead = False
        self.source.yield_per_item()

    def on_delivered(self, chunk: Any) -> None:
        """Called at the client end for every chunk delivered."""
        self._observer.delivered(chunk)
        if chunk.__class__ is ErrorChunk and self.outcome is None:
            # An error chunk that is not the pipeline's own terminal: the
            # coordinator's (its proposal), or one a processor made up. Nothing
            # after it may run.
            error = chunk.payload.error
            self.conclude(
                self._proposed
                or RunOutcome(
                    kind="error",
                    finish_reason="error",
                    error=error if isinstance(error, BaseException) else None,
                    in_stream=True,
                )
            )
