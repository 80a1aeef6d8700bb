"""The loopback fake provider server, driven by the real ``anthropic`` SDK and by
a plain ``httpx2`` client over real sockets (so: the real clock, no MockClock).

Every test is bounded by ``trio.fail_after(10)``.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anthropic
import httpx2
import pytest
import trio
import trio.testing

import procession.testing.fake_provider as fake_provider
from procession.testing.fake_provider import (
    FakeProvider,
    FakeProviderError,
    Fault,
    HttpError,
    RecordedRequest,
    Stream,
    TokenCounts,
    Turn,
    anthropic_events,
    chat_events,
    open_fake_provider,
    responses_events,
)

LIMIT = 10
USER: list[anthropic.types.MessageParam] = [{"role": "user", "content": "hi"}]


@asynccontextmanager
async def sdk(
    server: FakeProvider, *, max_retries: int = 0, client_timeout: float = 5.0
) -> AsyncIterator[anthropic.AsyncAnthropic]:
    client = anthropic.AsyncAnthropic(
        api_key="test",
        base_url=server.base_url,
        max_retries=max_retries,
        timeout=client_timeout,
        http_client=anthropic.DefaultAsyncHttpxClient(),
    )
    async with client:
        yield client


async def collect(client: anthropic.AsyncAnthropic) -> list[Any]:
    stream = await client.messages.create(
        model="claude-test", max_tokens=64, messages=USER, stream=True
    )
    return [event async for event in stream]


def parse_sse(raw: bytes) -> list[tuple[str | None, str]]:
    """(event name or None, data) for each SSE block; asserts the framing."""
    text = raw.decode()
    assert text.endswith("\n\n")
    blocks = []
    for block in text[:-2].split("\n\n"):
        event = None
        data = []
        for line in block.split("\n"):
            field, _, value = line.partition(": ")
            if field == "event":
                event = value
            else:
                assert field == "data", line
                data.append(value)
        blocks.append((event, "\n".join(data)))
    return blocks


async def post(server: FakeProvider, path: str, body: dict[str, Any]) -> bytes:
    async with httpx2.AsyncClient(base_url=server.openai_base_url) as client:
        response = await client.post(
            path, json=body, headers={"authorization": "Bearer sk-test"}
        )
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("text/event-stream")
        return response.content


async def drain(stream: Any, seen: list[str]) -> None:
    """Iterate an SDK stream to its end, noting each event's type."""
    async for event in stream:
        seen.append(event.type)


# ---------------------------------------------------------------------------
# Anthropic Messages through the real SDK


async def test_text_stream_through_create_and_the_recorded_request() -> None:
    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider(
                [Stream.text("Hel", "lo", usage=TokenCounts(25, 6))]
            ) as server,
            sdk(server) as client,
        ):
            events = await collect(client)
    assert [e.type for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert [e.delta.text for e in events if e.type == "content_block_delta"] == [
        "Hel",
        "lo",
    ]
    assert events[0].message.model == "claude-test"  # echoes the request's model
    assert events[0].message.usage.input_tokens == 25
    assert events[-2].delta.stop_reason == "end_turn"
    assert events[-2].usage.output_tokens == 6
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.body["model"] == "claude-test"
    assert request.body["max_tokens"] == 64
    assert request.body["stream"] is True
    assert request.body["messages"] == [{"role": "user", "content": "hi"}]
    assert request.headers["Authorization"] == "Bearer test"  # case-insensitive
    assert "anthropic-version" in request.headers
    assert server.remaining == []
    [connection] = server.connections
    assert connection.events_sent == 7
    assert connection.finished_response
    assert connection.responses == 1


async def test_stream_helper_builds_the_final_message() -> None:
    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider([Stream.text("Hello", " there!")]) as server,
            sdk(server) as client,
            client.messages.stream(model="m", max_tokens=10, messages=USER) as stream,
        ):
            texts = [text async for text in stream.text_stream]
            final = await stream.get_final_message()
    assert texts == ["Hello", " there!"]
    assert final.stop_reason == "end_turn"
    assert final.content[0].type == "text"
    assert final.content[0].text == "Hello there!"
    assert server.requests[0].headers["x-stainless-helper-method"] == "stream"


