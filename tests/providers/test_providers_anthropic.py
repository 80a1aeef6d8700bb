"""``AnthropicModel`` on the real ``anthropic`` SDK against the loopback fake
server: request mapping, chunks, finish, error mapping, and cancellation and
backpressure reaching the socket.

Real clock (the sockets are real); every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import anthropic
import attrs
import pytest
import trio
import trio.testing
from provider_helpers import cancel_mid_read, wait_for_client_close

from procession import Agent, ConfigurationError, Processor, ProviderError
from procession.chunks import (
    Chunk,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
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
from procession.processors import (
    ProcessOutputStreamArgs,
    PromptAssistantMessage,
    PromptReasoningPart,
    PromptSystemMessage,
    PromptTextPart,
    PromptToolCallPart,
    PromptToolMessage,
    PromptToolResultPart,
    PromptUserMessage,
)
from procession.providers import AnthropicModel
from procession.runtime import (
    ModelRequest,
    ToolDefinition,
    registered_providers,
    resolve_model,
    tool,
)
from procession.testing.fake_provider import (
    FakeProvider,
    Fault,
    HttpError,
    Stream,
    TokenCounts,
    open_fake_provider,
)

# httpx2's response stream iterates httpcore2's PoolByteStream generator without
# closing it, so closing a response before its body ends (which we must do, and
# do: the socket is closed at once, see the tests below) leaves that inner
# generator to the garbage collector, and trio warns. The warning is upstream's;
# everything else stays an error.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Async generator 'httpcore2._async.connection_pool.PoolByteStream"
    ".__aiter__' was garbage collected:ResourceWarning"
)

TIMEOUT = 10

HI = ModelRequest(prompt=[PromptUserMessage([PromptTextPart("hi")])])
WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather in a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)


@pytest.fixture(autouse=True)
def _no_real_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may reach the real API, whatever the environment says."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@contextlib.asynccontextmanager
async def anthropic_model(
    base_url: str, **kwargs: Any
) -> AsyncIterator[AnthropicModel]:
    async with AnthropicModel(
        "claude-test", api_key="test-key", base_url=base_url, **kwargs
    ) as model:
        yield model


@contextlib.asynccontextmanager
async def serve(
    script: list[Any], **kwargs: Any
) -> AsyncIterator[tuple[FakeProvider, AnthropicModel]]:
    """The fake server with ``script``, and a model pointed at it."""
    async with (
        open_fake_provider(script) as server,
        anthropic_model(server.base_url, **kwargs) as model,
    ):
        yield server, model


async def collect(
    model: AnthropicModel, request: ModelRequest = HI
) -> tuple[list[Chunk], Any]:
    async with model.stream(request) as response:
        chunks = [chunk async for chunk in response]
        return chunks, response.finish


async def collect_until_error(
    model: AnthropicModel, request: ModelRequest = HI
) -> tuple[list[Chunk], ProviderError]:
    chunks: list[Chunk] = []
    try:
        async with model.stream(request) as response:
            async for chunk in response:
                chunks.append(chunk)
    except ProviderError as error:
        return chunks, error
    pytest.fail(f"the stream ended without a ProviderError after {chunks!r}")


def texts(chunks: list[Chunk]) -> list[str]:
    return [c.payload.text for c in chunks if isinstance(c, TextDeltaChunk)]


# --------------------------------------------------------------------------- #
# Streaming and request mapping
# --------------------------------------------------------------------------- #


async def test_text_stream_chunks_finish_and_request() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [
                    Stream.text(
                        "Hel", "lo", usage=TokenCounts(25, 6, cached_input_tokens=3)
                    )
                ]
            ) as server,
            anthropic_model(server.base_url) as model,
        ):
            chunks, finish = await collect(model)

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
    assert metadata.payload.model_id == "claude-test"
    assert metadata.payload.id
    assert finish.finish_reason == "stop"
    assert finish.usage.input_tokens == 25
    assert finish.usage.output_tokens == 6
    assert finish.usage.total_tokens == 31
    assert finish.usage.cached_input_tokens == 3
    assert finish.request["model"] == "claude-test"
    assert finish.raw_response["request_id"] == "req_fake_1"
    assert finish.raw_response["status_code"] == 200

    (request,) = server.requests
    assert request.path == "/v1/messages"
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.headers["x-stainless-retry-count"] == "0"
    assert request.body == {
        "model": "claude-test",
        "max_tokens": 4096,
        "stream": True,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
    }
    assert finish.request == request.body


async def test_request_maps_system_tools_settings_and_provider_options() -> None:
    request = ModelRequest(
        prompt=[
            PromptSystemMessage(
                "Be terse.",
                provider_options={"anthropic": {"cacheControl": {"type": "ephemeral"}}},
            ),
            PromptUserMessage([PromptTextPart("Weather in Paris?")]),
        ],
        tools=[WEATHER],
        tool_choice={"type": "tool", "tool_name": "get_weather"},
        settings={
            "max_tokens": 300,
            "temperature": 0.2,
            "top_k": 5,
            "stop_sequences": ["END"],
            "seed": 7,
        },
        provider_options={
            "anthropic": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
            "openai": {"store": False},
        },
    )
    with trio.fail_after(TIMEOUT):
        async with serve([Stream.text("ok")]) as (server, model):
            _, finish = await collect(model, request)

    body = server.requests[0].body
    assert body["system"] == [
        {"type": "text", "text": "Be terse.", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["max_tokens"] == 300
    # SDK >= 1.0 has no temperature/top_k kwargs: they travel in extra_body.
    assert body["temperature"] == 0.2
    assert body["top_k"] == 5
    assert body["stop_sequences"] == ["END"]
    assert body["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather in a city",
            "input_schema": WEATHER.input_schema,
        }
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "get_weather"}
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert "store" not in body
    assert "seed" not in body
    assert finish.warnings == ({"type": "unsupported-setting", "setting": "seed"},)


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
    ],
)
async def test_tool_choice_mapping(choice: Any, wire: dict[str, str]) -> None:
    request = ModelRequest(prompt=HI.prompt, tools=[WEATHER], tool_choice=choice)
    with trio.fail_after(TIMEOUT):
        async with serve([Stream.text("ok")]) as (server, model):
            await collect(model, request)
    assert server.requests[0].body["tool_choice"] == wire


async def test_history_maps_thinking_tool_use_and_tool_results() -> None:
    request = ModelRequest(
        prompt=[
            PromptUserMessage([PromptTextPart("Weather?")]),
            PromptAssistantMessage(
                [
                    PromptReasoningPart("Let me check.", signature="sig-1"),
                    PromptReasoningPart("", redacted_data="opaque"),
                    PromptReasoningPart("no signature: dropped"),
                    PromptTextPart("Checking."),
                    PromptToolCallPart("toolu_1", "get_weather", {"city": "Paris"}),
                ]
            ),
            PromptToolMessage(
                [PromptToolResultPart("toolu_1", "get_weather", {"temp": 18})]
            ),
            PromptUserMessage([PromptTextPart("And tomorrow?")]),
        ],
        tools=[WEATHER],
    )
    with trio.fail_after(TIMEOUT):
        async with serve([Stream.text("ok")]) as (server, model):
            await collect(model, request)

    messages = server.requests[0].body["messages"]
    assert messages[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Let me check.", "signature": "sig-1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Checking."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
        ],
    }
    # The tool result and the next user text share one user turn, result first.
    assert messages[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": '{"temp":18}'},
            {"type": "text", "text": "And tomorrow?"},
        ],
    }
    assert len(messages) == 3


async def test_tool_call_chunks_and_thinking_signature() -> None:
    script = [
        Stream.thinking("Let me ", "think.", signature="sig-abc")
        + Stream.tool_call("get_weather", {"city": "Paris"}, id="toolu_9", chunks=3)
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(script) as (_server, model):
            chunks, finish = await collect(model)

    reasoning = [c.payload.text for c in chunks if isinstance(c, ReasoningDeltaChunk)]
    assert reasoning == ["Let me ", "think."]
    (end,) = [c for c in chunks if isinstance(c, ReasoningEndChunk)]
    assert end.payload.signature == "sig-abc"
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
    call = tool_chunks[-1]
    assert isinstance(call, ToolCallChunk)
    assert call.payload.tool_call_id == "toolu_9"
    assert call.payload.tool_name == "get_weather"
    assert call.payload.args == {"city": "Paris"}
    assert (
        "".join(
            c.payload.args_text_delta
            for c in tool_chunks
            if isinstance(c, ToolCallDeltaChunk)
        )
        == '{"city":"Paris"}'
    )
    assert finish.finish_reason == "tool-calls"


@pytest.mark.parametrize(
    ("stop", "reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("tool_use", "tool-calls"),
        ("refusal", "content-filter"),
        ("pause_turn", "other"),
    ],
)
async def test_stop_reasons(stop: str, reason: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with serve([Stream.text("x", stop=stop)]) as (_server, model):
            _, finish = await collect(model)
    assert finish.finish_reason == reason
    assert finish.provider_metadata["anthropic"]["stop_reason"] == stop


# --------------------------------------------------------------------------- #
# With an Agent
# --------------------------------------------------------------------------- #


@attrs.frozen
class City:
    city: str


@tool
def get_weather(args: City) -> str:
    """Weather in a city."""
    return f"18C in {args.city}"


async def test_agent_tool_round_trip_sends_tool_result_with_tool_use_id() -> None:
    script = [
        Stream.text("Checking.")
        + Stream.tool_call("get_weather", {"city": "Paris"}, id="toolu_42"),
        Stream.text("It is 18C in Paris."),
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(script) as (server, model):
            agent = Agent(id="weather", model=model, tools=[get_weather])
            result = await agent.generate("Weather in Paris?")

    assert result.error is None
    assert result.text.endswith("It is 18C in Paris.")
    assert result.finish_reason == "stop"
    first, second = (r.body for r in server.requests)
    assert first["tools"][0]["name"] == "get_weather"
    assert first["tools"][0]["input_schema"]["properties"]["city"]["type"] == "string"
    assistant, results = second["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert {
        "type": "tool_use",
        "id": "toolu_42",
        "name": "get_weather",
        "input": {"city": "Paris"},
    } in assistant["content"]
    assert results == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_42",
                "content": "18C in Paris",
            }
        ],
    }


async def test_agent_sends_thinking_blocks_back_with_their_signature() -> None:
    script = [
        Stream.thinking("The user wants weather.", signature="EqQBCgIYAhIM")
        + Stream.tool_call("get_weather", {"city": "Oslo"}, id="toolu_7"),
        Stream.text("Cold."),
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(script) as (server, model):
            agent = Agent(
                id="thinker",
                model=model,
                tools=[get_weather],
                provider_options={
                    "anthropic": {
                        "thinking": {"type": "enabled", "budget_tokens": 1024}
                    }
                },
            )
            result = await agent.generate("Weather in Oslo?")

    assert result.text == "Cold."
    second = server.requests[1].body
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assistant = second["messages"][-2]
    assert assistant["role"] == "assistant"
    # Anthropic requires the thinking block first, unchanged, with its signature.
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants weather.",
        "signature": "EqQBCgIYAhIM",
    }
    assert assistant["content"][-1]["type"] == "tool_use"


async def test_agent_usage_comes_from_the_provider() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [
                    Stream.text(
                        "ok", usage=TokenCounts(input_tokens=120, output_tokens=7)
                    )
                ]
            ) as server,
            anthropic_model(server.base_url) as model,
        ):
            result = await Agent(id="u", model=model).generate("hi")
    assert result.usage.input_tokens == 120
    assert result.usage.output_tokens == 7


# --------------------------------------------------------------------------- #
# Errors
# --------------------------------------------------------------------------- #


async def test_529_is_a_retryable_provider_error_with_headers() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [HttpError.overloaded(headers={"retry-after": "7"})]
            ) as server,
            anthropic_model(server.base_url) as model,
        ):
            with pytest.raises(ProviderError, match="529") as info:
                async with model.stream(HI):
                    pytest.fail("entering should have raised")

    error = info.value
    assert error.status_code == 529
    assert error.is_retryable is True
    assert error.code == "overloaded_error"
    assert error.headers["Retry-After"] == "7"
    assert error.body["error"]["type"] == "overloaded_error"
    assert isinstance(error.__cause__, anthropic.APIStatusError)
    assert len(server.requests) == 1  # the SDK did not retry on its own


async def test_401_is_not_retryable() -> None:
    with trio.fail_after(TIMEOUT):
        async with serve([HttpError.unauthorized()]) as (_server, model):
            with pytest.raises(ProviderError, match="401") as info:
                async with model.stream(HI):
                    pass
    assert info.value.status_code == 401
    assert info.value.is_retryable is False
    assert info.value.code == "authentication_error"


async def test_x_should_retry_header_overrides_the_status() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [HttpError.bad_request(headers={"x-should-retry": "true"})]
            ) as server,
            anthropic_model(server.base_url) as model,
        ):
            with pytest.raises(ProviderError, match="400") as info:
                async with model.stream(HI):
                    pass
    assert info.value.is_retryable is True


async def test_mid_stream_error_event_has_the_error_type_as_code() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [Stream.text("Hel") + Stream.error("overloaded_error", "Overloaded")]
            ) as server,
            anthropic_model(server.base_url) as model,
        ):
            chunks, error = await collect_until_error(model)

    assert texts(chunks) == ["Hel"]  # what came before the error was delivered
    assert error.code == "overloaded_error"
    assert error.is_retryable is True
    assert error.status_code is None  # a 200 stream: no error status to report
    assert error.body["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert "text/event-stream" in error.headers["content-type"]
    assert isinstance(error.__cause__, anthropic.APIStatusError)


async def test_mid_stream_invalid_request_error_is_not_retryable() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [Stream.error("invalid_request_error", "bad")]
            ) as server,
            anthropic_model(server.base_url) as model,
        ):
            _, error = await collect_until_error(model)
    assert error.code == "invalid_request_error"
    assert error.is_retryable is False


async def test_dropped_connection_is_a_transport_provider_error() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [Stream.text("a", "b", "c", fault=Fault(drop_after=3))]
            ) as server,
            anthropic_model(server.base_url) as model,
        ):
            chunks, error = await collect_until_error(model)
    assert texts(chunks) == ["a"]
    assert error.code == "incomplete_chunked_read"
    assert error.is_retryable is True
    assert error.status_code is None
    assert type(error.__cause__).__name__ == "RemoteProtocolError"


async def test_stall_mid_body_is_a_timeout() -> None:
    import httpx2

    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [Stream.text("a", "b", fault=Fault(stall_after=3))]
            ) as server,
            httpx2.AsyncClient(timeout=httpx2.Timeout(0.3)) as http,
            anthropic_model(server.base_url, http_client=http) as model,
        ):
            _, error = await collect_until_error(model)
    assert error.code == "timeout"
    assert error.is_retryable is True


async def test_close_without_response_is_a_connection_error() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [HttpError(500, fault=Fault(close_without_response=True))]
            ) as server,
            anthropic_model(server.base_url) as model,
        ):
            with pytest.raises(ProviderError, match="connection") as info:
                async with model.stream(HI):
                    pass
    assert info.value.is_retryable is True
    assert info.value.code == "ECONNRESET"
    assert isinstance(info.value.__cause__, anthropic.APIConnectionError)


async def test_truncated_stream_is_incomplete_stream() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [Stream.text("a", "b", fault=Fault(truncate_after=3))]
            ) as server,
            anthropic_model(server.base_url) as model,
        ):
            chunks, error = await collect_until_error(model)
    assert texts(chunks) == ["a"]
    assert error.code == "incomplete_stream"
    assert error.is_retryable is True
    with pytest.raises(ProviderError, match="without message_stop"):
        raise error


async def test_agent_run_with_a_provider_error_ends_with_it() -> None:
    with trio.fail_after(TIMEOUT):
        async with serve([HttpError.overloaded()]) as (_server, model):
            result = await Agent(id="a", model=model).generate("hi")
    assert result.finish_reason == "error"
    assert isinstance(result.error, ProviderError)
    assert result.error.status_code == 529


# --------------------------------------------------------------------------- #
# Cancellation and backpressure reach the socket
# --------------------------------------------------------------------------- #


class RecordingModel:
    """Wraps a model; records, for each call, when leaving its ``stream``
    context finished and whether the HTTP response was closed by then."""

    def __init__(self, inner: AnthropicModel) -> None:
        self.inner = inner
        self.exits: list[tuple[float, bool]] = []

    @property
    def provider(self) -> str:
        return self.inner.provider

    @property
    def model_id(self) -> str:
        return self.inner.model_id

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


async def test_tripwire_mid_stream_closes_the_connection_before_the_stream_exits() -> (
    None
):
    pieces = [f"w{i} " for i in range(200)]
    slow = Stream.text(*pieces, fault=Fault(delay_between_events=0.02))
    with trio.fail_after(TIMEOUT):
        async with serve([slow]) as (server, inner):
            model = RecordingModel(inner)
            agent = Agent(id="a", model=model, output_processors=[TripAfter(3)])
            async with agent.stream("talk") as stream:
                chunks = [chunk async for chunk in stream]
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
    # 204 events were scripted; the client left after a handful.
    assert log.events_sent < 30


async def test_cancelled_read_closes_the_http_response() -> None:
    pieces = [f"w{i} " for i in range(200)]
    slow = Stream.text(*pieces, fault=Fault(delay_between_events=0.02))
    with trio.fail_after(TIMEOUT):
        async with serve([slow]) as (server, model):
            response = await cancel_mid_read(model, HI)
            assert response.http_response.is_closed
            log = await wait_for_client_close(server)
            assert server.connections == [log]
    assert log.closed_by_client
    assert log.events_sent < 30


async def test_leaving_the_block_early_closes_the_connection_at_once() -> None:
    pieces = [f"w{i} " for i in range(200)]
    slow = Stream.text(*pieces, fault=Fault(delay_between_events=0.02))
    with trio.fail_after(TIMEOUT):
        async with serve([slow]) as (server, model):
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


async def events_sent_while_consumer_stalls(
    pieces: int, piece_size: int
) -> tuple[int, int]:
    """Read 3 chunks, stop reading for a while; how many events the server got
    out, and how many it had to send."""
    big = ["x" * piece_size] * pieces
    async with (
        serve([Stream.text(*big)]) as (server, model),
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
    return stalled, pieces + 6


async def test_backpressure_a_consumer_that_stops_reading_stops_the_server() -> None:
    with trio.fail_after(TIMEOUT):
        small, _ = await events_sent_while_consumer_stalls(1000, 2048)
        large, total = await events_sent_while_consumer_stalls(4000, 2048)
    # ~8 MB scripted; only what fits in the socket buffers (and httpx2's one
    # read) got out while the consumer was not reading, however long the script.
    assert large < total // 8, (large, total)
    assert abs(large - small) < 100, (small, large)


# --------------------------------------------------------------------------- #
# Configuration
# --------------------------------------------------------------------------- #


async def test_missing_key_is_a_configuration_error_before_any_request() -> None:
    async with open_fake_provider([], strict=True) as server:
        with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
            AnthropicModel("claude-sonnet-4-5", base_url=server.base_url)
        with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
            resolve_model("anthropic/claude-sonnet-4-5")
        with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
            Agent(id="a", model="anthropic/claude-sonnet-4-5")
    assert server.requests == []


async def test_model_id_resolves_with_key_and_base_url_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert "anthropic" in registered_providers()
    with trio.fail_after(TIMEOUT):
        async with open_fake_provider([Stream.text("from env")]) as server:
            monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
            monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
            # (A model id the SDK does not flag as deprecated: it would warn.)
            model = resolve_model("anthropic/claude-fake-1")
            assert isinstance(model, AnthropicModel)
            assert (model.provider, model.model_id) == ("anthropic", "claude-fake-1")
            async with model:
                chunks, _ = await collect(model)
    assert texts(chunks) == ["from env"]
    assert server.requests[0].headers["authorization"] == "Bearer env-key"
    assert server.requests[0].body["model"] == "claude-fake-1"


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(
        ConfigurationError, match=r'pip install "procession\[anthropic\]"'
    ):
        AnthropicModel("claude-sonnet-4-5", api_key="k")


async def test_response_cannot_be_read_after_the_block() -> None:
    with trio.fail_after(TIMEOUT):
        async with serve([Stream.text("a")]) as (_server, model):
            async with model.stream(HI) as response:
                pass
            with pytest.raises(trio.ClosedResourceError, match="after its"):
                await response.__anext__()
