"""``examples/support.py:agent``: ``procession serve`` loads it by file path,
and it remembers conversations per thread (SQLite)."""

from __future__ import annotations

from pathlib import Path

import pytest

from procession.server import load_target
from tests.server.server_helpers import request, sse_events

ROOT = Path(__file__).parents[2]

pytestmark = pytest.mark.procession_real_clock


async def test_the_support_example_serves_with_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCESSION_SUPPORT_DB", str(tmp_path / "memory.db"))
    monkeypatch.chdir(ROOT)
    app = load_target("examples/support.py:agent")
    assert list(app.agents) == ["support-agent"]
    memory = {"thread": "t-1", "resource": "ada"}
    streamed = await request(
        app,
        "POST",
        "/api/agents/support-agent/stream",
        json_body={"messages": "Where is my order A-1042?", "memory": memory},
    )
    events = sse_events(streamed.body)
    assert events[-1] == "[DONE]"
    text = "".join(
        e["payload"]["text"]
        for e in events
        if isinstance(e, dict) and e["type"] == "text-delta"
    )
    assert "[EMAIL]" in text
    listed = await request(app, "GET", "/api/memory/threads?resourceId=ada")
    assert [t["id"] for t in listed.json()["threads"]] == ["t-1"]
    saved = await request(app, "GET", "/api/memory/threads/t-1/messages?resourceId=ada")
    roles = [m["role"] for m in saved.json()["messages"]]
    assert roles[0] == "user"
    assert roles[-1] == "assistant"