async def test_tool_use_streams_input_json_deltas() -> None:
    args = {"location": "Paris", "unit": "celsius"}
    turn = Stream.text("Checking.") + Stream.tool_call(
        "get_weather", args, id="toolu_1", chunks=4
    )
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server, sdk(server) as client:
            events = await collect(client)
    fragments = [
        e.delta.partial_json
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "input_json_delta"
    ]
    assert len(fragments) == 4
    assert json.loads("".join(fragments)) == args
    start = [e for e in events if e.type == "content_block_start"][1]
    assert (start.index, start.content_block.type) == (1, "tool_use")
    assert (start.content_block.id, start.content_block.name) == (
        "toolu_1",
        "get_weather",
    )
    assert events[-2].delta.stop_reason == "tool_use"


async def test_thinking_with_signature_then_text() -> None:
    turn = Stream.thinking("Let me think", " about it.", signature="sig-123") + (
        Stream.text("42")
    )
    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider([turn]) as server,
            sdk(server) as client,
            client.messages.stream(model="m", max_tokens=10, messages=USER) as stream,
        ):
            final = await stream.get_final_message()
    thinking, text = final.content
    assert thinking.type == "thinking"
    assert thinking.thinking == "Let me think about it."
    assert thinking.signature == "sig-123"
    assert text.type == "text"
    assert text.text == "42"


async def test_error_event_mid_stream_raises_api_status_error_200() -> None:
    turn = Stream.text("Hel") + Stream.error("overloaded_error", "Overloaded")
    seen: list[str] = []
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server, sdk(server) as client:
            stream = await client.messages.create(
                model="m", max_tokens=10, messages=USER, stream=True
            )
            with pytest.raises(anthropic.APIStatusError, match="Overloaded") as info:
                await drain(stream, seen)
    assert info.value.status_code == 200
    assert info.value.type == "overloaded_error"
    assert info.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_fake_1",
    }
    # The events before the error were yielded.
    assert seen == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    ]


async def test_529_http_error_with_headers() -> None:
    turn = HttpError.overloaded(headers={"retry-after": "7", "x-should-retry": "false"})
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server, sdk(server) as client:
            with pytest.raises(anthropic.APIStatusError, match="529") as info:
                await collect(client)
    error = info.value
    assert isinstance(error, anthropic.InternalServerError)  # 2.x: Overloaded <: 5xx
    assert error.status_code == 529
    assert error.type == "overloaded_error"
    assert error.response.headers["retry-after"] == "7"
    assert error.request_id == "req_fake_1"
    assert error.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": "req_fake_1",
    }


async def test_401_is_an_authentication_error() -> None:
    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider([HttpError.unauthorized()]) as server,
            sdk(server) as client,
        ):
            with pytest.raises(
                anthropic.AuthenticationError, match="invalid x-api-key"
            ) as info:
                await collect(client)
    assert info.value.status_code == 401
    assert info.value.type == "authentication_error"


async def test_sdk_retry_and_keep_alive() -> None:
    script: list[Turn] = [
        HttpError.overloaded(headers={"retry-after-ms": "1"}),
        Stream.text("ok"),
        Stream.text("again"),
    ]
    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider(script) as server,
            sdk(server, max_retries=1) as client,
        ):
            first = await collect(client)
            second = await collect(client)
    assert first[2].delta.text == "ok"
    assert second[2].delta.text == "again"
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == [
        "0",
        "1",
        "0",
    ]
    # The SDK drops the connection of an error response; the two streams after
    # it share one keep-alive connection (start_next_cycle works).
    assert sum(c.responses for c in server.connections) == 3
    assert server.connections[-1].responses == 2
    assert server.connections[-1].finished_response


async def test_drop_after_gives_an_incomplete_chunked_read() -> None:
    turn = Stream.text("a", "b", "c", fault=Fault(drop_after=3))
    seen: list[str] = []
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server, sdk(server) as client:
            stream = await client.messages.create(
                model="m", max_tokens=10, messages=USER, stream=True
            )
            # anthropic >= 2.17 wraps the read error in APIConnectionError
            # (the httpx2 error as its __cause__); older versions let it out.
            with pytest.raises(
                (httpx2.RemoteProtocolError, anthropic.APIConnectionError),
                match="incomplete chunked read",
            ):
                await drain(stream, seen)
            await server.connections[0].wait_closed()
    assert seen == ["message_start", "content_block_start", "content_block_delta"]
    [connection] = server.connections
    assert connection.events_sent == 3
    assert not connection.finished_response
    assert not connection.closed_by_client


