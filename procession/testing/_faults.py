"""Fault injection for ``ScriptedModel`` turns: an error at chunk k, a stall, a
slow drip, on trio's clock.

Each builder takes the items of one turn (what ``text_turn``,
``tool_call_turn`` and ``reasoning_turn`` return, spliced as you like) and
returns a new list for the script; the input is not changed. "Chunk k" counts
the chunks the consumer receives, from 0: ``Delay`` and ``Usage`` items are not
chunks, and a final ``ModelFinish`` / ``FinishChunk`` / ``StepFinishChunk`` is
not streamed. Under ``MockClock(autojump_threshold=0)`` every delay costs no
real time, so a test of a 30-second timeout runs instantly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..data import FinishChunk, StepFinishChunk
from ..models import ModelFinish
from ._script import Delay, ScriptError, ScriptItem, _is_chunk

__all__ = ["drip", "fail_at", "stall"]

STALL_SECONDS = 24 * 60 * 60.0
"""A stall's default length: longer than any timeout a test sets."""


def _is_streamed(item: ScriptItem, where: str) -> bool:
    if isinstance(item, str):
        raise ScriptError(
            f"{where}: the str item {item!r} streams as three chunks; write "
            f"*text_turn({item!r}) so the chunks can be counted"
        )
    if isinstance(item, FinishChunk | StepFinishChunk):
        return False
    return _is_chunk(item) or isinstance(item, Mapping)


def _is_finish(item: ScriptItem) -> bool:
    return isinstance(item, ModelFinish | FinishChunk | StepFinishChunk)


def _cut(items: Sequence[ScriptItem], k: int, where: str) -> tuple[int, int]:
    """(index in ``items`` of chunk ``k``, number of chunks); chunk ``n`` (one past
    the last) is the position of the finish item, or the end."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise ValueError(f"{where}: k must be an int >= 0, got {k!r}")
    streamed = [i for i, item in enumerate(items) if _is_streamed(item, where)]
    if k > len(streamed):
        raise ValueError(
            f"{where}: k={k} but the turn streams only {len(streamed)} chunks "
            f"(k may be 0 to {len(streamed)})"
        )
    if k < len(streamed):
        return streamed[k], len(streamed)
    finish = [i for i, item in enumerate(items) if _is_finish(item)]
    return (finish[0] if finish else len(items)), len(streamed)


def fail_at(
    items: Sequence[ScriptItem], k: int, error: BaseException
) -> list[ScriptItem]:
    """The turn cut before chunk ``k``, then ``error`` raised from the stream.

    The consumer receives chunks 0 to k-1 (and the delays before them), then the
    read raises ``error``; the rest of the turn, its finish included, is
    dropped (nothing may follow an exception). A ``Usage`` before the cut stays.
    Raises ``ValueError`` if the turn has fewer than ``k`` chunks.
    """
    if not isinstance(error, BaseException):
        raise TypeError(f"fail_at: error must be an exception instance, got {error!r}")
    index, _ = _cut(items, k, "fail_at")
    return [*items[:index], error]


def stall(
    items: Sequence[ScriptItem], k: int, seconds: float = STALL_SECONDS
) -> list[ScriptItem]:
    """The turn with ``Delay(seconds)`` before chunk ``k`` (a day by default):
    the stream goes quiet mid-response, as a provider that stopped sending
    does. ``k`` equal to the number of chunks stalls before the stream ends."""
    index, _ = _cut(items, k, "stall")
    return [*items[:index], Delay(seconds), *items[index:]]


def drip(items: Sequence[ScriptItem], seconds: float) -> list[ScriptItem]:
    """The turn with ``Delay(seconds)`` before every chunk: a slow provider."""
    delay = Delay(seconds)
    out: list[ScriptItem] = []
    for item in items:
        if _is_streamed(item, "drip"):
            out.append(delay)
        out.append(item)
    return out
