"""The runtime: the agent, its run, and tools.

``LanguageModel`` and the model-id registry live in ``procession.models``, the
tools in ``procession.runtime.tools`` (``tool`` and ``Tool`` also in
``procession``); their old paths here warn and name the home.
``procession.runtime.providers`` is a deprecated alias of
``procession.providers`` (kept for one release).
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from .._faces import moved_names as _moved_names
from ..data import PendingToolCall as PendingToolCall
from ._agent import Agent as Agent
from ._answer import SuspendedRun as SuspendedRun
from ._approval import RequireToolApproval as RequireToolApproval
from ._durable import Durable as Durable
from ._options import USE_AGENT_DEFAULT as USE_AGENT_DEFAULT
from ._options import UseAgentDefault as UseAgentDefault
from ._options import new_run_id as new_run_id
from ._result import AgentResult as AgentResult
from ._state import RETRY_FEEDBACK_TAG as RETRY_FEEDBACK_TAG
from ._stream import AgentStream as AgentStream
from ._takeover import adopt_lapsed_runs as adopt_lapsed_runs

__all__ = [
    "Agent",
    "AgentResult",
    "AgentStream",
    "Durable",
    "PendingToolCall",
    "RETRY_FEEDBACK_TAG",
    "RequireToolApproval",
    "SuspendedRun",
    "USE_AGENT_DEFAULT",
    "UseAgentDefault",
    "adopt_lapsed_runs",
    "new_run_id",
]

_fixup_module_metadata(__name__, globals())

# Names that left this face (issue 27 §3: one public home per name): still
# importable from here, with a DeprecationWarning naming their home.
__getattr__, __dir__ = _moved_names(
    __name__,
    {
        "FinishReason": "procession.models",
        "LanguageModel": "procession.models",
        "ModelFinish": "procession.models",
        "ModelRequest": "procession.models",
        "ModelResponse": "procession.models",
        "Tool": "procession.runtime.tools",
        "ToolChoice": "procession.models",
        "ToolContext": "procession.runtime.tools",
        "ToolDefinition": "procession.models",
        "ToolSet": "procession.runtime.tools",
        "ToolSource": "procession.runtime.tools",
        "ToolSuspended": "procession.runtime.tools",
        "execute_tool": "procession.runtime.tools._tool",
        "json_schema": "procession.runtime.tools",
        "open_tool_sources": "procession.runtime.tools",
        "parse_arguments": "procession.runtime.tools",
        "register_provider": "procession.models",
        "registered_providers": "procession.models",
        "resolve_model": "procession.models",
        "tool": "procession.runtime.tools",
        "unregister_provider": "procession.models",
    },
)
