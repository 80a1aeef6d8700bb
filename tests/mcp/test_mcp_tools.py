"""``MCPTools`` against a real MCP server: a subprocess over stdio (the
``mcp`` package's own server API, ``mcp_server.py``), and the same server
over streamable HTTP on loopback. The agent calls the tools through a
scripted model, so they go through the ordinary tool path."""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from procession import (
    Agent,
    ConfigurationError,
    ToolArgumentsError,
    ToolSourceNotOpenError,
)
from procession.chunks import ToolErrorChunk, ToolResultChunk
from procession.mcp import (
    MCPConnectionError,
    MCPTimeoutError,
    MCPTool,
    MCPToolAnnotations,
    MCPToolError,
    MCPTools,
)
from procession.processors import Processor, ProcessToolResultArgs
from procession.runtime.tools import ToolContext
from procession.testing import ScriptedModel, collect_stream, tool_call_turn
from tests.mcp.mcp_server import SERVER_FILE, serve_http

pytestmark = [
    pytest.mark.procession_real_clock,
    # The mcp SDK's streamable-HTTP client returns from inside its SSE loop
    # once it has the answer, leaving httpx2's stream generators to the GC
    # (which trio reports); upstream's, and harmless: the response is closed.
    pytest.mark.filterwarnings(
        r"ignore:Async generator 'http(x|core)2\.:ResourceWarning"
    ),
]


def server(state: Path, *extra: str) -> list[str]:
    return [sys.executable, str(SERVER_FILE), "--state", str(state), *extra]


async def wait_for(path: Path, seconds: float = 10.0) -> None:
    """Wait for a mark the server subprocess leaves (a real process: polled)."""
    with trio.fail_after(seconds):
        while not await trio.Path(path).exists():  # noqa: ASYNC110 - another process
            await trio.sleep(0.005)


def calls(*turns: tuple[str, dict[str, Any]], text: str = "done") -> ScriptedModel:
    """A model that calls each tool in turn, one per step, then says ``text``."""
    return ScriptedModel(
        [
            *(
                tool_call_turn(name, args, tool_call_id=f"c{i}")
                for i, (name, args) in enumerate(turns)
            ),
            text,
        ]
    )


# --- listing ------------------------------------------------------------------


async def test_the_servers_tools_reach_the_model_with_their_schemas(
    tmp_path: Path,
) -> None:
    model = calls()
    async with MCPTools(command=server(tmp_path)) as mcp:
        tools = {t.name: t for t in mcp.tools()}
        agent = Agent(id="a", model=model, tools=[mcp])
        await collect_stream(agent, "hi")
    assert set(tools) == {
        "echo",
        "add",
        "wait",
        "fail",
        "crash",
        "add_tool",
        "env_value",
        "read_file",
    }
    offered = {d.name: d for d in model.calls[0].tools}
    assert set(offered) == set(tools)
    assert offered["add"].input_schema["properties"] == {
        "a": {"title": "A", "type": "integer"},
        "b": {"title": "B", "type": "integer"},
    }
    assert offered["add"].input_schema["required"] == ["a", "b"]
    assert offered["echo"].description == "Echo the text back."
    # An invalid character for model providers becomes "_"; the call uses
    # the server's own name.
    assert tools["read_file"].server_name == "read.file"
    assert isinstance(tools["add"], MCPTool)
    assert tools["add"].annotations == MCPToolAnnotations(
        destructive_hint=True, idempotent_hint=False
    )
    assert tools["echo"].annotations.read_only_hint is True
    assert tools["echo"].annotations.title == "Echo"
    assert tools["echo"].server == mcp.name


async def test_a_prefix_renames_the_tools_for_the_model(tmp_path: Path) -> None:
    async with MCPTools(command=server(tmp_path), prefix="t") as mcp:
        tools = {t.name: t for t in mcp.tools()}
    assert "t_echo" in tools
    assert "t_read_file" in tools
    assert tools["t_echo"].server_name == "echo"


async def test_an_mcptools_not_entered_is_an_error_naming_it(tmp_path: Path) -> None:
    mcp = MCPTools(command=server(tmp_path), name="files")
    agent = Agent(id="a", model=calls(), tools=[mcp])
    with pytest.raises(ToolSourceNotOpenError, match=r"MCPTools 'files'.* is not open"):
        agent.stream("hi")
    with pytest.raises(ToolSourceNotOpenError, match="'files'"):
        mcp.tools()


