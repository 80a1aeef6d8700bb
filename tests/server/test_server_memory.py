"""The memory routes and memory through the run routes: a resource reads its
own threads only (another's thread is a 404, as if it did not exist); a token
tied to a resource acts for it, and a body naming another is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from procession.memory import Memory, SqliteStorage
from procession.server import create_app, serve
from procession.testing import ScriptedModel, text_turn
from tests.server.server_helpers import make_agent, request, sse_events

# SQLite works in a thread: the real clock.
pytestmark = pytest.mark.procession_real_clock


def _app(tmp_path: Path, turns: int = 4, **options: Any) -> Any:
    storage = SqliteStorage(tmp_path / "memory.db")
    model = ScriptedModel([text_turn(f"Answer {i}.") for i in range(turns)])
    agent = make_agent(model, memory=Memory(storage=storage))
    return create_app([agent], **options)


def _body(thread: str, resource: str | None, text: str = "Hi") -> dict[str, Any]:
    memory = (
        {"thread": thread}
        if resource is None
        else {
            "thread": thread,
            "resource": resource,
        }
    )
    return {"messages": text, "memory": memory}


async def test_a_streamed_turn_is_saved_and_listed_for_its_resource(
    tmp_path: Path,
) -> None:
    app = _app(tmp_path)
    streamed = await request(
        app, "POST", "/api/agents/helper/stream", json_body=_body("t-1", "ada")
    )
    assert sse_events(streamed.body)[-1] == "[DONE]"
    await request(
        app, "POST", "/api/agents/helper/generate", json_body=_body("t-2", "ada")
    )
    listing = await request(app, "GET", "/api/memory/threads?resourceId=ada")
    assert listing.status == 200
    body = listing.json()
    assert {t["id"] for t in body["threads"]} == {"t-1", "t-2"}
    assert body["total"] == 2
    assert body["hasMore"] is False
    assert all(t["resourceId"] == "ada" for t in body["threads"])
    assert all(t["createdAt"].endswith("Z") for t in body["threads"])
    messages = await request(
        app, "GET", "/api/memory/threads/t-1/messages?resourceId=ada"
    )
    assert messages.status == 200
    wire = messages.json()
    assert [m["role"] for m in wire["messages"]] == ["user", "assistant"]
    assert wire["uiMessages"] is None
    assert wire["total"] == 2
    thread = await request(app, "GET", "/api/memory/threads/t-1?resourceId=ada")
    assert thread.json()["id"] == "t-1"


async def test_another_resources_thread_is_not_found(tmp_path: Path) -> None:
    app = _app(tmp_path)
    await request(
        app, "POST", "/api/agents/helper/generate", json_body=_body("t-1", "ada")
    )
    theirs = await request(
        app, "GET", "/api/memory/threads/t-1/messages?resourceId=bob"
    )
    missing = await request(
        app, "GET", "/api/memory/threads/t-9/messages?resourceId=bob"
    )
    assert theirs.status == missing.status == 404
    assert theirs.json() == {"error": "no thread 't-1'"}
    assert missing.json() == {"error": "no thread 't-9'"}
    assert (await request(app, "GET", "/api/memory/threads?resourceId=bob")).json()[
        "threads"
    ] == []
    # A run naming bob's resource on ada's thread is refused the same way.
    run = await request(
        app, "POST", "/api/agents/helper/generate", json_body=_body("t-1", "bob")
    )
    assert run.status == 404
    assert run.json()["field"] == "memory.thread"


async def test_the_resource_is_required_without_a_token_resource(
    tmp_path: Path,
) -> None:
    app = _app(tmp_path)
    answer = await request(app, "GET", "/api/memory/threads")
    assert answer.status == 400
    assert answer.json()["field"] == "resourceId"


async def test_a_token_acts_for_its_resource(tmp_path: Path) -> None:
    app = _app(tmp_path, tokens={"ada-token": "ada", "bob-token": "bob"})
    ada = {"authorization": "Bearer ada-token"}
    bob = {"authorization": "Bearer bob-token"}
    # No resource in the body: the token's.
    saved = await request(
        app,
        "POST",
        "/api/agents/helper/generate",
        json_body=_body("t-1", None),
        headers=ada,
    )
    assert saved.status == 200
    mine = await request(app, "GET", "/api/memory/threads", headers=ada)
    assert [t["id"] for t in mine.json()["threads"]] == ["t-1"]
    assert (await request(app, "GET", "/api/memory/threads", headers=bob)).json()[
        "threads"
    ] == []
    stolen = await request(app, "GET", "/api/memory/threads/t-1/messages", headers=bob)
    assert stolen.status == 404
    # Naming another resource than the token's is refused, in a query or a body.
    other = await request(app, "GET", "/api/memory/threads?resourceId=ada", headers=bob)
    assert other.status == 403
    assert other.json()["field"] == "resourceId"
    for route in ("stream", "generate"):
        refused = await request(
            app,
            "POST",
            f"/api/agents/helper/{route}",
            json_body=_body("t-1", "ada"),
            headers=bob,
        )
        assert refused.status == 403, route
        assert refused.json()["field"] == "memory.resource"
    chat = await request(
        app,
        "POST",
        "/api/chat",
        json_body={
            "id": "c",
            "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
            ],
            "memory": {"thread": "t-1", "resource": "ada"},
        },
        headers=bob,
    )
    assert chat.status == 403


async def test_tokens_with_resources_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCESSION_SERVER_TOKENS", "tok-a@ada, plain")
    app = _app(tmp_path)
    listed = await request(
        app, "GET", "/api/memory/threads", headers={"authorization": "Bearer tok-a"}
    )
    assert listed.status == 200
    # A token with no resource names the resource it reads.
    plain = await request(
        app, "GET", "/api/memory/threads", headers={"authorization": "Bearer plain"}
    )
    assert plain.status == 400
    assert "tok-a" not in repr(app)


async def test_the_chat_route_sends_only_the_new_turn_with_memory(
    tmp_path: Path,
) -> None:
    storage = SqliteStorage(tmp_path / "memory.db")
    model = ScriptedModel([text_turn("First."), text_turn("Second.")])
    app = create_app([make_agent(model, memory=Memory(storage=storage))])

    def user(i: int, text: str) -> dict[str, Any]:
        return {
            "id": f"u{i}",
            "role": "user",
            "parts": [{"type": "text", "text": text}],
        }

    memory = {"thread": "c-1", "resource": "ada"}
    await request(
        app,
        "POST",
        "/api/chat",
        json_body={"id": "c-1", "messages": [user(1, "One")], "memory": memory},
    )
    history = [
        user(1, "One"),
        {
            "id": "a1",
            "role": "assistant",
            "parts": [{"type": "text", "text": "First."}],
        },
        user(2, "Two"),
    ]
    await request(
        app,
        "POST",
        "/api/chat",
        json_body={"id": "c-1", "messages": history, "memory": memory},
    )
    saved = await storage.list_messages("c-1", "ada")
    assert [(m.role, m.text) for m in saved] == [
        ("user", "One"),
        ("assistant", "First."),
        ("user", "Two"),
        ("assistant", "Second."),
    ]


NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
async def test_mastra_client_js_reads_the_memory_routes(
    tmp_path: Path, node_clients: Path
) -> None:
    app = _app(tmp_path, tokens={"ada-token": "ada", "bob-token": "bob"})
    saved = await request(
        app,
        "POST",
        "/api/agents/helper/generate",
        json_body=_body("t-1", None, text="Remember me"),
        headers={"authorization": "Bearer ada-token"},
    )
    assert saved.status == 200
    assert NODE is not None
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(
            lambda task_status: serve(
                app, port=0, shutdown_trigger=stop.wait, task_status=task_status
            )
        )
        try:
            with trio.fail_after(60):
                done = await trio.run_process(
                    [
                        NODE,
                        str(node_clients / "read_memory.mjs"),
                        urls[0],
                        "ada-token",
                        "bob-token",
                        "helper",
                        "t-1",
                    ],
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )
        finally:
            stop.set()
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["threads"] == [{"id": "t-1", "resourceId": "ada"}]
    assert seen["total"] == 1
    assert seen["thread"] == {"id": "t-1", "resourceId": "ada"}
    assert seen["roles"] == ["user", "assistant"]
    assert seen["texts"] == ["Remember me", "Answer 0."]
    assert "404" in seen["otherError"]