async def test_truncate_ends_the_stream_without_message_stop() -> None:
    turn = Stream.text("Hel", "lo", fault=Fault(truncate_after=4))
    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider([turn]) as server,
            sdk(server) as client,
            client.messages.stream(model="m", max_tokens=10, messages=USER) as stream,
        ):
            types = [event.type async for event in stream]
            final = await stream.get_final_message()
    assert "message_stop" not in types
    assert final.stop_reason is None
    assert final.content[0].type == "text"
    assert final.content[0].text == "Hello"
    assert server.connections[0].finished_response  # the HTTP body ended cleanly


async def test_close_without_response_is_a_connection_error() -> None:
    turn = Stream.text("never", fault=Fault(close_without_response=True))
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server, sdk(server) as client:
            with pytest.raises(anthropic.APIConnectionError, match="Connection"):
                await collect(client)
    assert isinstance(info_cause := server.requests[0], RecordedRequest)
    assert info_cause.path == "/v1/messages"  # the request was read in full first
    assert server.connections[0].bytes_sent == 0
    assert not server.connections[0].finished_response


async def test_headers_delay_beyond_the_timeout_is_an_api_timeout() -> None:
    turn = Stream.text("late", fault=Fault(headers_delay=2.0))
    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider([turn]) as server,
            sdk(server, client_timeout=0.2) as client,
        ):
            with pytest.raises(anthropic.APITimeoutError, match="timed out"):
                await collect(client)
    assert len(server.requests) == 1


async def test_stall_after_is_a_read_timeout_and_the_client_leaving_is_logged() -> None:
    turn = Stream.text("a", "b", fault=Fault(stall_after=3))
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server:
            async with sdk(server, client_timeout=0.3) as client:
                stream = await client.messages.create(
                    model="m", max_tokens=10, messages=USER, stream=True
                )
                # httpx2 raises it with an empty message; anthropic >= 2.17
                # wraps it in APITimeoutError ("Request to ... timed out").
                with pytest.raises(
                    (httpx2.ReadTimeout, anthropic.APITimeoutError),
                    match=r"^$|timed out",
                ):
                    await drain(stream, [])
            await server.connections[0].wait_closed()
    [connection] = server.connections
    assert connection.events_sent == 3
    assert connection.closed_by_client
    assert not connection.finished_response


async def test_delay_between_events_uses_the_clock() -> None:
    turn = Stream.text("a", "b", fault=Fault(delay_between_events=0.05))
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server, sdk(server) as client:
            started = trio.current_time()
            await collect(client)
            elapsed = trio.current_time() - started
    assert elapsed >= 6 * 0.05  # 7 events, 6 gaps


async def test_split_frames_still_parse_even_inside_utf8() -> None:
    async def run(fault: Fault | None) -> tuple[str, int]:
        async with (
            open_fake_provider(
                [Stream.text("Grüße, ", "wörld ✓", fault=fault)]
            ) as server,
            sdk(server) as client,
            client.messages.stream(model="m", max_tokens=10, messages=USER) as stream,
        ):
            text = await stream.get_final_text()
        return text, server.connections[0].bytes_sent

    with trio.fail_after(LIMIT):
        whole, whole_bytes = await run(None)
        split, split_bytes = await run(Fault(split_frames=3))
    assert whole == split == "Grüße, wörld ✓"
    assert split_bytes > whole_bytes * 2  # one chunk header per 3-byte piece


# ---------------------------------------------------------------------------
# OpenAI Chat Completions and Responses with a plain httpx2 client


