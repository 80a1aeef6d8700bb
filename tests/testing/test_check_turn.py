"""check_turn: a turn checked once answers calls of many ScriptedModels."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from procession import ProviderError
from procession.chunks import TextDeltaChunk, Usage, text_delta
from procession.models import ModelRequest
from procession.processors import PromptTextPart, PromptUserMessage
from procession.testing import (
    CheckedTurn,
    Delay,
    ScriptedModel,
    ScriptError,
    check_turn,
)
from procession.testing import _script as script_module


def request() -> ModelRequest:
    return ModelRequest(prompt=[PromptUserMessage([PromptTextPart("hi")])])


async def streamed(model: ScriptedModel) -> tuple[list[str], Any]:
    async with model.stream(request()) as response:
        chunks = [chunk async for chunk in response]
    texts = [c.payload.text for c in chunks if isinstance(c, TextDeltaChunk)]
    return texts, response.finish


async def test_a_checked_turn_streams_as_the_turn_it_was_made_from(
    autojump_clock: trio.testing.MockClock,
) -> None:
    items: list[Any] = [text_delta("a ", id="t"), Delay(0.5), text_delta("b", id="t")]
    checked = check_turn(items)
    assert isinstance(checked, CheckedTurn)
    assert await streamed(ScriptedModel([checked])) == await streamed(
        ScriptedModel([items])
    )
    texts, finish = await streamed(ScriptedModel([check_turn("one two three")]))
    assert "".join(texts) == "one two three"
    assert finish.usage.output_tokens == 3


async def test_a_checked_turn_is_not_checked_again_by_each_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    checked = check_turn(["hello there", Usage(input_tokens=2, output_tokens=5)])
    planned: list[object] = []
    plan_list = script_module._plan_list

    def counting(items: Any, turn: int | None) -> CheckedTurn:
        planned.append(items)
        return plan_list(items, turn)

    monkeypatch.setattr(script_module, "_plan_list", counting)
    for _ in range(3):  # one model per call, as a server's load test makes them
        texts, finish = await streamed(ScriptedModel([checked]))
        assert "".join(texts) == "hello there"
        assert finish.usage.output_tokens == 5
    called = ScriptedModel([lambda req: checked])  # a callable may return one too
    assert "".join((await streamed(called))[0]) == "hello there"
    assert planned == []
    ScriptedModel([["unchecked"]])
    assert planned == [["unchecked"]]  # the counter itself counts


def test_a_malformed_turn_is_refused_by_check_turn_naming_the_item() -> None:
    # What the signature forbids, as a caller without a type checker passes
    # it: the run-time check is under test.
    item: Any = object()
    not_a_list: Any = b"x"
    an_exception: Any = ValueError("no")
    with pytest.raises(ScriptError, match=r"^the turn, item 1: <object object"):
        check_turn(["fine", item])
    with pytest.raises(ScriptError, match=r"check_turn takes a list .* got b'x'"):
        check_turn(not_a_list)
    with pytest.raises(ScriptError, match=r"got ValueError\('no'\); an exception"):
        check_turn(an_exception)


def _frames(error: BaseException) -> int:
    count, tb = 0, error.__traceback__
    while tb is not None:
        count, tb = count + 1, tb.tb_next
    return count


async def test_a_shared_turns_exception_keeps_no_frames_of_earlier_raises() -> None:
    broken = ProviderError("connection reset", status_code=None)
    checked = check_turn(["partial", broken])
    depths = []
    for _ in range(4):  # a model per call, each raising the same instance
        with pytest.raises(ProviderError, match=r"connection reset") as raised:
            await streamed(ScriptedModel([checked]))
        assert raised.value is broken
        depths.append(_frames(raised.value))
    assert depths[0] > 0
    assert depths == [depths[0]] * 4  # not 1x, 2x, 3x, 4x the frames
