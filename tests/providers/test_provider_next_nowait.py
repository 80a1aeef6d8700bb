"""``next_nowait`` on the providers' responses: the chunks already decoded from
an earlier read, without reading the connection (issue 10, item 4).

Against the loopback fake server (real clock, bounded by ``trio.fail_after``).
A ``Stream.raw`` of several events joined into one item arrives as one HTTP
chunk, so one read decodes them all: what a burst looks like.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent, ProviderStreamError
from procession.chunks import (
    Chunk,
    ResponseMetadataChunk,
    TextDeltaChunk,
    ToolCallChunk,
    ToolCallInputStreamingEndChunk,
)
from procession.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel
from procession.providers._sse import ProviderResponse
from procession.testing.fake_provider import (
    Fault,
    Stream,
    anthropic_events,
    chat_events,
    open_fake_provider,
    responses_events,
)
from tests.providers.provider_helpers import HI, HTTPCORE_GC_WARNING

pytestmark = HTTPCORE_GC_WARNING

MODELS = [AnthropicModel, OpenAIChatModel, OpenAIResponsesModel]
RENDER: dict[type, Callable[..., list[str]]] = {
    AnthropicModel: anthropic_events,
    OpenAIChatModel: chat_events,
    OpenAIResponsesModel: responses_events,
}
TEXT = Stream.text("a", "b", "c", "d")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def _build(kind: type, base_url: str) -> Any:
    url = base_url if kind is AnthropicModel else base_url + "/v1"
    return kind("m", api_key="k", base_url=url)


def _burst(kind: type, stream: Stream = TEXT) -> Stream:
    """``stream``'s events for ``kind`` as one write (one read decodes all)."""
    return Stream.raw("".join(RENDER[kind](stream, model="m")))


@asynccontextmanager
async def _response(kind: type, *turns: Stream) -> AsyncIterator[Any]:
    """One streamed response of ``kind`` from a server scripted with ``turns``."""
    with trio.fail_after(10):
        async with (
            open_fake_provider(turns) as server,
            _build(kind, server.base_url) as model,
            model.stream(HI) as response,
        ):
            yield response


def _describe(chunks: list[Chunk]) -> list[tuple[str, Any]]:
    """Each chunk's type and text (ids differ from one response to the next)."""
    return [
        (c.type, getattr(getattr(c, "payload", None), "text", None)) for c in chunks
    ]


def _drain_nowait(response: Any) -> list[Chunk]:
    """Every chunk at hand; raises what ``next_nowait`` raises but
    ``WouldBlock`` (then the chunks taken are returned)."""
    taken = []
    while True:
        try:
            taken.append(response.next_nowait())
        except trio.WouldBlock:
            return taken


async def _read_awaited(kind: type) -> list[Chunk]:
    async with _response(kind, _burst(kind)) as response:
        return [chunk async for chunk in response]


@pytest.mark.parametrize("kind", MODELS)
async def test_nothing_is_at_hand_before_the_first_read(kind: type) -> None:
    async with _response(kind, _burst(kind)) as response:
        with pytest.raises(trio.WouldBlock, match=r"^$"):
            response.next_nowait()
        first = await response.__anext__()
        assert isinstance(first, ResponseMetadataChunk)
        rest = [chunk async for chunk in response]
    assert any(isinstance(c, TextDeltaChunk) for c in rest)


@pytest.mark.parametrize("kind", MODELS)
async def test_a_burst_is_taken_without_reading_in_order_to_the_end(
    kind: type,
) -> None:
    expected = await _read_awaited(kind)
    async with _response(kind, _burst(kind)) as response:
        got = [await response.__anext__(), *_drain_nowait(response)]
        # The whole body came in one read: everything but the end is at hand.
        assert _describe(got) == _describe(expected)[: len(got)]
        assert [c.payload.text for c in got if isinstance(c, TextDeltaChunk)] == [
            "a",
            "b",
            "c",
            "d",
        ]
        unfinished = response.finish
        # The end of the body is known only once the connection says so.
        got += [chunk async for chunk in response]
        assert unfinished is None
        assert response.finish is not None
        assert response.finish.finish_reason == "stop"
        with pytest.raises(StopAsyncIteration, match=r"^$"):
            response.next_nowait()
    assert _describe(got) == _describe(expected)


@pytest.mark.parametrize("kind", MODELS)
async def test_reads_of_both_kinds_interleaved_keep_the_order(kind: type) -> None:
    expected = await _read_awaited(kind)
    got: list[Chunk] = []
    async with _response(kind, _burst(kind)) as response:
        awaited = True
        while True:
            if awaited:
                try:
                    got.append(await response.__anext__())
                except StopAsyncIteration:
                    break
            else:
                try:
                    got.append(response.next_nowait())
                except trio.WouldBlock:
                    pass
                except StopAsyncIteration:
                    break
            awaited = not awaited
    assert _describe(got) == _describe(expected)


