"""Wire codecs: one cattrs converter per wire format.

Mastra's chunk and message JSON (``to_wire`` / ``from_wire``,
``message_to_wire`` / ``message_from_wire``), the input shapes a
``MessageList`` accepts (``parse_message`` / ``parse_system_message``), and the
check that text can leave the process (``find_lone_surrogate`` /
``check_text``), and the checks of decoded JSON values against an attrs class
or a JSON Schema (``ValueSchema``, ``json_schema``), shared by tool arguments
and structured output.
(De)serialisation happens here, at the edges, and nowhere in the data model.
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from ._input import parse_message as parse_message
from ._input import parse_system_message as parse_system_message
from ._mastra import from_wire as from_wire
from ._mastra import message_from_wire as message_from_wire
from ._mastra import message_to_wire as message_to_wire
from ._mastra import to_wire as to_wire
from ._schema import json_schema as json_schema
from ._text import check_text as check_text
from ._text import find_lone_surrogate as find_lone_surrogate
from ._validate import ValueMismatch as ValueMismatch
from ._validate import ValueSchema as ValueSchema
from ._validate import short_repr as short_repr

__all__ = [
    "ValueMismatch",
    "ValueSchema",
    "check_text",
    "find_lone_surrogate",
    "from_wire",
    "json_schema",
    "message_from_wire",
    "message_to_wire",
    "parse_message",
    "parse_system_message",
    "short_repr",
    "to_wire",
]

_fixup_module_metadata(__name__, globals())
