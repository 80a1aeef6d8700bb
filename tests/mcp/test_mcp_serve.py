"""Agents served as MCP tools, driven by the ``mcp`` package's own client:
``/api/mcp`` on the app, served by hypercorn on loopback, and ``procession
serve --mcp`` over stdio in a subprocess. And the app's lifespan opening the
``MCPTools`` of the agents it serves."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import AsyncIterator, MutableMapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
from mcp import Client, StdioServerParameters

from procession import Agent, ConfigurationError
from procession.mcp import MCPTools, agent_tool_name
from procession.server import ProcessionApp, create_app, serve
from procession.testing import ScriptedModel, tool_call_turn
from tests.mcp.mcp_server import SERVER_FILE
from tests.mcp.served_agents import echo_agent, memory_agent

pytestmark = [
    pytest.mark.procession_real_clock,
    # The mcp SDK's streamable-HTTP client returns from inside its SSE loop
    # once it has the answer, leaving httpx2's stream generators to the GC
    # (which trio reports); upstream's, and harmless: the response is closed.
    pytest.mark.filterwarnings(
        r"ignore:Async generator 'http(x|core)2\.:ResourceWarning"
    ),
]

SERVED = Path(__file__).parent / "served_agents.py"


@asynccontextmanager
async def served(app: ProcessionApp) -> AsyncIterator[str]:
    """``app`` served on a free loopback port; yields its base URL."""
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(functools.partial(serve, app, port=0))
        yield urls[0]
        nursery.cancel_scope.cancel()


def bearer(token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})


@asynccontextmanager
async def mcp_client(url: str, token: str | None = None) -> AsyncIterator[Client]:
    if token is None:
        async with Client(f"{url}/api/mcp") as client:
            yield client
        return
    from mcp.client.streamable_http import streamable_http_client

    async with bearer(token) as http:
        transport = streamable_http_client(f"{url}/api/mcp", http_client=http)
        async with Client(transport) as client:
            yield client


async def ask(
    client: Client, tool: str, arguments: dict[str, Any]
) -> tuple[Any, list[tuple[float, str | None]]]:
    seen: list[tuple[float, str | None]] = []

    async def on_progress(
        progress: float, total: float | None, message: str | None
    ) -> None:
        seen.append((progress, message))

    result = await client.call_tool(tool, arguments, progress_callback=on_progress)
    return result, seen


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content)


# --- /api/mcp ------------------------------------------------------------------


async def test_an_agent_is_a_tool_answering_with_progress_as_its_text_comes() -> None:
    app = create_app([echo_agent(guarded=False), memory_agent()])
    async with served(app) as url, mcp_client(url) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        result, progress = await ask(client, "ask_echo", {"message": "hello there"})
    assert set(listed) == {"ask_echo", "ask_notes_keeper"}
    assert listed["ask_echo"].input_schema == {
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "What to ask the agent."}
        },
        "required": ["message"],
    }
    assert set(listed["ask_notes_keeper"].input_schema["properties"]) == {
        "message",
        "threadId",
        "resourceId",
    }
    assert not result.is_error
    assert text_of(result) == "You said: hello there"
    # One notification per delta: the text so far, counted in characters.
    assert "".join(m or "" for _, m in progress) == "You said: hello there"
    assert [v for v, _ in progress] == sorted(v for v, _ in progress)
    assert progress[-1][0] == len("You said: hello there")
    assert len(progress) == 4


async def test_a_blocked_or_failed_run_answers_as_a_tool_error() -> None:
    app = create_app([echo_agent(), memory_agent()])
    async with served(app) as url, mcp_client(url) as client:
        blocked, _ = await ask(client, "ask_echo", {"message": "say hunter2"})
        empty, _ = await ask(client, "ask_echo", {"message": " "})
        no_thread, _ = await ask(client, "ask_notes_keeper", {"message": "hi"})
    assert blocked.is_error
    assert text_of(blocked).startswith("ask_echo: blocked by regex-filter: ")
    assert empty.is_error
    assert text_of(empty) == "ask_echo: 'message' must be a non-empty string"
    assert no_thread.is_error
    assert "thread" in text_of(no_thread)


async def test_api_mcp_is_behind_the_same_tokens() -> None:
    app = create_app([echo_agent()], tokens=["tok-good"])
    async with served(app) as url:
        async with httpx2.AsyncClient() as http:
            refused = await http.post(
                f"{url}/api/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"accept": "application/json, text/event-stream"},
            )
        async with mcp_client(url, "tok-good") as client:
            result, _ = await ask(client, "ask_echo", {"message": "in"})
    assert refused.status_code == 401
    assert "tok-good" not in refused.text
    assert text_of(result) == "You said: in"


async def test_a_call_acts_for_the_tokens_resource_only() -> None:
    agent = memory_agent()
    app = create_app([agent], tokens={"tok-alice": "alice"})
    async with served(app) as url, mcp_client(url, "tok-alice") as client:
        mine, _ = await ask(
            client, "ask_notes_keeper", {"message": "note this", "threadId": "t-1"}
        )
        other, _ = await ask(
            client,
            "ask_notes_keeper",
            {"message": "and this", "threadId": "t-2", "resourceId": "bob"},
        )
    assert text_of(mine) == "You said: note this"
    thread = await agent.memory.storage.get_thread("t-1", resource_id="alice")  # type: ignore[union-attr]
    assert thread is not None
    assert other.is_error
    assert "another resource than the one this request acts for" in text_of(other)
    assert await agent.memory.storage.get_thread("t-2", resource_id="bob") is None  # type: ignore[union-attr]


async def test_a_client_that_goes_away_cancels_the_run() -> None:
    app = create_app([echo_agent()])
    async with served(app) as url:
        async with mcp_client(url) as client:
            with trio.move_on_after(0.5):
                await client.call_tool("ask_echo", {"message": "answer slowly"})
        with trio.fail_after(5):
            while app.runs.streams:  # noqa: ASYNC110 - the server's side, over a socket
                await trio.sleep(0.01)
    assert app.runs.reserved == 0


def test_mcp_off_or_missing_is_said() -> None:
    app = create_app([echo_agent()], mcp=False)
    assert "mcp=off" in repr(app)
    assert "mcp=on" in repr(create_app([echo_agent()]))
    with pytest.raises(ConfigurationError, match="mcp must be a bool or None"):
        create_app([echo_agent()], mcp="yes")  # type: ignore[arg-type]
    clash = [echo_agent(), Agent(id="echo!", model=ScriptedModel([]))]
    with pytest.raises(
        ConfigurationError, match="would both be the MCP tool 'ask_echo_'"
    ):
        create_app([*clash, Agent(id="echo?", model=ScriptedModel([]))])
    assert agent_tool_name("notes.keeper") == "ask_notes_keeper"


async def test_api_mcp_without_the_lifespan_is_a_503() -> None:
    app = create_app([echo_agent()])
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode()
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/mcp", "headers": []}
    await app(scope, receive, send)
    assert sent[0]["status"] == 503
    assert b"lifespan" in sent[1]["body"]


_LAZY_PROBE = """
import functools, sys
import httpx2, trio
from procession.server import create_app, serve
from tests.mcp.served_agents import echo_agent

