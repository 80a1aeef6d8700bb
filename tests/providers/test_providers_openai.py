"""``OpenAIChatModel`` and ``OpenAIResponsesModel`` (httpx2, no SDK) against the
loopback fake server: request mapping, chunks, usage, finish reasons, HTTP and
in-stream errors, truncation, cancellation.

Real clock (the sockets are real); every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from provider_helpers import cancel_mid_read, wait_for_client_close

from procession import Agent, ConfigurationError, ProviderError
from procession.chunks import (
    Chunk,
    ReasoningDeltaChunk,
    ResponseMetadataChunk,
    TextDeltaChunk,
    TextEndChunk,
    TextStartChunk,
    ToolCallChunk,
    ToolCallDeltaChunk,
    ToolCallInputStreamingStartChunk,
)
from procession.processors import (
    PromptAssistantMessage,
    PromptSystemMessage,
    PromptTextPart,
    PromptToolCallPart,
    PromptToolMessage,
    PromptToolResultPart,
    PromptUserMessage,
    StreamErrorRetryProcessor,
)
from procession.providers import OpenAIChatModel, OpenAIResponsesModel
from procession.runtime import ModelRequest, ToolDefinition, resolve_model, tool
from procession.testing.fake_provider import (
    FakeProvider,
    Fault,
    HttpError,
    Stream,
    TokenCounts,
    open_fake_provider,
)

# See test_providers_anthropic.py: closing a response early leaves httpcore2's
# inner generator to the garbage collector (upstream), and trio warns.
pytestmark = pytest.mark.filterwarnings(
    "ignore:Async generator 'httpcore2._async.connection_pool.PoolByteStream"
    ".__aiter__' was garbage collected:ResourceWarning"
)

TIMEOUT = 10
OpenAIModel = OpenAIChatModel | OpenAIResponsesModel
KINDS = [OpenAIChatModel, OpenAIResponsesModel]

HI = ModelRequest(
    prompt=[PromptSystemMessage("Be terse."), PromptUserMessage([PromptTextPart("hi")])]
)
WEATHER = ToolDefinition(
    name="get_weather",
    description="Weather in a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture(autouse=True)
def _no_real_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may reach the real API, whatever the environment says."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


@contextlib.asynccontextmanager
async def openai_model(kind: type[OpenAIModel], base_url: str) -> AsyncIterator[Any]:
    async with kind("gpt-test", api_key="sk-test", base_url=base_url) as model:
        yield model


@contextlib.asynccontextmanager
async def serve(
    kind: type[OpenAIModel], script: list[Any]
) -> AsyncIterator[tuple[FakeProvider, Any]]:
    """The fake server with ``script``, and a ``kind`` model pointed at it."""
    async with (
        open_fake_provider(script) as server,
        openai_model(kind, server.openai_base_url) as model,
    ):
        yield server, model


async def collect(model: Any, request: ModelRequest = HI) -> tuple[list[Chunk], Any]:
    async with model.stream(request) as response:
        chunks = [chunk async for chunk in response]
        return chunks, response.finish


async def collect_until_error(
    model: Any, request: ModelRequest = HI
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
# Both endpoints
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("kind", KINDS)
async def test_text_usage_and_finish(kind: type[OpenAIModel]) -> None:
    script = [Stream.text("Hel", "lo", usage=TokenCounts(30, 4, cached_input_tokens=8))]
    with trio.fail_after(TIMEOUT):
        async with serve(kind, script) as (server, model):
            chunks, finish = await collect(model)

    metadata = chunks[0]
    assert isinstance(metadata, ResponseMetadataChunk)
    assert metadata.payload.model_id == "gpt-test"
    assert [type(c) for c in chunks[1:]] == [
        TextStartChunk,
        TextDeltaChunk,
        TextDeltaChunk,
        TextEndChunk,
    ]
    assert texts(chunks) == ["Hel", "lo"]
    assert finish.finish_reason == "stop"
    assert finish.usage.input_tokens == 30
    assert finish.usage.output_tokens == 4
    assert finish.usage.total_tokens == 34
    assert finish.usage.cached_input_tokens == 8
    (request,) = server.requests
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["stream"] is True
    assert finish.request == request.body


@pytest.mark.parametrize("kind", KINDS)
async def test_tool_call_streams_by_pieces_and_parses_args(
    kind: type[OpenAIModel],
) -> None:
    script = [Stream.tool_call("get_weather", {"city": "Paris"}, id="call_1", chunks=3)]
    request = ModelRequest(prompt=HI.prompt, tools=[WEATHER])
    with trio.fail_after(TIMEOUT):
        async with serve(kind, script) as (_server, model):
            chunks, finish = await collect(model, request)

    (start,) = [c for c in chunks if isinstance(c, ToolCallInputStreamingStartChunk)]
    assert start.payload.tool_name == "get_weather"
    deltas = [c for c in chunks if isinstance(c, ToolCallDeltaChunk)]
    assert len(deltas) == 3
    assert "".join(d.payload.args_text_delta for d in deltas) == '{"city":"Paris"}'
    (call,) = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert call.payload.tool_call_id == "call_1"
    assert call.payload.args == {"city": "Paris"}
    assert finish.finish_reason == "tool-calls"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("turn", "status", "code", "retryable"),
    [
        (HttpError.rate_limited(retry_after=3), 429, "rate_limit_exceeded", True),
        (HttpError.unauthorized(), 401, "invalid_api_key", False),
        (HttpError.server_error(), 500, "server_error", True),
        (HttpError(429, code="insufficient_quota"), 429, "insufficient_quota", False),
    ],
)
async def test_http_errors(
    kind: type[OpenAIModel], turn: HttpError, status: int, code: str, retryable: bool
) -> None:
    with trio.fail_after(TIMEOUT):
        async with serve(kind, [turn]) as (_server, model):
            with pytest.raises(ProviderError, match=str(status)) as info:
                async with model.stream(HI):
                    pytest.fail("entering should have raised")
    error = info.value
    assert error.status_code == status
    assert error.code == code
    assert error.is_retryable is retryable
    # ``code``: the body's error code, or its type when the code is null.
    assert code in (error.body["error"]["code"], error.body["error"]["type"])
    assert error.headers["x-request-id"] == "req_fake_1"
    if status == 429 and retryable:
        assert error.headers["Retry-After"] == "3"


@pytest.mark.parametrize("kind", KINDS)
async def test_truncated_stream_is_incomplete_stream(kind: type[OpenAIModel]) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [Stream.text("a", "b", fault=Fault(truncate_after=3))]
            ) as server,
            openai_model(kind, server.openai_base_url) as model,
        ):
            _, error = await collect_until_error(model)
    assert error.code == "incomplete_stream"
    assert error.is_retryable is True


@pytest.mark.parametrize("kind", KINDS)
async def test_dropped_connection_is_a_transport_error(kind: type[OpenAIModel]) -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [Stream.text("a", "b", fault=Fault(drop_after=2))]
            ) as server,
            openai_model(kind, server.openai_base_url) as model,
        ):
            _, error = await collect_until_error(model)
    assert error.code == "incomplete_chunked_read"
    assert error.is_retryable is True


@pytest.mark.parametrize("kind", KINDS)
async def test_split_frames_parse_the_same(kind: type[OpenAIModel]) -> None:
    script = [Stream.text("Hé", "llo ✓", fault=Fault(split_frames=3))]
    with trio.fail_after(TIMEOUT):
        async with serve(kind, script) as (_server, model):
            chunks, finish = await collect(model)
    assert texts(chunks) == ["Hé", "llo ✓"]
    assert finish.finish_reason == "stop"


@pytest.mark.parametrize("kind", KINDS)
async def test_cancelled_read_closes_the_connection(kind: type[OpenAIModel]) -> None:
    pieces = [f"w{i} " for i in range(200)]
    slow = Stream.text(*pieces, fault=Fault(delay_between_events=0.02))
    with trio.fail_after(TIMEOUT):
        async with serve(kind, [slow]) as (server, model):
            response = await cancel_mid_read(model, HI)
            assert response.http_response.is_closed
            log = await wait_for_client_close(server)
            assert server.connections == [log]
    assert log.closed_by_client
    assert log.events_sent < 40


@pytest.mark.parametrize("kind", KINDS)
async def test_leaving_the_block_early_closes_the_connection(
    kind: type[OpenAIModel],
) -> None:
    pieces = [f"w{i} " for i in range(200)]
    slow = Stream.text(*pieces, fault=Fault(delay_between_events=0.02))
    with trio.fail_after(TIMEOUT):
        async with serve(kind, [slow]) as (server, model):
            async with model.stream(HI) as response:
                async for chunk in response:
                    if isinstance(chunk, TextDeltaChunk):
                        break  # no read is in flight: only leaving can close
            assert response.http_response.is_closed
            log = await wait_for_client_close(server)
            assert server.connections == [log]
    assert log.closed_by_client
    assert log.events_sent < 40


@pytest.mark.parametrize(
    ("kind", "model_id", "variable"),
    [
        (OpenAIChatModel, "openai-chat/gpt-4.1", "OPENAI_API_KEY"),
        (OpenAIResponsesModel, "openai/gpt-5", "OPENAI_API_KEY"),
    ],
)
async def test_missing_key_is_a_configuration_error_before_any_request(
    kind: type[OpenAIModel], model_id: str, variable: str
) -> None:
    async with open_fake_provider([]) as server:
        with pytest.raises(ConfigurationError, match=variable):
            kind("gpt-test", base_url=server.openai_base_url)
        with pytest.raises(ConfigurationError, match=variable):
            resolve_model(model_id)
    assert server.requests == []


async def test_model_ids_resolve_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_fake_provider([Stream.text("a"), Stream.text("b")]) as server:
            monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
            monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
            responses = resolve_model("openai/gpt-5")
            chat = resolve_model("openai-chat/gpt-4.1")
            assert isinstance(responses, OpenAIResponsesModel)
            assert isinstance(chat, OpenAIChatModel)
            async with responses, chat:
                await collect(responses)
                await collect(chat)
    assert [r.path for r in server.requests] == [
        "/v1/responses",
        "/v1/chat/completions",
    ]
    assert {r.headers["authorization"] for r in server.requests} == {"Bearer sk-env"}


# --------------------------------------------------------------------------- #
# Chat Completions
# --------------------------------------------------------------------------- #


async def test_chat_request_body() -> None:
    request = ModelRequest(
        prompt=[
            PromptSystemMessage("Be terse."),
            PromptUserMessage([PromptTextPart("Weather?")]),
            PromptAssistantMessage(
                [
                    PromptTextPart("Checking."),
                    PromptToolCallPart("call_1", "get_weather", {"city": "Paris"}),
                ]
            ),
            PromptToolMessage([PromptToolResultPart("call_1", "get_weather", "18C")]),
        ],
        tools=[WEATHER],
        tool_choice="required",
        settings={
            "max_tokens": 50,
            "temperature": 0,
            "stop_sequences": ["X"],
            "top_k": 3,
        },
        provider_options={"openai": {"user": "u-1"}},
    )
    with trio.fail_after(TIMEOUT):
        async with serve(OpenAIChatModel, [Stream.text("ok")]) as (server, model):
            _, finish = await collect(model, request)

    (recorded,) = server.requests
    assert recorded.path == "/v1/chat/completions"
    body = recorded.body
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "arguments": '{"city":"Paris"}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather in a city",
                "parameters": WEATHER.input_schema,
            },
        }
    ]
    assert body["tool_choice"] == "required"
    assert (body["max_tokens"], body["temperature"], body["stop"]) == (50, 0, ["X"])
    assert body["user"] == "u-1"
    assert finish.warnings == ({"type": "unsupported-setting", "setting": "top_k"},)


@pytest.mark.parametrize(
    ("stop", "reason"),
    [("stop", "stop"), ("length", "length"), ("content_filter", "content-filter")],
)
async def test_chat_finish_reasons(stop: str, reason: str) -> None:
    with trio.fail_after(TIMEOUT):
        async with serve(OpenAIChatModel, [Stream.text("x", stop=stop)]) as (
            _server,
            model,
        ):
            _, finish = await collect(model)
    assert finish.finish_reason == reason


async def test_chat_reasoning_content_becomes_reasoning_chunks() -> None:
    script = [Stream.thinking("hm", "m") + Stream.text("ok")]
    with trio.fail_after(TIMEOUT):
        async with serve(OpenAIChatModel, script) as (_server, model):
            chunks, _ = await collect(model)
    reasoning = [c.payload.text for c in chunks if isinstance(c, ReasoningDeltaChunk)]
    assert reasoning == ["hm", "m"]
    assert texts(chunks) == ["ok"]


async def test_chat_mid_stream_error_keeps_the_error_object_as_body() -> None:
    script = [
        Stream.text("a") + Stream.error("server_error", "The server had an error")
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(OpenAIChatModel, script) as (_server, model):
            chunks, error = await collect_until_error(model)
    assert texts(chunks) == ["a"]
    assert error.body["error"]["type"] == "server_error"
    assert error.code == "server_error"
    assert error.is_retryable is True
    assert error.status_code is None


# --------------------------------------------------------------------------- #
# Responses
# --------------------------------------------------------------------------- #


async def test_responses_request_body() -> None:
    request = ModelRequest(
        prompt=[
            PromptSystemMessage("Be terse."),
            PromptUserMessage([PromptTextPart("Weather?")]),
            PromptAssistantMessage(
                [PromptToolCallPart("call_1", "get_weather", {"city": "Paris"})]
            ),
            PromptToolMessage(
                [PromptToolResultPart("call_1", "get_weather", {"temp": 18})]
            ),
        ],
        tools=[WEATHER],
        tool_choice={"type": "tool", "tool_name": "get_weather"},
        settings={"max_tokens": 64, "temperature": 0.5},
        provider_options={"openai": {"store": False}},
    )
    with trio.fail_after(TIMEOUT):
        async with serve(OpenAIResponsesModel, [Stream.text("ok")]) as (server, m):
            await collect(m, request)
    (recorded,) = server.requests
    assert recorded.path == "/v1/responses"
    body = recorded.body
    assert body["input"] == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city":"Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": '{"temp":18}'},
    ]
    assert body["tools"][0]["name"] == "get_weather"
    assert body["tools"][0]["parameters"] == WEATHER.input_schema
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert (body["max_output_tokens"], body["temperature"]) == (64, 0.5)
    assert body["store"] is False


@pytest.mark.parametrize(
    ("stream", "event_type", "payload_path"),
    [
        (
            Stream.error("server_error", "Sorry.", nested=True),
            "error",
            ("error", "code"),
        ),
        (Stream.error("server_error", "Sorry.", nested=False), "error", ("code",)),
        (
            Stream.error("rate_limit_exceeded", "Slow down.", responses="failed"),
            "response.failed",
            ("response", "error", "code"),
        ),
        (
            Stream.error("server_error", "Sorry.", responses="both"),
            "error",
            ("error", "code"),
        ),
    ],
)
async def test_responses_error_events_keep_the_event_as_body(
    stream: Stream, event_type: str, payload_path: tuple[str, ...]
) -> None:
    with trio.fail_after(TIMEOUT):
        async with serve(OpenAIResponsesModel, [Stream.text("a") + stream]) as (
            _server,
            m,
        ):
            chunks, error = await collect_until_error(m)

    assert texts(chunks) == ["a"]
    body = error.body
    assert body["type"] == event_type
    value: Any = body
    for key in payload_path:
        value = value[key]
    assert value == error.code
    assert error.code in ("server_error", "rate_limit_exceeded")
    assert error.is_retryable is True
    assert error.status_code is None


async def test_responses_invalid_prompt_error_is_not_retryable() -> None:
    script = [
        Stream.error("invalid_request_error", "Invalid prompt.", code="invalid_prompt")
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(OpenAIResponsesModel, script) as (_server, m):
            _, error = await collect_until_error(m)
    assert error.code == "invalid_prompt"
    assert error.is_retryable is False


async def test_responses_incomplete_max_tokens_is_length() -> None:
    with trio.fail_after(TIMEOUT):
        async with serve(OpenAIResponsesModel, [Stream.text("x", stop="length")]) as (
            _server,
            m,
        ):
            _, finish = await collect(m)
    assert finish.finish_reason == "length"


async def test_stream_error_retry_processor_retries_a_responses_error_event() -> None:
    script = [
        Stream.text("a") + Stream.error("server_error", "Sorry.", responses="both"),
        Stream.text("recovered"),
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(OpenAIResponsesModel, script) as (server, m):
            agent = Agent(
                id="r", model=m, error_processors=[StreamErrorRetryProcessor()]
            )
            result = await agent.generate("hi")
    assert result.error is None
    assert result.text == "recovered"
    assert len(server.requests) == 2


# --------------------------------------------------------------------------- #
# With an Agent: tool round trips
# --------------------------------------------------------------------------- #


@attrs.frozen
class City:
    city: str


@tool
def get_weather(args: City) -> str:
    """Weather in a city."""
    return f"18C in {args.city}"


async def test_chat_agent_tool_round_trip() -> None:
    script = [
        Stream.tool_call("get_weather", {"city": "Paris"}, id="call_7"),
        Stream.text("Mild."),
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(OpenAIChatModel, script) as (server, m):
            result = await Agent(id="c", model=m, tools=[get_weather]).generate(
                "Weather in Paris?"
            )
    assert result.text == "Mild."
    messages = server.requests[1].body["messages"]
    assert messages[-2]["tool_calls"][0]["id"] == "call_7"
    assert messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_7",
        "content": "18C in Paris",
    }


async def test_responses_agent_tool_round_trip() -> None:
    script = [
        Stream.tool_call("get_weather", {"city": "Oslo"}, id="call_8"),
        Stream.text("Cold."),
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(OpenAIResponsesModel, script) as (server, m):
            result = await Agent(id="r", model=m, tools=[get_weather]).generate(
                "Weather in Oslo?"
            )
    assert result.text == "Cold."
    items = server.requests[1].body["input"]
    assert items[-2] == {
        "type": "function_call",
        "call_id": "call_8",
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
    }
    assert items[-1] == {
        "type": "function_call_output",
        "call_id": "call_8",
        "output": "18C in Oslo",
    }
