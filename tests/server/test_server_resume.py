"""Resume in one process (``create_app(resume=True)``): a run outlives the
client that left, until it ends, is cancelled, or ``resume_grace_s`` passes
with nobody attached; a resumer replays what it missed (``Last-Event-ID``)
and follows the live run; behind the bounded buffer it gets a typed error
frame, never a silent gap."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import trio
import trio.testing

from procession import ConfigurationError
from procession.actors._pipeline import AT_HAND
from procession.chunks import TextDeltaChunk, TextDeltaPayload
from procession.server import (
    GAP_ERROR_NAME,
    InProcessRunBus,
    ReplayGap,
    create_app,
)
from procession.testing import Delay, ScriptedModel
from tests.server.server_helpers import make_agent, open_exchange, request, sse_events

_FRAME = re.compile(rb"id: (\d+)\ndata: ([^\n]*)\n\n")


def _slow_turn(words: int, every: float = 1.0) -> list[Any]:
    items: list[Any] = []
    for i in range(words):
        items += [
            Delay(every),
            TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} ")),
        ]
    return items


def frames(body: bytes) -> list[tuple[int, Any]]:
    """``(id, data)`` of every frame; every data frame must have an id."""
    found = [
        (int(seq), data.decode() if data == b"[DONE]" else json.loads(data))
        for seq, data in _FRAME.findall(body)
    ]
    assert len(found) == body.count(b"data: "), body
    return found


def _text(items: list[tuple[int, Any]]) -> str:
    return "".join(
        d["payload"]["text"]
        for _, d in items
        if isinstance(d, dict) and d["type"] == "text-delta"
    )


async def _read_until(exchange: Any, needle: bytes) -> None:
    while needle not in exchange.body:
        assert await exchange.next_part() is not None, needle


async def test_a_resumer_gets_what_it_missed_then_the_live_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(20)])
    app = create_app([make_agent(model)], resume=True, keepalive_s=0)
    body = {"messages": "Hi", "runId": "r-1"}
    async with open_exchange(
        app, "POST", "/api/agents/helper/stream", json_body=body
    ) as first:
        await _read_until(first, b'"w3 "')
        await first.disconnect()
        seen = frames(first.body)
        await trio.sleep(5)  # the run goes on with nobody attached
        assert not model.calls[0].closed_early
        async with open_exchange(
            app,
            "GET",
            "/api/agents/helper/runs/r-1/stream",
            headers={"last-event-id": str(seen[-1][0])},
        ) as second:
            assert second.status == 200
            assert second.headers["content-type"] == "text/event-stream"
            await second.read_all()
    rest = frames(second.body)
    ids = [seq for seq, _ in seen + rest]
    assert ids == list(range(1, len(ids) + 1))  # no gap, no repeat
    assert _text(seen + rest) == "".join(f"w{i} " for i in range(20))
    assert rest[-1][1] == "[DONE]"
    assert not model.calls[0].closed_early
    assert app.runs.streams == {}
    assert app.bus is not None
    assert await app.bus.find("run:r-1") is None


async def test_a_run_nobody_comes_back_to_is_cancelled_after_the_grace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(100)])
    app = create_app([make_agent(model)], resume=True, resume_grace_s=10)
    async with open_exchange(
        app, "POST", "/api/agents/helper/stream", json_body={"messages": "Hi"}
    ) as first:
        await _read_until(first, b'"w1 "')
        start = trio.current_time()
        await first.disconnect()
    # Leaving the block waited for the app: the run ended.
    waited = trio.current_time() - start
    assert 10 <= waited <= 12
    assert app.runs.streams == {}
    assert model.calls[0].closed_early
    assert model.calls[0].chunks_streamed < 20
    assert app.runs.reserved == 0


async def test_an_explicit_cancel_ends_a_detached_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(100)])
    app = create_app([make_agent(model)], resume=True)
    async with open_exchange(
        app,
        "POST",
        "/api/agents/helper/stream",
        json_body={"messages": "Hi", "runId": "r-2"},
    ) as first:
        await _read_until(first, b'"w1 "')
        await first.disconnect()
        cancelled = await request(app, "POST", "/api/agents/helper/runs/r-2/cancel")
        assert cancelled.status == 200
    assert app.runs.streams == {}
    assert model.calls[0].closed_early
    gone = await request(app, "GET", "/api/agents/helper/runs/r-2/stream")
    assert gone.status == 404


async def test_a_resumer_behind_the_buffer_gets_a_typed_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(100)])
    app = create_app([make_agent(model)], resume=True, resume_buffer_frames=8)
    async with open_exchange(
        app,
        "POST",
        "/api/agents/helper/stream",
        json_body={"messages": "Hi", "runId": "r-3"},
    ) as first:
        await _read_until(first, b'"w1 "')
        await first.disconnect()
        last = frames(first.body)[-1][0]
        await trio.sleep(20)  # twenty more frames: the buffer holds 8
        behind = await request(
            app,
            "GET",
            "/api/agents/helper/runs/r-3/stream",
            headers={"last-event-id": str(last)},
        )
        await request(app, "POST", "/api/agents/helper/runs/r-3/cancel")
    events = sse_events(behind.body)
    assert len(events) == 1, events
    error = events[0]["payload"]["error"]
    assert error["name"] == GAP_ERROR_NAME
    assert f"cannot resume from frame {last + 1}" in error["message"]
    assert b"[DONE]" not in behind.body


async def test_the_chat_stream_resumes_and_is_204_when_nothing_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(10)])
    app = create_app([make_agent(model)], resume=True, keepalive_s=0)
    nothing = await request(app, "GET", "/api/chat/c-1/stream")
    assert nothing.status == 204
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
    async with open_exchange(
        app, "POST", "/api/chat", json_body={"id": "c-1", "messages": [message]}
    ) as first:
        await _read_until(first, b'"w2 "')
        await first.disconnect()
        again = await request(app, "GET", "/api/chat/c-1/stream")
    assert again.status == 200
    assert again.headers["x-vercel-ai-ui-message-stream"] == "v1"
    replay = frames(again.body)  # everything, from frame 1
    assert [seq for seq, _ in replay] == list(range(1, len(replay) + 1))
    assert replay[0][1]["type"] == "start"
    assert re.fullmatch(r"run-[0-9a-f]{32}", replay[0][1]["messageId"])
    assert replay[-1][1] == "[DONE]"
    deltas = "".join(
        d["delta"] for _, d in replay if isinstance(d, dict) and "delta" in d
    )
    assert deltas == "".join(f"w{i} " for i in range(10))
    assert (await request(app, "GET", "/api/chat/c-1/stream")).status == 204


async def test_without_resume_a_disconnect_cancels_and_nothing_resumes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(100)])
    app = create_app([make_agent(model)])
    assert app.bus is None
    async with open_exchange(
        app,
        "POST",
        "/api/agents/helper/stream",
        json_body={"messages": "Hi", "runId": "r-4"},
    ) as first:
        await _read_until(first, b'"w1 "')
        assert b"id: " not in first.body  # no ids without resume
    assert model.calls[0].closed_early
    assert (
        await request(app, "GET", "/api/agents/helper/runs/r-4/stream")
    ).status == 404
    assert (await request(app, "GET", "/api/chat/x/stream")).status == 204


async def test_a_bad_last_event_id_is_a_400(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(100)])
    app = create_app([make_agent(model)], resume=True)
    async with open_exchange(
        app,
        "POST",
        "/api/agents/helper/stream",
        json_body={"messages": "Hi", "runId": "r-5"},
    ) as first:
        await _read_until(first, b'"w0 "')
        bad = await request(
            app,
            "GET",
            "/api/agents/helper/runs/r-5/stream",
            headers={"last-event-id": "soon"},
        )
        await request(app, "POST", "/api/agents/helper/runs/r-5/cancel")
    assert bad.status == 400
    assert "Last-Event-ID" in bad.json()["error"]


async def test_an_attached_slow_client_holds_the_run_back() -> None:
    deltas = [
        TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} "))
        for i in range(200)
    ]
    model = ScriptedModel([deltas])
    app = create_app(
        [make_agent(model)], resume=True, resume_buffer_frames=16, keepalive_s=0
    )
    async with open_exchange(
        app, "POST", "/api/agents/helper/stream", json_body={"messages": "Hi"}
    ) as exchange:
        await _read_until(exchange, b'"w3 "')
        await trio.testing.wait_all_tasks_blocked()
        held = model.calls[0].chunks_streamed
        # The buffer (16 frames), a chunk in hand at each stage, and the chunks
        # at hand an unsplit adaptive run takes in one batch (AT_HAND).
        assert held <= 16 + 8 + AT_HAND, held
        await exchange.read_all()
    assert model.calls[0].chunks_streamed == 200
    assert frames(exchange.body)[-1][1] == "[DONE]"


async def test_the_in_process_bus_refuses_a_key_in_use_and_reports_gaps() -> None:
    bus = InProcessRunBus(buffer_frames=2)
    log = bus.open("run:x")
    with pytest.raises(KeyError, match="run:x"):
        bus.open("run:x")
    for frame in (b"a", b"b", b"c"):
        await log.publish(frame)
    async with log.attach(0) as late:
        with pytest.raises(ReplayGap, match="buffer starts at frame 2"):
            await late.receive()
    async with log.attach(1) as fine:
        assert await fine.receive() == (2, b"b")
        log.close()
        assert await fine.receive() == (3, b"c")
        with pytest.raises(trio.EndOfChannel, match=r"^$"):
            await fine.receive()


def test_resume_options_are_checked() -> None:
    agent = make_agent(ScriptedModel([]))
    with pytest.raises(ConfigurationError, match="resume_grace_s"):
        create_app([agent], resume=True, resume_grace_s=-1)
    with pytest.raises(ConfigurationError, match="resume_buffer_frames"):
        create_app([agent], resume=True, resume_buffer_frames=0)
    with pytest.raises(ConfigurationError, match="resume must be"):
        create_app([agent], resume="yes")  # type: ignore[arg-type]
