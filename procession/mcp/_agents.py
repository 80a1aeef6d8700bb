"""Agents served as MCP tools: each agent is the tool ``ask_<agent id>``,
which takes a ``message``, runs the agent on it and answers with its text,
sending the text as MCP progress notifications while it is produced (to a
client that asked for progress with a ``progressToken``).

Two transports: ``MCPEndpoint``, streamable HTTP for an ASGI app (the
``/api/mcp`` route of ``procession.server.create_app``; stateless, so any
server process can answer any request), and ``serve_stdio`` (``procession
serve --mcp``, for a client that starts the server itself, as Claude
Desktop does).
"""

from __future__ import annotations

import re
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    MutableMapping,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final, TypeAlias

import attrs
import trio

from .._errors import ConfigurationError
from ..chunks import TextDeltaChunk
from ..runtime import Agent, AgentStream
from ..runtime.tools import open_tool_sources

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

__all__ = [
    "CALLER_SCOPE_KEY",
    "AgentCall",
    "MCPEndpoint",
    "RunOpener",
    "agent_tool_name",
    "agents_server",
    "serve_stdio",
]

CALLER_SCOPE_KEY: Final = "procession.mcp.caller"
"""The ASGI scope key under which ``MCPEndpoint.handle`` keeps who is calling
(the server's token), for the ``RunOpener``."""

_INVALID: Final = re.compile(r"[^a-zA-Z0-9_-]")


@attrs.frozen(kw_only=True)
class AgentCall:
    """What one call of ``ask_<agent id>`` asks: the message, and for an
    agent with memory the thread and resource it names (if any)."""

    message: str
    thread_id: str | None = None
    resource_id: str | None = None


Scope: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send: TypeAlias = Callable[[MutableMapping[str, Any]], Awaitable[None]]

RunOpener: TypeAlias = Callable[
    [Agent, AgentCall, Any], AbstractAsyncContextManager[AgentStream]
]
"""``open_run(agent, call, caller)``: the run for one tool call, as
``agent.stream`` opens it. ``caller`` is what the transport knows of who
calls (``procession.server`` passes the bearer token; ``None`` over stdio).
It may raise to refuse the call (its message goes back as the tool's
error)."""


def agent_tool_name(agent_id: str) -> str:
    """``ask_<agent id>``, made valid for model providers (an invalid
    character becomes ``_``; at most 64 characters)."""
    return f"ask_{_INVALID.sub('_', agent_id)}"[:64]


def _open_run(agent: Agent, call: AgentCall, caller: Any) -> Any:
    return agent.stream(
        call.message, thread_id=call.thread_id, resource_id=call.resource_id
    )


def _input_schema(agent: Agent) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "message": {"type": "string", "description": "What to ask the agent."}
    }
    if agent.memory is not None:
        properties["threadId"] = {
            "type": "string",
            "description": "The conversation thread to continue (the agent keeps "
            "memory of it).",
        }
        properties["resourceId"] = {
            "type": "string",
            "description": "Whose thread it is (a user id); a token tied to a "
            "resource always acts for its own.",
        }
    return {"type": "object", "properties": properties, "required": ["message"]}


def _call_of(agent: Agent, arguments: Mapping[str, Any] | None) -> AgentCall:
    arguments = arguments or {}
    message = arguments.get("message")
    if not isinstance(message, str) or not message.strip():
        raise ValueError("'message' must be a non-empty string")
    ids: dict[str, str | None] = {}
    for key, field in (("threadId", "thread_id"), ("resourceId", "resource_id")):
        value = arguments.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise ValueError(f"'{key}' must be a non-empty string")
        ids[field] = value if agent.memory is not None else None
    return AgentCall(message=message, **ids)


def _by_tool_name(agents: Iterable[Agent]) -> dict[str, Agent]:
    by_tool: dict[str, Agent] = {}
    for agent in agents:
        if not isinstance(agent, Agent):
            raise ConfigurationError(f"agents must be Agent objects, got {agent!r}")
        tool_name = agent_tool_name(agent.id)
        if tool_name in by_tool:
            raise ConfigurationError(
                f"agents {by_tool[tool_name].id!r} and {agent.id!r} would both be "
                f"the MCP tool {tool_name!r}; give them ids that differ in letters "
                f"or digits"
            )
        by_tool[tool_name] = agent
    if not by_tool:
        raise ConfigurationError("an MCP server of agents needs at least one agent")
    return by_tool


