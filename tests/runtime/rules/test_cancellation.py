"""SPEC §2 rule 8 and structured cancellation: cancelling a run ends it with an
abort chunk and closes the provider stream; a tripwire mid-stream cancels the
model stream, and what was read after the trip is reported."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from procession import Agent, Processor
from procession.actors import ExecutionMode
from procession.chunks import AbortChunk, TextDeltaChunk, TripwireChunk
from procession.processors import ProcessOutputStreamArgs
from procession.testing import Delay, ScriptedModel, text_turn
from tests.runtime.rules._helpers import (
    StreamGuard,
    Upper,
    each_mode,
    run_stream,
    types,
)

# === 8. Cancellation =============================================================


@each_mode
async def test_rule8_cancel_ends_with_an_abort_chunk_not_a_tripwire(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    slow = [item for word in ("one", "two", "three") for item in (word, Delay(1))]
    model = ScriptedModel([slow])
    agent = Agent(id="a", model=model, output_processors=[Upper()], execution_mode=mode)
    async with agent.stream("hi") as stream:
        seen = []
        async for chunk in stream:
            seen.append(chunk)
            if isinstance(chunk, TextDeltaChunk):
                break
        await stream.cancel()
        assert model.calls[0].closed_early  # closed before cancel() returned
        rest = [chunk async for chunk in stream]
        result = await stream.result()
    assert len(rest) == 1
    assert isinstance(rest[0], AbortChunk)
    assert "tripwire" not in types(seen + rest)
    assert result.finish_reason == "aborted"
    assert result.tripwire is None
    assert result.error is None


async def test_rule8_leaving_the_block_early_closes_the_provider_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([[*text_turn("a b"), Delay(100), "never read"]])
    agent = Agent(id="a", model=model)
    async with agent.stream("hi") as stream:
        async for chunk in stream:
            if isinstance(chunk, TextDeltaChunk):
                break
    assert model.calls[0].closed_early
    result = await stream.result()
    assert result.finish_reason == "aborted"
    assert result.tripwire is None


async def test_rule8_the_caller_cancelling_closes_the_provider_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([[*text_turn("a b"), Delay(100), "never read"]])
    agent = Agent(id="a", model=model)
    with trio.move_on_after(50) as scope:
        await agent.generate("hi")
    assert scope.cancelled_caught
    assert model.calls[0].closed_early


# === Structured cancellation =====================================================


class QuietGuard(Processor):
    """Aborts on a text delta containing ``secret``; no ``on_violation``."""

    id = "quiet-guard"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk) and "secret" in part.payload.text:
            args.abort("leak")
        return part


async def test_a_tripwire_mid_stream_cancels_the_model_stream_in_fused_mode(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """In fused mode the coordinator hands each chunk over a 0-capacity channel
    (a rendezvous) and the consumer runs the (sync) stage on it without a
    checkpoint. When the guard trips on the delta " secret", the consumer ends
    the run before the coordinator's next model read gets past its checkpoint,
    so that read is cancelled: exactly the chunks up to the tripping one were
    streamed (text-start, "a", " secret") and ``model_chunks_after_end == 0``."""
    model = ScriptedModel([text_turn("a secret b c d e f g h i")])
    agent = Agent(id="a", model=model, output_processors=[QuietGuard()])
    chunks, result = await run_stream(agent)
    assert isinstance(chunks[-1], TripwireChunk)
    assert model.calls[0].closed_early
    assert model.calls[0].chunks_streamed == 3
    assert result.model_chunks_after_end == 0


async def test_model_chunks_read_after_a_trip_are_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The guard's ``on_violation`` takes a second (awaited before the tripwire
    chunk, SPEC §2.6). Whatever the provider streamed after the trip that nobody
    used must show up in ``model_chunks_after_end`` (SPEC §3: "tokens spent
    after a trip are reported")."""
    log: list[Any] = []
    model = ScriptedModel([text_turn("a secret b c d e f g h i")])
    agent = Agent(id="a", model=model, output_processors=[StreamGuard(log)])
    chunks, result = await run_stream(agent)
    assert isinstance(chunks[-1], TripwireChunk)
    assert model.calls[0].closed_early
    read_after_trip = model.calls[0].chunks_streamed - 3
    assert result.model_chunks_after_end == read_after_trip


async def test_a_tripwire_mid_stream_cancels_the_model_stream_in_actors_mode(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel(
        [[*text_turn("a secret b"), Delay(1), *text_turn("c", id="x")]]
    )
    agent = Agent(
        id="a",
        model=model,
        output_processors=[QuietGuard()],
        execution_mode="actors",
    )
    chunks, _ = await run_stream(agent)
    assert isinstance(chunks[-1], TripwireChunk)
    assert model.calls[0].closed_early
    # Read-ahead is bounded and the part after the delay is never read.
    assert 3 <= model.calls[0].chunks_streamed <= 5