async def test_chat_completions_text_tool_call_and_usage() -> None:
    args = {"city": "Paris"}
    turn = Stream.text("Hel", "lo") + Stream.tool_call(
        "get_weather", args, id="call_abc", chunks=2
    )
    body = {
        "model": "gpt-test",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "hi"}],
    }
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server:
            raw = await post(server, "/chat/completions", body)
    blocks = parse_sse(raw)
    assert all(event is None for event, _ in blocks)  # data-only SSE
    assert blocks[-1] == (None, "[DONE]")
    chunks = [json.loads(data) for _, data in blocks[:-1]]
    assert {c["model"] for c in chunks} == {"gpt-test"}
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas[0]["role"] == "assistant"
    assert "".join(d.get("content") or "" for d in deltas) == "Hello"
    calls = [call for d in deltas for call in d.get("tool_calls", [])]
    assert calls[0]["id"] == "call_abc"
    assert calls[0]["function"]["name"] == "get_weather"
    assert {call["index"] for call in calls} == {0}
    assert json.loads("".join(c["function"]["arguments"] for c in calls)) == args
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "tool_calls"
    assert set(finishes[:-1]) == {None}
    *earlier, usage_chunk = chunks
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["prompt_tokens"] == 10
    assert all(c["usage"] is None for c in earlier)
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.body["stream_options"] == {"include_usage": True}


async def test_chat_completions_without_include_usage_and_with_an_error() -> None:
    turn = Stream.text("Hi") + Stream.error("server_error", "Sorry about that!")
    body = {"model": "gpt-test", "stream": True, "messages": []}
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server:
            raw = await post(server, "/chat/completions", body)
    chunks = [json.loads(data) for _, data in parse_sse(raw)]  # no [DONE]
    assert all("usage" not in c for c in chunks)
    assert chunks[-1] == {
        "error": {
            "message": "Sorry about that!",
            "type": "server_error",
            "param": None,
            "code": None,
        }
    }
    assert chunks[-2]["choices"][0]["delta"] == {"content": "Hi"}


async def test_responses_text_and_function_call_events() -> None:
    turn = Stream.text("Hel", "lo") + Stream.tool_call(
        "get_weather", '{"city":"Paris"}', id="call_1", chunks=2
    )
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server:
            raw = await post(
                server, "/responses", {"model": "gpt-r", "input": "hi", "stream": True}
            )
    blocks = parse_sse(raw)
    data = [json.loads(d) for _, d in blocks]
    assert [event for event, _ in blocks] == [d["type"] for d in data]
    assert [event for event, _ in blocks] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [d["sequence_number"] for d in data] == list(range(len(data)))
    assert data[6]["text"] == "Hello"
    assert data[9]["item"]["call_id"] == "call_1"
    assert data[12]["arguments"] == '{"city":"Paris"}'
    completed = data[-1]["response"]
    assert completed["status"] == "completed"
    assert completed["model"] == "gpt-r"
    assert [item["type"] for item in completed["output"]] == [
        "message",
        "function_call",
    ]
    assert completed["usage"]["total_tokens"] == 10 + 4


@pytest.mark.parametrize(
    ("nested", "responses", "tail"),
    [
        (True, "error", ["error"]),
        (False, "error", ["error"]),
        (True, "failed", ["response.failed"]),
        (True, "both", ["error", "response.failed"]),
    ],
)
async def test_responses_error_shapes(
    nested: bool, responses: Any, tail: list[str]
) -> None:
    turn = Stream.text("x") + Stream.error(
        "server_error", "Sorry.", nested=nested, responses=responses
    )
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server:
            raw = await post(server, "/responses", {"model": "m", "stream": True})
    blocks = parse_sse(raw)
    data = [json.loads(d) for _, d in blocks]
    assert [event for event, _ in blocks][-len(tail) :] == tail
    assert "response.completed" not in [event for event, _ in blocks]
    assert [d["sequence_number"] for d in data] == list(range(len(data)))
    last = data[-1]
    if tail[-1] == "response.failed":
        assert last["response"]["status"] == "failed"
        assert last["response"]["error"] == {
            "code": "server_error",
            "message": "Sorry.",
        }
    elif nested:
        assert last["error"] == {
            "type": "server_error",
            "code": "server_error",
            "message": "Sorry.",
            "param": None,
        }
    else:
        assert (last["code"], last["message"]) == ("server_error", "Sorry.")
        assert "error" not in last


async def test_responses_max_tokens_is_incomplete() -> None:
    with trio.fail_after(LIMIT):
        async with open_fake_provider([Stream.text("cut", stop="length")]) as server:
            raw = await post(server, "/responses", {"model": "m", "stream": True})
    event, data = parse_sse(raw)[-1]
    assert event == "response.incomplete"
    assert json.loads(data)["response"]["incomplete_details"] == {
        "reason": "max_output_tokens"
    }