# --- calls through the agent --------------------------------------------------


class SeenResults(Processor):
    id = "seen-results"

    def __init__(self) -> None:
        self.results: list[tuple[str, Any]] = []

    async def process_tool_result(self, args: ProcessToolResultArgs) -> Any:
        self.results.append((args.tool_name, args.result))
        return None


async def test_the_agent_calls_mcp_tools_through_its_tool_path(tmp_path: Path) -> None:
    seen = SeenResults()
    model = calls(("echo", {"text": "hello"}), ("add", {"a": 2, "b": 3}))
    async with MCPTools(command=server(tmp_path)) as mcp:
        agent = Agent(id="a", model=model, tools=[mcp], output_processors=[seen])
        run = await collect_stream(agent, "hi")
    assert run.result.error is None
    results = [c.payload.result for c in run.chunks if isinstance(c, ToolResultChunk)]
    assert results == ["hello", "5"]
    assert seen.results == [("echo", "hello"), ("add", "5")]
    assert run.text == "done"


async def test_a_tool_error_from_the_server_reaches_the_model_as_a_tool_error(
    tmp_path: Path,
) -> None:
    model = calls(("fail", {"message": "the disk is full"}))
    async with MCPTools(command=server(tmp_path)) as mcp:
        run = await collect_stream(Agent(id="a", model=model, tools=[mcp]), "hi")
    (error,) = [c for c in run.chunks if isinstance(c, ToolErrorChunk)]
    assert isinstance(error.payload.error, MCPToolError)
    assert str(error.payload.error).endswith("the disk is full")  # the server's words
    # The model reads the server's words in the tool message.
    tool_message = [m for m in model.calls[1].prompt if m.role == "tool"]
    assert "the disk is full" in json.dumps([repr(m) for m in tool_message])


async def test_bad_arguments_are_refused_before_the_call(tmp_path: Path) -> None:
    model = calls(("add", {"a": "2", "b": 3}))
    async with MCPTools(command=server(tmp_path)) as mcp:
        run = await collect_stream(Agent(id="a", model=model, tools=[mcp]), "hi")
    (error,) = [c for c in run.chunks if isinstance(c, ToolErrorChunk)]
    assert isinstance(error.payload.error, ToolArgumentsError)
    assert "'2' is not of type 'integer' @ $.a" in str(error.payload.error)


async def test_two_agents_share_one_connection(tmp_path: Path) -> None:
    async with MCPTools(command=server(tmp_path)) as mcp:
        first = Agent(id="a", model=calls(("echo", {"text": "1"})), tools=[mcp])
        second = Agent(id="b", model=calls(("echo", {"text": "2"})), tools=[mcp])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(collect_stream, first, "hi")
            nursery.start_soon(collect_stream, second, "hi")
    assert len((tmp_path / "starts").read_text().splitlines()) == 1


async def test_the_server_gets_its_env(tmp_path: Path) -> None:
    async with MCPTools(command=server(tmp_path), env={"ANSWER": "forty-two"}) as mcp:
        assert await mcp.call("env_value", {"name": "ANSWER"}) == "forty-two"


# --- cancellation and timeouts ------------------------------------------------


async def test_a_cancelled_run_cancels_the_call_on_the_server_and_frees_the_session(
    tmp_path: Path,
) -> None:
    model = calls(("wait", {"tag": "first"}))
    async with MCPTools(command=server(tmp_path)) as mcp:
        agent = Agent(id="a", model=model, tools=[mcp])
        chunks: list[Any] = []
        async with agent.stream("hi") as stream, trio.open_nursery() as nursery:

            async def read() -> None:
                async for chunk in stream:
                    chunks.append(chunk)

            nursery.start_soon(read)
            await wait_for(tmp_path / "first.started")
            cancelled_at = time.monotonic()
            await stream.cancel()
        result = await stream.result()
        assert result.finish_reason == "aborted"
        assert chunks[-1].type == "abort"
        # The same connection serves the next call at once.
        assert await mcp.call("echo", {"text": "next"}) == "next"
        latency = time.monotonic() - cancelled_at
        await wait_for(tmp_path / "first.cancelled")
    assert latency < 1.0
    assert not (tmp_path / "first.finished").exists()
    assert len((tmp_path / "starts").read_text().splitlines()) == 1


