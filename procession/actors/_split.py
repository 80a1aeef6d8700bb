"""The ``"adaptive"`` mode's async boundaries.

An adaptive pipeline runs fused (every stage an awaited call in the consumer's
task) until a stage's hook is seen to block (``_watch``), or from the start if
a processor asks for it (``stream_boundary = True``). Then the chain is split
into *segments*, each run fused in a task of its own, linked by bounded
channels::

    feeder: source + stages [0, b1)  ->  link  ->  stages [b1, b2)  ->  ...
        ->  stages [bm, n)  ->  link  ->  the consumer

so a stage that waits on I/O no longer holds up the stages before it (they
run ahead, up to the links' slack) nor, through them, the model's stream.
Boundaries only ever get added, at message boundaries, in stream order; a
stage that stops blocking stays behind its boundary.

Messages on the links are micro-batches (``_Batch``): the feeder gathers up to
``BATCH`` source items when they are at hand without waiting (an ``Inline``
source's backlog: a scripted or cached response, several SSE events parsed
from one read), and each segment passes a message's outputs on as one message
(it does not merge queued messages: that would hold finished chunks back while
one of its hooks waits). Each batch knows how many source items it stands
for, so the in-flight count stays exact and bounded:
``((segments + 1) * link_capacity + 2 * segments + 2) * batch`` source items
read but not settled. Every message costs one checkpoint at least (its send),
so the feeder checkpoints at least every ``batch`` source items: that is the
split pipeline's cancellation-latency bound, beside the fused part's
``checkpoint_every``.

Each stage processes its items exactly as in ``"actors"`` mode
(``_Stage.take``), one after another, so the client sees what
every other mode gives.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any, Final

import trio

from ..data import DataChunk, ErrorChunk
from ._flow import NO_INDICES, NOTHING, Flow
from ._markers import _DrainBarrier, _Raise
from ._stage import _CHUNK_SET, _STOP, _Stage
from ._supervision import unwrapping_a_lone_exception

__all__: list[str] = []

DEFAULT_LINK_CAPACITY: Final = 4
"""Messages each adaptive link holds (with batches: up to 64 chunks of slack)."""
BATCH: Final = 16
"""The most source items one message stands for."""


class _Batch(list[Any]):
    """A message on an adaptive link: items, and the source items they stand
    for (``sources``; 0 for a barrier the feeder made)."""

    __slots__ = ("sources",)

    def __init__(self, items: list[Any], sources: int) -> None:
        super().__init__(items)
        self.sources = sources


class Splitter:
    """One adaptive pipeline's segment tasks. Where the boundaries are, and
    where they are wanted, is in the pipeline's ``Flow`` (a stage that parks
    says so there)."""

    __slots__ = (
        "_flow",
        "capacity",
        "closed",
        "decided",
        "nursery",
        "segments",
        "stages",
        "unsettled",
    )

    def __init__(
        self, flow: Flow, stages: Sequence[_Stage], capacity: int | float
    ) -> None:
        # Weakly, as a stage does: the flow's driver may hold the pipeline,
        # which holds its splitter (no reference cycle).
        self._flow = weakref.ref(flow)
        self.stages = stages
        self.nursery: trio.Nursery | None = None
        """Where the supervisor goes when the chain first splits (the
        pipeline's block sets it: the outer nursery), then the supervisor's."""
        self.capacity = capacity
        asked = {
            k
            for k, stage in enumerate(stages)
            if stage.actor.spec.stream_boundary is True
        }
        if asked:
            flow.wanted = {*flow.wanted, *asked}
        self.segments = 0
        """Segment tasks running (the feeder not counted)."""
        self.unsettled = 0
        """Source items of the batch the consumer is delivering."""
        self.closed = False
        self.decided: trio.Event | None = None
        """Set when the client end has acted on a retry request (or the run
        ended): the feeder waits for it before reading past a cut."""

    @property
    def split(self) -> bool:
        return self.flow.receive is not None

    @property
    def flow(self) -> Flow:
        flow = self._flow()
        assert flow is not None  # the splitter lives inside its pipeline
        return flow

    def bound(self) -> int | float:
        if not self.split:
            return 1
        if self.capacity == math.inf:
            return math.inf
        m = self.segments
        return int(((m + 1) * self.capacity + 2 * m + 2) * BATCH)

    def retry_decided(self) -> None:
        """The client end acted on a retry request, or the stream ended."""
        decided, self.decided = self.decided, None
        if decided is not None:
            decided.set()

    def close(self) -> None:
        """The pipeline's block is left: cancel the segment tasks (and any not
        started yet)."""
        self.closed = True
        scope = self.flow.cancel_scope
        if scope is not None:
            scope.cancel()

    # the first split, from the consumer's task ---------------------------------

    def start(self) -> None:
        """Split the fused chain at the wanted boundaries (called by the
        consumer's read, between items, with nothing in flight)."""
        flow = self.flow
        send, receive = trio.open_memory_channel[Any](self.capacity)
        flow.receive = receive
        cuts = sorted(flow.wanted)
        flow.wanted = NO_INDICES
        on_split = getattr(flow.driver, "on_split", None)
        if on_split is not None:
            on_split()  # the driver's source is read ahead from now on
        flow.boundaries = {*flow.boundaries, *cuts}
        self.segments = len(cuts)
        assert self.nursery is not None  # set when the pipeline's block opened
        self.nursery.start_soon(self._supervise, cuts, send)

    async def _supervise(
        self, cuts: list[int], send: trio.MemorySendChannel[Any]
    ) -> None:
        """Own the segment tasks in a nursery of their own, so a terminal event
        cancels them and never the consumer's code."""
        flow = self.flow
        if self.closed:
            send.close()
            return  # the block was left before this task got to run
        with unwrapping_a_lone_exception():
            async with trio.open_nursery() as nursery:
                self.nursery = nursery  # later splits start their tasks here
                flow.cancel_scope = nursery.cancel_scope
                ends = [*cuts[1:], len(self.stages)]
                first = cuts[0]
                for lo, hi in reversed(list(zip(cuts, ends, strict=True))):
                    link_send, link_receive = trio.open_memory_channel[Any](
                        self.capacity
                    )
                    nursery.start_soon(self._segment, lo, hi, link_receive, send)
                    send = link_send
                nursery.start_soon(self._feeder, first, send)

    # the feeder: the source and the stages before the first boundary ----------

    async def _feeder(self, hi: int, send: trio.MemorySendChannel[Any]) -> None:
        flow = self.flow
        pending: list[Any] = []
        sources = 0
        try:
            while True:
                if flow.retry_raised >= flow.entry_attempt and flow.inline is not None:
                    # A processor asked to retry this attempt: the rest of the
                    # model's response is discarded whatever the driver decides,
                    # so it is not read on (as in fused mode) until it has.
                    if pending or sources:
                        send, hi = await self._send(0, hi, send, pending, sources)
                        pending, sources = [], 0
                    if self.decided is None:
                        self.decided = trio.Event()
                    await self.decided.wait()
                    continue
                raw = flow.take_nowait()
                if raw is NOTHING:
                    if pending:
                        send, hi = await self._send(0, hi, send, pending, sources)
                        pending, sources = [], 0
                    try:
                        raw = await flow.next_source()
                    except StopAsyncIteration:
                        break
                flow.pull_count()
                item = flow.admit(raw)
                if item is not None and item.__class__ is ErrorChunk:
                    # Held back until everything before it reached the client
                    # end, so the driver decides in stream position.
                    drained = _DrainBarrier()
                    pending.append(drained)
                    send, hi = await self._send(0, hi, send, pending, sources)
                    pending, sources = [], 0
                    await drained.wait()
                    if await flow.recovered(item):
                        item = None
                sources += 1
                if item is None:
                    pass
                elif hi == 0:  # no stage before the first boundary
                    pending.append(item)
                else:
                    pending.extend(await self._through(0, hi, [item]))
                if sources >= BATCH:
                    send, hi = await self._send(0, hi, send, pending, sources)
                    pending, sources = [], 0
            if pending or sources:
                send, hi = await self._send(0, hi, send, pending, sources)
        except Exception as exc:
            # In-band, like everything else: what was read before the failure
            # reaches the client first.
            pending.append(_Raise(exc))
            await send.send(_Batch(pending, sources))
        finally:
            send.close()

    # a segment: the stages [lo, hi) behind a boundary ---------------------------

    async def _segment(
        self,
        lo: int,
        hi: int,
        receive: trio.MemoryReceiveChannel[Any],
        send: trio.MemorySendChannel[Any],
    ) -> None:
        # One message at a time, its outputs sent on before the next is taken:
        # merging what is queued here would hold finished chunks back while a
        # slow hook of this segment waits, and stop the next one overlapping.
        try:
            while True:
                try:
                    message: _Batch = await receive.receive()
                except trio.EndOfChannel:
                    return
                out = await self._through(lo, hi, list(message))
                send, hi = await self._send(lo, hi, send, out, message.sources)
        finally:
            receive.close()
            send.close()

    async def _through(self, lo: int, hi: int, items: list[Any]) -> list[Any]:
        """``items`` through stages [lo, hi), as each stage does in actors mode."""
        stages = self.stages
        for k in range(lo, hi):
            stage = stages[k]
            out: list[Any] = []
            stage.out = out
            await _taken(stage, items, out)
            items = out
        return items

    async def _send(
        self,
        lo: int,
        hi: int,
        send: trio.MemorySendChannel[Any],
        items: list[Any],
        sources: int,
    ) -> tuple[trio.MemorySendChannel[Any], int]:
        """Send a batch on (or count it settled when nothing is left of it), then
        put in any boundary wanted inside [lo, hi): this task keeps the stages
        before it and hands the rest, and its link onward, to a new task.
        Returns the task's send channel and end from now on."""
        flow = self.flow
        if items:
            await send.send(_Batch(items, sources))
        else:
            flow.settled += sources
        inside = [k for k in flow.wanted if lo <= k < hi and k not in flow.boundaries]
        if not inside:
            return send, hi
        cut = min(inside)
        flow.wanted = flow.wanted - {cut}
        flow.boundaries = {*flow.boundaries, cut}
        self.segments += 1
        link_send, link_receive = trio.open_memory_channel[Any](self.capacity)
        assert self.nursery is not None  # the supervisor's, by now
        self.nursery.start_soon(self._segment, cut, hi, link_receive, send)
        return link_send, cut

    # the consumer's end ----------------------------------------------------------

    def received(self, message: _Batch) -> None:
        """The consumer took ``message`` off the last link (the previous one is
        delivered by now): count the previous one settled."""
        flow = self.flow
        flow.settled += self.unsettled
        self.unsettled = message.sources
        flow.buffer.extend(message)


async def _taken(stage: _Stage, items: list[Any], out: list[Any]) -> None:
    """``stage.take`` of each of ``items`` in turn, into ``out``, with the
    per-chunk path inline (one coroutine per message, not two per chunk): a
    chunk through an async hook that is not watched (any more), the actor's
    turn free. Everything else (markers, a stage past its cut, data parts it
    skips, a watched hook, a sync hook) goes through ``take`` itself."""
    actor = stage.actor
    args = stage.args
    fn = stage.fn
    parts = stage.parts
    inline = stage.is_async and stage.watch is None
    for item in items:
        if not (
            inline
            and item.__class__ in _CHUNK_SET
            and not stage.stopped
            and not stage.discarding
            # The actor's turn, read inline (as Stage.apply does).
            and not actor._busy  # noqa: SLF001 - the turn, inline
            and not actor._waiting  # noqa: SLF001 - the turn, inline
            and not (stage.skip_data and item.__class__ is DataChunk)
        ):
            await stage.take(item, out)
            continue
        # Stage.apply inline, its turn taken (as _pipeline's _chain does).
        parts.append(item)
        args.part = item
        actor._busy = True  # noqa: SLF001 - the turn, inline
        try:
            result = await fn(args)
        except BaseException as exc:
            result = stage.raised(exc, item)
        finally:
            actor.release_turn()
        if result is item or result.__class__ in _CHUNK_SET:
            out.append(result)  # the common case
            continue
        if not (result is None or result is _STOP):
            result = stage.checked(result, item)
        # Stage.take's tail.
        if result is None:
            stage.dropped()
        elif result is _STOP:
            pass
        elif result.__class__ is list:
            out.extend(result)
        else:
            out.append(result)
