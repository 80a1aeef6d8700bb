"""``ScriptedResponse.next_nowait``: the chunks that need no waiting, without
``__anext__``'s checkpoint (the agent's fused run pulls them so)."""

from __future__ import annotations

import pytest
import trio

from procession.chunks import TextDeltaChunk, text_delta
from procession.models import ModelRequest
from procession.processors import PromptTextPart, PromptUserMessage
from procession.testing import Delay, ScriptedModel


def _request() -> ModelRequest:
    return ModelRequest(prompt=[PromptUserMessage([PromptTextPart("hi")])])


async def test_next_nowait_gives_chunks_until_a_delay_then_the_end() -> None:
    model = ScriptedModel([[text_delta("a"), Delay(1), text_delta("b")]])
    async with model.stream(_request()) as response:
        first = response.next_nowait()
        assert isinstance(first, TextDeltaChunk)
        assert first.payload.text == "a"
        with pytest.raises(trio.WouldBlock, match=r"^$"):
            response.next_nowait()  # the delay is the awaited read's to sleep
        second = await response.__anext__()
        assert isinstance(second, TextDeltaChunk)
        assert second.payload.text == "b"
        assert model.calls[0].finish is None  # not at the end yet
        with pytest.raises(StopAsyncIteration, match=r"^$"):
            response.next_nowait()
        assert response.finish is not None
        assert response.finish.finish_reason == "stop"
    assert model.calls[0].chunks_streamed == 2
    assert not model.calls[0].closed_early


async def test_next_nowait_raises_the_scripted_error() -> None:
    model = ScriptedModel([[text_delta("a"), ValueError("boom")]])
    async with model.stream(_request()) as response:
        response.next_nowait()
        with pytest.raises(ValueError, match="boom"):
            response.next_nowait()
        with pytest.raises(StopAsyncIteration, match=r"^$"):
            response.next_nowait()
    assert isinstance(model.calls[0].error, ValueError)