async def test_a_call_past_call_timeout_is_cancelled_on_the_server(
    tmp_path: Path,
) -> None:
    async with MCPTools(command=server(tmp_path), call_timeout=0.5) as mcp:
        with pytest.raises(
            MCPTimeoutError, match=r"'wait' did not answer within call_timeout=0.5 s"
        ):
            await mcp.call("wait", {"tag": "slow"})
        assert await mcp.call("echo", {"text": "still here"}) == "still here"
        await wait_for(tmp_path / "slow.cancelled")


async def test_a_server_that_will_not_start_is_an_error_naming_it(
    tmp_path: Path,
) -> None:
    mcp = MCPTools(command=[str(tmp_path / "no-such-server"), "--port", "1"])
    with pytest.raises(
        MCPConnectionError,
        match=r"MCP server 'no-such-server' would not start: FileNotFoundError",
    ):
        async with mcp:
            pass
    assert not mcp.is_open


async def test_a_server_that_exits_at_once_is_an_error_naming_it(
    tmp_path: Path,
) -> None:
    mcp = MCPTools(command=[sys.executable, "-c", "pass"], name="quitter")
    with pytest.raises(
        MCPConnectionError, match=r"MCP server 'quitter' would not start"
    ):
        async with mcp:
            pass


async def test_a_server_that_will_not_answer_times_out(tmp_path: Path) -> None:
    mcp = MCPTools(
        command=[sys.executable, "-c", "import time; time.sleep(60)"],
        name="mute",
        connect_timeout=0.5,
    )
    started = time.monotonic()
    with pytest.raises(
        MCPTimeoutError,
        match=r"'mute' did not start and list its tools within connect_timeout=0.5 s",
    ):
        async with mcp:
            pass
    # The subprocess was stopped too (stdin closed, then terminated).
    assert time.monotonic() - started < 10


# --- a dropped connection -----------------------------------------------------


async def test_a_dropped_connection_is_reopened_once(tmp_path: Path) -> None:
    async with MCPTools(command=server(tmp_path)) as mcp:
        with pytest.raises(
            MCPConnectionError,
            match=r"the connection dropped during the call of 'crash' \(not retried",
        ):
            await mcp.call("crash", {})
        assert await mcp.call("echo", {"text": "back"}) == "back"
    assert len((tmp_path / "starts").read_text().splitlines()) == 2


async def test_a_connection_that_cannot_be_reopened_fails_for_good(
    tmp_path: Path,
) -> None:
    async with MCPTools(
        command=server(tmp_path, "--start-limit", "1"), name="once"
    ) as mcp:
        with pytest.raises(MCPConnectionError, match="during the call"):
            await mcp.call("crash", {})
        with pytest.raises(
            MCPConnectionError, match=r"'once' dropped and could not be re-opened"
        ):
            await mcp.call("echo", {"text": "back"})
        with pytest.raises(ToolSourceNotOpenError, match="could not be re-opened"):
            mcp.tools()


# --- a tool list that changes -------------------------------------------------


async def test_a_changed_tool_list_is_offered_at_the_next_step(tmp_path: Path) -> None:
    """A 2025 server says so in the call's own response stream: the call
    returns once the new list is in, and the next step offers it."""
    model = calls(("add_tool", {"name": "late"}), ("late", {"text": "hi"}))
    async with MCPTools(command=server(tmp_path), protocol="legacy") as mcp:
        run = await collect_stream(Agent(id="a", model=model, tools=[mcp]), "hi")
    assert "late" not in {d.name for d in model.calls[0].tools}
    assert "late" in {d.name for d in model.calls[1].tools}
    results = [c.payload.result for c in run.chunks if isinstance(c, ToolResultChunk)]
    assert results == ["added", "late: hi"]


