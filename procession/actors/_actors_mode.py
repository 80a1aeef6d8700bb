"""The ``"actors"`` mode's tasks: a reader and one task per stage, linked by
bounded channels (``link_capacity`` messages each), under a supervisor of
their own."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import trio

from ..data import ErrorChunk
from ._flow import Flow
from ._markers import _DrainBarrier, _Raise
from ._stage import _Stage
from ._supervision import unwrapping_a_lone_exception

__all__: list[str] = []


class ActorsMode:
    """One actors-mode pipeline's tasks."""

    __slots__ = ("capacity", "checkpoint_every", "flow", "stages")

    def __init__(
        self,
        flow: Flow,
        stages: Sequence[_Stage],
        *,
        capacity: int | float,
        checkpoint_every: int,
    ) -> None:
        self.flow = flow
        self.stages = stages
        self.capacity = capacity
        self.checkpoint_every = checkpoint_every

    async def supervise(
        self, *, task_status: trio.TaskStatus[trio.MemoryReceiveChannel[Any]]
    ) -> None:
        """The actors-mode supervisor: owns the reader and stage tasks in a nursery
        of its own, so a terminal event cancels them and never the consumer's
        code (which runs in the enclosing block)."""
        with unwrapping_a_lone_exception():
            async with trio.open_nursery() as nursery:
                self.flow.cancel_scope = nursery.cancel_scope
                capacity = self.capacity
                send, receive = trio.open_memory_channel[Any](capacity)
                nursery.start_soon(self._reader, send)
                for stage in self.stages:
                    next_send, next_receive = trio.open_memory_channel[Any](capacity)
                    nursery.start_soon(self._stage_task, stage, receive, next_send)
                    receive = next_receive
                task_status.started(receive)

    async def _reader(self, send: trio.MemorySendChannel[Any]) -> None:
        flow = self.flow
        assert flow.iterator is not None
        with send:
            try:
                count = 0
                while True:
                    try:
                        raw = await flow.next_source()
                    except StopAsyncIteration:
                        break
                    flow.pull_count()
                    count += 1
                    item = flow.admit(raw)
                    if item is not None and item.__class__ is ErrorChunk:
                        # Held back until everything before it reached the client
                        # end, so the driver decides in stream position.
                        drained = _DrainBarrier()
                        await send.send(drained)
                        await drained.wait()
                        if await flow.recovered(item):
                            item = None
                    if item is None:
                        flow.settled += 1
                    else:
                        await send.send(item)
                    if count % self.checkpoint_every == 0:
                        await trio.lowlevel.checkpoint()
            except Exception as exc:
                # In-band, like everything else: what was read before the
                # failure reaches the client first, as in fused mode.
                await send.send(_Raise(exc))

    async def _stage_task(
        self,
        stage: _Stage,
        receive: trio.MemoryReceiveChannel[Any],
        send: trio.MemorySendChannel[Any],
    ) -> None:
        flow = self.flow
        with send, receive:
            async for message in receive:
                out: list[Any] = []
                stage.out = out
                if message.__class__ is list:
                    for item in message:
                        await stage.take(item, out)
                else:
                    await stage.take(message, out)
                if not out:
                    flow.settled += 1
                elif len(out) == 1:
                    await send.send(out[0])
                else:
                    await send.send(out)
