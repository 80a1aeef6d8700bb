"""``OpenAIChatModel`` and ``OpenAIResponsesModel`` (httpx2, no SDK) against the
loopback fake server, where they differ from the other dialects: request
mapping, finish reasons, HTTP and in-stream errors, tool round trips. What every
dialect does alike (chunks, usage, tool calls, truncation, cancellation,
configuration) is in test_providers.py.

Real clock (the sockets are real); every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent, ProviderError
from procession.chunks import (
    ReasoningDeltaChunk,
)
from procession.models import ModelRequest
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
from procession.testing.fake_provider import (
    HttpError,
    Stream,
)
from tests.providers.provider_helpers import (
    CHAT,
    HTTPCORE_GC_WARNING,
    RESPONSES,
    TIMEOUT,
    WEATHER,
    Dialect,
    collect,
    collect_until_error,
    get_weather,
    serve,
    texts,
)

pytestmark = HTTPCORE_GC_WARNING

HI = ModelRequest(
    prompt=[PromptSystemMessage("Be terse."), PromptUserMessage([PromptTextPart("hi")])]
)


@pytest.fixture(autouse=True)
def _no_real_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may reach the real API, whatever the environment says."""
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------- #
# HTTP errors, on both endpoints
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("dialect", [CHAT, RESPONSES], ids=lambda d: d.name)
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
    dialect: Dialect, turn: HttpError, status: int, code: str, retryable: bool
) -> None:
    with trio.fail_after(TIMEOUT):
        async with serve(dialect, [turn]) as (_server, model):
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
        async with serve(CHAT, [Stream.text("ok")]) as (server, model):
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
        async with serve(CHAT, [Stream.text("x", stop=stop)]) as (
            _server,
            model,
        ):
            _, finish = await collect(model, HI)
    assert finish.finish_reason == reason


async def test_chat_reasoning_content_becomes_reasoning_chunks() -> None:
    script = [Stream.thinking("hm", "m") + Stream.text("ok")]
    with trio.fail_after(TIMEOUT):
        async with serve(CHAT, script) as (_server, model):
            chunks, _ = await collect(model, HI)
    reasoning = [c.payload.text for c in chunks if isinstance(c, ReasoningDeltaChunk)]
    assert reasoning == ["hm", "m"]
    assert texts(chunks) == ["ok"]


async def test_chat_mid_stream_error_keeps_the_error_object_as_body() -> None:
    script = [
        Stream.text("a") + Stream.error("server_error", "The server had an error")
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(CHAT, script) as (_server, model):
            chunks, error = await collect_until_error(model, HI)
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
        async with serve(RESPONSES, [Stream.text("ok")]) as (server, m):
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
        async with serve(RESPONSES, [Stream.text("a") + stream]) as (
            _server,
            m,
        ):
            chunks, error = await collect_until_error(m, HI)

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
        async with serve(RESPONSES, script) as (_server, m):
            _, error = await collect_until_error(m, HI)
    assert error.code == "invalid_prompt"
    assert error.is_retryable is False


async def test_responses_incomplete_max_tokens_is_length() -> None:
    with trio.fail_after(TIMEOUT):
        async with serve(RESPONSES, [Stream.text("x", stop="length")]) as (
            _server,
            m,
        ):
            _, finish = await collect(m, HI)
    assert finish.finish_reason == "length"


async def test_stream_error_retry_processor_retries_a_responses_error_event() -> None:
    script = [
        Stream.text("a") + Stream.error("server_error", "Sorry.", responses="both"),
        Stream.text("recovered"),
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(RESPONSES, script) as (server, m):
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


async def test_chat_agent_tool_round_trip() -> None:
    script = [
        Stream.tool_call("get_weather", {"city": "Paris"}, id="call_7"),
        Stream.text("Mild."),
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(CHAT, script) as (server, m):
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
        async with serve(RESPONSES, script) as (server, m):
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
