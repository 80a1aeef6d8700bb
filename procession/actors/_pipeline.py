"""The output-stream pipeline: chunks through a supervised chain of processor
actors, with backpressure and in-band signals.

How it works
============

Every processor with a ``process_output_stream`` hook is a *stage* of the chain.
Chunks enter from a source (the model stream, plus chunks the driver injects)
and leave at the *client end*, the consumer's ``async for``.

Everything a stage produces travels **in-band**, in stream order: the chunks it
returns, the custom chunks it writes with ``writer.custom``, the violations it
reports, and its ``abort()`` (a tripwire, or a retry request). The client end
acts on them in that order, so the earliest position always wins and every
execution mode gives exactly what a one-chunk-at-a-time sequential run gives
(SPEC §2.10; ``procession.testing.run_sequential`` is that run, executable).

Execution modes (``mode=``):

``"fused"``
    Every stage is an awaited call in the consumer's task: pulling a chunk from
    the iterator pulls one item from the source and runs it through the chain.
    No task switch per chunk; backpressure is implicit (nothing is read ahead).
    A checkpoint is taken at least every ``checkpoint_every`` source items, so a
    source that never blocks still lets cancellation and other tasks in.
``"actors"``
    The design card taken literally: a reader task and one task per stage,
    linked by bounded trio memory channels (``link_capacity`` messages each).
``"adaptive"`` (the default)
    Fused, until a stage's async hook is seen to park (to wait on I/O, a
    sleep, an event: ``_watch``; a mere checkpoint does not count), or from
    the start for a processor with ``stream_boundary = True``: from the
    stage's next chunk on, the chain runs as segments in tasks of their own,
    linked by bounded channels carrying micro-batches (``_split``), so slow
    processors overlap instead of adding up. A stage stays split once split.
    Unsplit, a read runs up to ``AT_HAND`` source items that are at hand
    through the chain at once (``_fill_fused``), and the next reads take them.

Bounds: in ``"actors"`` mode, with a consumer that stops reading, the number of
source items read but not yet delivered stays at most
``(stages + 1) * link_capacity + 2 * stages + 2`` (one item in hand and one in a
parked send per stage, one parked in the reader, one in the consumer's hand),
whatever the stream's length. In ``"fused"`` mode it is 1; in ``"adaptive"``
mode ``AT_HAND`` (16) until the first boundary, then ``((segments + 1) *
link_capacity + 2 * segments + 2) * 16`` (``_split``).

A driver's source may yield ``Inline(source)``: the items that follow are
pulled from that ``InlineSource`` in the task that reads the source (the
consumer's, in ``"fused"`` mode) while they are at hand, and handed over by
the driver's task only when one must be waited for. The agent's run hands the
model's response over this way, so a chunk at hand costs no task switch.

Retries and attempts: a stage's ``abort(retry=True)`` is handed to the driver
(``PipelineDriver.on_retry_request``) when it reaches the client end. If the
driver accepts, everything after the cut in that attempt is discarded and the
driver starts a new attempt by yielding a ``NewAttempt`` marker from the source;
if not (or there is no driver), it ends the stream as a tripwire.
"""

from __future__ import annotations

import math
from collections.abc import (
    Awaitable,
    Sequence,
)
from typing import Any, Final

import trio

from .._errors import (
    TripWire,
)
from .._secrets import get_logger
from ..data import (
    DataChunk,
    ErrorChunk,
    ErrorPayload,
    TripwireChunk,
    TripwirePayload,
)
from ..processors import (
    AbortSignal,
    ProcessorViolation,
    RequestContext,
    TracingContext,
)
from ._actor import ProcessorActor
from ._flow import NOTHING, Flow
from ._interface import (
    ExecutionMode,
    PipelineDriver,
    PipelineOutcome,
    PipelineStatistics,
)
from ._markers import (
    Barrier,
    Deliver,
    EndRun,
    NewAttempt,
    _DrainBarrier,
    _Marker,
    _Raise,
    _StageEnd,
    _Violation,
)
from ._split import Splitter
from ._stage import _CHUNK_SET, _SLOW, _STOP, _Pending, _Stage
from ._watch import COUNTED, driven, first_probation

__all__ = ["GRACE_SECONDS", "OutputPipeline"]