SDK = "mcp.server.streamable_http_manager"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "1"}}}

async def main():
    app = create_app([echo_agent()], mcp=True)
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(functools.partial(serve, app, port=0))
        async with httpx2.AsyncClient(timeout=30) as client:
            status = (await client.get(urls[0] + "/api/agents")).status_code
            print("served", status, "sdk loaded", SDK in sys.modules)
            answers = []

            async def initialize():
                answers.append(await client.post(
                    urls[0] + "/api/mcp", json=INIT,
                    headers={"accept": "application/json, text/event-stream"}))

            async with trio.open_nursery() as first:  # two first requests at once
                first.start_soon(initialize)
                first.start_soon(initialize)
            print("mcp", *sorted(a.status_code for a in answers),
                  all("serverInfo" in a.text for a in answers),
                  "sdk loaded", SDK in sys.modules)
        nursery.cancel_scope.cancel()

trio.run(main)
"""


def test_the_mcp_sdk_loads_at_the_first_mcp_request_not_at_startup() -> None:
    # In a process of its own: this test module imports the SDK itself.
    out = subprocess.run(
        [sys.executable, "-c", _LAZY_PROBE],
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.splitlines()
    assert out == [
        "served 200 sdk loaded False",
        "mcp 200 200 True sdk loaded True",
    ]


# --- the lifespan opens the agents' MCPTools ----------------------------------------


async def test_the_app_opens_the_mcp_tools_of_its_agents(tmp_path: Path) -> None:
    mcp = MCPTools(command=[sys.executable, str(SERVER_FILE), "--state", str(tmp_path)])
    model = ScriptedModel([tool_call_turn("echo", {"text": "from mcp"}), "done"])
    app = create_app([Agent(id="a", model=model, tools=[mcp])])
    states = [mcp.is_open]
    async with served(app) as url, httpx2.AsyncClient() as http:
        states.append(mcp.is_open)
        info = (await http.get(f"{url}/api/agents/a")).json()
        answer = await http.post(
            f"{url}/api/agents/a/generate", json={"messages": "hi"}
        )
    states.append(mcp.is_open)
    assert states == [False, True, False]
    assert "echo" in info["tools"]
    assert answer.status_code == 200
    assert "from mcp" in json.dumps(answer.json())


async def test_an_mcp_server_that_will_not_start_fails_the_startup_naming_it(
    tmp_path: Path,
) -> None:
    mcp = MCPTools(command=[str(tmp_path / "absent-server")], name="absent")
    app = create_app([Agent(id="a", model=ScriptedModel([]), tools=[mcp])])
    with pytest.RaisesGroup(
        pytest.RaisesExc(
            match=r"Lifespan failure in startup. 'MCP server 'absent' would not start: "
            r"FileNotFoundError"
        ),
        flatten_subgroups=True,
    ):
        # hypercorn may start listening before it sees the startup failed:
        # the failure ends the serve task then.
        with trio.fail_after(10):
            async with served(app):
                await trio.sleep_forever()


# --- procession serve --mcp (stdio) --------------------------------------------------


def cli(*args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "procession", *args], cwd=str(SERVED.parent)
    )


async def test_procession_serve_mcp_speaks_stdio() -> None:
    async with Client(cli("serve", "--mcp", f"{SERVED}:agents")) as client:
        listed = [t.name for t in (await client.list_tools()).tools]
        result, progress = await ask(client, "ask_echo", {"message": "over stdio"})
    assert listed == ["ask_echo"]
    assert text_of(result) == "You said: over stdio"
    assert "".join(m or "" for _, m in progress) == "You said: over stdio"


async def test_a_client_cancelling_over_stdio_cancels_the_run() -> None:
    async with Client(cli("serve", "--mcp", f"{SERVED}:agents")) as client:
        with trio.move_on_after(0.5):
            await client.call_tool("ask_echo", {"message": "answer slowly"})
        # The session is usable at once for the next call.
        with trio.fail_after(5):
            result, _ = await ask(client, "ask_echo", {"message": "next"})
    assert text_of(result) == "You said: next"


def test_serve_mcp_refuses_a_bus(capsys: pytest.CaptureFixture[str]) -> None:
    from procession._cli import main

    assert main(["serve", "--mcp", "--bus", "redis://localhost:6379/0"]) == 2
    assert "--bus is for HTTP; --mcp serves over stdio" in capsys.readouterr().err
