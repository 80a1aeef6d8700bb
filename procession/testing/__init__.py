"""The public test kit for your own processors.

* ``ScriptedModel``: a language model whose answers you script (text, reasoning,
  tool calls, errors at the call or mid-stream, delays on trio's clock); it
  records every request.
* ``run_sequential``: the sequential reference runner, the executable meaning of
  the pipeline's equivalence guarantee.
* ``procession.testing.strategies``: Hypothesis strategies for chunks, chunk
  streams, messages and text splits (needs the ``testing`` extra).
"""

from ..runtime._scripted import CallLog as CallLog
from ..runtime._scripted import Delay as Delay
from ..runtime._scripted import RecordedCall as RecordedCall
from ..runtime._scripted import ScriptedModel as ScriptedModel
from ..runtime._scripted import ScriptedResponse as ScriptedResponse
from ..runtime._scripted import ScriptError as ScriptError
from ..runtime._scripted import ScriptExhausted as ScriptExhausted
from ..runtime._scripted import reasoning_turn as reasoning_turn
from ..runtime._scripted import text_turn as text_turn
from ..runtime._scripted import tool_call_turn as tool_call_turn
from ._reference import SequentialRun as SequentialRun
from ._reference import run_sequential as run_sequential

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
