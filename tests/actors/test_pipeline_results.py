"""The output-stream pipeline in every execution mode: what a hook's result does
(drop, split, rewrite, identity), writer.custom, and the ``stream_parts`` list
and args object each stage is shown (SPEC §2.1, 2.2, 2.10).

The property test (tests/actors/test_pipeline_equivalence.py) checks that the
modes agree with the sequential reference; these tests pin down what the
reference itself promises.
"""

from __future__ import annotations

from typing import Any

import pytest

from procession.actors import (
    ExecutionMode,
)
from procession.actors._markers import NewAttempt
from procession.chunks import (
    DataChunk,
    TextDeltaChunk,
    data,
    text_delta,
    to_wire,
)
from procession.processors import (
    ProcessOutputStreamArgs,
)
from tests.actors.pipeline_helpers import (
    Recorder,
    Scripted,
    each_mode,
    part_text,
    rewritten,
    run,
    texts,
)

# --- results: drop, split, rewrite, identity -------------------------------------


@each_mode
async def test_none_drops_the_chunk_for_the_rest_of_the_chain(
    mode: ExecutionMode,
) -> None:
    def drop_b(args: ProcessOutputStreamArgs) -> Any:
        return None if part_text(args) == "b" else args.part

    after = Recorder("after")
    chunks, stream = await run(
        [Scripted("dropper", drop_b), after], map(text_delta, "abc"), mode
    )
    assert texts(chunks) == ["a", "c"]
    assert texts(after.seen) == ["a", "c"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "completed"


@each_mode
async def test_a_list_goes_through_the_rest_of_the_chain_in_order(
    mode: ExecutionMode,
) -> None:
    def split(args: ProcessOutputStreamArgs) -> Any:
        if part_text(args) == "a":
            return [args.part, text_delta("x"), text_delta("y")]
        return args.part

    def mark(args: ProcessOutputStreamArgs) -> Any:
        assert isinstance(args.part, TextDeltaChunk)
        return rewritten(args.part, "!")

    after = Recorder("after")
    chunks, _ = await run(
        [Scripted("splitter", split), Scripted("marker", mark), after],
        map(text_delta, "ab"),
        mode,
    )
    assert texts(chunks) == ["a!", "x!", "y!", "b!"]
    assert texts(after.seen) == ["a!", "x!", "y!", "b!"]


@each_mode
async def test_a_rewritten_chunk_is_what_later_processors_and_the_client_see(
    mode: ExecutionMode,
) -> None:
    def upper(args: ProcessOutputStreamArgs) -> Any:
        assert isinstance(args.part, TextDeltaChunk)
        return text_delta(args.part.payload.text.upper())

    after = Recorder("after")
    chunks, _ = await run(
        [Scripted("upper", upper, is_async=True), after], map(text_delta, "ab"), mode
    )
    assert texts(chunks) == ["A", "B"]
    assert texts(after.seen) == ["A", "B"]


@each_mode
async def test_pass_through_hands_on_the_same_object(mode: ExecutionMode) -> None:
    source = [text_delta("a"), data("tool", {"n": 1}), text_delta("b")]
    first, second = Recorder("first"), Recorder("second", data_parts=True)
    chunks, _ = await run([first, second], source, mode)
    assert len(chunks) == len(source)
    assert all(out is original for out, original in zip(chunks, source, strict=True))
    assert all(
        seen is original for seen, original in zip(second.seen, source, strict=True)
    )


@each_mode
async def test_data_chunks_reach_only_processors_that_opt_in(
    mode: ExecutionMode,
) -> None:
    blind = Recorder("blind")
    sees_data = Recorder("sees-data", data_parts=True)

    def rewrite_text_only(args: ProcessOutputStreamArgs) -> Any:
        # Would break a data chunk (no payload.text): it must never get one.
        assert isinstance(args.part, TextDeltaChunk)
        return rewritten(args.part, "+")

    source = [text_delta("a"), data("tool", {"n": 1}), text_delta("b")]
    chunks, _ = await run(
        [blind, Scripted("text-only", rewrite_text_only), sees_data], source, mode
    )
    assert texts(blind.seen) == ["a", "b"]
    assert texts(sees_data.seen) == ["a+", "data-tool", "b+"]
    assert texts(chunks) == ["a+", "data-tool", "b+"]
    assert chunks[1] is source[1]  # passed unchanged by those that skip it
    assert isinstance(chunks[1], DataChunk)


# --- writer.custom ----------------------------------------------------------------


@each_mode
@pytest.mark.parametrize("awaited", [True, False])
async def test_custom_chunks_precede_the_hooks_result_and_skip_later_processors(
    mode: ExecutionMode, awaited: bool
) -> None:
    class Writer:
        id = "writer"

        async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            assert args.writer is not None
            note = data("note", {"about": part_text(args)})
            if awaited:
                await args.writer.custom(note)
            else:
                args.writer.custom_nowait(to_wire(note))  # a wire dict works too
            return rewritten(args.part, "'")  # type: ignore[arg-type]  # any chunk type is passed on purpose

    after = Recorder("after", data_parts=True)
    chunks, _ = await run([Writer(), after], map(text_delta, "ab"), mode)
    assert texts(chunks) == ["data-note", "a'", "data-note", "b'"]
    assert [c.data for c in chunks if isinstance(c, DataChunk)] == [
        {"about": "a"},
        {"about": "b"},
    ]
    assert texts(after.seen) == ["a'", "b'"]  # custom chunks bypass the rest


# --- stream_parts and the args object -------------------------------------------


@each_mode
async def test_stream_parts_is_one_live_list_with_current_and_dropped_chunks(
    mode: ExecutionMode,
) -> None:
    lists: list[Any] = []
    snapshots: list[list[str]] = []

    def keep_every_other(args: ProcessOutputStreamArgs) -> Any:
        lists.append(args.stream_parts)
        snapshots.append(texts(args.stream_parts))
        assert args.stream_parts[-1] is args.part
        return args.part if len(args.stream_parts) % 2 else None

    source = [
        NewAttempt(0, discard=False),
        text_delta("a"),
        text_delta("b"),
        text_delta("c"),
        NewAttempt(1, discard=True),
        text_delta("d"),
        text_delta("e"),
    ]
    chunks, _ = await run([Scripted("p", keep_every_other)], source, mode)
    # No driver: the first attempt was delivered; discard=True only makes the
    # processors forget it.
    assert texts(chunks) == ["a", "c", "d"]
    assert snapshots == [["a"], ["a", "b"], ["a", "b", "c"], ["d"], ["d", "e"]]
    assert all(parts is lists[0] for parts in lists)  # never a copy
    assert texts(lists[0]) == ["d", "e"]


@each_mode
async def test_one_args_object_per_stage_is_reused_for_every_chunk(
    mode: ExecutionMode,
) -> None:
    """SPEC §2.1 lets the runtime reuse one argument object per stage and only
    change ``part``: building a (frozen, nine-field) object per call costs more
    than the whole per-processor budget (DESIGN.md "Speed": ~0.62 µs against
    ~0.11 µs). Processors may rely on the object only during the call, and this
    test makes sure the cheap path stays the one taken."""
    seen: dict[str, list[Any]] = {"p": [], "q": []}

    def record(name: str) -> Any:
        def hook(args: ProcessOutputStreamArgs) -> Any:
            seen[name].append((args, args.part, args.processor_id))
            return args.part

        return hook

    await run(
        [Scripted("p", record("p")), Scripted("q", record("q"), is_async=True)],
        map(text_delta, "abc"),
        mode,
    )
    for name, calls in seen.items():
        assert len(calls) == 3
        assert all(args is calls[0][0] for args, _, _ in calls)
        assert texts(part for _, part, _ in calls) == ["a", "b", "c"]
        assert {processor_id for _, _, processor_id in calls} == {name}
    assert seen["p"][0][0] is not seen["q"][0][0]
