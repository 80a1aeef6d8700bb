"""ScriptedModel's default usage count over long and interleaved text blocks."""

from __future__ import annotations

from typing import Any

from procession.chunks import text_delta
from procession.data import Usage
from procession.models import ModelRequest
from procession.processors import PromptTextPart, PromptUserMessage
from procession.testing import ScriptedModel


async def _usage(turn: list[Any]) -> Usage | None:
    model = ScriptedModel([turn])
    request = ModelRequest(prompt=[PromptUserMessage([PromptTextPart("hi")])])
    async with model.stream(request) as response:
        async for _ in response:
            pass
    assert response.finish is not None
    return response.finish.usage


async def test_interleaved_blocks_join_their_own_pieces() -> None:
    # Block a: "on" + "e tw" + "o" = "one two"; block b: "x" + "y z" = "xy z".
    turn: list[Any] = [
        text_delta("on", id="a"),
        text_delta("x", id="b"),
        text_delta("e tw", id="a"),
        text_delta("y z", id="b"),
        text_delta("o", id="a"),
    ]
    assert await _usage(turn) == Usage(input_tokens=1, output_tokens=4, total_tokens=5)


async def test_a_long_stream_is_counted_exactly() -> None:
    # 100k pieces "w " and "w" alternating: "w ww ww ... ww w", 50,001 words.
    turn: list[Any] = [text_delta("w " if i % 2 == 0 else "w") for i in range(100_000)]
    usage = await _usage(turn)
    assert usage is not None
    assert usage.output_tokens == 50_001
