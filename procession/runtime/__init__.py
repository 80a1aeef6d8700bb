"""The runtime: the agent, its run, and tools.

``LanguageModel`` and the model-id registry are re-exported from their home,
``procession.models``. ``procession.runtime.providers`` is a deprecated alias of
``procession.providers`` (kept for one release).
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from ..data import PendingToolCall as PendingToolCall
from ..models import FinishReason as FinishReason
from ..models import LanguageModel as LanguageModel
from ..models import ModelFinish as ModelFinish
from ..models import ModelRequest as ModelRequest
from ..models import ModelResponse as ModelResponse
from ..models import ToolChoice as ToolChoice
from ..models import ToolDefinition as ToolDefinition
from ..models import register_provider as register_provider
from ..models import registered_providers as registered_providers
from ..models import resolve_model as resolve_model
from ..models import unregister_provider as unregister_provider
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
from .tools import Tool as Tool
from .tools import ToolContext as ToolContext
from .tools import ToolSet as ToolSet
from .tools import ToolSource as ToolSource
from .tools import ToolSuspended as ToolSuspended
from .tools import execute_tool as execute_tool
from .tools import json_schema as json_schema
from .tools import open_tool_sources as open_tool_sources
from .tools import parse_arguments as parse_arguments
from .tools import tool as tool

__all__ = [
    "Agent",
    "AgentResult",
    "AgentStream",
    "Durable",
    "FinishReason",
    "LanguageModel",
    "ModelFinish",
    "ModelRequest",
    "ModelResponse",
    "PendingToolCall",
    "RETRY_FEEDBACK_TAG",
    "RequireToolApproval",
    "SuspendedRun",
    "Tool",
    "ToolChoice",
    "ToolContext",
    "ToolDefinition",
    "ToolSet",
    "ToolSource",
    "ToolSuspended",
    "USE_AGENT_DEFAULT",
    "UseAgentDefault",
    "adopt_lapsed_runs",
    "execute_tool",
    "json_schema",
    "new_run_id",
    "open_tool_sources",
    "parse_arguments",
    "register_provider",
    "registered_providers",
    "resolve_model",
    "tool",
    "unregister_provider",
]

_fixup_module_metadata(__name__, globals())
