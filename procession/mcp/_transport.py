"""Opening one connection to an MCP server with the SDK's ``Client``: the
transport (a subprocess over stdio, or streamable HTTP), its read side
watched for the end of the connection."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["ServerSpec", "follows_changes_by_listening", "open_client"]


class ServerSpec:
    """How to reach one server: a command (stdio) or a URL (streamable
    HTTP), with what goes with either."""

    __slots__ = ("basic_auth", "command", "cwd", "env", "headers", "url")

    def __init__(
        self,
        *,
        command: tuple[str, ...] | None,
        url: str | None,
        env: Mapping[str, str] | None,
        cwd: str | None,
        headers: Mapping[str, str] | None,
        basic_auth: tuple[str, str] | None,
    ) -> None:
        self.command = command
        self.url = url
        self.env = env
        self.cwd = cwd
        self.headers = headers
        self.basic_auth = basic_auth


@asynccontextmanager
async def open_client(
    spec: ServerSpec,
    *,
    protocol: Literal["auto", "legacy"],
    on_end: Callable[[], None],
    on_message: Callable[[Any], Awaitable[None]],
) -> AsyncIterator[Client]:
    """The SDK's client on the server's transport, entered: ``on_end`` is
    called when the connection ends (the server process exited, the stream
    closed), ``on_message`` gets the session's notifications. Checkpoints;
    raises what the SDK raises for a server that will not start or answer."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    async with AsyncExitStack() as stack:
        transport: Any
        if spec.command is not None:
            transport = stdio_client(
                StdioServerParameters(
                    command=spec.command[0],
                    args=list(spec.command[1:]),
                    env=dict(spec.env) if spec.env is not None else None,
                    cwd=spec.cwd,
                ),
                errlog=_server_stderr(),
            )
        else:
            import httpx2

            assert spec.url is not None
            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=dict(spec.headers) if spec.headers is not None else None,
                    auth=spec.basic_auth,
                    timeout=httpx2.Timeout(30.0, read=300.0),
                )
            )
            transport = streamable_http_client(spec.url, http_client=http)

        async def handle(message: Any) -> None:
            await on_message(message)

        client = Client(
            _Watched(transport, on_end),
            mode=protocol,
            cache=None,
            message_handler=handle,
        )
        yield await stack.enter_async_context(client)


def follows_changes_by_listening(client: Client) -> bool:
    """Whether the connection is 2026-07-28 (changes come on a listen stream)
    and the server says its tool list may change."""
    from mcp_types.version import MODERN_PROTOCOL_VERSIONS

    tools = client.server_capabilities.tools
    return (
        client.protocol_version in MODERN_PROTOCOL_VERSIONS
        and tools is not None
        and bool(tools.list_changed)
    )


def _server_stderr() -> Any:
    """Where a server process's stderr goes: ours, or the process's own when
    ``sys.stderr`` was replaced by an object without a file descriptor (a
    notebook, a test's capture), else nowhere."""
    for stream in (sys.stderr, sys.__stderr__):
        try:
            if stream is not None:
                stream.fileno()
                return stream
        except (AttributeError, OSError, ValueError):
            continue
    return subprocess.DEVNULL


class _Watched:
    """A transport whose read side calls ``on_end`` when the connection ends
    (a server process that exited, a stream the server closed)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    async def __aenter__(self) -> tuple[Any, Any]:
        read, write = await self._inner.__aenter__()
        return _WatchedRead(read, self._on_end), write

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
        return result


class _WatchedRead:
    __slots__ = ("_inner", "_on_end")

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end = on_end

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> _WatchedRead:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self._inner.__anext__()
        except (StopAsyncIteration, anyio.ClosedResourceError):
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedRead:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc, tb)
        return result
