"""Provider regressions found in review, each against the fake server with the
real SDK (real clock, bounded by ``trio.fail_after``)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from procession import Agent
from procession.chunks import TextDeltaChunk
from procession.models import ModelRequest
from procession.processors import (
    PromptAssistantMessage,
    PromptReasoningPart,
    PromptTextPart,
    PromptToolCallPart,
    PromptToolMessage,
    PromptToolResultPart,
    PromptUserMessage,
    StreamErrorRetryProcessor,
)
from procession.providers import AnthropicModel, OpenAIResponsesModel
from procession.testing.fake_provider import (
    HttpError,
    Stream,
    Turn,
    open_fake_provider,
    responses_events,
)
from tests.providers.provider_helpers import HI, HTTPCORE_GC_WARNING

pytestmark = HTTPCORE_GC_WARNING


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def _event(name: str, data: str) -> str:
    return f"event: {name}\ndata: {data}\n\n"


async def test_a_null_in_message_delta_usage_keeps_the_start_counts() -> None:
    raw = [
        _event(
            "message_start",
            '{"type":"message_start","message":{"id":"msg_1","type":"message",'
            '"role":"assistant","model":"claude-test","content":[],"stop_reason":null,'
            '"stop_sequence":null,"usage":{"input_tokens":25,'
            '"cache_creation_input_tokens":7,"cache_read_input_tokens":100,'
            '"output_tokens":1}}}',
        ),
        _event(
            "content_block_start",
            '{"type":"content_block_start","index":0,'
            '"content_block":{"type":"text","text":""}}',
        ),
        _event(
            "content_block_delta",
            '{"type":"content_block_delta","index":0,'
            '"delta":{"type":"text_delta","text":"Hi"}}',
        ),
        _event("content_block_stop", '{"type":"content_block_stop","index":0}'),
        _event(
            "message_delta",
            '{"type":"message_delta","delta":{"stop_reason":"end_turn",'
            '"stop_sequence":null},"usage":{"input_tokens":null,'
            '"cache_creation_input_tokens":null,"cache_read_input_tokens":null,'
            '"output_tokens":6}}',
        ),
        _event("message_stop", '{"type":"message_stop"}'),
    ]
    with trio.fail_after(10):
        async with (
            open_fake_provider([Stream.raw(raw)]) as server,
            AnthropicModel(
                "claude-test", api_key="k", base_url=server.base_url
            ) as model,
            model.stream(HI) as response,
        ):
            _ = [chunk async for chunk in response]
    assert response.finish is not None
    usage = response.finish.usage
    assert usage is not None
    assert usage.input_tokens == 25
    assert usage.output_tokens == 6
    assert usage.cached_input_tokens == 100
    assert usage.cache_creation_input_tokens == 7


async def test_a_done_line_after_a_completed_response_is_ignored() -> None:
    events = [
        *responses_events(Stream.text("Hello"), model="gpt-test"),
        "data: [DONE]\n\n",
    ]
    with trio.fail_after(10):
        async with (
            open_fake_provider([Stream.raw(events)]) as server,
            OpenAIResponsesModel(
                "gpt-test", api_key="k", base_url=server.openai_base_url
            ) as model,
            model.stream(HI) as response,
        ):
            texts = [
                c.payload.text async for c in response if isinstance(c, TextDeltaChunk)
            ]
    assert texts == ["Hello"]
    assert response.finish is not None
    assert response.finish.finish_reason == "stop"


@pytest.mark.parametrize("status", [429, 529])
async def test_x_should_retry_false_is_honoured_by_the_retry_processor(
    status: int,
) -> None:
    """An Anthropic HTTP error body looks like an OpenAI Responses stream error;
    the built-in matcher must not read it as one and override the provider."""
    script: list[Turn] = [
        HttpError(status, headers={"x-should-retry": "false"}),
        Stream.text("second"),
    ]
    with trio.fail_after(10):
        async with (
            open_fake_provider(script, allow_unused=True) as server,
            AnthropicModel(
                "claude-test", api_key="k", base_url=server.base_url
            ) as model,
        ):
            agent = Agent(
                id="a", model=model, error_processors=[StreamErrorRetryProcessor()]
            )
            result = await agent.generate("hi")
    assert len(server.requests) == 1
    assert result.finish_reason == "error"
    assert getattr(result.error, "is_retryable", None) is False


async def test_anthropic_request_shape_rules() -> None:
    """Empty user text is dropped, signed thinking leads its assistant turn, and
    a final assistant prefill does not end in whitespace (the API rejects all
    three)."""
    prompt: list[Any] = [
        PromptUserMessage([PromptTextPart(""), PromptTextPart("weather?")]),
        PromptAssistantMessage([PromptTextPart("Let me check.")]),
        PromptAssistantMessage(
            [
                PromptReasoningPart("think", signature="sig"),
                PromptToolCallPart("toolu_1", "get_weather", {"city": "Paris"}),
            ]
        ),
        PromptToolMessage([PromptToolResultPart("toolu_1", "get_weather", "18C")]),
        PromptAssistantMessage([PromptTextPart("It is ")]),  # a prefill
    ]
    with trio.fail_after(10):
        async with (
            open_fake_provider([Stream.text("18C.")]) as server,
            AnthropicModel(
                "claude-test", api_key="k", base_url=server.base_url
            ) as model,
            model.stream(ModelRequest(prompt=prompt)) as response,
        ):
            _ = [chunk async for chunk in response]
    body = server.requests[0].body
    assert isinstance(body, dict)
    messages = body["messages"]
    assert messages[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "weather?"}],
    }
    assistant = [block["type"] for block in messages[1]["content"]]
    assert assistant == ["thinking", "text", "tool_use"]
    assert messages[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "It is"}],
    }


async def test_a_chat_body_cut_after_finish_reason_is_incomplete() -> None:
    """We always ask for include_usage: a body that ends after finish_reason but
    before the usage chunk and [DONE] was cut off."""
    from procession import ProviderError
    from procession.providers import OpenAIChatModel
    from procession.testing.fake_provider import Fault

    with trio.fail_after(10):
        async with (
            open_fake_provider(
                [Stream.text("a", "b", fault=Fault(truncate_after=4))]
            ) as server,
            OpenAIChatModel(
                "gpt-test", api_key="k", base_url=server.openai_base_url
            ) as model,
        ):
            with pytest.raises(ProviderError, match="usage chunk and \\[DONE\\]"):
                async with model.stream(HI) as response:
                    _ = [chunk async for chunk in response]


async def test_responses_reasoning_left_open_is_closed_at_the_end() -> None:
    events = [
        e
        for e in responses_events(Stream.thinking("hmm") + Stream.text("ok"), model="m")
        if "reasoning_summary_text.done" not in e
        and "reasoning_summary_part.done" not in e
        and not ("output_item.done" in e and '"type":"reasoning"' in e)
    ]
    with trio.fail_after(10):
        async with (
            open_fake_provider([Stream.raw(events)]) as server,
            OpenAIResponsesModel(
                "m", api_key="k", base_url=server.openai_base_url
            ) as model,
            model.stream(HI) as response,
        ):
            types = [chunk.type async for chunk in response]
    assert types.count("reasoning-start") == 1
    assert types.count("reasoning-end") == 1