async def test_a_changed_tool_list_is_picked_up_on_a_2026_connection(
    tmp_path: Path,
) -> None:
    """On a 2026-07-28 connection the change comes on the ``subscriptions/
    listen`` stream, in no order with the call's answer: it is picked up
    soon after, and the runs that start then offer it."""
    async with MCPTools(command=server(tmp_path)) as mcp:
        assert await mcp.call("add_tool", {"name": "late"}) == "added"
        with trio.fail_after(10):
            while "late" not in {t.name for t in mcp.tools()}:  # noqa: ASYNC110
                await trio.sleep(0.005)  # (the server's change comes when it comes)
        model = calls(("late", {"text": "hi"}))
        run = await collect_stream(Agent(id="a", model=model, tools=[mcp]), "hi")
    results = [c.payload.result for c in run.chunks if isinstance(c, ToolResultChunk)]
    assert results == ["late: hi"]


# --- streamable HTTP ----------------------------------------------------------


async def test_tools_over_streamable_http(tmp_path: Path) -> None:
    model = calls(("echo", {"text": "over http"}))
    async with trio.open_nursery() as nursery:
        url = await nursery.start(serve_http, tmp_path)
        async with MCPTools(url=url) as mcp:
            run = await collect_stream(Agent(id="a", model=model, tools=[mcp]), "hi")
            assert mcp.name.startswith("127.0.0.1:")
        nursery.cancel_scope.cancel()
    results = [c.payload.result for c in run.chunks if isinstance(c, ToolResultChunk)]
    assert results == ["over http"]


async def test_http_headers_reach_the_server_and_never_a_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "tok-5ecret-value"
    caplog.set_level(logging.DEBUG)
    async with trio.open_nursery() as nursery:
        url = await nursery.start(
            lambda task_status: serve_http(
                tmp_path, token=secret, task_status=task_status
            )
        )
        async with MCPTools(
            url=url, headers={"Authorization": f"Bearer {secret}"}
        ) as mcp:
            assert await mcp.call("echo", {"text": "in"}) == "in"
            assert secret not in repr(mcp)
        wrong = MCPTools(
            url=url + f"?key={secret}", headers={"Authorization": "Bearer wrong-token"}
        )
        with pytest.raises(MCPConnectionError, match=r"would not connect") as caught:
            async with wrong:
                pass
        nursery.cancel_scope.cancel()
    assert secret not in str(caught.value)
    assert secret not in repr(caught.value)
    assert "wrong-token" not in str(caught.value)
    assert secret not in repr(wrong)
    assert not any(secret in r.getMessage() for r in caplog.records)
    # The query's value was in the URL httpx2 logged, redacted.
    assert any(
        "[redacted]" in r.getMessage() for r in caplog.records if r.name == "httpx2"
    )


async def test_a_restarted_http_server_is_reconnected_to(tmp_path: Path) -> None:
    """A legacy (2025) session is forgotten by a restarted server: the call
    is refused, the connection re-opened and the call sent again once."""
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def run_server(task_status: trio.TaskStatus[str]) -> None:
            with scope:
                await serve_http(tmp_path, task_status=task_status)

        url = await nursery.start(run_server)
        async with MCPTools(url=url, protocol="legacy") as mcp:
            assert await mcp.call("echo", {"text": "one"}) == "one"
            scope.cancel()
            port = int(url.split(":")[2].split("/")[0])
            # The same port again: a new server, which knows no session.
            await nursery.start(_serve_on, tmp_path, port)
            assert await mcp.call("echo", {"text": "two"}) == "two"
        nursery.cancel_scope.cancel()


async def _serve_on(
    state: Path, port: int, task_status: trio.TaskStatus[list[str]]
) -> None:
    from hypercorn.config import Config
    from hypercorn.trio import serve

    from tests.mcp.mcp_server import build_server

    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.accesslog = None
    config.errorlog = None
    app: Any = build_server(state).streamable_http_app()
    await serve(app, config, task_status=task_status)


