"""What every provider dialect does alike, run over the three of them
(``AnthropicModel`` on the real ``anthropic`` SDK, ``OpenAIChatModel`` and
``OpenAIResponsesModel`` on ``httpx2``) against the loopback fake server:
chunks, usage and finish, tool calls streamed by pieces, a body cut short or
dropped, cancellation and backpressure reaching the socket, configuration
from the environment. What only one dialect does is in
test_providers_anthropic.py and test_providers_openai.py.

Real clock (the sockets are real); every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import re
from types import TracebackType
from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent, ConfigurationError, Processor, ProviderError
from procession.chunks import (
    Chunk,
    ReasoningDeltaChunk,
    ResponseMetadataChunk,
    TextDeltaChunk,
    TextEndChunk,
    TextStartChunk,
    ToolCallChunk,
    ToolCallDeltaChunk,
    ToolCallInputStreamingEndChunk,
    ToolCallInputStreamingStartChunk,
    TripwireChunk,
)
from procession.models import ModelRequest, registered_providers, resolve_model
from procession.processors import (
    ProcessOutputStreamArgs,
)
from procession.testing.fake_provider import (
    Fault,
    Stream,
    TokenCounts,
    open_fake_provider,
)
from tests.providers.provider_helpers import (
    DIALECTS,
    HI,
    HTTPCORE_GC_WARNING,
    PROVIDER_ENV,
    TIMEOUT,
    WEATHER,
    Dialect,
    cancel_mid_read,
    collect,
    collect_until_error,
    serve,
    texts,
    wait_for_client_close,
)

pytestmark = HTTPCORE_GC_WARNING


@pytest.fixture(params=DIALECTS, ids=lambda dialect: dialect.name)
def dialect(request: pytest.FixtureRequest) -> Dialect:
    result: Dialect = request.param
    return result


@pytest.fixture(autouse=True)
def _no_real_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may reach a real API, whatever the environment says."""
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------- #
# Streaming
# --------------------------------------------------------------------------- #


async def test_text_stream_chunks_usage_finish_and_request(dialect: Dialect) -> None:
    script = [Stream.text("Hel", "lo", usage=TokenCounts(25, 6, cached_input_tokens=3))]
    with trio.fail_after(TIMEOUT):
        async with serve(dialect, script) as (server, model):
            chunks, finish = await collect(model, HI)

    assert [type(c) for c in chunks] == [
        ResponseMetadataChunk,
        TextStartChunk,
        TextDeltaChunk,
        TextDeltaChunk,
        TextEndChunk,
    ]
    assert texts(chunks) == ["Hel", "lo"]
    metadata = chunks[0]
    assert isinstance(metadata, ResponseMetadataChunk)
    assert metadata.payload.model_id == dialect.model_id
    assert metadata.payload.id
    assert finish.finish_reason == "stop"
    assert finish.usage.input_tokens == 25
    assert finish.usage.output_tokens == 6
    assert finish.usage.total_tokens == 31
    assert finish.usage.cached_input_tokens == 3
    assert finish.raw_response["status_code"] == 200

    (request,) = server.requests
    assert request.path == dialect.path
    assert request.headers["authorization"] == f"Bearer {dialect.api_key}"
    assert request.body["model"] == dialect.model_id
    assert request.body["stream"] is True
    assert finish.request == request.body


async def test_tool_call_streams_by_pieces_and_parses_args(dialect: Dialect) -> None:
    script = [
        Stream.thinking("Let me ", "think.", signature="sig-abc")
        + Stream.tool_call("get_weather", {"city": "Paris"}, id="call_9", chunks=3)
    ]
    request = ModelRequest(prompt=HI.prompt, tools=[WEATHER])
    with trio.fail_after(TIMEOUT):
        async with serve(dialect, script) as (_server, model):
            chunks, finish = await collect(model, request)

    reasoning = [c.payload.text for c in chunks if isinstance(c, ReasoningDeltaChunk)]
    assert reasoning == ["Let me ", "think."]
    tool_chunks = [
        c
        for c in chunks
        if isinstance(
            c,
            ToolCallInputStreamingStartChunk
            | ToolCallDeltaChunk
            | ToolCallInputStreamingEndChunk
            | ToolCallChunk,
        )
    ]
    assert [type(c) for c in tool_chunks] == [
        ToolCallInputStreamingStartChunk,
        ToolCallDeltaChunk,
        ToolCallDeltaChunk,
        ToolCallDeltaChunk,
        ToolCallInputStreamingEndChunk,
        ToolCallChunk,
    ]
    assert all(c.payload.tool_call_id == "call_9" for c in tool_chunks)
    start, *deltas, _end, call = tool_chunks
    assert isinstance(start, ToolCallInputStreamingStartChunk)
    assert start.payload.tool_name == "get_weather"
    assert "".join(
        d.payload.args_text_delta for d in deltas if isinstance(d, ToolCallDeltaChunk)
    ) == ('{"city":"Paris"}')
    assert isinstance(call, ToolCallChunk)
    assert call.payload.tool_name == "get_weather"
    assert call.payload.args == {"city": "Paris"}
    assert finish.finish_reason == "tool-calls"


