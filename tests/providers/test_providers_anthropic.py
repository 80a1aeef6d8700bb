"""``AnthropicModel`` on the real ``anthropic`` SDK against the loopback fake
server, where it differs from the other dialects: request mapping, thinking
blocks and their signatures, stop reasons, the SDK's error mapping. What every
dialect does alike (chunks, usage, tool calls, cancellation and backpressure
reaching the socket, configuration) is in test_providers.py.

Real clock (the sockets are real); every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

from typing import Any

import anthropic
import pytest
import trio
import trio.testing

from procession import Agent, ConfigurationError, ProviderError
from procession.chunks import (
    ReasoningEndChunk,
    ToolCallChunk,
)
from procession.models import ModelRequest
from procession.processors import (
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
from procession.testing.fake_provider import (
    Fault,
    HttpError,
    Stream,
    open_fake_provider,
)
from tests.providers.provider_helpers import (
    ANTHROPIC,
    HI,
    HTTPCORE_GC_WARNING,
    TIMEOUT,
    WEATHER,
    collect,
    collect_until_error,
    get_weather,
    serve,
    texts,
)

pytestmark = HTTPCORE_GC_WARNING


@pytest.fixture(autouse=True)
def _no_real_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing here may reach the real API, whatever the environment says."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------- #
# Streaming and request mapping
# --------------------------------------------------------------------------- #


async def test_request_body_sdk_headers_and_request_id() -> None:
    # The chunks, usage and finish of a text reply: test_providers.py.
    with trio.fail_after(TIMEOUT):
        async with serve(ANTHROPIC, [Stream.text("Hel", "lo")]) as (server, model):
            _, finish = await collect(model, HI)

    assert finish.raw_response["request_id"] == "req_fake_1"
    (request,) = server.requests
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
        async with serve(ANTHROPIC, [Stream.text("ok")]) as (server, model):
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
        async with serve(ANTHROPIC, [Stream.text("ok")]) as (server, model):
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
        async with serve(ANTHROPIC, [Stream.text("ok")]) as (server, model):
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


async def test_thinking_ends_with_its_signature() -> None:
    # The reasoning and tool-call chunks around it: test_providers.py.
    script = [
        Stream.thinking("Let me ", "think.", signature="sig-abc")
        + Stream.tool_call("get_weather", {"city": "Paris"}, id="toolu_9", chunks=3)
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(ANTHROPIC, script) as (_server, model):
            chunks, _ = await collect(model, HI)

    (end,) = [c for c in chunks if isinstance(c, ReasoningEndChunk)]
    assert end.payload.signature == "sig-abc"
    (call,) = [c for c in chunks if isinstance(c, ToolCallChunk)]
    assert call.payload.tool_call_id == "toolu_9"


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
        async with serve(ANTHROPIC, [Stream.text("x", stop=stop)]) as (_server, model):
            _, finish = await collect(model, HI)
    assert finish.finish_reason == reason
    assert finish.provider_metadata["anthropic"]["stop_reason"] == stop


# --------------------------------------------------------------------------- #
# With an Agent
# --------------------------------------------------------------------------- #


async def test_agent_tool_round_trip_sends_tool_result_with_tool_use_id() -> None:
    script = [
        Stream.text("Checking.")
        + Stream.tool_call("get_weather", {"city": "Paris"}, id="toolu_42"),
        Stream.text("It is 18C in Paris."),
    ]
    with trio.fail_after(TIMEOUT):
        async with serve(ANTHROPIC, script) as (server, model):
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
        async with serve(ANTHROPIC, script) as (server, model):
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


# --------------------------------------------------------------------------- #
# Errors
# --------------------------------------------------------------------------- #


async def test_529_is_a_retryable_provider_error_with_headers() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [HttpError.overloaded(headers={"retry-after": "7"})]
            ) as server,
            ANTHROPIC.build(server.base_url) as model,
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
        async with serve(ANTHROPIC, [HttpError.unauthorized()]) as (_server, model):
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
            ANTHROPIC.build(server.base_url) as model,
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
            ANTHROPIC.build(server.base_url) as model,
        ):
            chunks, error = await collect_until_error(model, HI)

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
            ANTHROPIC.build(server.base_url) as model,
        ):
            _, error = await collect_until_error(model, HI)
    assert error.code == "invalid_request_error"
    assert error.is_retryable is False


async def test_stall_mid_body_is_a_timeout() -> None:
    import httpx2

    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [Stream.text("a", "b", fault=Fault(stall_after=3))]
            ) as server,
            httpx2.AsyncClient(timeout=httpx2.Timeout(0.3)) as http,
            ANTHROPIC.build(server.base_url, http_client=http) as model,
        ):
            _, error = await collect_until_error(model, HI)
    assert error.code == "timeout"
    assert error.is_retryable is True


async def test_close_without_response_is_a_connection_error() -> None:
    with trio.fail_after(TIMEOUT):
        async with (
            open_fake_provider(
                [HttpError(500, fault=Fault(close_without_response=True))]
            ) as server,
            ANTHROPIC.build(server.base_url) as model,
        ):
            with pytest.raises(ProviderError, match="connection") as info:
                async with model.stream(HI):
                    pass
    assert info.value.is_retryable is True
    assert info.value.code == "ECONNRESET"
    assert isinstance(info.value.__cause__, anthropic.APIConnectionError)


async def test_agent_run_with_a_provider_error_ends_with_it() -> None:
    with trio.fail_after(TIMEOUT):
        async with serve(ANTHROPIC, [HttpError.overloaded()]) as (_server, model):
            result = await Agent(id="a", model=model).generate("hi")
    assert result.finish_reason == "error"
    assert isinstance(result.error, ProviderError)
    assert result.error.status_code == 529


# --------------------------------------------------------------------------- #
# Configuration
# --------------------------------------------------------------------------- #


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(
        ConfigurationError, match=r'pip install "procession\[anthropic\]"'
    ):
        AnthropicModel("claude-sonnet-4-5", api_key="k")