@pytest.mark.parametrize("kind", MODELS)
async def test_an_event_of_several_chunks_leaves_the_rest_at_hand(
    kind: type,
) -> None:
    # One event per write (the fake server's usual framing); the event that
    # ends a tool call makes two chunks, so the second is at hand.
    call = Stream.tool_call("search", {"q": "x"}, id="call_1")
    async with _response(kind, call) as response:
        chunk = await response.__anext__()
        while not isinstance(chunk, ToolCallInputStreamingEndChunk):
            chunk = await response.__anext__()
        follow = response.next_nowait()
        assert isinstance(follow, ToolCallChunk)
        assert follow.payload.args == {"q": "x"}
        rest = [chunk async for chunk in response]
    assert not any(isinstance(c, ToolCallChunk) for c in rest)


@pytest.mark.parametrize("kind", MODELS)
async def test_a_failure_in_a_burst_is_raised_as_by_the_awaited_read(
    kind: type,
) -> None:
    failing = TEXT + Stream.error("overloaded_error", "busy")
    async with _response(kind, _burst(kind, failing)) as response:
        await response.__anext__()
        with pytest.raises(ProviderStreamError, match="busy"):
            _drain_nowait(response)
        # The stream is over, however it is read.
        with pytest.raises(StopAsyncIteration, match=r"^$"):
            response.next_nowait()
        with pytest.raises(StopAsyncIteration, match=r"^$"):
            await response.__anext__()


async def test_data_that_is_not_json_fails_the_stream_from_next_nowait() -> None:
    events = anthropic_events(TEXT, model="m")
    broken = [*events[:2], "event: content_block_delta\ndata: {nope\n\n"]
    async with _response(AnthropicModel, Stream.raw("".join(broken))) as response:
        await response.__anext__()
        with pytest.raises(ProviderStreamError, match="data is not JSON") as info:
            _drain_nowait(response)
    assert info.value.code == "invalid_response"


@pytest.mark.parametrize("kind", MODELS)
async def test_a_closed_response_gives_nothing_at_hand(kind: type) -> None:
    async with _response(kind, _burst(kind)) as response:
        await response.__anext__()
    with pytest.raises(trio.WouldBlock, match=r"^$"):
        response.next_nowait()  # __anext__ says why
    with pytest.raises(trio.ClosedResourceError, match="after its 'async with'"):
        await response.__anext__()


@pytest.mark.parametrize("kind", MODELS)
@pytest.mark.parametrize("burst", [False, True], ids=["per-event", "burst"])
async def test_an_agent_run_reads_the_same_chunks_inline_or_awaited(
    kind: type, burst: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def run(model: Any) -> list[tuple[str, Any]]:
        agent = Agent(id="a", model=model, execution_mode="fused")
        async with agent.stream("hi") as stream:
            return _describe([chunk async for chunk in stream])

    turn = _burst(kind) if burst else TEXT
    with trio.fail_after(10):
        async with (
            open_fake_provider([turn, turn]) as server,
            _build(kind, server.base_url) as model,
        ):
            inline = await run(model)
            # Without next_nowait the run awaits every chunk.
            monkeypatch.setattr(ProviderResponse, "next_nowait", None)
            awaited = await run(model)
    assert inline == awaited
    assert ("text-delta", "d") in inline


@pytest.mark.parametrize("kind", MODELS)
async def test_reads_cancelled_while_the_provider_waits_lose_nothing(
    kind: type,
) -> None:
    # The server pauses between events; whenever every task is parked there
    # (the run awaiting the socket, the consumer waiting for the hand-over) the
    # consumer's read is cancelled, as a heartbeat timeout would. Had that
    # reached the HTTP stream, the text would end there.
    pieces = ("a", "b", "c", "d", "e")
    paced = Stream.text(*pieces, fault=Fault(delay_between_events=0.005))
    got: list[str] = []
    cancelled = 0

    async def read_once(reader: Any, scope: trio.CancelScope) -> bool:
        """Read one chunk (False at the end); cancel ``scope`` if all park."""
        async with trio.open_nursery() as nursery:

            async def heartbeat() -> None:
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()

            nursery.start_soon(heartbeat)
            try:
                chunk = await reader.__anext__()
            except StopAsyncIteration:
                return False
            finally:
                nursery.cancel_scope.cancel()
            if isinstance(chunk, TextDeltaChunk):
                got.append(chunk.payload.text)
            return True

    with trio.fail_after(10):
        async with (
            open_fake_provider([paced]) as server,
            _build(kind, server.base_url) as model,
        ):
            agent = Agent(id="a", model=model, execution_mode="fused")
            async with agent.stream("hi") as stream:
                reader = stream.__aiter__()
                going = True
                while going:
                    with trio.CancelScope() as scope:
                        going = await read_once(reader, scope)
                    cancelled += scope.cancelled_caught
                result = await stream.result()
    assert "".join(got) == "".join(pieces)
    assert result.text == "".join(pieces)
    assert result.finish_reason == "stop"
    assert cancelled >= len(pieces)  # at least one pause per delta
