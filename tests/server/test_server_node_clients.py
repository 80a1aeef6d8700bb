"""Real clients, written by others, under node: the AI SDK's own UI message
stream reader (``parseJsonEventStream`` with ``uiMessageChunkSchema``, then
``readUIMessageStream``) and ``@mastra/client-js`` (``agent.stream`` /
``agent.generate``), against a real hypercorn server. What each assembles
(text, tool calls, the tripwire) must agree with ``generate()``.

The npm packages come from the ``node_clients`` fixture (tests/server/
conftest.py: ``$PROCESSION_NODE_CLIENTS``, where ``.ci/run`` installs them,
or a temporary directory). Skipped, with the
reason, only when node is absent.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from procession.server import create_app
from procession.testing import text_turn, tool_call_turn
from tests.server.node_helpers import run_node_against
from tests.server.server_helpers import BlockSecrets, RetryOnce, make_agent

SCRIPT = "read_streams.mjs"

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")


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
        # A retried first attempt: streamed (the default) and held.
        *(
            make_agent(
                [text_turn("a draft"), text_turn("The full answer.")] * 3,
                id=agent_id,
                output_processors=[RetryOnce()],
                max_processor_retries=1,
            )
            for agent_id in ("retry", "retry-held")
        ),
    ]


async def _read_with_node(clients: Path) -> dict[str, Any]:
    done = await run_node_against(
        create_app(_agents(), step_text={"retry-held": "hold"}),
        clients / SCRIPT,
        *AGENTS,
        seconds=60,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


AGENTS = ["text", "tool", "tripwire", "retry", "retry-held"]


async def test_real_clients_agree_with_generate(node_clients: Path) -> None:
    seen = await _read_with_node(node_clients)
    assert seen["agents"] == AGENTS
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
        # The UI message has an id (the run's), and no part is left streaming.
        assert ai_sdk["messageId"].startswith("run-")
        assert set(ai_sdk["textStates"]) == {"done"}
    assert seen["tripwire"]["mastra"]["types"][-1] == "tripwire"


async def test_what_stock_clients_assemble_of_a_retry_in_each_mode(
    node_clients: Path,
) -> None:
    """Streamed (the default), a retried attempt reaches stock clients, which
    do not withdraw it: the AI SDK keeps its text part beside the accepted
    one, client-js users joining deltas read both. Held, nothing the
    processor rejected is sent: every client assembles ``result.text``."""
    seen = await _read_with_node(node_clients)
    accepted = "The full answer."
    streamed, held = seen["retry"], seen["retry-held"]
    assert streamed["generate"]["text"] == held["generate"]["text"] == accepted
    assert streamed["aiSdk"]["text"] == "a draft" + accepted
    assert streamed["mastra"]["text"] == "a draft" + accepted
    assert "step-retry" in streamed["mastra"]["types"]
    assert held["aiSdk"]["text"] == held["mastra"]["text"] == accepted
    assert "step-retry" in held["mastra"]["types"]  # said, with nothing to drop
    assert held["aiSdk"]["invalid"] == []
