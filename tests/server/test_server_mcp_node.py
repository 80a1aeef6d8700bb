"""Mastra's own ``MCPClient`` (``@mastra/mcp``, under node) against the
app's ``/api/mcp``, on a real hypercorn server: it lists the agents as tools,
asks one (with progress notifications on), and without the token is
refused. Skipped, with the reason, only when node is absent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from procession.server import create_app
from procession.testing import text_turn
from tests.server.node_helpers import run_node_against
from tests.server.server_helpers import make_agent

NODE = shutil.which("node")
pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed"),
    pytest.mark.procession_real_clock,
]


async def test_mastras_mcp_client_asks_an_agent(node_clients: Path) -> None:
    agent = make_agent([text_turn("You said: hello from node")], id="echo")
    app = create_app([agent], tokens={"tok-mcp": "alice"})
    done = await run_node_against(
        app,
        node_clients / "ask_mcp.mjs",
        "tok-mcp",
        "ask_echo",
        "hello from node",
    )
    seen: dict[str, Any] = json.loads(done.stdout)
    assert seen["tools"] == ["procession_ask_echo"]
    assert seen["schema"] == "present"
    answer = seen["answer"]
    assert answer["isError"] is False
    assert [c["text"] for c in answer["content"]] == ["You said: hello from node"]
    assert "".join(seen["progress"]) == "You said: hello from node"
    assert "401" in seen["refused"] or "nauthorized" in seen["refused"]
    assert "tok-mcp" not in seen["refused"]
