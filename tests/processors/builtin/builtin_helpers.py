"""Run text through output processors the way a provider streams it, and check
what the client would see (shared by the built-in processors' tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import trio
import trio.testing

from procession import chunks as c
from procession.testing import SequentialRun, run_sequential


def stream_of(pieces: Sequence[str], *, tail: Sequence[Any] = ()) -> list[Any]:
    """``step-start``, one text block of ``pieces``, ``text-end``, then ``tail``
    (``step-finish`` and ``finish`` unless given)."""
    return [
        c.step_start(run_id="run-1"),
        c.text_start(run_id="run-1"),
        *(c.text_delta(piece, run_id="run-1") for piece in pieces),
        c.text_end(run_id="run-1"),
        *(tail or [c.step_finish(run_id="run-1"), c.finish(run_id="run-1")]),
    ]


async def _source(items: Sequence[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def run_chunks(processors: Sequence[object], items: Sequence[Any]) -> SequentialRun:
    """``items`` through ``processors`` with the sequential reference runner (on
    an autojump clock, from a plain test)."""

    async def main() -> SequentialRun:
        return await run_sequential(processors, _source(items), run_id="run-1")

    result: SequentialRun = trio.run(
        main, clock=trio.testing.MockClock(autojump_threshold=0)
    )
    return result


def run_pieces(processors: Sequence[object], pieces: Sequence[str]) -> SequentialRun:
    return run_chunks(processors, stream_of(pieces))


def client_text(chunks: Sequence[Any]) -> str:
    return "".join(x.payload.text for x in chunks if isinstance(x, c.TextDeltaChunk))


def assert_text_blocks_valid(chunks: Sequence[Any]) -> None:
    """Every text delta sits inside its own block (after its ``text-start``,
    before its ``text-end``), and no delta is empty."""
    open_ids: set[str] = set()
    for chunk in chunks:
        if isinstance(chunk, c.TextStartChunk):
            open_ids.add(chunk.payload.id)
        elif isinstance(chunk, c.TextDeltaChunk):
            assert chunk.payload.id in open_ids, f"{chunk!r} outside its block"
            assert chunk.payload.text, f"an empty delta {chunk!r}"
        elif isinstance(chunk, c.TextEndChunk):
            assert chunk.payload.id in open_ids, f"{chunk!r} without its start"
            open_ids.discard(chunk.payload.id)
