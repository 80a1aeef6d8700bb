"""procession: LLM agents whose streams flow through supervised trio actors.

The public face: ``Agent``, ``Processor``, ``TripWire``, messages and the whole
error tree. The rooms below it, bottom to top (imports only go down; the
import-linter contracts in ``pyproject.toml`` check it):

* ``procession.chunks`` and ``procession.messages``: the value types and their
  Mastra wire JSON (implemented in ``procession.data`` and ``procession.wire``);
* ``procession.models``: the ``LanguageModel`` protocol and the model-id registry;
* ``procession.processors``: the processor contract and the built-in processors;
* ``procession.actors``: the actor kernel, the output pipeline, the run's
  coordination protocol;
* ``procession.runtime``: the agent, its run, tools;
* the edges: ``procession.providers`` (Anthropic, OpenAI) and
  ``procession.testing`` (the test kit).
"""

from . import chunks as chunks
from . import messages as messages
from ._errors import ApprovalAlreadyDecided as ApprovalAlreadyDecided
from ._errors import ConfigurationError as ConfigurationError
from ._errors import DuplicateProcessorIdError as DuplicateProcessorIdError
from ._errors import EventTooLargeError as EventTooLargeError
from ._errors import InvalidTextError as InvalidTextError
from ._errors import MessageFormatError as MessageFormatError
from ._errors import MissingFieldError as MissingFieldError
from ._errors import ModelIdleTimeout as ModelIdleTimeout
from ._errors import NoRunStorageError as NoRunStorageError
from ._errors import OverloadedError as OverloadedError
from ._errors import ProcessionError as ProcessionError
from ._errors import ProcessorContractError as ProcessorContractError
from ._errors import ProcessorError as ProcessorError
from ._errors import ProviderConnectionError as ProviderConnectionError
from ._errors import ProviderError as ProviderError
from ._errors import ProviderStatusError as ProviderStatusError
from ._errors import ProviderStreamError as ProviderStreamError
from ._errors import ProviderTimeoutError as ProviderTimeoutError
from ._errors import RateLimitError as RateLimitError
from ._errors import RunDeadlineExceeded as RunDeadlineExceeded
from ._errors import SnapshotError as SnapshotError
from ._errors import ToolArgumentsError as ToolArgumentsError
from ._errors import ToolCallNotPendingError as ToolCallNotPendingError
from ._errors import ToolInterruptedError as ToolInterruptedError
from ._errors import ToolSourceNotOpenError as ToolSourceNotOpenError
from ._errors import TripWire as TripWire
from ._errors import UnknownChunkTypeError as UnknownChunkTypeError
from ._errors import WaitingRunError as WaitingRunError
from ._errors import WaitingRunNotFound as WaitingRunNotFound
from ._errors import WireFormatError as WireFormatError
from ._faces import fixup_module_metadata as _fixup_module_metadata
from ._version import version as _version
from .messages import Message as Message
from .messages import SystemMessage as SystemMessage
from .messages import message_text as message_text
from .processors import MessageList as MessageList
from .processors import Processor as Processor
from .processors import ProcessorViolation as ProcessorViolation
from .processors import RequestContext as RequestContext
from .runtime import Agent as Agent
from .runtime import AgentResult as AgentResult
from .runtime.tools import Tool as Tool
from .runtime.tools import tool as tool

__all__ = [
    "Agent",
    "AgentResult",
    "ApprovalAlreadyDecided",
    "ConfigurationError",
    "DuplicateProcessorIdError",
    "EventTooLargeError",
    "InvalidTextError",
    "Message",
    "MessageFormatError",
    "MessageList",
    "MissingFieldError",
    "ModelIdleTimeout",
    "NoRunStorageError",
    "OverloadedError",
    "ProcessionError",
    "Processor",
    "ProcessorContractError",
    "ProcessorError",
    "ProcessorViolation",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderStatusError",
    "ProviderStreamError",
    "ProviderTimeoutError",
    "RateLimitError",
    "RequestContext",
    "RunDeadlineExceeded",
    "SnapshotError",
    "SystemMessage",
    "Tool",
    "ToolArgumentsError",
    "ToolCallNotPendingError",
    "ToolInterruptedError",
    "ToolSourceNotOpenError",
    "TripWire",
    "UnknownChunkTypeError",
    "WaitingRunError",
    "WaitingRunNotFound",
    "WireFormatError",
    "message_text",
    "tool",
]

_fixup_module_metadata(__name__, globals(), force=True)

__version__: str = _version()
"""The installed distribution's version (PEP 396 style)."""
