"""Stopping an AI SDK chat (``POST /api/chat/{id}/stop``, the stop endpoint of
the AI SDK's guide to resumable chats: ``chat.stop()`` only drops the
connection, which a resumable run outlives), in one process; across replicas
in ``test_server_redis_replicas.py``."""

from __future__ import annotations

import re
from typing import Any

import trio
import trio.testing

from procession.chunks import TextDeltaChunk, TextDeltaPayload
from procession.server import create_app
from procession.testing import Delay, ScriptedModel
from tests.server.server_helpers import make_agent, open_exchange, request, sse_events

MESSAGE = {"role": "user", "content": "Hi"}


def _slow_turn(words: int) -> list[Any]:
    items: list[Any] = []
    for i in range(words):
        items += [
            Delay(1.0),
            TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} ")),
        ]
    return items


def _types(body: bytes) -> list[str]:
    events = sse_events(re.sub(rb"id: [0-9-]+\n", b"", body))
    return [e if isinstance(e, str) else e["type"] for e in events]


async def test_a_stop_ends_a_chat_run_its_client_left(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(100)])
    app = create_app([make_agent(model)], resume=True, keepalive_s=0)
    chat = {"id": "c-stop", "messages": [MESSAGE]}
    async with open_exchange(app, "POST", "/api/chat", json_body=chat) as first:
        while b'"w2 "' not in first.body:
            assert await first.next_part() is not None
        await first.disconnect()
        await trio.sleep(3)  # the run outlives its client...
        running = not model.calls[0].closed_early
        stopped = await request(app, "POST", "/api/chat/c-stop/stop", json_body={})
        # ...until the stop: what a resumer reads then is the run's end.
        resumed = await request(app, "GET", "/api/chat/c-stop/stream")
    assert running
    assert stopped.status == 200
    assert stopped.json() == {"success": True, "stopped": True}
    assert model.calls[0].closed_early
    assert _types(resumed.body)[-2:] == ["abort", "[DONE]"]
    assert trio.current_time() < 20  # long before the run's 100 s


async def test_a_stop_for_a_chat_that_is_not_running_is_no_error() -> None:
    for app in (
        create_app([make_agent(ScriptedModel([]))], resume=True),
        create_app([make_agent(ScriptedModel([]))]),
    ):
        stopped = await request(app, "POST", "/api/chat/nope/stop")
        assert stopped.status == 200
        assert stopped.json() == {"success": True, "stopped": False}
        wrong = await request(app, "GET", "/api/chat/nope/stop")
        assert wrong.status == 405


async def test_without_resume_a_stop_still_ends_the_chat_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([_slow_turn(100)])
    app = create_app([make_agent(model)], keepalive_s=0)
    chat = {"id": "c-plain", "messages": [MESSAGE]}
    async with open_exchange(app, "POST", "/api/chat", json_body=chat) as first:
        while b'"w2 "' not in first.body:
            assert await first.next_part() is not None
        stopped = await request(app, "POST", "/api/chat/c-plain/stop")
        await first.read_all()
    assert stopped.json() == {"success": True, "stopped": True}
    assert _types(first.body)[-2:] == ["abort", "[DONE]"]
