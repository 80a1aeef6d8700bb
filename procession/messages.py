"""Messages and their Mastra wire JSON: the public home of the message types.

Messages have Mastra's ``MastraDBMessage`` shape and are mutable, as the seed
requires: an in-place edit of ``message.content.parts`` is seen by later
processors and by persistence. ``message_to_wire(message) -> dict`` and
``message_from_wire(dict) -> Message`` speak ``MastraDBMessage`` JSON exactly.
"""

from ._faces import fixup_module_metadata as _fixup_module_metadata
from .data import DataPart as DataPart
from .data import FilePart as FilePart
from .data import Message as Message
from .data import MessageContent as MessageContent
from .data import Part as Part
from .data import ReasoningDetail as ReasoningDetail
from .data import ReasoningPart as ReasoningPart
from .data import Role as Role
from .data import SourceDocumentPart as SourceDocumentPart
from .data import SourceInfo as SourceInfo
from .data import SourcePart as SourcePart
from .data import StepStartPart as StepStartPart
from .data import SystemMessage as SystemMessage
from .data import TextPart as TextPart
from .data import ToolInvocation as ToolInvocation
from .data import ToolInvocationPart as ToolInvocationPart
from .data import ToolInvocationState as ToolInvocationState
from .data import UnknownPart as UnknownPart
from .data import message_text as message_text
from .data import new_message_id as new_message_id
from .wire import message_from_wire as message_from_wire
from .wire import message_to_wire as message_to_wire

__all__ = [
    "DataPart",
    "FilePart",
    "Message",
    "MessageContent",
    "Part",
    "ReasoningDetail",
    "ReasoningPart",
    "Role",
    "SourceDocumentPart",
    "SourceInfo",
    "SourcePart",
    "StepStartPart",
    "SystemMessage",
    "TextPart",
    "ToolInvocation",
    "ToolInvocationPart",
    "ToolInvocationState",
    "UnknownPart",
    "message_from_wire",
    "message_text",
    "message_to_wire",
    "new_message_id",
]

_fixup_module_metadata(__name__, globals())