# --- arguments ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, r"exactly one of command=\[...\] .* or url="),
        ({"command": ["a"], "url": "http://x"}, "exactly one of"),
        ({"command": "npx server"}, r"a non-empty list of str.*split the string"),
        ({"command": []}, "a non-empty list of str"),
        ({"url": "ftp://u:pw@host/x"}, r"http:// or https:// URL, got 'host/x'"),
        (
            {"command": ["a"], "prefix": "bad prefix"},
            r"prefix must be .* got 'bad prefix'",
        ),
        ({"command": ["a"], "headers": {"A": "b"}}, "headers= is for url="),
        ({"url": "http://x", "env": {"A": "b"}}, "env= and cwd= are for command="),
        (
            {"command": ["a"], "env": {"A": 1}},
            r"env must be a mapping of str to str, got a dict",
        ),
        (
            {"command": ["a"], "require_approval": "yes"},
            "require_approval must be a bool or a function",
        ),
        (
            {"command": ["a"], "require_approval": lambda name: True},
            "three positional arguments",
        ),
        (
            {"command": ["a"], "connect_timeout": 0},
            "connect_timeout must be a positive number",
        ),
        ({"command": ["a"], "protocol": "2024"}, "protocol must be 'auto' or 'legacy'"),
    ],
)
def test_bad_arguments_are_typed_errors_naming_them(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        MCPTools(**kwargs)


def test_names_never_show_secrets() -> None:
    mcp = MCPTools(url="https://user:hunter2@example.com:8443/mcp?api_key=s3cr3t-key")
    assert mcp.name == "example.com:8443/mcp"
    assert "hunter2" not in repr(mcp)
    assert "s3cr3t" not in repr(mcp)
    cmd = MCPTools(
        command=["npx", "-y", "@modelcontextprotocol/server-github", "--token=abc123"]
    )
    assert cmd.name == "npx server-github"


async def test_require_approval_is_carried_by_each_tool(tmp_path: Path) -> None:
    asked: list[tuple[str, Any]] = []

    def policy(name: str, args: Any, context: ToolContext) -> bool:
        asked.append((name, args))
        return name == "add"

    async with MCPTools(command=server(tmp_path), require_approval=policy) as mcp:
        tools = {t.name: t for t in mcp.tools()}
    context = ToolContext(tool_call_id="c", tool_name="read_file")
    approval = tools["read_file"].require_approval
    assert callable(approval)
    assert approval({"path": "x"}, context) is False
    add = tools["add"].require_approval
    assert callable(add)
    assert add({"a": 1, "b": 2}, context) is True
    assert asked == [("read.file", {"path": "x"}), ("add", {"a": 1, "b": 2})]
    async with MCPTools(command=server(tmp_path), require_approval=True) as mcp:
        assert all(t.require_approval is True for t in mcp.tools())


async def test_mcp_calls_are_traced_as_tool_calls(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    from procession.telemetry import names

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = calls(("echo", {"text": "traced"}), ("fail", {"message": "nope"}))
    async with MCPTools(command=server(tmp_path)) as mcp:
        agent = Agent(id="a", model=model, tools=[mcp], tracer_provider=provider)
        await agent.generate("hi")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    echo, fail = spans["execute_tool echo"], spans["execute_tool fail"]
    assert echo.attributes is not None
    assert echo.attributes[names.GEN_AI_TOOL_NAME] == "echo"
    assert echo.status.is_ok
    assert not fail.status.is_ok
    assert "nope" in (fail.status.description or "")


async def test_an_mcp_tool_waits_for_approval_when_mcptools_asks(
    tmp_path: Path,
) -> None:
    """``MCPTools(require_approval=fn(name, args, ctx))``: a call the policy
    picks waits for a person like any tool's, and runs on the server only
    once approved; annotations alone never ask."""
    from procession.memory import SqliteStorage

    asked: list[tuple[str, Any]] = []

    def policy(name: str, args: Any, context: Any) -> bool:
        asked.append((name, args))
        return name == "add"

    model = calls(("echo", {"text": "hi"}), ("add", {"a": 2, "b": 3}))
    async with MCPTools(command=server(tmp_path), require_approval=policy) as mcp:
        agent = Agent(
            id="a",
            model=model,
            tools=[mcp],
            storage=SqliteStorage(tmp_path / "runs.db"),
        )
        paused = await agent.generate("hi")
        assert paused.finish_reason == "suspended"
        [waiting] = paused.pending_tool_calls
        assert waiting.tool_name == "add"
        result = await agent.approve_tool_call_generate(paused.run_id)
    assert [name for name, _ in asked] == ["echo", "add"]
    assert result.text == "done"
    assert result.steps[-2].tool_results[0].result == "5"
