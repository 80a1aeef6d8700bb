"""The public test kit for your own processors.

* ``ScriptedModel``: a language model whose answers you script (text, reasoning,
  tool calls, errors at the call or mid-stream, delays on trio's clock); it
  records every request.
* ``run_sequential``: the sequential reference runner, the executable meaning of
  the pipeline's equivalence guarantee.
* ``procession.testing.strategies``: Hypothesis strategies for chunks, chunk
  streams, messages and text splits (needs the ``testing`` extra).
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from ._reference import SequentialRun as SequentialRun
from ._reference import run_sequential as run_sequential
from ._script import Delay as Delay
from ._script import ScriptError as ScriptError
from ._script import ScriptExhausted as ScriptExhausted
from ._script import reasoning_turn as reasoning_turn
from ._script import text_turn as text_turn
from ._script import tool_call_turn as tool_call_turn
from ._scripted import CallLog as CallLog
from ._scripted import RecordedCall as RecordedCall
from ._scripted import ScriptedModel as ScriptedModel
from ._scripted import ScriptedResponse as ScriptedResponse

__all__ = [
    "CallLog",
    "Delay",
    "RecordedCall",
    "ScriptError",
    "ScriptExhausted",
    "ScriptedModel",
    "ScriptedResponse",
    "SequentialRun",
    "reasoning_turn",
    "run_sequential",
    "text_turn",
    "tool_call_turn",
]

_fixup_module_metadata(__name__, globals())
