"""``collect_stream``: run an agent, keep every chunk the client saw and the
result."""

from __future__ import annotations

from typing import Any

import attrs

from ..data import Chunk, TextDeltaChunk
from ..runtime import Agent, AgentResult

__all__ = ["CollectedRun", "collect_stream"]


@attrs.frozen
class CollectedRun:
    """One streamed run, read to its end: the chunks in the order the client
    received them, and ``await stream.result()``."""

    chunks: tuple[Chunk, ...]
    result: AgentResult

    @property
    def types(self) -> list[str]:
        """The chunks' wire types, in order (``["start", "step-start", ...]``)."""
        return [chunk.type for chunk in self.chunks]

    @property
    def text(self) -> str:
        """The text of the ``text-delta`` chunks the client received."""
        return "".join(
            c.payload.text for c in self.chunks if isinstance(c, TextDeltaChunk)
        )


async def collect_stream(agent: Agent, messages: Any, **options: Any) -> CollectedRun:
    """``agent.stream(messages, **options)`` read to its end.

    Takes the options of ``Agent.stream``. Checkpoints as the stream does;
    cancellation propagates (and, as leaving ``agent.stream`` always does,
    cancels the run). A run that trips or fails returns normally: look at
    ``result.finish_reason``, ``result.tripwire`` and ``result.error``.
    """
    async with agent.stream(messages, **options) as stream:
        chunks = [chunk async for chunk in stream]
        result = await stream.result()
    return CollectedRun(tuple(chunks), result)