async def test_split_frames_parse_the_same(dialect: Dialect) -> None:
    script = [Stream.text("Hé", "llo ✓", fault=Fault(split_frames=3))]
    with trio.fail_after(TIMEOUT):
        async with serve(dialect, script) as (_server, model):
            chunks, finish = await collect(model, HI)
    assert texts(chunks) == ["Hé", "llo ✓"]
    assert finish.finish_reason == "stop"


async def test_response_cannot_be_read_after_the_block(dialect: Dialect) -> None:
    with trio.fail_after(TIMEOUT):
        async with serve(dialect, [Stream.text("a")]) as (_server, model):
            async with model.stream(HI) as response:
                pass
            with pytest.raises(trio.ClosedResourceError, match="after its"):
                await response.__anext__()


async def test_agent_usage_comes_from_the_provider(dialect: Dialect) -> None:
    script = [Stream.text("ok", usage=TokenCounts(input_tokens=120, output_tokens=7))]
    with trio.fail_after(TIMEOUT):
        async with serve(dialect, script) as (_server, model):
            result = await Agent(id="u", model=model).generate("hi")
    assert result.usage.input_tokens == 120
    assert result.usage.output_tokens == 7


# --------------------------------------------------------------------------- #
# A body cut short
# --------------------------------------------------------------------------- #


async def test_truncated_stream_is_incomplete_stream(dialect: Dialect) -> None:
    cut = Fault(truncate_after=dialect.events_before_text + 1)
    script = [Stream.text("a", "b", fault=cut)]
    with trio.fail_after(TIMEOUT):
        async with serve(dialect, script) as (_server, model):
            chunks, error = await collect_until_error(model, HI)
    assert texts(chunks) == ["a"]
    assert error.code == "incomplete_stream"
    assert error.is_retryable is True
    assert error.status_code is None
    with pytest.raises(ProviderError, match=re.escape(f"without {dialect.incomplete}")):
        raise error


async def test_dropped_connection_is_a_transport_error(dialect: Dialect) -> None:
    cut = Fault(drop_after=dialect.events_before_text + 1)
    script = [Stream.text("a", "b", "c", fault=cut)]
    with trio.fail_after(TIMEOUT):
        async with serve(dialect, script) as (_server, model):
            chunks, error = await collect_until_error(model, HI)
    assert texts(chunks) == ["a"]
    assert error.code == "incomplete_chunked_read"
    assert error.is_retryable is True
    assert error.status_code is None
    assert type(error.__cause__).__name__ == "RemoteProtocolError"


# --------------------------------------------------------------------------- #
# Cancellation and backpressure reach the socket
# --------------------------------------------------------------------------- #


def slow_stream() -> Stream:
    """200 text deltas, 20 ms apart: a reader leaves long before the end."""
    pieces = [f"w{i} " for i in range(200)]
    return Stream.text(*pieces, fault=Fault(delay_between_events=0.02))


async def test_cancelled_read_closes_the_connection(dialect: Dialect) -> None:
    with trio.fail_after(TIMEOUT):
        async with serve(dialect, [slow_stream()]) as (server, model):
            response = await cancel_mid_read(model, HI)
            assert response.http_response.is_closed
            log = await wait_for_client_close(server)
            assert server.connections == [log]
    assert log.closed_by_client
    assert log.events_sent < 30