async def test_http_error_on_openai_endpoints_has_the_openai_shape() -> None:
    script = [HttpError.rate_limited(retry_after=7), HttpError.bad_request("no model")]
    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider(script) as server,
            httpx2.AsyncClient(base_url=server.openai_base_url) as client,
        ):
            limited = await client.post("/chat/completions", json={})
            bad = await client.post("/responses", json={})
    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "7"
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"
    assert "type" not in limited.json()  # no top-level type, unlike Anthropic
    assert bad.status_code == 400
    assert bad.json() == {
        "error": {
            "message": "no model",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
    }


async def test_unknown_paths_get_a_404_in_the_provider_shape_and_take_no_turn() -> None:
    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider([]) as server,
            httpx2.AsyncClient(base_url=server.base_url) as client,
        ):
            openai_404 = await client.post("/v1/embeddings", json={})
            anthropic_404 = await client.get(
                "/v1/models", headers={"anthropic-version": "2023-06-01"}
            )
    assert openai_404.status_code == anthropic_404.status_code == 404
    assert openai_404.json()["error"]["message"].endswith("POST /v1/embeddings")
    assert anthropic_404.json()["type"] == "error"
    assert anthropic_404.json()["error"]["type"] == "not_found_error"
    assert [r.path for r in server.requests] == ["/v1/embeddings", "/v1/models"]


async def test_raw_stream_is_sent_byte_for_byte() -> None:
    events: list[bytes | str] = [b"event: ping\ndata: {}\n\n", "data: [DONE]\n\n"]
    with trio.fail_after(LIMIT):
        async with open_fake_provider([Stream.raw(events)]) as server:
            raw = await post(server, "/chat/completions", {})
    assert raw == b"event: ping\ndata: {}\n\ndata: [DONE]\n\n"
    assert server.connections[0].events_sent == 2


# ---------------------------------------------------------------------------
# The script, callables, waiting, backpressure


async def test_one_script_is_shared_by_all_endpoints_in_order() -> None:
    script = [Stream.text("one"), Stream.text("two"), Stream.text("three")]
    with trio.fail_after(LIMIT):
        async with open_fake_provider(script) as server:
            chat = await post(server, "/chat/completions", {})
            responses = await post(server, "/responses", {})
            assert len(server.remaining) == 1
            async with sdk(server) as client:
                events = await collect(client)
    assert b'"content":"one"' in chat
    assert b'"delta":"two"' in responses
    assert events[2].delta.text == "three"
    assert [r.path for r in server.requests] == [
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
    ]


async def test_a_callable_turn_answers_from_the_request() -> None:
    def echo(request: RecordedRequest) -> Stream:
        return Stream.text(f"you said {request.body['messages'][0]['content']}")

    with trio.fail_after(LIMIT):
        async with open_fake_provider([echo]) as server, sdk(server) as client:
            events = await collect(client)
    assert events[2].delta.text == "you said hi"


async def test_a_failing_callable_turn_fails_the_block() -> None:
    def broken(request: RecordedRequest) -> Stream:
        raise KeyError("oops")

    async def run() -> None:
        async with open_fake_provider([broken]) as server, sdk(server) as client:
            with pytest.raises(anthropic.InternalServerError, match="raised"):
                await collect(client)

    with (
        trio.fail_after(LIMIT),
        pytest.raises(FakeProviderError, match="callable turn failed") as info,
    ):
        await run()
    assert isinstance(info.value.__cause__, KeyError)


async def test_a_script_that_runs_out_answers_500_and_fails_at_exit() -> None:
    async def run() -> None:
        async with (
            open_fake_provider([Stream.text("only")]) as server,
            sdk(server) as client,
        ):
            await collect(client)
            with pytest.raises(anthropic.InternalServerError, match="found no turn"):
                await collect(client)

    with (
        trio.fail_after(LIMIT),
        pytest.raises(FakeProviderError, match="the script ran out"),
    ):
        await run()


