"""The public test kit for your own processors.

* ``ScriptedModel``: a language model whose answers you script (text, reasoning,
  tool calls, errors at the call or mid-stream, delays on trio's clock); it
  records every request. ``check_turn`` checks a turn once for many models.
* ``run_sequential``: the sequential reference runner, the executable meaning of
  the pipeline's equivalence guarantee.
* ``assert_split_invariant`` / ``assert_modes_agree``: ready-made checks that a
  processor gives one verdict and one output however its text is split, and the
  same client output in every execution mode as ``run_sequential``.
* ``assert_run_shape``: a whole run's chunks keep the order every run keeps
  (one ``finish``, or ``error`` then the closing ``step-finish`` / ``finish``,
  or ``tripwire`` / ``abort`` last); returns how the run ended.
* ``fail_at`` / ``stall`` / ``drip``: fault injection on a scripted turn (an
  error at chunk k, a stall, a slow drip), on trio's clock.
* ``collect_stream``: run an agent, keep its chunks and its result.
* ``crash_run``: a durable run's process dies mid-run (its lease lapsed at
  once), for tests of what a takeover keeps.
* ``PassThrough`` / ``SyncPassThrough``: output processors that change
  nothing (the baseline of a processor benchmark).
* ``SchedulerCounts``: a trio instrument counting task steps and spawned
  tasks, to pin what a run costs the scheduler as a count.
* The pytest plugin (loaded by the ``pytest11`` entry point ``procession``):
  ``async def`` tests under trio on an autojump clock, and fixtures; see
  ``procession.testing._pytest_plugin``.
* ``procession.testing.strategies``: Hypothesis strategies for chunks, chunk
  streams, messages and text splits (needs the ``testing`` extra).
"""

from .._faces import fixup_module_metadata as _fixup_module_metadata
from ._checks import assert_modes_agree as assert_modes_agree
from ._checks import assert_split_invariant as assert_split_invariant
from ._collect import CollectedRun as CollectedRun
from ._collect import collect_stream as collect_stream
from ._counts import SchedulerCounts as SchedulerCounts
from ._crash import crash_run as crash_run
from ._faults import drip as drip
from ._faults import fail_at as fail_at
from ._faults import stall as stall
from ._pass_through import PassThrough as PassThrough
from ._pass_through import SyncPassThrough as SyncPassThrough
from ._reference import SequentialRun as SequentialRun
from ._reference import run_sequential as run_sequential
from ._run_shape import RunEnd as RunEnd
from ._run_shape import assert_run_shape as assert_run_shape
from ._script import CheckedTurn as CheckedTurn
from ._script import Delay as Delay
from ._script import ScriptError as ScriptError
from ._script import ScriptExhausted as ScriptExhausted
from ._script import check_turn as check_turn
from ._script import reasoning_turn as reasoning_turn
from ._script import text_turn as text_turn
from ._script import tool_call_turn as tool_call_turn
from ._scripted import CallLog as CallLog
from ._scripted import RecordedCall as RecordedCall
from ._scripted import ScriptedModel as ScriptedModel
from ._scripted import ScriptedResponse as ScriptedResponse

__all__ = [
    "CallLog",
    "CheckedTurn",
    "CollectedRun",
    "Delay",
    "PassThrough",
    "RecordedCall",
    "RunEnd",
    "SchedulerCounts",
    "ScriptError",
    "ScriptExhausted",
    "ScriptedModel",
    "ScriptedResponse",
    "SequentialRun",
    "SyncPassThrough",
    "assert_modes_agree",
    "assert_run_shape",
    "assert_split_invariant",
    "check_turn",
    "collect_stream",
    "crash_run",
    "drip",
    "fail_at",
    "reasoning_turn",
    "run_sequential",
    "stall",
    "text_turn",
    "tool_call_turn",
]

_fixup_module_metadata(__name__, globals())
