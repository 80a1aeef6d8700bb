"""Tools from any MCP server, and agents served as MCP tools.

``MCPTools`` puts the tools of a Model Context Protocol server (over stdio or
streamable HTTP) in an agent's ``tools=`` list; they are called through the
same path as ``@tool`` tools, so ``process_tool_result``, tracing, timeouts
and cancellation apply. Serving agents the other way round, as MCP tools
``ask_<agent id>``: ``procession serve --mcp`` (stdio) and the ``/api/mcp``
route of ``procession.server.create_app`` (streamable HTTP).

Built on the official ``mcp`` SDK (``pip install "procession[mcp]"``; it runs
on trio through anyio). Importing this module does not import the SDK.
"""

from .._errors import MCPConnectionError as MCPConnectionError
from .._errors import MCPServerError as MCPServerError
from .._errors import MCPTimeoutError as MCPTimeoutError
from .._errors import MCPToolError as MCPToolError
from .._faces import fixup_module_metadata as _fixup_module_metadata
from .._faces import moved_names as _moved_names
from ._agents import AgentCall as AgentCall
from ._agents import MCPEndpoint as MCPEndpoint
from ._agents import RunOpener as RunOpener
from ._agents import agent_tool_name as agent_tool_name
from ._agents import agents_server as agents_server
from ._agents import serve_stdio as serve_stdio
from ._tool import ApprovalPolicy as ApprovalPolicy
from ._tool import MCPTool as MCPTool
from ._tool import MCPToolAnnotations as MCPToolAnnotations
from ._tool import ToolApproval as ToolApproval
from ._tools import MCPTools as MCPTools

__all__ = [
    "AgentCall",
    "ApprovalPolicy",
    "MCPConnectionError",
    "MCPEndpoint",
    "MCPServerError",
    "MCPTimeoutError",
    "MCPTool",
    "MCPToolAnnotations",
    "MCPToolError",
    "MCPTools",
    "RunOpener",
    "ToolApproval",
    "agent_tool_name",
    "agents_server",
    "serve_stdio",
]

_fixup_module_metadata(__name__, globals())

# Names that left this face (issue 27 §3: one public home per name): still
# importable from here, with a DeprecationWarning naming their home.
__getattr__, __dir__ = _moved_names(
    __name__,
    {
        "ToolSourceNotOpenError": "procession",
    },
)
