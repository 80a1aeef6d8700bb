"""Wire codecs: one cattrs converter per wire format.

Mastra's chunk and message JSON (``to_wire`` / ``from_wire``,
``message_to_wire`` / ``message_from_wire``), and the input shapes a
``MessageList`` accepts (``parse_message`` / ``parse_system_message``).
(De)serialisation happens here, at the edges, and nowhere in the data model.
"""

from ._input import parse_message as parse_message
from ._input import parse_system_message as parse_system_message
from ._mastra import from_wire as from_wire
from ._mastra import message_from_wire as message_from_wire
from ._mastra import message_to_wire as message_to_wire
from ._mastra import to_wire as to_wire

__all__ = [
    "from_wire",
    "message_from_wire",
    "message_to_wire",
    "parse_message",
    "parse_system_message",
    "to_wire",
]
