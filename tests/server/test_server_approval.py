"""Tool approval over HTTP: the routes ``@mastra/client-js`` calls
(``approve-tool-call``, ``decline-tool-call``, ``resume-stream``, their
``-generate`` twins, ``suspended-runs``), answered only for the resource that
owns the run (another gets 404 before any 409); and the real client-js under
node doing a whole approve and a whole decline."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from procession import Agent, tool
from procession.memory import Memory, SqliteStorage
from procession.server import create_app, serve
from procession.testing import ScriptedModel, text_turn, tool_call_turn
from tests.server.server_helpers import request, sse_events

pytestmark = pytest.mark.procession_real_clock

ADA = {"authorization": "Bearer ada-token"}
BOB = {"authorization": "Bearer bob-token"}


@attrs.frozen
class RecordId:
    id: int


def _agent(tmp_path: Path, executed: list[int], answers: int = 3) -> Agent:
    @tool(require_approval=True)
    def delete_record(args: RecordId) -> dict[str, Any]:
        """Delete a record."""
        executed.append(args.id)
        return {"deleted": args.id}

    turns: list[Any] = []
    for _ in range(answers):
        turns += [tool_call_turn("delete_record", {"id": 42}), text_turn("Deleted.")]
    return Agent(
        id="clerk",
        model=ScriptedModel(turns),
        tools=[delete_record],
        memory=Memory(storage=SqliteStorage(tmp_path / "m.db")),
    )


def _types(body: bytes) -> list[str]:
    return [e if isinstance(e, str) else e["type"] for e in sse_events(body)]


async def _pause(app: Any, headers: dict[str, str]) -> dict[str, Any]:
    answer = await request(
        app,
        "POST",
        "/api/agents/clerk/stream",
        json_body={
            "messages": "delete 42",
            "memory": {"thread": "t-1", "resource": "ada"},
        },
        headers=headers,
    )
    events = sse_events(answer.body)
    assert events[-1] == "[DONE]"
    waiting: dict[str, Any] = events[-2]
    assert waiting["type"] == "tool-call-approval"
    return waiting


async def test_approve_over_http_only_for_the_owner_and_once(tmp_path: Path) -> None:
    executed: list[int] = []
    app = create_app(
        [_agent(tmp_path, executed)], tokens={"ada-token": "ada", "bob-token": "bob"}
    )
    waiting = await _pause(app, ADA)
    body = {"runId": waiting["runId"], "toolCallId": waiting["payload"]["toolCallId"]}
    path = "/api/agents/clerk/approve-tool-call"
    listed_bob = await request(
        app, "GET", "/api/agents/clerk/suspended-runs", headers=BOB
    )
    listed_ada = await request(
        app, "GET", "/api/agents/clerk/suspended-runs", headers=ADA
    )
    bob = await request(app, "POST", path, json_body=body, headers=BOB)
    ada = await request(app, "POST", path, json_body=body, headers=ADA)
    again = await request(app, "POST", path, json_body=body, headers=ADA)
    bob_again = await request(app, "POST", path, json_body=body, headers=BOB)
    assert listed_bob.json() == {"runs": [], "total": 0}
    [run] = listed_ada.json()["runs"]
    assert run["runId"] == waiting["runId"]
    assert run["toolCalls"][0]["requiresApproval"] is True
    assert bob.status == 404  # not the owner: as if nothing waited
    assert ada.status == 200
    assert _types(ada.body)[:2] == ["tool-result", "step-finish"]  # no start
    assert _types(ada.body)[-2:] == ["finish", "[DONE]"]
    assert again.status == 409
    assert again.json()["field"] == "toolCallId"
    assert bob_again.status == 404  # ownership before the 409
    assert executed == [42]


async def test_bad_answers_are_typed_4xx(tmp_path: Path) -> None:
    executed: list[int] = []
    app = create_app([_agent(tmp_path, executed)])
    waiting = await _pause(app, {})
    run_id = waiting["runId"]
    cases = [
        ("approve-tool-call", {"toolCallId": "x"}, 400, "runId"),
        ("approve-tool-call", {"runId": run_id}, 400, "toolCallId"),
        (
            "decline-tool-call",
            {"runId": run_id, "toolCallId": "nope"},
            400,
            "toolCallId",
        ),
        (
            "approve-tool-call",
            {"runId": "run-unknown", "toolCallId": "x"},
            404,
            "runId",
        ),
        ("resume-stream", {"runId": run_id}, 400, "resumeData"),
        (
            "decline-tool-call",
            {"runId": run_id, "toolCallId": "c", "reason": 3},
            400,
            "reason",
        ),
    ]
    for action, body, status, field in cases:
        answer = await request(
            app, "POST", f"/api/agents/clerk/{action}", json_body=body
        )
        assert (answer.status, answer.json().get("field")) == (status, field), (
            action,
            body,
            answer.body,
        )
    assert executed == []
    declined = await request(
        app,
        "POST",
        "/api/agents/clerk/decline-tool-call-generate",
        json_body={
            "runId": run_id,
            "toolCallId": waiting["payload"]["toolCallId"],
            "reason": "not today",
        },
    )
    assert declined.status == 200
    assert declined.json()["finishReason"] == "stop"
    assert executed == []


# --- the real client, under node --------------------------------------------------

NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("how", ["approve", "decline"])
async def test_mastra_client_js_answers_a_waiting_call(
    tmp_path: Path, node_clients: Path, how: str
) -> None:
    assert NODE is not None
    executed: list[int] = []
    app = create_app([_agent(tmp_path, executed)])
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
                    [NODE, str(node_clients / "approve.mjs"), urls[0], "clerk", how],
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )
        finally:
            stop.set()
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["first"][-1] == "tool-call-approval"
    assert seen["waiting"]["toolName"] == "delete_record"
    assert seen["listed"]["runs"][0]["runId"] == seen["secondRunIds"][0]
    assert seen["second"][-1] == "finish"
    assert len(seen["secondRunIds"]) == 1
    assert seen["text"] == "Deleted."
    assert "409" in seen["again"] or "already answered" in seen["again"]
    if how == "approve":
        assert seen["second"][0] == "tool-result"
        assert executed == [42]
    else:
        assert seen["denied"]["approval"] == {
            "id": seen["waiting"]["toolCallId"],
            "approved": False,
            "reason": "not today",
        }
        assert executed == []


@pytest.mark.skipif(NODE is None, reason="node is not installed")
@pytest.mark.parametrize("how", ["approve", "decline"])
async def test_the_ai_sdk_chat_answers_a_waiting_call(
    tmp_path: Path, node_clients: Path, how: str
) -> None:
    """``addToolApprovalResponse`` with ``sendAutomaticallyWhen``: the next
    request carries the answer; the run goes on in the same assistant
    message, which ends with the tool's output (or its denial) and the text."""
    assert NODE is not None
    executed: list[int] = []
    app = create_app([_agent(tmp_path, executed)])
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
                        str(node_clients / "approve_chat.mjs"),
                        urls[0],
                        "clerk",
                        how,
                    ],
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )
        finally:
            stop.set()
    assert done.returncode == 0, done.stderr.decode()
    seen = json.loads(done.stdout)
    assert seen["errors"] == []
    assert seen["status"] == "ready"
    assert seen["requests"] == 2
    assert ["tool-delete_record", "approval-requested"] in seen["pausedParts"]
    assert seen["approvalId"].endswith("::call-1")
    user, assistant = seen["messages"]
    assert (user["role"], assistant["role"]) == ("user", "assistant")
    tool_parts = [p for p in assistant["parts"] if p[0] == "tool-delete_record"]
    texts = [p[2] for p in assistant["parts"] if p[0] == "text"]
    assert texts == ["Deleted."]
    if how == "approve":
        assert tool_parts == [
            ["tool-delete_record", "output-available", {"deleted": 42}]
        ]
        assert executed == [42]
    else:
        assert tool_parts == [["tool-delete_record", "output-denied", None]]
        assert executed == []
