"""``args.stream_parts``: a read-only live view (issue 9, §1.10).

A hook reads what it was shown like a list, but cannot append to it, clear
it or assign into it; the view is never a copy, and it still forgets the
chunks of a discarded attempt (SPEC §2.4).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import pytest

from procession.actors import ExecutionMode, open_output_pipeline
from procession.actors._markers import NewAttempt
from procession.chunks import Chunk, TextDeltaChunk, text_delta
from procession.processors import ProcessOutputStreamArgs, StreamParts
from procession.testing import run_sequential

MODES: tuple[ExecutionMode, ...] = ("adaptive", "fused", "actors")
each_mode = pytest.mark.parametrize("mode", MODES)

READ_ONLY = "stream_parts is a read-only view"


async def from_list(items: Iterable[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


def texts(chunks: Iterable[Any]) -> list[str]:
    return [c.payload.text for c in chunks if isinstance(c, TextDeltaChunk)]


MUTATIONS: dict[str, Callable[[Any, Chunk], object]] = {
    "append": lambda parts, chunk: parts.append(chunk),
    "extend": lambda parts, chunk: parts.extend([chunk]),
    "insert": lambda parts, chunk: parts.insert(0, chunk),
    "clear": lambda parts, chunk: parts.clear(),
    "pop": lambda parts, chunk: parts.pop(),
    "remove": lambda parts, chunk: parts.remove(chunk),
    "setitem": lambda parts, chunk: parts.__setitem__(0, chunk),
    "delitem": lambda parts, chunk: parts.__delitem__(0),
    "iadd": lambda parts, chunk: parts.__iadd__([chunk]),
}


class Tamperer:
    """Tries every mutation on every chunk (each must raise a TypeError, or
    the hook fails the test), records what it reads, and passes the chunk on."""

    id = "tamperer"

    def __init__(self) -> None:
        self.snapshots: list[list[str]] = []
        self.views: list[Sequence[Chunk]] = []

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        parts = args.stream_parts
        for mutate in MUTATIONS.values():
            with pytest.raises(TypeError, match=READ_ONLY):
                mutate(parts, args.part)
        self.views.append(parts)
        self.snapshots.append(texts(parts))
        assert parts[-1] is args.part
        assert parts[len(parts) - 1] is args.part
        assert list(parts[:]) == list(parts)
        assert args.part in parts
        return args.part


SOURCE = [
    NewAttempt(0, discard=False),
    text_delta("a"),
    text_delta("b"),
    NewAttempt(1, discard=True),
    text_delta("c"),
    text_delta("d"),
]


@each_mode
async def test_a_hook_cannot_change_stream_parts(mode: ExecutionMode) -> None:
    """Every mutation raises a TypeError saying the view is read-only; reading
    works as on a list; the stream goes on unchanged."""
    tamperer = Tamperer()
    async with open_output_pipeline([tamperer], from_list(SOURCE), mode=mode) as out:
        chunks = [chunk async for chunk in out]
    assert texts(chunks) == ["a", "b", "c", "d"]
    # Live and never copied: one view, which forgot the discarded attempt.
    assert tamperer.snapshots == [["a"], ["a", "b"], ["c"], ["c", "d"]]
    assert all(view is tamperer.views[0] for view in tamperer.views)
    assert texts(tamperer.views[0]) == ["c", "d"]


async def test_the_sequential_reference_gives_the_same_read_only_view() -> None:
    """``run_sequential`` (the executable contract) refuses the same mutations."""
    tamperer = Tamperer()
    run = await run_sequential([tamperer], from_list(SOURCE))
    assert texts(run.chunks) == ["a", "b", "c", "d"]
    assert tamperer.snapshots == [["a"], ["a", "b"], ["c"], ["c", "d"]]


def test_stream_parts_reads_like_a_list_of_what_is_behind_it() -> None:
    """Length, indexing, slicing (a new list), iteration in both directions,
    ``in`` and equality with lists; the view follows the list behind it."""
    a, b, c = text_delta("a"), text_delta("b"), text_delta("c")
    behind: list[Chunk] = [a, b]
    same: list[Chunk] = [a, b]
    view = StreamParts(behind)
    assert len(view) == 2
    assert (view[0], view[-1]) == (a, b)
    assert view[0:1] == [a]
    assert isinstance(view[0:1], list)
    assert list(view) == [a, b]
    assert list(reversed(view)) == [b, a]
    assert b in view
    assert c not in view
    assert view == [a, b]
    assert view == (a, b)
    assert view == StreamParts(same)
    assert view != [a]
    behind.append(c)
    assert len(view) == 3
    assert view[-1] is c
    assert repr(StreamParts([])) == "StreamParts([])"
    with pytest.raises(TypeError, match="unhashable"):
        hash(view)
    with pytest.raises(TypeError, match=READ_ONLY):
        view.append(a)
    with pytest.raises(TypeError, match=READ_ONLY):
        view[0] = c  # the point: assignment is refused
    assert behind == [a, b, c]


async def test_a_kept_view_is_not_a_way_around_it() -> None:
    """A view kept from an earlier chunk is the same read-only view."""
    kept: list[Any] = []

    def keep(args: ProcessOutputStreamArgs) -> Any:
        kept.append(args.stream_parts)
        return args.part

    class Keeper:
        id = "keeper"
        process_output_stream = staticmethod(keep)

    async with open_output_pipeline([Keeper()], from_list([text_delta("x")])) as stream:
        assert texts([c async for c in stream]) == ["x"]
    with pytest.raises(TypeError, match=READ_ONLY):
        kept[0].clear()
    assert texts(kept[0]) == ["x"]