async def test_leaving_the_block_early_closes_the_connection_at_once(
    dialect: Dialect,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with serve(dialect, [slow_stream()]) as (server, model):
            async with model.stream(HI) as response:
                async for chunk in response:
                    if isinstance(chunk, TextDeltaChunk):
                        break  # no read is in flight: only leaving can close
            assert response.http_response.is_closed
            log = await wait_for_client_close(server)
            assert server.connections == [log]
            # Closed: the connection's task is over, so it sends nothing more.
            assert log.closed_at is not None
    assert log.closed_by_client
    assert log.events_sent < 30


class RecordingModel:
    """Wraps a model; records, for each call, when leaving its ``stream``
    context finished and whether the HTTP response was closed by then."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.exits: list[tuple[float, bool]] = []

    @property
    def provider(self) -> str:
        provider: str = self.inner.provider
        return provider

    @property
    def model_id(self) -> str:
        model_id: str = self.inner.model_id
        return model_id

    def stream(self, request: ModelRequest) -> _RecordingCall:
        return _RecordingCall(self, request)


class _RecordingCall:
    def __init__(self, model: RecordingModel, request: ModelRequest) -> None:
        self.model = model
        self.call = model.inner.stream(request)

    async def __aenter__(self) -> Any:
        self.response = await self.call.__aenter__()
        return self.response

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.call.__aexit__(exc_type, exc, tb)
        closed = self.response.http_response.is_closed
        self.model.exits.append((trio.current_time(), closed))


class TripAfter(Processor):
    id = "trip-after"

    def __init__(self, deltas: int) -> None:
        self.deltas = deltas
        self.seen = 0

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        if isinstance(args.part, TextDeltaChunk):
            self.seen += 1
            if self.seen >= self.deltas:
                args.abort("enough")
        return args.part


async def test_tripwire_mid_stream_closes_the_connection_before_the_stream_exits(
    dialect: Dialect,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with serve(dialect, [slow_stream()]) as (server, inner):
            model = RecordingModel(inner)
            agent = Agent(id="a", model=model, output_processors=[TripAfter(3)])
            async with agent.stream("talk") as stream:
                chunks: list[Chunk] = [chunk async for chunk in stream]
            exited_at = trio.current_time()
            # The server notices the close on its next write.
            log = await wait_for_client_close(server)
            assert server.connections == [log]

    assert isinstance(chunks[-1], TripwireChunk)
    ((closed_at, closed),) = model.exits
    assert closed, "the HTTP response was still open when the model call was left"
    assert closed_at <= exited_at
    assert log.closed_by_client
    assert not log.finished_response
    # Over 200 events were scripted; the client left after a handful.
    assert log.events_sent < 30


async def events_sent_while_consumer_stalls(
    dialect: Dialect, pieces: int, piece_size: int
) -> int:
    """Read 3 chunks, stop reading for a while; how many events the server got
    out."""
    big = ["x" * piece_size] * pieces
    async with (
        serve(dialect, [Stream.text(*big)]) as (server, model),
        model.stream(HI) as response,
    ):
        for _ in range(3):
            await response.__anext__()
        # Wait until the server is blocked by the full socket buffers.
        log = server.connections[0]
        with trio.move_on_after(5) as waiting:
            await log.wait_stalled()
        assert not waiting.cancelled_caught, "the server never stalled"
        stalled = log.events_sent
        # Blocked for good, not just slow: once nothing can run, nothing more
        # got out.
        await trio.testing.wait_all_tasks_blocked()
        assert log.events_sent == stalled
    return stalled


async def test_backpressure_a_consumer_that_stops_reading_stops_the_server(
    dialect: Dialect,
) -> None:
    with trio.fail_after(TIMEOUT):
        small = await events_sent_while_consumer_stalls(dialect, 1000, 2048)
        large = await events_sent_while_consumer_stalls(dialect, 4000, 2048)
    # ~8 MB scripted; only what fits in the socket buffers (and httpx2's one
    # read) got out while the consumer was not reading, however long the script.
    assert large < 4000 // 8, (large, small)
    assert abs(large - small) < 100, (small, large)


# --------------------------------------------------------------------------- #
# Configuration
# --------------------------------------------------------------------------- #


async def test_missing_key_is_a_configuration_error_before_any_request(
    dialect: Dialect,
) -> None:
    async with open_fake_provider([], strict=True) as server:
        with pytest.raises(ConfigurationError, match=dialect.key_env):
            dialect.kind(dialect.model_id, base_url=dialect.base_url(server))
        with pytest.raises(ConfigurationError, match=dialect.key_env):
            resolve_model(dialect.registered)
        with pytest.raises(ConfigurationError, match=dialect.key_env):
            Agent(id="a", model=dialect.registered)
    assert server.requests == []


async def test_model_id_resolves_with_key_and_base_url_from_the_environment(
    dialect: Dialect, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider, model_id = dialect.registered.split("/")
    assert provider in registered_providers()
    with trio.fail_after(TIMEOUT):
        async with open_fake_provider([Stream.text("from env")]) as server:
            monkeypatch.setenv(dialect.key_env, "env-key")
            monkeypatch.setenv(dialect.base_url_env, dialect.base_url(server))
            model = resolve_model(dialect.registered)
            assert isinstance(model, dialect.kind)
            assert (model.provider, model.model_id) == (provider, model_id)
            async with model:
                chunks, _ = await collect(model, HI)
    assert texts(chunks) == ["from env"]
    (request,) = server.requests
    assert request.path == dialect.path
    assert request.headers["authorization"] == "Bearer env-key"
    assert request.body["model"] == model_id
