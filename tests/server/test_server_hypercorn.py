"""A real server: hypercorn's trio worker on a free loopback port, driven by
httpx2 (on the real clock)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import trio

from procession.chunks import TextDeltaChunk, TextDeltaPayload
from procession.server import ProcessionApp, create_app, serve
from procession.testing import Delay, ScriptedModel
from tests.server.server_helpers import make_agent


@asynccontextmanager
async def running(app: ProcessionApp) -> AsyncIterator[tuple[str, trio.Event]]:
    """Serve ``app`` on 127.0.0.1:<free port>; yields the base URL and the
    event that shuts the server down."""
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            lambda task_status: serve(
                app, port=0, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        try:
            yield urls[0], stop
        finally:
            stop.set()


async def _eventually(condition: Callable[[], bool]) -> None:
    """Wait (5 s at most) until ``condition()``: it reads state the server
    task updates, with no event to wait on, so poll it."""
    with trio.fail_after(5):
        while not condition():  # noqa: ASYNC110 - no event exists for this
            await trio.sleep(0.01)


def _slow(words: int, every: float) -> list[Any]:
    items: list[Any] = []
    for i in range(words):
        items += [
            Delay(every),
            TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} ")),
        ]
    return items


async def _events(response: httpx2.Response) -> AsyncIterator[Any]:
    async for line in response.aiter_lines():
        if line.startswith("data: "):
            data = line[len("data: ") :]
            yield data if data == "[DONE]" else json.loads(data)


async def test_streams_both_protocols_over_http() -> None:
    app = create_app([make_agent(["Hello over HTTP.", "Hello again."])])
    async with running(app) as (base, _stop), httpx2.AsyncClient(timeout=5) as client:
        async with client.stream(
            "POST", f"{base}/api/agents/helper/stream", json={"messages": "Hi"}
        ) as response:
            assert response.status_code == 200
            assert response.headers["content-type"] == "text/event-stream"
            events = [e async for e in _events(response)]
        assert events[-1] == "[DONE]"
        text = "".join(
            e["payload"]["text"] for e in events[:-1] if e["type"] == "text-delta"
        )
        assert text == "Hello over HTTP."
        async with client.stream(
            "POST",
            f"{base}/api/chat",
            json={"id": "c", "messages": [{"role": "user", "content": "Hi"}]},
        ) as response:
            assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
            assert response.headers["x-accel-buffering"] == "no"
            ui = [e async for e in _events(response)]
        assert ui[-2:] == [{"type": "finish", "finishReason": "stop"}, "[DONE]"]


async def test_a_client_disconnect_cancels_the_run_over_http() -> None:
    model = ScriptedModel([_slow(200, every=0.02)])
    app = create_app([make_agent(model)])
    async with running(app) as (base, _stop):
        host, port = base.removeprefix("http://").rsplit(":", 1)
        # A raw socket, so the test decides exactly when the client leaves.
        sock = await trio.open_tcp_stream(host, int(port))
        body = b'{"messages": "Hi"}'
        await sock.send_all(
            b"POST /api/agents/helper/stream HTTP/1.1\r\nhost: x\r\n"
            b"content-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        received = b""
        with trio.fail_after(5):
            while received.count(b'"text-delta"') < 3:
                received += await sock.receive_some(65536)
        await sock.aclose()
        await _eventually(lambda: model.calls[0].closed_early)
        streamed = model.calls[0].chunks_streamed
        await trio.sleep(0.2)  # ten more deltas' time: nothing more is read
        assert model.calls[0].chunks_streamed == streamed < 50
        await _eventually(lambda: app.runs.reserved == 0)


async def test_auth_over_http() -> None:
    app = create_app([make_agent(["x"])], tokens=["s3cret"])
    async with running(app) as (base, _stop), httpx2.AsyncClient(timeout=5) as client:
        bare = await client.get(f"{base}/api/agents")
        assert bare.status_code == 401
        ok = await client.get(
            f"{base}/api/agents", headers={"authorization": "Bearer s3cret"}
        )
        assert ok.status_code == 200
        assert list(ok.json()) == ["helper"]


async def test_graceful_shutdown_over_http() -> None:
    model = ScriptedModel([_slow(500, every=0.02)])
    app = create_app([make_agent(model)])
    async with (
        running(app) as (base, stop),
        httpx2.AsyncClient(timeout=5) as client,
        client.stream(
            "POST", f"{base}/api/agents/helper/stream", json={"messages": "Hi"}
        ) as response,
    ):
        events = []
        async for event in _events(response):
            events.append(event)
            if len(events) == 5:
                stop.set()
    assert events[-1] == "[DONE]"
    assert events[-2]["type"] == "abort"
    assert model.calls[0].closed_early


async def test_a_dropped_connection_resumes_over_http() -> None:
    # Resume on: the client's connection closes mid-stream; the run goes on
    # in the server; a new connection with Last-Event-ID gets the rest.
    model = ScriptedModel([_slow(30, every=0.02)])
    app = create_app([make_agent(model)], resume=True, keepalive_s=0)
    async with running(app) as (base, _stop), httpx2.AsyncClient(timeout=5) as client:
        host, port = base.removeprefix("http://").rsplit(":", 1)
        # A raw socket, so the test decides exactly when the client leaves.
        sock = await trio.open_tcp_stream(host, int(port))
        body = b'{"messages": "Hi", "runId": "r-http"}'
        await sock.send_all(
            b"POST /api/agents/helper/stream HTTP/1.1\r\nhost: x\r\n"
            b"content-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        )
        received = b""
        with trio.fail_after(5):
            while received.count(b'"text-delta"') < 3:
                received += await sock.receive_some(65536)
        await sock.aclose()
        # Each frame is one HTTP chunk: whole between the chunk-size lines.
        frames = re.findall(rb"id: (\d+)\ndata: ([^\n]*)\n\n", received)
        last_id = int(frames[-1][0])
        seen = [
            json.loads(data)["payload"]["text"]
            for _seq, data in frames
            if b'"text-delta"' in data
        ]
        async with client.stream(
            "GET",
            f"{base}/api/agents/helper/runs/r-http/stream",
            headers={"last-event-id": str(last_id)},
        ) as response:
            assert response.status_code == 200
            events = [e async for e in _events(response)]
    assert events[-1] == "[DONE]"
    rest = [e["payload"]["text"] for e in events[:-1] if e["type"] == "text-delta"]
    assert "".join(seen + rest) == "".join(f"w{i} " for i in range(30))
    assert not model.calls[0].closed_early
