"""How a served step reaches the client: streamed as it is made (the default,
``"stream"``), or held until every ``process_output_step`` of the chain has
passed it (``"hold"``), so that nothing a processor rejects is ever sent.

Why: a retried attempt (``process_output_step`` asking for a retry) has
already been streamed. procession says so in band (a ``step-retry`` chunk; the
AI SDK route a ``data-step-retry`` part) and the bundled page strikes it out,
but stock clients do not: the AI SDK's ``readUIMessageStream`` keeps the
rejected attempt's text part beside the accepted one, and a
``@mastra/client-js`` user who joins the text deltas reads both. Holding
trades the time to the first byte of each step (it becomes the step's whole
length) and memory (a step's chunks, per stream) for a client that only ever
shows what the run accepted.

Held, a step's chunks (from its ``step-start`` to its ``step-finish``) go out
together at its ``step-finish``. A ``step-retry`` drops what was held (the
``step-retry`` itself is sent: the client is told an attempt was withdrawn);
a ``tripwire`` drops it too (the processor rejected it). An ``error`` or an
``abort`` sends what was held first: nothing rejected it, and the run's
``result.text`` keeps it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Final, Literal, TypeAlias

from .._errors import ConfigurationError
from ..chunks import Chunk
from ..runtime import AgentStream

__all__ = ["STEP_TEXT_MODES", "HeldSteps", "StepText", "check_step_text"]

StepText: TypeAlias = Literal["stream", "hold"]
STEP_TEXT_MODES: Final = ("stream", "hold")

_DROP_HELD: Final = frozenset({"step-retry", "tripwire"})
_SEND_HELD: Final = frozenset({"error", "abort", "finish"})


def check_step_text(
    value: object, agent_ids: frozenset[str]
) -> StepText | Mapping[str, StepText]:
    """``create_app(step_text=...)``: one mode for every agent, or a mapping
    of agent id to mode (agents left out stream); ``ConfigurationError``
    naming what is wrong."""
    if value == "stream" or value == "hold":
        return "stream" if value == "stream" else "hold"
    if isinstance(value, str):
        raise ConfigurationError(
            f"step_text must be 'stream' or 'hold' (or a mapping of agent id "
            f"to one), got {value!r}"
        )
    if isinstance(value, Mapping):
        for agent_id, mode in value.items():
            if agent_id not in agent_ids:
                raise ConfigurationError(
                    f"step_text names agent {agent_id!r}, which the app does not "
                    f"serve (its agents: {sorted(agent_ids)})"
                )
            if mode not in STEP_TEXT_MODES:
                raise ConfigurationError(
                    f"step_text[{agent_id!r}] must be 'stream' or 'hold', got {mode!r}"
                )
        return dict(value)
    raise ConfigurationError(
        f"step_text must be 'stream', 'hold' or a mapping of agent id to one, "
        f"got {value!r}"
    )


class HeldSteps:
    """The chunks of ``stream`` with each step held until its
    ``step-finish`` (the module docstring). An async iterator, not a
    generator: a read that is cancelled loses nothing and the next read goes
    on (the stream's own guarantee carries through). Checkpoints as the
    stream's reads do."""

    __slots__ = ("_held", "_holding", "_out", "_stream")

    def __init__(self, stream: AgentStream) -> None:
        self._stream = stream
        self._held: list[Chunk] = []
        self._holding = False
        self._out: deque[Chunk] = deque()

    def __aiter__(self) -> HeldSteps:
        return self

    async def __anext__(self) -> Chunk:
        """The next chunk to send. Checkpoints when it reads the stream (a
        held step's chunks come without one); cancelled, nothing is lost."""
        out = self._out
        while not out:
            chunk = await self._stream.__anext__()  # StopAsyncIteration ends
            self._take(chunk)
        return out.popleft()

    def next_ready(self) -> Chunk | None:
        """The next chunk to send if it is at hand now (a released step's, or
        one the stream has at hand), else None; never awaits."""
        out = self._out
        while not out:
            chunk = self._stream.next_ready()
            if chunk is None:
                return None
            self._take(chunk)
        return out.popleft()

    def end_nowait(self) -> bool:
        """Whether the stream has ended with nothing left to send, found
        without awaiting (``AgentStream.end_nowait``)."""
        return not self._out and self._stream.end_nowait()

    def _take(self, chunk: Chunk) -> None:
        kind = chunk.type
        if kind == "step-start":
            self._holding = True
        if not self._holding:
            self._out.append(chunk)
        elif kind in _DROP_HELD:
            self._release(send=False)
            self._out.append(chunk)
        elif kind in _SEND_HELD:
            self._release(send=True)
            self._out.append(chunk)
        else:
            self._held.append(chunk)
            if kind == "step-finish":
                self._release(send=True)

    def _release(self, *, send: bool) -> None:
        if send:
            self._out.extend(self._held)
        self._held.clear()
        self._holding = False
