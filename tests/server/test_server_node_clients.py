"""Real clients, written by others, under node: the AI SDK's own UI message
stream reader (``parseJsonEventStream`` with ``uiMessageChunkSchema``, then
``readUIMessageStream``) and ``@mastra/client-js`` (``agent.stream`` /
``agent.generate``), against a real hypercorn server. What each assembles
(text, tool calls, the tripwire) must agree with ``generate()``.

The npm packages come from ``$PROCESSION_NODE_CLIENTS`` (a directory whose
``node_modules`` has them; ``.ci/run`` installs them there), else they are
installed into a temporary directory once per session. Skipped, with the
reason, only when node is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import trio
from server_helpers import BlockSecrets, make_agent

from procession.server import create_app, serve
from procession.testing import text_turn, tool_call_turn

CLIENTS = Path(__file__).parent / "clients"
# The pinned client versions, one per line (``.ci/run`` installs the same):
# ai 7.0.38 is the release on @ai-sdk/provider-utils 5.0.13, the one
# @mastra/core 1.71.0 depends on; @mastra/client-js 1.47.0 is the newest
# client-js (it pins @mastra/core 1.68).
NPM_PACKAGES = (CLIENTS / "npm-packages.txt").read_text().split()
SCRIPT = CLIENTS / "read_streams.mjs"

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")


@pytest.fixture(scope="session")
def node_clients(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the clients' node_modules and the script beside it."""
    given = os.environ.get("PROCESSION_NODE_CLIENTS")
    where = Path(given) if given else tmp_path_factory.mktemp("npm-clients")
    if not (where / "node_modules" / "ai").exists():
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(where),
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                *NPM_PACKAGES,
            ],
            check=True,
            timeout=600,
        )
    shutil.copy(SCRIPT, where / SCRIPT.name)
    return where


def _agents() -> list[Any]:
    # Each agent answers three calls: the AI SDK reader, client-js stream and
    # client-js generate, in that order.
    return [
        make_agent([text_turn("Hello there, friend.")] * 3, id="text"),
        make_agent(
            [tool_call_turn("weather", {"city": "Oslo"}), text_turn("Sunny.")] * 3,
            id="tool",
        ),
        make_agent(
            [text_turn("The secret is 42.")] * 3,
            id="tripwire",
            output_processors=[BlockSecrets()],
        ),
    ]


async def _read_with_node(clients: Path) -> dict[str, Any]:
    assert NODE is not None
    app = create_app(_agents())
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
                        str(clients / SCRIPT.name),
                        urls[0],
                        "text",
                        "tool",
                        "tripwire",
                    ],
                    capture_stdout=True,
                    capture_stderr=True,
                    check=False,
                )
        finally:
            stop.set()
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def test_real_clients_agree_with_generate(node_clients: Path) -> None:
    seen = await _read_with_node(node_clients)
    assert seen["agents"] == ["text", "tool", "tripwire"]
    weather = {
        "name": "weather",
        "input": {"city": "Oslo"},
        "output": {"city": "Oslo", "sky": "sunny", "celsius": 21},
    }
    tripwire = {
        "reason": "the answer reveals a secret",
        "retry": False,
        "metadata": {"word": "secret"},
        "processorId": "block-secrets",
    }
    expected = {
        "text": ("Hello there, friend.", [], None, "stop"),
        "tool": ("Sunny.", [weather], None, "stop"),
        "tripwire": ("The", [], tripwire, "other"),
    }
    for agent_id, (text, tools, trip, reason) in expected.items():
        ai_sdk, mastra, generate = (
            seen[agent_id][k] for k in ("aiSdk", "mastra", "generate")
        )
        assert ai_sdk["invalid"] == [], ai_sdk["invalid"]
        assert ai_sdk["headers"]["x-vercel-ai-ui-message-stream"] == "v1"
        assert generate["finishReason"] == reason
        assert ai_sdk["text"] == mastra["text"] == generate["text"] == text
        assert [
            {k: t[k] for k in ("name", "input", "output")} for t in ai_sdk["tools"]
        ] == tools
        assert mastra["tools"] == generate["tools"] == tools
        assert all(t["state"] == "output-available" for t in ai_sdk["tools"])
        assert ai_sdk["tripwire"] == mastra["tripwire"] == generate["tripwire"] == trip
    assert seen["tripwire"]["mastra"]["types"][-1] == "tripwire"
