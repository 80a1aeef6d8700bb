"""The runtime: the agent loop, the model interface, tools and providers."""

from . import providers as providers  # registers the "anthropic/...", "openai/..." ids
from ._agent import RETRY_FEEDBACK_TAG as RETRY_FEEDBACK_TAG
from ._agent import Agent as Agent
from ._agent import AgentResult as AgentResult
from ._agent import AgentStream as AgentStream
from ._model import FinishReason as FinishReason
from ._model import LanguageModel as LanguageModel
from ._model import ModelFinish as ModelFinish
from ._model import ModelRequest as ModelRequest
from ._model import ModelResponse as ModelResponse
from ._model import ToolChoice as ToolChoice
from ._model import ToolDefinition as ToolDefinition
from ._providers import register_provider as register_provider
from ._providers import registered_providers as registered_providers
from ._providers import resolve_model as resolve_model
from ._providers import unregister_provider as unregister_provider
from ._tools import Tool as Tool
from ._tools import ToolContext as ToolContext
from ._tools import ToolSet as ToolSet
from ._tools import execute_tool as execute_tool
from ._tools import json_schema as json_schema
from ._tools import parse_arguments as parse_arguments
from ._tools import tool as tool

__all__ = [
    "Agent",
    "AgentResult",
    "AgentStream",
    "FinishReason",
    "LanguageModel",
    "ModelFinish",
    "ModelRequest",
    "ModelResponse",
    "RETRY_FEEDBACK_TAG",
    "Tool",
    "ToolChoice",
    "ToolContext",
    "ToolDefinition",
    "ToolSet",
    "execute_tool",
    "json_schema",
    "parse_arguments",
    "register_provider",
    "registered_providers",
    "resolve_model",
    "tool",
    "unregister_provider",
]