def agents_server(
    agents: Iterable[Agent],
    *,
    open_run: RunOpener | None = None,
    name: str = "procession",
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) whose tools are
    ``ask_<agent id>``, one per agent. Each call runs the agent through
    ``open_run`` (default: ``agent.stream(message)``), reports the text as
    progress while it comes, and answers with the run's text; a run that
    fails, trips or is refused answers as a tool error saying why. A call the
    client cancels cancels the run.

    Raises:
        ConfigurationError: no agents, or two whose tool names are one.
    """
    from mcp.server.lowlevel import Server
    from mcp_types import (
        CallToolRequestParams,
        CallToolResult,
        ListToolsResult,
        PaginatedRequestParams,
        TextContent,
        Tool,
        ToolAnnotations,
    )

    opener = open_run or _open_run
    by_tool = _by_tool_name(agents)
    tools = [
        Tool(
            name=tool_name,
            title=agent.name,
            description=_description(agent),
            input_schema=_input_schema(agent),
            annotations=ToolAnnotations(
                title=agent.name, read_only_hint=False, open_world_hint=True
            ),
        )
        for tool_name, agent in by_tool.items()
    ]

    async def list_tools(
        ctx: Any, params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        await trio.lowlevel.checkpoint()
        return ListToolsResult(tools=tools)

    def failed(text: str) -> CallToolResult:
        return CallToolResult(
            content=[TextContent(type="text", text=text)], is_error=True
        )

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        agent = by_tool.get(params.name)
        if agent is None:
            await trio.lowlevel.checkpoint()
            return failed(f"no tool {params.name!r}; the tools are {sorted(by_tool)}")
        try:
            call = _call_of(agent, params.arguments)
        except ValueError as exc:
            await trio.lowlevel.checkpoint()
            return failed(f"{params.name}: {exc}")
        request = getattr(ctx, "request", None)
        caller = None if request is None else request.scope.get(CALLER_SCOPE_KEY)
        try:
            async with opener(agent, call, caller) as stream:
                sent = 0
                async for chunk in stream:
                    if isinstance(chunk, TextDeltaChunk) and chunk.payload.text:
                        sent += len(chunk.payload.text)
                        await ctx.session.report_progress(
                            sent, None, chunk.payload.text
                        )
                result = await stream.result()
        except Exception as exc:
            return failed(f"{params.name}: {exc}")
        if result.tripwire is not None:
            return failed(
                f"{params.name}: blocked by {result.tripwire.processor_id}: "
                f"{result.tripwire.reason}"
            )
        if result.error is not None:
            text = str(result.error) or type(result.error).__name__
            return failed(f"{params.name}: {text}")
        return CallToolResult(content=[TextContent(type="text", text=result.text)])

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def _description(agent: Agent) -> str:
    description = getattr(agent, "description", None)
    said = f" {description}" if isinstance(description, str) and description else ""
    return f"Ask the agent {agent.name!r} (id {agent.id!r}); it answers in text.{said}"


class MCPEndpoint:
    """Agents as MCP tools over streamable HTTP, for an ASGI app: stateless
    (each request stands alone: no session to keep, any server process
    answers), answering in SSE so progress notifications stream.

    ``async with endpoint.running():`` for the app's lifespan, then
    ``await endpoint.handle(scope, receive, send, caller=...)`` for each
    request to its path; ``caller`` reaches ``open_run``. Authentication is
    the app's, before ``handle``.

    Raises:
        ConfigurationError: as ``agents_server`` does, when it is made.
    """

    def __init__(
        self,
        agents: Iterable[Agent],
        *,
        open_run: RunOpener | None = None,
        max_body_bytes: int = 1 << 20,
    ) -> None:
        self._agents = list(_by_tool_name(agents).values())  # checked now
        self._open_run = open_run
        self._max_body_bytes = max_body_bytes
        self._manager: StreamableHTTPSessionManager | None = None
        self._nursery: trio.Nursery | None = None
        self._starting: trio.Lock | None = None

    @property
    def is_running(self) -> bool:
        return self._nursery is not None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the endpoint. The SDK is imported and its task group started
        at the first request, not here: a server no MCP client calls never
        loads it (about 38 MB a process). Checkpoints; leaving it cancels
        the calls in flight."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self._starting = trio.Lock()
            try:
                yield
            finally:
                self._nursery = self._starting = self._manager = None
                nursery.cancel_scope.cancel()

    async def _started(self) -> StreamableHTTPSessionManager:
        """The SDK's session manager, started once (by the first request;
        concurrent first requests wait for the one start). Checkpoints."""
        manager = self._manager
        if manager is not None:
            return manager
        nursery, starting = self._nursery, self._starting
        if nursery is None or starting is None:
            raise RuntimeError("the MCP endpoint runs only inside running()")
        async with starting:
            if self._manager is None:
                self._manager = await nursery.start(self._run_manager)
        assert self._manager is not None
        return self._manager

    async def _run_manager(
        self, task_status: trio.TaskStatus[StreamableHTTPSessionManager]
    ) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        manager = StreamableHTTPSessionManager(
            app=agents_server(self._agents, open_run=self._open_run),
            stateless=True,
            json_response=False,
            max_request_body_size=self._max_body_bytes,
        )
        async with manager.run():
            task_status.started(manager)
            await trio.sleep_forever()

    async def handle(
        self, scope: Scope, receive: Receive, send: Send, *, caller: Any
    ) -> None:
        """Answer one HTTP request of the MCP client (the first one starts
        the SDK). Checkpoints; a client that leaves cancels its call (and its
        run).

        Raises:
            RuntimeError: the endpoint is not running.
        """
        manager = await self._started()
        await manager.handle_request({**scope, CALLER_SCOPE_KEY: caller}, receive, send)


async def serve_stdio(
    agents: Iterable[Agent], *, open_run: RunOpener | None = None
) -> None:
    """Serve ``agents`` as MCP tools over this process's stdin and stdout,
    until stdin closes (the client ended the session) or this is cancelled.
    Opens the tool sources of the agents that are not open (their
    ``MCPTools``) first. Nothing else may write to stdout meanwhile.
    Checkpoints throughout."""
    from mcp.server.stdio import stdio_server

    agent_list = list(agents)
    server = agents_server(agent_list, open_run=open_run)
    async with (
        open_tool_sources([a.tools for a in agent_list]),
        stdio_server() as (read, write),
    ):
        await server.run(read, write, server.create_initialization_options())
