"""Helpers of the output-stream pipeline's behaviour tests
(tests/actors/test_pipeline_*.py): the execution modes, a source from a list, a
recorder and scripted processors, and a retry driver with its source.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from procession import (
    TripWire,
)
from procession.actors import (
    ExecutionMode,
    OutputPipeline,
    open_output_pipeline,
)
from procession.actors._markers import Barrier, NewAttempt
from procession.chunks import (
    ErrorChunk,
    TextDeltaChunk,
)
from procession.processors import (
    ProcessOutputStreamArgs,
)

MODES: tuple[ExecutionMode, ...] = ("adaptive", "fused", "actors")
each_mode = pytest.mark.parametrize("mode", MODES)


# --- helpers -------------------------------------------------------------------


async def from_list(items: Iterable[Any]) -> AsyncIterator[Any]:
    for item in items:
        yield item


async def run(
    processors: list[Any], items: Iterable[Any], mode: ExecutionMode, **options: Any
) -> tuple[list[Any], OutputPipeline]:
    """Read the whole stream; return the chunks and the (closed) pipeline."""
    async with open_output_pipeline(
        processors, from_list(items), run_id="run-1", mode=mode, **options
    ) as stream:
        chunks = [chunk async for chunk in stream]
    return chunks, stream


def texts(chunks: Iterable[Any]) -> list[str]:
    return [c.payload.text if isinstance(c, TextDeltaChunk) else c.type for c in chunks]


def rewritten(chunk: TextDeltaChunk, suffix: str) -> TextDeltaChunk:
    return attrs.evolve(
        chunk, payload=attrs.evolve(chunk.payload, text=chunk.payload.text + suffix)
    )


class Recorder:
    """Passes every chunk on and records what it was shown."""

    def __init__(self, id: str = "recorder", *, data_parts: bool = False) -> None:
        self.id = id
        self.process_data_parts = data_parts
        self.seen: list[Any] = []

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        self.seen.append(args.part)
        return args.part


class Scripted:
    """Calls ``act(args)`` for every chunk (sync or async hook)."""

    def __init__(
        self,
        id: str,
        act: Any,
        *,
        is_async: bool = False,
        on_error: str = "raise",
        on_violation: Any = None,
    ) -> None:
        self.id = id
        self.on_error = on_error
        if on_violation is not None:
            self.on_violation = on_violation
        if is_async:

            async def hook(args: ProcessOutputStreamArgs) -> Any:
                await trio.lowlevel.checkpoint()
                return act(args)

            self.process_output_stream = hook
        else:
            self.process_output_stream = act


def part_text(args: ProcessOutputStreamArgs) -> str:
    part = args.part
    return part.payload.text if isinstance(part, TextDeltaChunk) else part.type


class Driver:
    """Accepts (or refuses) every retry request and error chunk; the source
    reads ``pending`` to know whether to start a new attempt."""

    def __init__(self, accept: bool) -> None:
        self.accept = accept
        self.pending = False
        self.retry_requests: list[TripWire] = []
        self.errors: list[ErrorChunk] = []

    async def on_retry_request(self, tripwire: TripWire) -> bool:
        self.retry_requests.append(tripwire)
        self.pending = self.accept
        return self.accept

    async def on_error_chunk(self, chunk: ErrorChunk) -> bool:
        self.errors.append(chunk)
        self.pending = self.accept
        return self.accept

    def on_attempt(self, marker: Any) -> None:
        pass  # this driver does not track attempts

    def on_terminal(self, outcome: Any) -> None:
        pass  # nor stop a producer of its own


async def attempts(driver: Driver, scripted: list[list[Any]]) -> AsyncIterator[Any]:
    """A driver's source: attempt i yields ``scripted[i]`` in full (the pipeline,
    not the source, must cut a retried attempt), then a barrier; a new attempt
    follows only if the driver accepted a retry or recovered an error."""
    for number, chunks in enumerate(scripted):
        yield NewAttempt(number, discard=number > 0)
        for chunk in chunks:
            yield chunk
        barrier = Barrier()
        yield barrier
        await barrier.wait()
        if not driver.pending:
            return
        driver.pending = False
