"""A real MCP server for the tests, written with the ``mcp`` package's own
server API (``MCPServer``): run as a subprocess over stdio
(``python mcp_server.py --state DIR``), or served over streamable HTTP on
loopback by ``serve_http`` (hypercorn's trio worker, in the test's trio run).

It leaves marks in its state directory (``DIR/<tag>.started``,
``.cancelled``, ``.finished``, and ``starts``, one line per start) so a test
can see what happened on the server's side of a call.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import trio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

SERVER_FILE = Path(__file__)


def build_server(state: Path) -> MCPServer:
    """The test server: echo, add, wait, fail, crash, add_tool, env_value and
    a tool whose name has a dot."""
    server: MCPServer = MCPServer("procession-test-server", log_level="WARNING")

    def mark(name: str, text: str = "") -> None:
        (state / name).write_text(text)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, title="Echo"))
    def echo(text: str) -> str:
        """Echo the text back."""
        return text

    @server.tool(
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=False)
    )
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    async def wait(tag: str, seconds: float = 60.0) -> str:
        """Wait, leaving marks: started, then finished or cancelled."""
        mark(f"{tag}.started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            mark(f"{tag}.cancelled")
            raise
        mark(f"{tag}.finished")
        return "waited"

    @server.tool()
    def fail(message: str) -> str:
        """Fail with the message."""
        raise ToolError(message)

    @server.tool()
    def crash() -> str:
        """Exit the server process in the middle of the call."""
        os._exit(1)

    @server.tool()
    async def add_tool(name: str, ctx: Context) -> str:
        """Add a tool named ``name`` and say the tool list changed."""

        def added(text: str) -> str:
            return f"{name}: {text}"

        server.add_tool(added, name=name, description=f"The tool {name}.")
        # (A 2026-07-28 connection does not take this one: the listen
        # stream carries the change.)
        with contextlib.suppress(Exception):
            await ctx.request_context.session.send_tool_list_changed()
        await ctx.notify_tools_changed()
        return "added"

    @server.tool()
    def env_value(name: str) -> str:
        """The value of an environment variable of the server process."""
        return os.environ.get(name, "<unset>")

    @server.tool(name="read.file")
    def read_file(path: str) -> str:
        """A tool whose name has a dot."""
        return path

    return server


def _count_start(state: Path, limit: int | None) -> None:
    starts = state / "starts"
    with starts.open("a") as f:
        f.write(f"{os.getpid()}\n")
    if limit is not None and len(starts.read_text().splitlines()) > limit:
        sys.exit(3)


async def serve_http(
    state: Path,
    *,
    token: str | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the test server over streamable HTTP on a free loopback port,
    until cancelled; ``task_status`` gets its URL. With ``token``, a request
    without ``Authorization: Bearer <token>`` gets a 401."""
    from hypercorn.config import Config
    from hypercorn.trio import serve

    inner: Any = build_server(state).streamable_http_app()
    app: Any = inner
    if token is not None:
        app = _require_token(inner, token)
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    async with trio.open_nursery() as nursery:
        urls = await nursery.start(functools.partial(serve, app, config))
        task_status.started(urls[0] + "/mcp")


def _require_token(app: Any, token: str) -> Callable[..., Awaitable[None]]:
    expected = f"Bearer {token}".encode()

    async def guarded(
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if (
            scope["type"] == "http"
            and dict(scope["headers"]).get(b"authorization") != expected
        ):
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"no"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", type=Path, required=True)
    parser.add_argument("--start-limit", type=int, default=None)
    args = parser.parse_args()
    _count_start(args.state, args.start_limit)
    trio.run(build_server(args.state).run_stdio_async)


if __name__ == "__main__":
    main()
