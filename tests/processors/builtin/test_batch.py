"""``BatchParts`` and ``ToolCallFilter``."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from procession import ConfigurationError
from procession import chunks as c
from procession.messages import (
    Message,
    MessageContent,
    TextPart,
    ToolInvocation,
    ToolInvocationPart,
)
from procession.processors import (
    BatchParts,
    MessageList,
    ProcessInputArgs,
    ToolCallFilter,
)
from procession.testing import run_sequential
from procession.testing.strategies import text_splits
from tests.processors.builtin.builtin_helpers import (
    assert_text_blocks_valid,
    client_text,
    run_chunks,
    run_pieces,
)


def _deltas(chunks: list[Any]) -> list[str]:
    return [x.payload.text for x in chunks if isinstance(x, c.TextDeltaChunk)]


def test_deltas_are_coalesced_by_count_and_flushed_before_other_chunks() -> None:
    run = run_pieces([BatchParts(batch_size=3)], list("abcdefgh"))
    assert _deltas(run.chunks) == ["abc", "def", "gh"]
    types = [x.type for x in run.chunks]
    assert types[-4:] == ["text-delta", "text-end", "step-finish", "finish"]


def test_another_blocks_delta_releases_the_batch() -> None:
    items = [
        c.text_start(id="a"),
        c.text_start(id="b"),
        c.text_delta("1", id="a"),
        c.text_delta("2", id="a"),
        c.text_delta("x", id="b"),
        c.text_end(id="a"),
        c.text_end(id="b"),
    ]
    run = run_chunks([BatchParts()], items)
    shown = [
        (x.payload.id, x.payload.text) for x in run.chunks if x.type == "text-delta"
    ]
    assert shown == [("a", "12"), ("b", "x")]


@given(st.data())
def test_the_client_text_is_the_same_for_every_split(data: st.DataObject) -> None:
    text = data.draw(st.text(max_size=30))
    size = data.draw(st.integers(min_value=1, max_value=6))
    run = run_pieces([BatchParts(batch_size=size)], data.draw(text_splits(text)))
    assert client_text(run.chunks) == text
    assert_text_blocks_valid(run.chunks)


def test_max_wait_time_releases_a_batch_with_the_next_chunk() -> None:
    async def source() -> Any:
        yield c.text_start()
        yield c.text_delta("a")
        await trio.sleep(0.5)
        yield c.text_delta("b")  # 500 ms after the batch began: released
        yield c.text_delta("c")
        yield c.text_end()

    async def main() -> Any:
        return await run_sequential(
            [BatchParts(batch_size=10, max_wait_time=200)], source()
        )

    run = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert _deltas(run.chunks) == ["ab", "c"]


def test_bad_batch_options() -> None:
    with pytest.raises(ConfigurationError, match="batch_size must be 1 or more"):
        BatchParts(batch_size=0)
    with pytest.raises(ConfigurationError, match="max_wait_time must be 0 ms or more"):
        BatchParts(max_wait_time=-1)


def _tool_message(*names: str, text: str | None = None) -> Message:
    parts: list[Any] = [] if text is None else [TextPart(text=text)]
    parts += [
        ToolInvocationPart(
            tool_invocation=ToolInvocation(
                state="result", tool_call_id=f"call-{n}", tool_name=n, result=1
            )
        )
        for n in names
    ]
    return Message(role="assistant", content=MessageContent(parts=parts))


def _args(messages: list[Message]) -> ProcessInputArgs:
    return ProcessInputArgs(
        processor_id="tool-call-filter",
        state={},
        messages=messages,
        system_messages=[],
        message_list=MessageList(),
    )


def test_tool_call_filter_removes_every_invocation_by_default() -> None:
    question = Message.user("hi")
    only_tools = _tool_message("search")
    mixed = _tool_message("search", "weather", text="here")
    kept = ToolCallFilter().process_input(_args([question, only_tools, mixed]))
    assert kept is not None
    assert [m.id for m in kept] == [question.id, mixed.id]
    assert [type(p).__name__ for p in mixed.content.parts] == ["TextPart"]


def test_tool_call_filter_exclude_names_tools() -> None:
    mixed = _tool_message("search", "weather")
    kept = ToolCallFilter(exclude=["search"]).process_input(_args([mixed]))
    assert kept is not None
    names = [
        p.tool_invocation.tool_name
        for p in kept[0].content.parts
        if isinstance(p, ToolInvocationPart)
    ]
    assert names == ["weather"]
    assert ToolCallFilter(exclude=[]).process_input(_args([_tool_message("x")])) is None
    assert ToolCallFilter().process_input(_args([Message.user("plain")])) is None