async def test_unused_turns_fail_at_exit_unless_allowed() -> None:
    with trio.fail_after(LIMIT):
        with pytest.raises(FakeProviderError, match=r"1 scripted turn\(s\) were never"):
            async with open_fake_provider([Stream.text("spare")]):
                pass
        async with open_fake_provider([Stream.text("spare")], allow_unused=True):
            pass
        async with (
            open_fake_provider([], strict=False) as server,
            httpx2.AsyncClient(base_url=server.openai_base_url) as client,
        ):
            response = await client.post("/responses", json={})
        assert response.status_code == 500


async def test_the_blocks_own_exception_propagates_unwrapped() -> None:
    with trio.fail_after(LIMIT), pytest.raises(LookupError, match="mine"):
        async with open_fake_provider([Stream.text("unused")]):
            raise LookupError("mine")


async def test_wait_for_requests_parks_until_the_request_arrives() -> None:
    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider(
                [Stream.text("slow", fault=Fault(headers_delay=0.2))]
            ) as server,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(post, server, "/chat/completions", {"model": "x"})
            await server.wait_for_requests(1)
            # The request is recorded before it is answered.
            assert server.connections[0].responses == 0
            assert server.requests[0].body == {"model": "x"}


async def test_backpressure_reaches_the_socket() -> None:
    piece = "x" * 32_768
    total = 1000 + 5  # 1000 deltas + start, block start/stop, delta, stop
    turn = Stream.text(*[piece] * 1000)
    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider([turn]) as server,
            httpx2.AsyncClient(base_url=server.base_url) as client,
            client.stream("POST", "/v1/messages", json={}) as response,
        ):
            # Headers are in; the body is not read. The server must stall.
            log = server.connections[0]
            with trio.move_on_after(5) as waiting:
                await log.wait_stalled()
            assert not waiting.cancelled_caught, "the server never stalled"
            stalled_at = log.events_sent
            # Nothing can run any more (the server's write would be runnable if
            # the socket took more): it is blocked for good, not just slow.
            await trio.testing.wait_all_tasks_blocked()
            assert log.events_sent == stalled_at
            assert not log.finished_response
            received = 0
            async for data in response.aiter_bytes():
                received += len(data)
    assert 0 < stalled_at < total
    assert server.connections[0].events_sent == total
    assert received > 1000 * len(piece)


async def test_wait_stalled_returns_when_a_stall_fault_holds_the_stream() -> None:
    turn = Stream.text("a", "b", fault=Fault(stall_after=3))
    with trio.fail_after(LIMIT):
        async with open_fake_provider([turn]) as server:
            async with (
                httpx2.AsyncClient(base_url=server.base_url) as client,
                client.stream("POST", "/v1/messages", json={}),
            ):
                log = server.connections[0]
                await log.wait_stalled()
                assert log.events_sent == 3
                assert log.closed_at is None
            await log.wait_closed()
    assert log.closed_by_client
    assert not log.finished_response


async def test_wait_stalled_does_not_count_a_server_idle_between_responses() -> None:
    """A finished response leaves the server waiting for the next request: that
    is not a stall, so the waiter wakes only when the connection closes."""
    woke_with: list[float | None] = []

    async def waiter(log: fake_provider.ConnectionLog) -> None:
        await log.wait_stalled()
        woke_with.append(log.closed_at)

    with trio.fail_after(LIMIT):
        async with (
            open_fake_provider([Stream.text("hi")]) as server,
            trio.open_nursery() as nursery,
            httpx2.AsyncClient(base_url=server.base_url) as client,
        ):
            response = await client.post("/v1/messages", json={})
            assert response.status_code == 200
            log = server.connections[0]
            # The server has written the end of the body; let it note so and
            # park in its read of the next request.
            await trio.testing.wait_all_tasks_blocked()
            assert log.finished_response
            nursery.start_soon(waiter, log)
            await trio.testing.wait_all_tasks_blocked()
            assert woke_with == []
            # Leaving closes the client's keep-alive connection, then the
            # nursery waits for the waiter.
    [closed_at] = woke_with
    assert closed_at is not None
    assert log.closed_by_client


async def test_the_waits_checkpoint_even_when_they_return_at_once() -> None:
    with trio.fail_after(LIMIT):
        async with open_fake_provider([Stream.text("hi")]) as server:
            await post(server, "/chat/completions", {})
            log = server.connections[0]
            await log.wait_closed()
            for wait in (log.wait_closed, log.wait_stalled):
                with trio.CancelScope() as scope:
                    scope.cancel()
                    await wait()
                assert scope.cancelled_caught, wait


