"""Recovering from API and stream errors, end to end: an ``Agent`` on the real
``anthropic`` SDK against the loopback fake server, with the seed's
``StreamErrorRetryProcessor`` as its error processor.

Real clock (the sockets are real): Retry-After is measured on trio's clock in
real seconds, kept small; every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from procession import Agent, ProviderError
from procession.processors import StreamErrorRetryProcessor
from procession.providers import AnthropicModel
from procession.testing.fake_provider import (
    FakeProvider,
    Fault,
    HttpError,
    Stream,
    Turn,
    open_fake_provider,
)

pytestmark = pytest.mark.filterwarnings(
    # httpx2 leaves httpcore2's inner generator to the collector after an early
    # close (the socket itself is closed at once); see test_providers_anthropic.
    "ignore:Async generator 'httpcore2._async.connection_pool.PoolByteStream"
    ".__aiter__' was garbage collected:ResourceWarning"
)


@pytest.fixture(autouse=True)
def _no_real_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@asynccontextmanager
async def agent_on(
    script: list[Turn], **options: Any
) -> AsyncIterator[tuple[FakeProvider, Agent]]:
    async with (
        open_fake_provider(script) as server,
        AnthropicModel("claude-test", api_key="k", base_url=server.base_url) as model,
    ):
        yield server, Agent(id="a", model=model, **options)


async def run(agent: Agent, prompt: str = "hi") -> tuple[list[str], Any]:
    types: list[str] = []
    async with agent.stream(prompt) as stream:
        async for chunk in stream:
            types.append(chunk.type)
        return types, await stream.result()


async def test_529_then_success_with_the_retry_processor() -> None:
    script: list[Turn] = [HttpError.overloaded(), Stream.text("recovered")]
    retry = StreamErrorRetryProcessor()
    async with agent_on(script, error_processors=[retry]) as (server, agent):
        with trio.fail_after(10):
            types, result = await run(agent)
    assert result.text == "recovered"
    assert result.finish_reason == "stop"
    assert result.retry_count == 1
    assert len(server.requests) == 2
    assert "error" not in types
    assert types.count("step-retry") == 1


async def test_retry_after_is_honoured_on_trios_clock() -> None:
    script: list[Turn] = [
        HttpError.rate_limited(retry_after=1),
        Stream.text("after the wait"),
    ]
    retry = StreamErrorRetryProcessor()
    async with agent_on(script, error_processors=[retry]) as (server, agent):
        with trio.fail_after(10):
            start = trio.current_time()
            _types, result = await run(agent)
            elapsed = trio.current_time() - start
    assert result.text == "after the wait"
    first, second = server.requests[0].received_at, server.requests[1].received_at
    assert second - first >= 1.0  # the server saw the retry no sooner than asked
    assert elapsed >= 1.0


async def test_mid_stream_error_is_recovered_by_a_retry() -> None:
    script: list[Turn] = [
        Stream.text("Hel") + Stream.error("overloaded_error", "Overloaded"),
        Stream.text("Hello again"),
    ]
    retry = StreamErrorRetryProcessor(max_retries=1)
    async with agent_on(script, error_processors=[retry]) as (server, agent):
        with trio.fail_after(10):
            types, result = await run(agent)
    assert result.text == "Hello again"
    assert result.error is None
    assert len(server.requests) == 2
    # The client saw "Hel", then the step-retry that tells it to drop it.
    assert types.index("step-retry") > types.index("text-delta")
    assert "error" not in types
    assert result.steps[0].finish_reason == "retry"


async def test_a_truncated_stream_is_reported_as_an_error() -> None:
    script: list[Turn] = [Stream.text("never", "ends", fault=Fault(truncate_after=3))]
    async with agent_on(script) as (server, agent):
        with trio.fail_after(10):
            types, result = await run(agent)
    assert result.finish_reason == "error"
    assert isinstance(result.error, ProviderError)
    assert result.error.code == "incomplete_stream"
    # SPEC rule 18b: error, then the closing step-finish and finish.
    assert types[-3:] == ["error", "step-finish", "finish"]
    assert len(server.requests) == 1  # no error processor: no retry


async def test_401_is_never_retried_even_for_unknown_errors() -> None:
    script: list[Turn] = [HttpError.unauthorized()]
    retry = StreamErrorRetryProcessor(retry_unknown_errors=True, max_retries=3)
    async with agent_on(script, error_processors=[retry]) as (server, agent):
        with trio.fail_after(10):
            types, result = await run(agent)
    assert len(server.requests) == 1
    assert result.finish_reason == "error"
    assert isinstance(result.error, ProviderError)
    assert result.error.status_code == 401
    assert result.retry_count == 0
    assert types.count("error") == 1
