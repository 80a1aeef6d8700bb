"""Streaming done right, in-process: a disconnect cancels the run and stops
the model read; a client that stops reading stalls the model; keepalives
while idle; the cancel route; a graceful shutdown."""

from __future__ import annotations

from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from procession.actors._pipeline import AT_HAND
from procession.chunks import TextDeltaChunk, TextDeltaPayload
from procession.server import KEEPALIVE_FRAME, create_app
from procession.testing import Delay, ScriptedModel
from tests.server.server_helpers import make_agent, open_exchange, request, sse_events


def _slow_turn(words: int, every: float = 1.0) -> list[Any]:
    """``words`` deltas, ``every`` seconds apart (on trio's clock)."""
    items: list[Any] = []
    for i in range(words):
        items += [
            Delay(every),
            TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} ")),
        ]
    return items


def _body(**extra: Any) -> dict[str, Any]:
    return {"messages": "Hi", **extra}


async def _read_until(exchange: Any, needle: bytes) -> None:
    while needle not in exchange.body:
        part = await exchange.next_part()
        assert part is not None, f"the stream ended before {needle!r}"


async def test_disconnect_cancels_the_run_and_the_model_read(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(100)])
    app = create_app([make_agent(model)])
    async with open_exchange(
        app, "POST", "/api/agents/helper/stream", json_body=_body(runId="r-gone")
    ) as exchange:
        await _read_until(exchange, b'"w2 "')
        assert app.runs.streams.keys() == {"run:*:r-gone"}
        await exchange.disconnect()
        async for _part in _drain(exchange):
            pass
    call = model.calls[0]
    assert call.closed_early
    assert call.chunks_streamed < 10  # not the 100 the script has
    assert app.runs.streams == {}
    assert app.runs.reserved == 0
    assert b"[DONE]" not in exchange.body


async def _drain(exchange: Any) -> Any:
    while (part := await exchange.next_part()) is not None:
        yield part


async def test_a_client_that_stops_reading_stalls_the_model() -> None:
    deltas = [
        TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} "))
        for i in range(200)
    ]
    model = ScriptedModel([deltas])
    app = create_app([make_agent(model)], keepalive_s=0)
    async with open_exchange(
        app, "POST", "/api/agents/helper/stream", json_body=_body()
    ) as exchange:
        await _read_until(exchange, b'"w3 "')
        await trio.testing.wait_all_tasks_blocked()
        held = model.calls[0].chunks_streamed
        # One frame in the blocked send, one chunk with the writer, one with
        # the reader, and the batch of chunks at hand an unsplit adaptive run
        # takes at once (AT_HAND): a handful, never the 200 the model has ready.
        assert held <= 4 + 4 + AT_HAND, held
        await trio.testing.wait_all_tasks_blocked()
        assert model.calls[0].chunks_streamed == held  # still stalled
        await exchange.read_all()
    assert model.calls[0].chunks_streamed == 200
    assert sse_events(exchange.body)[-1] == "[DONE]"


async def test_keepalive_comments_while_idle(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(1, every=50)])
    app = create_app([make_agent(model)], keepalive_s=15)
    exchange = await request(
        app, "POST", "/api/agents/helper/stream", json_body=_body()
    )
    before_delta = exchange.body.split(b'"w0 "')[0]
    assert before_delta.count(KEEPALIVE_FRAME) == 3  # at 15, 30 and 45 s
    assert sse_events(exchange.body)[-1] == "[DONE]"


async def test_the_cancel_route_ends_the_stream_with_abort(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(100)])
    app = create_app([make_agent(model)])
    async with open_exchange(
        app, "POST", "/api/agents/helper/stream", json_body=_body(runId="r-9")
    ) as exchange:
        await _read_until(exchange, b'"w1 "')
        cancelled = await request(app, "POST", "/api/agents/helper/runs/r-9/cancel")
        assert cancelled.status == 200
        assert cancelled.json() == {"message": "Run cancelled", "runId": "r-9"}
        await exchange.read_all()
    events = sse_events(exchange.body)
    assert events[-2]["type"] == "abort"
    assert events[-1] == "[DONE]"
    assert model.calls[0].closed_early
    missing = await request(app, "POST", "/api/agents/helper/runs/r-9/cancel")
    assert missing.status == 404


async def test_shutdown_ends_open_streams_with_a_final_chunk(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(100), _slow_turn(100)])
    app = create_app([make_agent(model)])
    async with (
        open_exchange(
            app, "POST", "/api/agents/helper/stream", json_body=_body()
        ) as mastra,
        open_exchange(app, "POST", "/api/chat", json_body=_body()) as chat,
    ):
        await _read_until(mastra, b'"w1 "')
        await _read_until(chat, b'"w1 "')
        app.begin_shutdown()
        await mastra.read_all()
        await chat.read_all()
    assert [
        e if e == "[DONE]" else e["type"] for e in sse_events(mastra.body)[-2:]
    ] == [
        "abort",
        "[DONE]",
    ]
    assert sse_events(chat.body)[-2:] == [{"type": "abort"}, "[DONE]"]
    assert all(call.closed_early for call in model.calls)


async def test_disconnect_during_generate_cancels_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(100)])
    app = create_app([make_agent(model)])
    inbox: list[dict[str, Any]] = [
        {"type": "http.request", "body": b'{"messages": "Hi"}', "more_body": False}
    ]
    gone = trio.Event()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if inbox:
            return inbox.pop(0)
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    async def serve_one() -> None:
        await app(scope, receive, send)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/agents/helper/generate",
        "headers": [(b"content-type", b"application/json")],
    }
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_one)
        await trio.sleep(3.5)  # three deltas in
        gone.set()
    assert model.calls[0].closed_early
    assert model.calls[0].chunks_streamed == 3
    assert sent == []  # nobody to answer
    assert app.runs.reserved == 0


class _SlowToClose:
    """A model whose response takes 30 s to close once read (a provider's
    connection closing slowly), shielded as a real close would be."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.model_id = inner.model_id

    def stream(self, request: Any) -> Any:
        @asynccontextmanager
        async def response() -> AsyncIterator[Any]:
            async with self.inner.stream(request) as inner:
                try:
                    yield inner
                finally:
                    with trio.CancelScope(shield=True):
                        await trio.sleep(30)

        return response()


async def test_a_run_id_is_free_once_its_body_ended_while_the_run_still_closes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([["one"], _slow_turn(100), ["three"]])
    app = create_app([make_agent(_SlowToClose(model))])
    stream = "/api/agents/helper/stream"
    with trio.fail_after(300):
        async with open_exchange(
            app, "POST", stream, json_body=_body(runId="r-closing")
        ) as done:
            await done.read_all()
            assert b"data: [DONE]" in done.body
            began = trio.current_time()
            await trio.testing.wait_all_tasks_blocked()  # the app went on
            # The app has not returned: the model's response is closing.
            assert app.runs.streams == {}
            cancel = await request(
                app, "POST", "/api/agents/helper/runs/r-closing/cancel"
            )
            assert cancel.status == 404, cancel.body
            async with open_exchange(
                app, "POST", stream, json_body=_body(runId="r-closing")
            ) as again:
                assert again.status == 200, again.body
                await _read_until(again, b'"w1 "')
                await again.disconnect()
                # Gone mid-body: the id is free at once, though this run
                # closes for 30 s too (and the first one still closes).
                await trio.testing.wait_all_tasks_blocked()
                assert app.runs.streams == {}
                assert trio.current_time() - began < 30
                third = await request(
                    app, "POST", stream, json_body=_body(runId="r-closing")
                )
                assert third.status == 200, third.body
                assert b"three" in third.body
