"""A paused run's continuation is published under the same run on the bus
(in one process here, ``InProcessRunBus``; across replicas on Redis in
``test_server_approval_replicas.py``): a follower of the run (``GET
/api/agents/{id}/runs/{runId}/stream``, ``GET /api/chat/{id}/stream``)
reads the continuation an answer started in another request, with the run's
id and its frame ids numbered on from the pause; a cancel through the run's
route reaches it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import trio

from procession.memory import SqliteStorage
from procession.server import create_app
from tests.server.clerk_target import clerk
from tests.server.server_helpers import open_exchange, request

pytestmark = pytest.mark.procession_real_clock

_FRAME = re.compile(rb"id: (\d+)\ndata: ([^\n]*)\n\n")
THREAD = {"thread": "t-1", "resource": "ada"}


def frames(body: bytes) -> list[tuple[int, Any]]:
    """``(id, data)`` of every frame; every data frame must have an id."""
    found = [
        (int(seq), data.decode() if data == b"[DONE]" else json.loads(data))
        for seq, data in _FRAME.findall(body)
    ]
    assert len(found) == body.count(b"data: "), body
    return found


def _types(items: list[tuple[int, Any]]) -> list[str]:
    return [d if isinstance(d, str) else d["type"] for _, d in items]


class Gate:
    """The tool's execution waits here: the continuation stays live (its
    log open) until the test opens it."""

    def __init__(self) -> None:
        self.opened = trio.Event()
        self.entered = trio.Event()
        self.executed: list[int] = []

    async def wait(self, record: int) -> None:
        self.executed.append(record)
        self.entered.set()
        await self.opened.wait()


def _app(tmp_path: Path, gate: Gate) -> Any:
    agent = clerk(SqliteStorage(tmp_path / "m.db"), gate.wait, slow_words=5)
    return create_app([agent], resume=True, keepalive_s=0)


async def test_a_follower_reads_the_continuation_an_answer_started(
    tmp_path: Path,
) -> None:
    gate = Gate()
    app = _app(tmp_path, gate)
    paused = await request(
        app,
        "POST",
        "/api/agents/clerk/stream",
        json_body={"messages": "delete 42", "memory": THREAD},
    )
    pause = frames(paused.body)
    assert _types(pause)[-2:] == ["tool-call-approval", "[DONE]"]
    run_id, call = pause[-2][1]["runId"], pause[-2][1]["payload"]["toolCallId"]
    follow = f"/api/agents/clerk/runs/{run_id}/stream"
    # Paused, nothing runs under the run: nothing to follow (its log ended
    # and, in one process, is forgotten).
    assert (await request(app, "GET", follow)).status == 404
    answer_body = {"runId": run_id, "toolCallId": call}
    async with (
        open_exchange(
            app, "POST", "/api/agents/clerk/approve-tool-call", json_body=answer_body
        ) as answer,
        open_exchange(
            app, "GET", follow, headers={"last-event-id": str(pause[-1][0])}
        ) as after_pause,
        open_exchange(app, "GET", follow) as fresh,
    ):
        assert (answer.status, after_pause.status, fresh.status) == (200, 200, 200)
        with trio.fail_after(10):
            await gate.entered.wait()  # the tool runs; the log stays open
        gate.opened.set()
        bodies = [await e.read_all() for e in (answer, after_pause, fresh)]
    answered, *followed = (frames(body) for body in bodies)
    assert followed == [answered, answered]
    assert _types(answered)[:2] == ["tool-result", "step-finish"]
    assert _types(answered)[-2:] == ["finish", "[DONE]"]
    assert [seq for seq, _ in answered] == list(
        range(pause[-1][0] + 1, pause[-1][0] + 1 + len(answered))
    )  # numbered on from the pause
    assert {d["runId"] for _, d in pause + answered if isinstance(d, dict)} == {run_id}
    text = "".join(
        d["payload"]["text"]
        for _, d in answered
        if d != "[DONE]" and "text" in d.get("payload", {})
    )
    assert text == "w0 w1 w2 w3 w4 "
    again = await request(
        app, "POST", "/api/agents/clerk/approve-tool-call", json_body=answer_body
    )
    assert again.status == 409
    assert gate.executed == [42]


async def test_a_cancel_of_the_run_reaches_its_continuation(tmp_path: Path) -> None:
    gate = Gate()
    app = _app(tmp_path, gate)
    paused = await request(
        app,
        "POST",
        "/api/agents/clerk/stream",
        json_body={"messages": "delete 42", "memory": THREAD},
    )
    waiting = frames(paused.body)[-2][1]
    run_id = waiting["runId"]
    async with open_exchange(
        app,
        "POST",
        "/api/agents/clerk/approve-tool-call",
        json_body={"runId": run_id, "toolCallId": waiting["payload"]["toolCallId"]},
    ) as answer:
        cancelled = await request(
            app, "POST", f"/api/agents/clerk/runs/{run_id}/cancel"
        )
        body = await answer.read_all()
    assert cancelled.status == 200
    assert cancelled.json() == {"message": "Run cancelled", "runId": run_id}
    assert _types(frames(body))[-2:] == ["abort", "[DONE]"]


async def test_a_chat_follower_reads_the_continuation(tmp_path: Path) -> None:
    gate = Gate()
    app = _app(tmp_path, gate)
    chat = {
        "id": "chat-1",
        "messages": [
            {
                "id": "u1",
                "role": "user",
                "parts": [{"type": "text", "text": "delete 42"}],
            }
        ],
        "memory": THREAD,
    }
    paused = frames((await request(app, "POST", "/api/chat", json_body=chat)).body)
    [asked] = [
        d
        for _, d in paused
        if isinstance(d, dict) and d["type"] == "tool-approval-request"
    ]
    message_id = next(
        d["messageId"]
        for _, d in paused
        if isinstance(d, dict) and d["type"] == "start"
    )
    answer = {
        **chat,
        "messages": [
            *chat["messages"],
            {
                "id": message_id,
                "role": "assistant",
                "parts": [
                    {
                        "type": "tool-delete_record",
                        "toolCallId": asked["toolCallId"],
                        "state": "approval-responded",
                        "input": {"id": 42},
                        "approval": {"id": asked["approvalId"], "approved": True},
                    }
                ],
            },
        ],
    }
    async with (
        open_exchange(app, "POST", "/api/chat", json_body=answer) as answering,
        open_exchange(
            app,
            "GET",
            "/api/chat/chat-1/stream",
            headers={"last-event-id": str(paused[-1][0])},
        ) as following,
    ):
        assert following.status == 200
        gate.opened.set()
        answered = frames(await answering.read_all())
        followed = frames(await following.read_all())
    assert followed == answered
    assert answered[0][0] == paused[-1][0] + 1
    assert _types(answered)[0] == "tool-output-available"
    assert _types(answered)[-1] == "[DONE]"
    assert gate.executed == [42]
    nothing = await request(app, "GET", "/api/chat/chat-1/stream")
    assert nothing.status == 204  # ended: forgotten in one process


async def test_a_follower_reads_a_continuation_a_generate_answer_started(
    tmp_path: Path,
) -> None:
    """``approve-tool-call-generate`` answers with JSON, and its continuation
    is published under the run all the same: a follower reads it, numbered on
    from the pause, and a cancel would reach it (it is registered)."""
    gate = Gate()
    app = _app(tmp_path, gate)
    paused = await request(
        app,
        "POST",
        "/api/agents/clerk/stream",
        json_body={"messages": "delete 42", "memory": THREAD},
    )
    pause = frames(paused.body)
    run_id, call = pause[-2][1]["runId"], pause[-2][1]["payload"]["toolCallId"]
    follow = f"/api/agents/clerk/runs/{run_id}/stream"
    answers: list[Any] = []

    async def answer() -> None:
        answers.append(
            await request(
                app,
                "POST",
                "/api/agents/clerk/approve-tool-call-generate",
                json_body={"runId": run_id, "toolCallId": call},
            )
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer)
        with trio.fail_after(10):
            await gate.entered.wait()  # the tool runs; the log is open
        async with open_exchange(
            app, "GET", follow, headers={"last-event-id": str(pause[-1][0])}
        ) as follower:
            assert follower.status == 200
            gate.opened.set()
            body = await follower.read_all()
    followed = frames(body)
    (answered,) = answers
    assert answered.status == 200
    assert answered.json()["text"] == "w0 w1 w2 w3 w4 "
    assert _types(followed)[:2] == ["tool-result", "step-finish"]
    assert _types(followed)[-2:] == ["finish", "[DONE]"]
    assert [seq for seq, _ in followed] == list(
        range(pause[-1][0] + 1, pause[-1][0] + 1 + len(followed))
    )
    text = "".join(
        d["payload"]["text"]
        for _, d in followed
        if d != "[DONE]" and "text" in d.get("payload", {})
    )
    assert text == "w0 w1 w2 w3 w4 "
    assert gate.executed == [42]
