"""Golden bytes: what both protocols stream for five runs (a text answer, a
tool round trip, a tripwire, a retry, an error), byte for byte.

Message ids are generated (uuids), so they are numbered by first appearance
before comparing (``server_helpers.stable``); run ids are fixed by the
request's ``runId``. To re-record after a deliberate change:
``PROCESSION_UPDATE_GOLDEN=1 pytest tests/server/test_server_golden.py``
and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from procession import ProviderError
from procession.chunks import from_wire
from procession.server import create_app
from procession.testing import assert_run_shape, text_turn, tool_call_turn
from tests.server.server_helpers import (
    BlockSecrets,
    RetryOnce,
    make_agent,
    request,
    sse_events,
    stable,
)

GOLDEN = Path(__file__).parent / "golden"


def _scenario(name: str) -> Any:
    """A fresh agent (its scripted model is used up by one run) per scenario."""
    if name == "text":
        return make_agent([text_turn("Hello there, friend.")])
    if name == "tool":
        return make_agent(
            [
                tool_call_turn("weather", {"city": "Oslo"}),
                text_turn("Sunny, 21 degrees."),
            ]
        )
    if name == "tripwire":
        return make_agent(
            [text_turn("The secret code is 42.")], output_processors=[BlockSecrets()]
        )
    if name == "retry":
        return make_agent(
            [text_turn("a draft"), text_turn("The full answer.")],
            output_processors=[RetryOnce()],
            max_processor_retries=1,
        )
    if name == "error":
        overloaded = ProviderError("Overloaded", status_code=529, is_retryable=True)
        return make_agent([[*text_turn("Partial"), overloaded]])
    raise AssertionError(name)


SCENARIOS = ["text", "tool", "tripwire", "retry", "error"]


def _check_golden(path: Path, body: bytes) -> None:
    if os.environ.get("PROCESSION_UPDATE_GOLDEN"):
        path.write_bytes(body)
    assert path.exists(), f"no golden file {path.name}; record it (module doc)"
    assert body == path.read_bytes(), f"{path.name} changed"


@pytest.mark.parametrize("name", SCENARIOS)
async def test_mastra_stream_bytes(name: str) -> None:
    app = create_app([_scenario(name)])
    exchange = await request(
        app,
        "POST",
        "/api/agents/helper/stream",
        json_body={"messages": "Hi", "runId": f"run-{name}"},
    )
    assert exchange.status == 200
    body = stable(exchange.body)
    _check_golden(GOLDEN / f"mastra-{name}.sse", body)
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    end = assert_run_shape([from_wire(e) for e in events[:-1]])
    assert end == {"tripwire": "tripwire", "error": "error"}.get(name, "finish")


@pytest.mark.parametrize("name", SCENARIOS)
async def test_ui_message_stream_bytes(name: str) -> None:
    app = create_app([_scenario(name)])
    exchange = await request(
        app,
        "POST",
        "/api/agents/helper/chat",
        json_body={
            "id": "chat-1",
            "trigger": "submit-message",
            "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}
            ],
        },
    )
    assert exchange.status == 200
    assert exchange.headers["x-vercel-ai-ui-message-stream"] == "v1"
    body = stable(exchange.body)
    _check_golden(GOLDEN / f"ui-{name}.sse", body)
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    finish = events[-2]
    assert finish["type"] == "finish"
    expected = {"tripwire": "other", "error": "error", "tool": "stop"}
    assert finish["finishReason"] == expected.get(name, "stop")
