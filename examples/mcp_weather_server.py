"""A small MCP server, written with the ``mcp`` package's own server API,
for ``docs/mcp.md``: one tool, ``forecast``, over stdio.

Run it yourself with ``python examples/mcp_weather_server.py`` (it then
waits for an MCP client on stdin).
"""

from __future__ import annotations

import trio
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server: MCPServer = MCPServer("weather", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def forecast(city: str) -> str:
    """Tomorrow's weather in a city."""
    return f"{city}: sunny, 21 °C"


if __name__ == "__main__":
    trio.run(server.run_stdio_async)