async def test_a_blocked_write_whose_socket_drained_is_not_yet_a_stall() -> None:
    """Between the client reading and the server's task running again, the log
    still says "write blocked"; ``wait_stalled`` asks the socket and waits for
    the server to note its next state instead of waking on the stale one."""
    raw, theirs = socket.socketpair()
    with raw, theirs:
        raw.setblocking(False)
        log = fake_provider.ConnectionLog(opened_at=trio.current_time())
        log._socket = trio.socket.from_stdlib_socket(raw)
        log._set_stall("write")  # but the socket has room: the write goes on
        woke = trio.Event()

        async def waiter() -> None:
            await log.wait_stalled()
            woke.set()

        with trio.fail_after(LIMIT):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiter)
                await trio.testing.wait_all_tasks_blocked()
                assert not woke.is_set()
                with contextlib.suppress(BlockingIOError):
                    while True:  # fill the buffers; nobody reads ``theirs``
                        raw.send(b"x" * 65536)
                log._set_stall("write")  # the server would note its retry
                await woke.wait()


# ---------------------------------------------------------------------------
# Builders and renderers


def test_renderers_return_sse_event_strings() -> None:
    stream = Stream.text("a", stop="max_tokens")
    anthropic_sse = anthropic_events(Stream(stream, pings=True), model="m")
    assert anthropic_sse[0].startswith("event: message_start\ndata: {")
    assert anthropic_sse[2] == 'event: ping\ndata: {"type":"ping"}\n\n'
    assert '"stop_reason":"max_tokens"' in anthropic_sse[-2]
    assert all(e.endswith("\n\n") for e in anthropic_sse)
    chat = chat_events(stream, include_usage=True)
    assert '"finish_reason":"length"' in chat[-3]
    assert chat[-1] == "data: [DONE]\n\n"
    assert responses_events(stream)[-1].startswith("event: response.incomplete\n")


def test_composition_by_plus_or_list_is_the_same() -> None:
    a, b = Stream.text("a", stop="end_turn"), Stream.tool_call("f", {}, stop="stop")
    assert a + b == Stream([a, b]) == Stream(a, b)
    assert (a + b).stop == "stop"  # the right-hand side wins
    assert (a + b).parts == a.parts + b.parts
    assert Stream(a, stop="tool_use").stop == "tool_use"


def test_builders_reject_impossible_streams() -> None:
    with pytest.raises(ValueError, match="must be the last part"):
        Stream.error("api_error", "x") + Stream.text("after")
    with pytest.raises(ValueError, match="cannot be combined"):
        Stream.raw(b"data: x\n\n") + Stream.text("a")
    with pytest.raises(ValueError, match="at most one of"):
        Fault(drop_after=1, truncate_after=2)
    with pytest.raises(ValueError, match=r"headers_delay must be >= 0, got -1"):
        Fault(headers_delay=-1)
    with pytest.raises(ValueError, match="chunks must be >= 1"):
        Stream.tool_call("f", {}, chunks=0)
    with pytest.raises(ValueError, match="nothing to render"):
        anthropic_events(Stream.raw(b""))


def test_the_facade_exports_are_sorted_and_complete() -> None:
    exported = fake_provider.__all__
    assert list(exported) == sorted(exported)
    # isidentifier: pytest's assertion rewriting (procession is a pytest plugin's
    # distribution) adds "@py_builtins" and "@pytest_ar" to the module.
    public = {
        n for n in vars(fake_provider) if n.isidentifier() and not n.startswith("_")
    }
    assert public - {"annotations"} == set(exported)


def test_the_old_usage_name_is_a_warning_alias_of_token_counts() -> None:
    """``Usage`` (the name until 0.1) still works for one release, warns, and
    is the same class as ``TokenCounts``; it is not ``procession.chunks.Usage``."""
    with pytest.warns(DeprecationWarning, match=r"Usage is renamed TokenCounts"):
        old = fake_provider.Usage
    assert old is TokenCounts
    assert "Usage" not in fake_provider.__all__
    assert TokenCounts.__module__ == "procession.testing.fake_provider"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = fake_provider.Nope
