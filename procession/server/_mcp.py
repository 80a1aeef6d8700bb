"""``/api/mcp``: the app's agents as MCP tools (``procession.mcp``), each call
run as a ``stream`` request's run is (the token's resource, the limits)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

import attrs

from .._errors import ConfigurationError
from ..mcp import AgentCall, MCPEndpoint
from ..runtime import Agent, AgentStream
from ._security import Principal
from ._tracing import RequestSpan

__all__ = ["McpCaller", "mcp_endpoint", "mcp_wanted"]


@attrs.frozen
class McpCaller:
    """Who calls, as the route knows it: whom the request acts for (its
    resource, from the token or ``authenticate``) and the request's span (the
    run's span is its child)."""

    principal: Principal
    span: RequestSpan = attrs.field(repr=False)


RunFor = Callable[
    [Agent, Mapping[str, Any], McpCaller], AbstractAsyncContextManager[AgentStream]
]
"""The app's way to run an agent for a request body (``ProcessionApp._mcp_run``)."""


def mcp_wanted(mcp: bool | None) -> bool:
    """``create_app(mcp=...)``: ``None`` is on when the ``mcp`` extra is
    installed; ``True`` needs it."""
    installed = importlib.util.find_spec("mcp") is not None
    if mcp is None:
        return installed
    if not isinstance(mcp, bool):
        raise ConfigurationError(f"mcp must be a bool or None, got {mcp!r}")
    if mcp and not installed:
        raise ConfigurationError(
            'mcp=True needs the mcp extra: pip install "procession[mcp]"'
        )
    return mcp


def mcp_endpoint(
    agents: Iterable[Agent], run_for: RunFor, *, max_body_bytes: int
) -> MCPEndpoint:
    """The endpoint whose calls run through ``run_for`` with the body a
    ``stream`` request would have sent."""

    def open_run(
        agent: Agent, call: AgentCall, caller: Any
    ) -> AbstractAsyncContextManager[AgentStream]:
        body: dict[str, Any] = {"messages": call.message}
        if call.thread_id is not None:
            body["threadId"] = call.thread_id
        if call.resource_id is not None:
            body["resourceId"] = call.resource_id
        return run_for(agent, body, caller)

    return MCPEndpoint(agents, open_run=open_run, max_body_bytes=max_body_bytes)
