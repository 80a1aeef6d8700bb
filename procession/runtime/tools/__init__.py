"""Tools: what the model is offered, how its arguments are checked, how a tool runs.

A ``Tool`` has a name, a description, an input and an ``execute`` function::

    @attrs.frozen
    class WeatherInput:
        city: str
        unit: Literal["celsius", "fahrenheit"] = "celsius"
        \"\"\"Temperature unit.\"\"\"

    @tool
    async def get_weather(args: WeatherInput, context: ToolContext) -> str:
        \"\"\"Current weather in a city.\"\"\"
        ...

The input is one of:

* an attrs class: the JSON Schema the model sees is generated from it
  (``json_schema``) and the model's arguments are structured into an instance
  with a strict cattrs converter;
* a JSON Schema dict (an object schema): the arguments are validated against it
  (with the ``jsonschema`` package when it is installed — the ``jsonschema``
  extra — else with a small built-in validator) and passed on as a ``dict``;
* ``None``: the tool takes no arguments (``{"type": "object", "properties": {}}``);
  whatever object the model sends is passed on as a ``dict``.

An agent's ``tools=`` list may also hold tool sources (``ToolSource``, e.g.
``procession.mcp.MCPTools``): tools from outside the program, offered as the
source has them at each step and called through the same path.

The agent loop uses the three steps separately: ``ToolSet.definitions()`` for the
model request, ``parse_arguments`` when a tool call arrives (a
``ToolArgumentsError`` goes back to the model as a ``tool-error`` chunk, so it can
correct itself) and ``execute_tool`` to run it.

Argument checking is strict, as JSON Schema is: ``"5"`` is not an integer and
``1`` is not a boolean. The one leniency, also JSON Schema's, is that an integral
float (``5.0``) is accepted as an integer.
"""

from ..._faces import fixup_module_metadata as _fixup_module_metadata
from ..._faces import moved_names as _moved_names
from ...wire import json_schema as json_schema
from ._arguments import parse_arguments as parse_arguments
from ._tool import Tool as Tool
from ._tool import ToolContext as ToolContext
from ._tool import ToolSuspended as ToolSuspended
from ._tool import tool as tool
from ._toolset import ToolSet as ToolSet
from ._toolset import ToolSource as ToolSource
from ._toolset import open_tool_sources as open_tool_sources

__all__ = [
    "Tool",
    "ToolContext",
    "ToolSet",
    "ToolSource",
    "ToolSuspended",
    "json_schema",
    "open_tool_sources",
    "parse_arguments",
    "tool",
]

_fixup_module_metadata(__name__, globals())

# Names that left this face (issue 27 §3: one public home per name): still
# importable from here, with a DeprecationWarning naming their home.
__getattr__, __dir__ = _moved_names(
    __name__,
    {
        "execute_tool": "procession.runtime.tools._tool",
    },
)
