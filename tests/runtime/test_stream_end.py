"""The stream's end found without awaiting (``AgentStream.end_nowait``,
issue 23): a run that does nothing after its ``finish`` that awaits ends
with it (its coordinator's last word, the late text, is queued behind
``finish``: ``RunControl.then``), so a writer sends the end with the last
chunks; a run with more to do after ``finish`` (a ``process_output_result``
hook, an error's closing chunks) says False, and the read goes on."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent, Processor, ProviderError
from procession.actors import ExecutionMode
from procession.chunks import Chunk, TextDeltaChunk
from procession.runtime import AgentStream
from procession.testing import PassThrough, ScriptedModel, text_turn
from tests.runtime.flushing import Batch

each_mode = pytest.mark.parametrize("mode", ["adaptive", "fused", "actors"])
# An actors-mode pipeline is read by a task of its own: only a read can tell
# its end.
TELLS = {"adaptive": True, "fused": True, "actors": False}


class Results(Processor):
    """A ``process_output_result`` hook: the run awaits it after ``finish``."""

    id = "results"

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def process_output_result(self, args: Any) -> None:
        self.seen.append(args.result.text)


def _agent(mode: ExecutionMode, *processors: Any, model: Any = None) -> Agent:
    return Agent(
        id="a",
        model=model or ScriptedModel([text_turn("hello brave world", chunk_size=6)]),
        output_processors=[PassThrough(0), *processors],
        execution_mode=mode,
    )


async def _through(stream: AgentStream, kind: str) -> list[Chunk]:
    """Read up to and with the first chunk of type ``kind``."""
    chunks: list[Chunk] = []
    async for chunk in stream:
        chunks.append(chunk)
        if chunk.type == kind:
            return chunks
    raise AssertionError(f"no {kind} chunk in {[c.type for c in chunks]}")


@each_mode
async def test_a_run_with_nothing_after_finish_ends_with_it(
    mode: ExecutionMode,
) -> None:
    async with _agent(mode).stream("hi") as stream:
        assert not stream.end_nowait()  # its start: nothing changed
        chunks = await _through(stream, "finish")
        assert stream.end_nowait() is TELLS[mode]
        if TELLS[mode]:
            assert stream.outcome is not None
            assert stream.outcome.kind == "finish"
            assert stream.end_nowait()  # ended: still so
        rest = [chunk async for chunk in stream]
        result = await stream.result()
    assert rest == []
    assert [c.type for c in chunks][:2] == ["start", "step-start"]
    assert result.text == "hello brave world"
    assert result.outcome.kind == "finish"


@each_mode
async def test_late_text_is_kept_when_the_end_is_taken_without_a_read(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    # The flushed text comes just before finish; the run keeps it where the
    # stream is read, once finish got there (in fused mode, end_nowait takes
    # the queued word itself).
    with trio.fail_after(60):
        async with _agent(mode, Batch("finish")).stream("hi") as stream:
            chunks = await _through(stream, "finish")
            ended = stream.end_nowait()
            result = await stream.result()
    assert ended is TELLS[mode]
    seen = "".join(c.payload.text for c in chunks if isinstance(c, TextDeltaChunk))
    assert seen == "hello brave world"
    assert result.text == seen
    assert result.steps[-1].text == seen


@each_mode
async def test_a_result_hook_after_finish_keeps_the_end_until_it_ran(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    results = Results()
    with trio.fail_after(60):
        async with _agent(mode, results).stream("hi") as stream:
            await _through(stream, "finish")
            assert not stream.end_nowait()  # the hook runs after finish
            assert [chunk async for chunk in stream] == []
            assert stream.end_nowait()
    assert results.seen == ["hello brave world"]


@each_mode
async def test_after_an_error_the_closing_chunks_are_read(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    model = ScriptedModel([ProviderError("down", status_code=500)])
    with trio.fail_after(60):
        async with _agent(mode, model=model).stream("hi") as stream:
            await _through(stream, "error")
            assert not stream.end_nowait()
            rest = [chunk.type async for chunk in stream]
    assert rest[-1] == "finish"
    assert stream.outcome is not None
    assert stream.outcome.kind == "error"


class Boom(Processor):
    """Fails on every text delta: the run's error is decided where the stream
    is read, with no proposal of the coordinator's."""

    id = "boom"
    on_error = "raise"

    def process_output_stream(self, args: Any) -> Any:
        if args.part.type == "text-delta":
            raise RuntimeError("boom")
        return args.part


@each_mode
async def test_after_an_error_decided_at_the_client_end_the_closing_chunks_are_read(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.fail_after(60):
        async with _agent(mode, Boom()).stream("hi") as stream:
            await _through(stream, "error")
            await trio.testing.wait_all_tasks_blocked()  # the coordinator stopped
            assert not stream.end_nowait()
            rest = [chunk.type async for chunk in stream]
    assert rest[-2:] == ["step-finish", "finish"]
    assert stream.outcome is not None
    assert stream.outcome.kind == "error"
