"""The tool-call block every dialect streams through (``_tool_calls``): the
chunks it emits and the arguments it settles on, including the cases the
loopback server does not send (arguments given whole when the block opens,
a closing event that carries the whole text, a block closed twice)."""

from __future__ import annotations

from typing import Any

import pytest

from procession.data import Chunk
from procession.providers._tool_calls import ToolCallBlock, ToolCallEmitter


def _emitter() -> tuple[ToolCallEmitter, list[Chunk]]:
    chunks: list[Chunk] = []
    return ToolCallEmitter(chunks.append), chunks


def _described(chunks: list[Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for chunk in chunks:
        payload = chunk.payload
        if chunk.type == "tool-call-delta":
            out.append((chunk.type, payload.args_text_delta))
        elif chunk.type == "tool-call":
            out.append((chunk.type, payload.args))
        else:
            out.append((chunk.type, None))
        assert payload.tool_call_id == "c1"
        if chunk.type != "tool-call-input-streaming-end":
            assert payload.tool_name == "weather"
    return out


def test_a_streamed_call_opens_grows_and_closes_once() -> None:
    emitter, chunks = _emitter()
    block = emitter.start("c1", "weather")
    emitter.delta(block, '{"city":')
    emitter.delta(block, "")  # an empty piece is no delta
    emitter.delta(block, None)
    emitter.delta(block, '"Paris"}')
    assert emitter.end(block) is True
    assert emitter.end(block) is False  # closed already: nothing more
    emitter.delta(block, "late")  # nor after the close
    assert block == ToolCallBlock(
        "c1", "weather", args_text='{"city":"Paris"}', done=True
    )
    assert _described(chunks) == [
        ("tool-call-input-streaming-start", None),
        ("tool-call-delta", '{"city":'),
        ("tool-call-delta", '"Paris"}'),
        ("tool-call-input-streaming-end", None),
        ("tool-call", {"city": "Paris"}),
    ]


@pytest.mark.parametrize(
    ("streamed", "initial", "closing", "args"),
    [
        ("", None, None, {}),
        ("  ", None, None, {}),
        ("", {"city": "Oslo"}, None, {"city": "Oslo"}),  # Anthropic's whole input
        ("", "not a dict", None, {}),
        ('{"city":"Rome"}', {"city": "Oslo"}, None, {"city": "Rome"}),
        ('{"city":"Rome"}', None, '{"city":"Lima"}', {"city": "Lima"}),  # Responses
        ('{"city":"Rome"}', None, "", {}),
        ("{not json", None, None, "{not json"),  # reported to the model as is
    ],
)
def test_the_arguments_a_call_closes_with(
    streamed: str, initial: Any, closing: str | None, args: Any
) -> None:
    emitter, chunks = _emitter()
    block = emitter.start("c1", "weather", initial_args=initial)
    emitter.delta(block, streamed)
    emitter.end(block, closing)
    assert _described(chunks)[-1] == ("tool-call", args)
