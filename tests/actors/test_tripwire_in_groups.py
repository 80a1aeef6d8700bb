"""A TripWire raised inside a hook's own nursery, next to other exceptions."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from procession import TripWire
from procession.actors import ExecutionMode, open_output_pipeline
from procession.chunks import text_delta
from procession.processors._calling import tripwire_in


def test_an_abort_wins_over_plain_errors_beside_it() -> None:
    tripwire = TripWire("stop", processor_id="p")
    group = BaseExceptionGroup("nursery", [ValueError("x"), tripwire])
    assert tripwire_in(group) is tripwire


def test_an_abort_in_a_nested_group_is_found() -> None:
    tripwire = TripWire("stop")
    group = BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [tripwire])])
    assert tripwire_in(group) is tripwire


def test_cancellation_beside_an_abort_is_not_swallowed() -> None:
    group = BaseExceptionGroup("nursery", [KeyboardInterrupt(), TripWire("stop")])
    assert tripwire_in(group) is None


def test_a_group_without_an_abort_has_none() -> None:
    assert tripwire_in(BaseExceptionGroup("nursery", [ValueError("x")])) is None


@pytest.mark.parametrize("mode", ["adaptive", "fused", "actors"])
async def test_a_stage_honours_an_abort_raised_beside_a_plain_error(
    mode: ExecutionMode,
) -> None:
    class Both:
        id = "both"

        async def process_output_stream(self, args: Any) -> Any:
            if args.part.payload.text == "b":

                async def fail() -> None:
                    raise ValueError("side task broke")

                async def block() -> None:
                    args.abort("blocked b")

                # Both children raise in the same round: a group of both.
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(fail)
                    nursery.start_soon(block)
            return args.part

    async def source() -> Any:
        for text in "abc":
            yield text_delta(text)

    async with open_output_pipeline([Both()], source(), mode=mode) as stream:
        chunks = [chunk async for chunk in stream]
    assert [c.type for c in chunks] == ["text-delta", "tripwire"]
    assert chunks[-1].payload.reason == "blocked b"


@pytest.mark.parametrize("mode", ["adaptive", "fused", "actors"])
async def test_a_sync_hook_that_returns_an_awaitable_has_it_awaited(
    mode: ExecutionMode,
) -> None:
    """A sync def returning a coroutine (a lambda around an async function):
    its result, its abort and its failures count like an async hook's."""

    async def upper(args: Any) -> Any:
        if args.part.payload.text == "c":
            args.abort("no c")
        return text_delta(args.part.payload.text.upper())

    class Lambda:
        id = "lambda"

        def process_output_stream(self, args: Any) -> Any:
            return upper(args)

    async def source() -> Any:
        for text in "abc":
            yield text_delta(text)

    async with open_output_pipeline([Lambda()], source(), mode=mode) as stream:
        chunks = [chunk async for chunk in stream]
    assert [c.payload.text for c in chunks[:2]] == ["A", "B"]
    assert chunks[-1].type == "tripwire"
    assert chunks[-1].payload.reason == "no c"
