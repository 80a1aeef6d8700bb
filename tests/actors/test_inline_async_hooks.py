"""An async stream hook awaited inline (its turn free) that aborts or fails is a
tripwire or the processor's error in fused mode as in actors mode, never a
contract error about the pipeline's own stop marker. Failed before the fix."""

from __future__ import annotations

from typing import Any

import pytest

from procession import Agent, Processor, ProcessorError
from procession.chunks import TextDeltaChunk
from procession.testing import ScriptedModel, assert_run_shape, text_turn


class RetryOnce(Processor):
    id = "retry-once"

    async def process_output_stream(self, args: Any) -> Any:
        if isinstance(args.part, TextDeltaChunk) and args.retry_count == 0:
            args.abort("again", retry=True)
        return args.part


class Fails(Processor):
    id = "fails"

    def __init__(self, on_error: Any) -> None:
        self.on_error = on_error

    async def process_output_stream(self, args: Any) -> Any:
        if isinstance(args.part, TextDeltaChunk):
            raise ValueError("hook bug")
        return args.part


@pytest.mark.parametrize("mode", ["adaptive", "fused", "actors"])
async def test_an_inline_async_hooks_retry_is_granted(mode: Any) -> None:
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("first"), text_turn("second")]),
        output_processors=[RetryOnce()],
        max_processor_retries=1,
        execution_mode=mode,
    )
    async with agent.stream("hi") as stream:
        chunks = [c async for c in stream]
        result = await stream.result()
    assert result.error is None
    assert result.text == "second"
    assert result.retry_count == 1
    assert assert_run_shape(chunks) == "finish"


@pytest.mark.parametrize("mode", ["adaptive", "fused", "actors"])
@pytest.mark.parametrize(
    ("on_error", "kind"), [("raise", "error"), ("block", "tripwire")]
)
async def test_an_inline_async_hooks_failure_follows_its_policy(
    mode: Any, on_error: str, kind: str
) -> None:
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("one two")]),
        output_processors=[Fails(on_error)],
        execution_mode=mode,
    )
    result = await agent.generate("hi")
    assert result.outcome.kind == kind
    if kind == "error":
        assert isinstance(result.error, ProcessorError)
        assert "hook bug" in str(result.error)