logger = get_logger("procession")

GRACE_SECONDS: Final = 5.0
"""How long the work of a cancelled read may run on, past the read's deadline
(past its start if the deadline had passed already): a hook cut off and run
again, ``on_violation``, a retry decision (README, "Cancelled reads"); also
how long closing the source may take on leaving the pipeline's block."""


def _grace_deadline() -> float:
    """The deadline of work a cancelled read lets finish: the read's own
    deadline plus ``GRACE_SECONDS``, or the grace from now when the
    read is cancelled already (its deadline passed before it began: trio
    reports ``-inf`` then), so that such a read still makes progress."""
    deadline = trio.current_effective_deadline()
    if deadline == -math.inf:
        deadline = trio.current_time()
    return deadline + GRACE_SECONDS


_PASSING: Final = frozenset({NewAttempt, Barrier, Deliver})
"""Markers the client end acts on without awaiting (``next_ready`` passes
them): an adaptive fill's batch goes on after one (after a custom chunk a
stage wrote, too: it is a ``Deliver``)."""

AT_HAND: Final = 16
"""``"adaptive"`` mode, unsplit: at most this many source items are run through
the chain per fill while they are at hand (``_fill_fused``), ahead of the
client's reads."""


# --- the pipeline --------------------------------------------------------------


class OutputPipeline:
    """One run's output-stream pipeline: an async iterator of the chunks the
    client sees. Open it with ``open_output_pipeline``.

    After iteration ends, ``outcome`` says how the stream ended; ``statistics()``
    gives counters. Iterating checkpoints at least every ``checkpoint_every``
    source items; it does not checkpoint on every chunk.
    """

    __slots__ = (
        "__weakref__",
        "_at_hand",
        "_checkpointed",
        "_delivered",
        "_flow",
        "_held",
        "_pending_end",
        "_resume",
        "_shield_chain",
        "_source_done",
        "_splitter",
        "_stages",
        "_task",
        "_watching",
        "abort_signal",
        "checkpoint_every",
        "driver",
        "link_capacity",
        "message_list",
        "mode",
        "outcome",
        "request_context",
        "retry_count",
        "run_id",
        "tracing_context",
    )

    def __init__(
        self,
        flow: Flow,
        stages: Sequence[_Stage],
        splitter: Splitter | None,
        *,
        run_id: str | None,
        request_context: RequestContext,
        message_list: Any,
        mode: ExecutionMode,
        link_capacity: int | float,
        checkpoint_every: int,
        driver: PipelineDriver | None,
        tracing_context: TracingContext | None,
        abort_signal: AbortSignal | None,
        retry_count: int,
    ) -> None:
        self.run_id = run_id
        self.request_context = request_context
        self.message_list = message_list
        self.mode: ExecutionMode = mode
        self.link_capacity = link_capacity
        self.checkpoint_every = checkpoint_every
        self.driver = driver
        self.tracing_context = tracing_context
        self.abort_signal = abort_signal
        self.retry_count = retry_count
        self.outcome: PipelineOutcome | None = None
        # Shared with the stages, the splitter and actors mode's tasks (_flow).
        self._flow = flow
        self._stages = stages
        self._splitter = splitter  # "adaptive": see _split
        self._task: Any = None  # "adaptive": the reading task (_watch's probe)
        self._watching = any(stage.watch is not None for stage in stages)
        self._pending_end: Any = None
        self._resume: list[tuple[int, Any]] = []  # fused mode: see _chain
        self._shield_chain = False  # set once a read is cancelled mid-chain
        # "adaptive": source items a fill may run while they are at hand (see
        # _fill_fused); 0 where this trio does not count schedule points (no
        # probation then: first_probation() is 0).
        self._at_hand = AT_HAND if mode == "adaptive" and first_probation() else 0
        self._held: Any = NOTHING  # an error chunk a batch stopped before
        self._source_done = False
        # Statistics (the rest are the flow's).
        self._checkpointed = -1  # _fill_fused: the budget checkpoint taken last
        self._delivered = 0
        for stage in stages:
            stage.out = flow.buffer if mode != "actors" else []

    # statistics ---------------------------------------------------------------

    @property
    def bound(self) -> int | float:
        """The documented bound on source items read but not settled."""
        if self._splitter is not None and self._flow.receive is not None:
            return self._splitter.bound()  # split
        if self.mode != "actors":
            return max(1, self._at_hand)  # fused, or adaptive unsplit
        stages = len(self._stages)
        if self.link_capacity == math.inf:
            return math.inf
        return int((stages + 1) * self.link_capacity + 2 * stages + 2)

    def statistics(self) -> PipelineStatistics:
        flow = self._flow
        return PipelineStatistics(
            mode=self.mode,
            stages=len(self._stages),
            pulled=flow.pulled,
            delivered=self._delivered,
            peak_in_flight=flow.peak,
            bound=self.bound,
        )

    # fused mode ---------------------------------------------------------------

    async def _fill_fused(self) -> None:
        """Pull one source item and run it through every stage (in this task).

        In ``"adaptive"`` mode, then up to ``AT_HAND - 1`` more, while the
        next is at hand (an ``Inline`` source has it without waiting, a
        driver's queue has it queued: ``Flow.queued``), the chain made nothing
        but chunks and the markers the client end passes without awaiting
        (``_PASSING``), and no hook yielded: the client end then serves a
        micro-batch without a fill per chunk. A batch ends before an error
        chunk (it waits in ``_held`` until everything before it is delivered,
        as ``Flow.recovered`` needs), at any other marker or signal, at a
        checkpoint boundary and after the first hook that yields."""
        flow = self._flow
        assert flow.iterator is not None
        if self._watching and (
            self._task is None or (flow.pulled + 1) % self.checkpoint_every == 0
        ):
            # The reading task, looked up now and then, not per chunk: a stream
            # read from one task and then another is watched in the new one
            # after at most checkpoint_every items (till then the probe may
            # miss a yield, never misclassify a park: _watch).
            self._task = trio.lowlevel.current_task()
        if self._resume:
            await self._resume_interrupted()
            return
        pulled = flow.pulled
        if (pulled + 1) % self.checkpoint_every == 0 and self._checkpointed != pulled:
            # Before the item is taken, never between taking and queueing it: a
            # read cancelled here (a deadline on each read) loses nothing. Once
            # per item: the read after one cancelled here goes on (a read whose
            # deadline had passed would be cancelled here every time).
            self._checkpointed = pulled
            await trio.lowlevel.checkpoint()
        item = self._held
        if item is not NOTHING:
            self._held = NOTHING
        else:
            try:
                inline = flow.inline
                if inline is None:
                    item = await flow.iterator.__anext__()
                else:
                    try:
                        item = inline.pull_nowait()  # the per-chunk path, no await
                    except trio.WouldBlock:
                        item = NOTHING  # waited for below, outside the handler
                    except trio.EndOfChannel:
                        flow.inline = inline = None
                        item = NOTHING
                    if item is NOTHING:
                        # Not through next_source: a paced chunk's wait asks
                        # the source once, not three times (each a WouldBlock
                        # raised), and parks one frame less deep; waiting
                        # outside a handler, it keeps no exception alive.
                        if inline is not None:
                            try:
                                item = await inline.pull()
                            except trio.EndOfChannel:
                                flow.inline = None
                        if item is NOTHING:
                            item = await flow.iterator.__anext__()
            except StopAsyncIteration:
                self._source_done = True
                return
        # The items this fill may run (adaptive mode: up to AT_HAND; from an
        # Inline source one more than were run from it before, so the first
        # chunk of a response goes out alone, then 2, 4, 8...).
        if flow.inline is None:
            left = self._at_hand  # the driver's own few items: all at hand
        else:
            left = min(self._at_hand, flow.ramp + 1)
            flow.ramp += 1
        task: Any = None
        points = 0
        if left:
            task = trio.lowlevel.current_task()
        buffer = flow.buffer
        while True:
            if left:
                # trio's count, read inline (_watch.schedule_points).
                points = task._schedule_points  # noqa: SLF001 - trio's count
            # pull_count and admit's chunk case, inline: the per-chunk path.
            flow.pulled = pulled = flow.pulled + 1
            flow.settled += 1  # in fused mode an item is settled as it is run
            if pulled - flow.settled >= flow.peak:
                flow.peak = pulled - flow.settled + 1
            if (
                item.__class__ not in _CHUNK_SET
                or flow.retry_raised >= flow.entry_attempt
            ):
                # What admit lets through here is a marker (a chunk only
                # passes where the condition above is false).
                item = flow.admit(item)
                if item is None:
                    return
                if item.__class__ is NewAttempt:
                    for stage in self._stages:
                        stage.new_attempt(item)
                buffer.append(item)
                if item.__class__ not in _PASSING:
                    return
                # One the client end passes without awaiting (next_ready):
                # the batch goes on with what is queued after it.
            else:
                # Held back: processors see an error only once it is
                # terminal. Everything before it was delivered already (the
                # buffer is empty when an error chunk is run: a batch stops
                # before one).
                if item.__class__ is ErrorChunk and await self._decided(
                    flow.recovered(item)
                ):
                    return
                if self._shield_chain:
                    await self._shielded(0, item)
                    return
                if self._stages:
                    await self._chain(0, item)
                else:
                    buffer.append(item)
            left -= 1
            if (
                left <= 0
                or task._schedule_points != points  # noqa: SLF001 - trio's count
                or self._resume
                or (
                    buffer[-1].__class__ not in _CHUNK_SET
                    and buffer[-1].__class__ not in _PASSING
                    if buffer
                    else False
                )
                or (flow.pulled + 1) % self.checkpoint_every == 0
            ):
                return
            inline = flow.inline  # take_nowait, inline
            if inline is None:
                # The driver's own items queued after this one (lifecycle
                # chunks, markers): they go out with it, in one send.
                queued = flow.queued
                if queued is None:
                    return
                item = queued()
                if item is NOTHING:
                    return
            else:
                try:
                    item = inline.pull_nowait()
                except trio.WouldBlock:
                    return
                except trio.EndOfChannel:
                    flow.inline = None
                    return
                flow.ramp += 1
            if item.__class__ is ErrorChunk:
                self._held = item  # run once the batch is delivered
                return

    async def _shielded(self, k: int, item: Any) -> None:
        """``_chain``, shielded from the consumer's cancellation for a grace period.

        Used once a read of this pipeline was cancelled while a hook awaited (a
        heartbeat timeout around ``__anext__``, say): that hook was cut off and
        is run again with the same chunk (at least once), and from then on a
        chunk finishes its way through the processors (its outputs wait in the
        buffer) before the cancellation takes effect. The consumer's deadline
        still holds, ``GRACE_SECONDS`` late at most; an explicit
        ``cancel()`` of an enclosing scope waits for the hooks of the chunk in
        flight. Consumers that never cancel a read pay nothing for this.
        """
        deadline = _grace_deadline()  # outside the shield, which hides it
        with trio.CancelScope(shield=True, deadline=deadline) as scope:
            await self._chain(k, item)
        if scope.cancelled_caught:
            # The grace ran out: let the consumer's own cancellation through now
            # (the interrupted chunk waits in _resume for the next read).
            await trio.lowlevel.checkpoint()

    async def _resume_interrupted(self) -> None:
        """Carry on with the chunks a cancelled read left half-way (see
        ``_chain``), in stream order, before anything new is read."""
        pending, self._resume = self._resume, []
        for index, (k, item) in enumerate(pending):
            try:
                await self._shielded(k, item)
            except BaseException:
                # Cancelled again: _chain queued its own remnants first.
                self._resume.extend(pending[index + 1 :])
                raise

    async def _chain(self, k: int, item: Any) -> None:
        """Carry ``item`` through stages k.. into the buffer, depth first.

        If a hook is cut off by cancellation anyway (``_shielded``'s grace ran
        out), the chunk is not lost: the interrupted stage, and every chunk
        still to go after it, are queued and run again on the next read, so the
        interrupted hook is called again with the same chunk (at least once,
        never skipped). Actors mode has no such case: its stages are only
        cancelled when the whole pipeline is.

        Once a stage asked for a retry of this attempt, nothing more of it is
        carried: the other chunks a list result made (and chunks queued to
        resume) come after the cut, as in the sequential run, where the
        decision is taken before the next chunk moves. (Without this a stage
        before the retrying one could end the run on a chunk past the cut.)
        """
        flow = self._flow
        if flow.retry_raised >= flow.entry_attempt:
            return
        stages = self._stages
        n = len(stages)
        while k < n:
            stage = stages[k]
            if stage.stopped or stage.discarding:
                return
            if stage.skip_data and item.__class__ is DataChunk:
                k += 1
                continue
            try:
                if stage.is_async:
                    actor = stage.actor
                    # The actor's turn, inline (Stage.apply does the same).
                    if actor._busy or actor._waiting:  # noqa: SLF001 - the turn
                        result = await stage.apply(item)
                    else:
                        # Stage.apply inline, its turn taken (the per-chunk
                        # path of an async hook: one coroutine fewer per stage).
                        stage.parts.append(item)
                        args = stage.args
                        args.part = item
                        actor._busy = True  # noqa: SLF001 - the turn, inline
                        try:
                            watch = stage.watch
                            if watch is None:
                                result = await stage.fn(args)
                            elif watch is COUNTED:  # adaptive: see _watch
                                # The task's count of schedule points, read
                                # inline (_watch.schedule_points is the same).
                                task = self._task
                                points = task._schedule_points  # noqa: SLF001 - trio's count
                                result = await stage.fn(args)
                                if task._schedule_points != points:  # noqa: SLF001 - trio's count
                                    stage.yielded()
                            else:
                                result = await driven(stage.fn(args), stage.seen)
                                if stage.seen.parked:
                                    stage.parked()
                                elif stage.probation:
                                    stage.probed()
                        except BaseException as exc:
                            result = stage.raised(exc, item)
                        finally:
                            # release_turn, inline (read through the stage:
                            # a task may have queued for the turn meanwhile).
                            if stage.actor._waiting:  # noqa: SLF001 - the turn
                                actor.release_turn()
                            else:
                                actor._busy = False  # noqa: SLF001 - the turn
                        if not (
                            result is item
                            or result is None
                            or result is _STOP  # raised(): a tripwire or failure
                            or result.__class__ in _CHUNK_SET
                        ):
                            result = stage.checked(result, item)
                else:
                    result = stage.apply_nowait(item)
                    if result is _SLOW:
                        result = await stage.apply(item)
                    elif result.__class__ is _Pending:
                        result = await stage.apply(item, result)
            except BaseException:
                # Offered again on the next read: take it back out of
                # stream_parts so it is not there twice.
                if stage.parts and stage.parts[-1] is item:
                    stage.parts.pop()
                self._resume.append((k, item))
                # This consumer cancels its reads: from now on chunks finish their
                # way through the processors first (see _shielded).
                self._shield_chain = True
                raise
            if result is None:
                stage.dropped()
                return
            if result is _STOP:
                return
            if result.__class__ is list:
                for index, sub in enumerate(result):
                    try:
                        await self._chain(k + 1, sub)
                    except BaseException:
                        self._resume.extend(
                            (k + 1, rest) for rest in result[index + 1 :]
                        )
                        raise
                return
            item = result
            k += 1
        flow.buffer.append(item)

    # the client end ------------------------------------------------------------

    def __aiter__(self) -> OutputPipeline:
        return self

    def next_ready(self) -> Any:
        """The next chunk the client sees if it is ready now, else ``None``:
        what ``__anext__`` would return without awaiting (a chunk at the head
        of a batch run ahead), for a reader that awaits ``__anext__`` only
        when this gives ``None``. Never awaits and never runs a hook."""
        flow = self._flow
        buffer = flow.buffer
        if (
            self._pending_end is not None
            or flow.receive is not None  # split or actors: __anext__ accounts
        ):
            return None
        while buffer:
            head = buffer[0]
            cls = head.__class__
            if cls in _CHUNK_SET:
                self._delivered += 1
                return buffer.popleft()
            if cls not in _PASSING or flow.finished:
                return None
            # A marker acted on without awaiting (as _client_marker does).
            buffer.popleft()
            if cls is Barrier:
                head.release()
            elif cls is NewAttempt:
                if self.driver is not None:
                    self.driver.on_attempt(head)
            else:  # Deliver
                self._delivered += 1
                return head.chunk
        return None

    def end_nowait(self) -> bool:
        """Whether the stream has ended, found without awaiting: True when
        ``__anext__`` would raise ``StopAsyncIteration`` with nothing to run
        or deliver first (the end is then taken: the outcome is
        ``completed``, as that read makes it); False otherwise, with nothing
        delivered or run (barriers at the head passed, as a read passes
        them). Only a fused or unsplit adaptive pipeline whose source says
        its end without a read (a run's ``ControlSource``) can tell; never in
        ``"actors"`` mode or once split. Never awaits, never runs a hook."""
        flow = self._flow
        if self._pending_end is not None or flow.receive is not None:
            return False
        buffer = flow.buffer
        while buffer:
            # A barrier run ahead with the last chunk passes as next_ready
            # passes it.
            head = buffer[0]
            if head.__class__ is not Barrier or flow.finished:
                return False
            buffer.popleft()
            head.release()
        if not flow.finished and not self._source_done:
            if self._held is not NOTHING or self._resume or flow.inline is not None:
                return False
            source = flow.iterator
            ended = getattr(source, "ended_nowait", None)
            take_barrier = getattr(source, "take_barrier_nowait", None)
            if ended is None or take_barrier is None:
                return False
            while not ended():
                # A barrier queued last (RunControl.then; fused mode takes one
                # item a read) passes here as the client end passes it: it
                # runs no hook.
                barrier = take_barrier()
                if barrier is None:
                    return False
                flow.pull_count()
                flow.settled += 1
                barrier.release()
            self._source_done = True
        if not flow.finished:
            self._end_completed()
        return True

    async def __anext__(self) -> Any:
        """The next chunk the client sees.

        In ``"fused"`` mode the stages run here, in the caller's task: this
        checkpoints whenever a hook or the source does, and at least every
        ``checkpoint_every`` source items. If the caller's read is cancelled
        while a hook awaits, nothing is lost: that hook is called again with
        the same chunk on the next read, and from then on each chunk finishes
        its way through the stages first (up to the caller's deadline plus
        ``GRACE_SECONDS``). Raises ``StopAsyncIteration`` at the end.

        In every mode a read whose deadline has passed (before it began, or
        while it runs) still returns a chunk that is ready: one in the buffer
        or the last link, or in ``"fused"`` mode a source item at hand run
        through the stages (hooks that await get the grace, from the read's
        start if its deadline had passed); it raises ``Cancelled`` only where
        it waits. The ``checkpoint_every`` checkpoint is taken once per item,
        so the read after one cancelled there goes past it. A consumer that
        reads again after each timeout thus gets every chunk, however short
        its deadline.
        """
        flow = self._flow
        buffer = flow.buffer
        while True:
            if self._pending_end is not None:
                # The terminal chunk of a read that was cancelled while
                # on_violation ran: it is still delivered, once.
                item, self._pending_end = self._pending_end, None
                self._delivered += 1
                return item
            if buffer:
                item = buffer.popleft()
                if (
                    not buffer
                    and self.mode == "actors"
                    and item.__class__ is not _DrainBarrier
                ):
                    flow.settled += 1
            elif flow.finished:
                raise StopAsyncIteration
            else:
                if (
                    flow.receive is None
                    and not self._source_done
                    and (
                        self._splitter is None
                        or not flow.wanted
                        or self._held is not NOTHING
                    )
                ):
                    await self._fill_fused()  # _refill's fused case, inline
                else:
                    await self._refill()
                continue
            if item.__class__ not in _CHUNK_SET:  # a marker
                chunk = await self._client_marker(item)
                if chunk is None:
                    continue
                item = chunk
            self._delivered += 1
            return item

    async def _refill(self) -> None:
        flow = self._flow
        splitter = self._splitter
        if flow.receive is None:
            if (
                splitter is None
                or not flow.wanted
                or self._resume
                or self._held is not NOTHING
            ):
                if self._source_done:
                    self._end_completed()
                    return
                await self._fill_fused()
                return
            if self._source_done:
                self._end_completed()
                return
            splitter.start()  # adaptive: a stage blocked; split from here on
        receive = flow.receive
        assert receive is not None
        try:
            # What is ready is taken first: receive() alone raises Cancelled
            # before it looks, so a read whose deadline had passed would never
            # get a chunk (the read-progress guarantee: __anext__).
            waiting = False
            try:
                message = receive.receive_nowait()
            except trio.WouldBlock:
                waiting = True  # waited for outside the handler (no exception kept)
            if waiting:
                message = await receive.receive()
        except trio.EndOfChannel:
            self._end_completed()
            return
        if splitter is not None:
            splitter.received(message)
        elif message.__class__ is list:
            flow.buffer.extend(message)
        else:
            flow.buffer.append(message)

    def _end_completed(self) -> None:
        self._flow.finished = True
        if self.outcome is None:
            self.outcome = PipelineOutcome("completed")

    async def _client_marker(self, item: _Marker) -> Any:
        """Act on a marker at the client end; return a chunk to deliver, if any."""
        if self._flow.finished:
            return None
        if isinstance(item, Deliver):
            return item.chunk
        if isinstance(item, _Violation):
            await self._notify(item.actor, item.violation)
            return None
        if isinstance(item, Barrier):  # _DrainBarrier too
            item.release()
            return None
        if isinstance(item, NewAttempt):
            if self.driver is not None:
                self.driver.on_attempt(item)
            return None
        if isinstance(item, _Raise):
            raise item.error
        if isinstance(item, EndRun):
            return await self._deliver_tripwire(item.tripwire, item.actor)
        assert isinstance(item, _StageEnd)
        if item.error is not None:
            self._end_with(PipelineOutcome("error", error=item.error))
            return ErrorChunk(
                payload=ErrorPayload(error=item.error), run_id=self.run_id
            )
        tripwire = item.tripwire
        assert tripwire is not None
        if (
            tripwire.retry
            and self.driver is not None
            and await self._decided(self.driver.on_retry_request(tripwire))
        ):
            if self._splitter is not None:
                self._splitter.retry_decided()
            return None
        return await self._deliver_tripwire(tripwire, item.actor)

    async def _deliver_tripwire(
        self, tripwire: TripWire, actor: ProcessorActor | None
    ) -> TripwireChunk:
        """The run is over from here: tell the driver first (it stops reading the
        model), then await on_violation, then deliver the tripwire chunk."""
        self._end_with(PipelineOutcome("tripwire", tripwire=tripwire))
        chunk = self._tripwire_chunk(tripwire)
        self._pending_end = chunk  # delivered even if this read is cancelled
        if actor is not None:
            await self._notify(
                actor,
                ProcessorViolation(
                    processor_id=tripwire.processor_id or actor.id,
                    message=tripwire.reason,
                    detail=tripwire.metadata,
                    blocking=True,
                ),
            )
        self._pending_end = None
        return chunk

    async def _notify(
        self, actor: ProcessorActor, violation: ProcessorViolation
    ) -> None:
        """Await ``on_violation``. It runs to the end even if the consumer's read
        is cancelled meanwhile (the marker was taken from the stream, so a
        cut-off call would be a lost alert), up to the consumer's own deadline
        plus a grace period."""
        # The consumer's deadline still holds, a grace period late at most.
        deadline = _grace_deadline()  # outside the shield, which hides it
        with trio.CancelScope(shield=True, deadline=deadline):
            await actor.notify_violation(violation)

    async def _decided(self, decision: Awaitable[bool]) -> bool:
        """Await a driver's decision about an item already taken from the stream
        (an error chunk at the entry, a retry request at the client end). Like
        ``_notify``, it is not cut off by the consumer's cancelled read, up to
        the consumer's deadline plus a grace period: the item would be lost
        with it. Past the grace the answer is False (the item is terminal, and
        is delivered on a later read)."""
        deadline = _grace_deadline()  # outside the shield, which hides it
        with trio.CancelScope(shield=True, deadline=deadline):
            return await decision
        return False

    def _tripwire_chunk(self, tripwire: TripWire) -> TripwireChunk:
        return TripwireChunk(payload=TripwirePayload.of(tripwire), run_id=self.run_id)

    def _end_with(self, outcome: PipelineOutcome) -> None:
        flow = self._flow
        self.outcome = outcome
        flow.finished = True
        if self._splitter is not None:
            self._splitter.retry_decided()
        flow.buffer.clear()
        if self.driver is not None:
            self.driver.on_terminal(outcome)
        if flow.cancel_scope is not None:
            # The terminal item is delivered; nothing upstream may run on.
            flow.cancel_scope.cancel()
