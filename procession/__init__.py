"""procession: LLM agents whose streams flow through supervised trio actors.

The public face. Layers: ``procession.processors`` (contract and data model),
``procession.actors`` (actor kernel and pipeline), ``procession.runtime`` (the
agent loop); ``procession.chunks`` for chunk types and their wire JSON;
``procession.testing`` for the test kit.
"""

from procession.processors import ConfigurationError as ConfigurationError
from procession.processors import Message as Message
from procession.processors import MessageList as MessageList
from procession.processors import ProcessionError as ProcessionError
from procession.processors import Processor as Processor
from procession.processors import ProcessorViolation as ProcessorViolation
from procession.processors import ProviderError as ProviderError
from procession.processors import RequestContext as RequestContext
from procession.processors import SystemMessage as SystemMessage
from procession.processors import TripWire as TripWire
from procession.processors import message_text as message_text
from procession.runtime import Agent as Agent
from procession.runtime import AgentResult as AgentResult
from procession.runtime import Tool as Tool
from procession.runtime import tool as tool

__all__ = [
    "Agent",
    "AgentResult",
    "ConfigurationError",
    "Message",
    "MessageList",
    "ProcessionError",
    "Processor",
    "ProcessorViolation",
    "ProviderError",
    "RequestContext",
    "SystemMessage",
    "Tool",
    "TripWire",
    "message_text",
    "tool",
]
