"""Values that describe what a run produced: steps, tool calls, tripwires."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import attrs

from .._errors import TripWire

if TYPE_CHECKING:
    from ._usage import Usage

__all__ = [
    "OutcomeKind",
    "OutputResult",
    "PendingToolCall",
    "RunOutcome",
    "StepResult",
    "ToolCallInfo",
    "ToolResultInfo",
    "TripwireInfo",
]


@attrs.frozen(kw_only=True)
class TripwireInfo:
    """A tripwire as the client sees it (``result.tripwire``, a step's tripwire)."""

    reason: str
    retry: bool = False
    metadata: Any = None
    processor_id: str | None = None

    @classmethod
    def of(cls, tripwire: TripWire) -> TripwireInfo:
        """The info of a raised ``TripWire``."""
        return cls(
            reason=tripwire.reason,
            retry=tripwire.retry,
            metadata=tripwire.metadata,
            processor_id=tripwire.processor_id,
        )


OutcomeKind: TypeAlias = Literal[
    "finish", "error", "tripwire", "abort", "suspended", "moved"
]


@attrs.frozen(kw_only=True)
class RunOutcome:
    """How a run ended: decided once, at the client end, and never changed.

    The stream's last chunk, ``generate()``'s result (``finish_reason``,
    ``tripwire``, ``error``) and anything that records a finished run are all
    derived from this one value.
    """

    kind: OutcomeKind
    """``finish`` (the run completed), ``error``, ``tripwire``, ``abort`` (the
    caller cancelled it or left the stream early), ``suspended`` (it waits
    for a person: a tool call needs approval, or a tool suspended itself) or
    ``moved`` (a durable run that goes on in another process: this one lost
    its lease, or handed the run over; its stream ends with no terminal
    chunk)."""
    finish_reason: str
    """``stop``, ``length``, ``tool-calls``, ... for ``finish``; ``error``;
    ``other`` for a tripwire (as Mastra); ``aborted``; ``suspended``;
    ``moved``."""
    tripwire: TripwireInfo | None = None
    error: BaseException | None = attrs.field(default=None, eq=False)
    pending: tuple[PendingToolCall, ...] = ()
    """For ``suspended``: the calls the run waits on (one, as in Mastra)."""
    in_stream: bool = False
    """Whether an output-stream processor ended the run on a chunk of the stream
    (the attempt in flight was cut there), rather than a hook that runs between
    the stream's steps."""


@attrs.frozen(kw_only=True)
class PendingToolCall:
    """A tool call a paused run waits on: ``kind`` ``"approval"`` (answer it
    with ``Agent.approve_tool_call`` / ``decline_tool_call``) or
    ``"suspended"`` (the tool suspended itself with ``suspend_payload``;
    answer it with ``Agent.resume_stream``). ``resume_schema`` is the JSON
    Schema of the answer, as a JSON string (Mastra's shape)."""

    tool_call_id: str
    tool_name: str
    args: Any = None
    kind: Literal["approval", "suspended"] = "approval"
    suspend_payload: Any = None
    resume_schema: str | None = None


@attrs.frozen(kw_only=True)
class ToolCallInfo:
    """A tool call the model made in a step."""

    tool_call_id: str
    tool_name: str
    args: Any = None
    provider_executed: bool | None = None


@attrs.frozen(kw_only=True)
class ToolResultInfo:
    """The outcome of a tool call: its result, or its error (``is_error``)."""

    tool_call_id: str
    tool_name: str
    args: Any = None
    result: Any = None
    is_error: bool = False
    provider_executed: bool | None = None


@attrs.frozen(kw_only=True)
class StepResult:
    """One model step of a run (``steps`` in hook args and in the result).

    A step rejected by a tripwire (including one that was retried) has its
    ``tripwire`` set and its ``text`` empty, as in Mastra.
    """

    step_number: int
    text: str = ""
    reasoning: str = ""
    tool_calls: Sequence[ToolCallInfo] = ()
    tool_results: Sequence[ToolResultInfo] = ()
    finish_reason: str = "unknown"
    usage: Usage | None = None
    tripwire: TripwireInfo | None = None
    warnings: Sequence[Any] = ()
    provider_metadata: Any = None
    sources: Sequence[Any] = ()
    files: Sequence[Any] = ()
    request: Any = None
    response: Any = None


@attrs.frozen(kw_only=True)
class OutputResult:
    """``process_output_result``'s ``result``: the run's text, usage, finish reason
    and steps."""

    text: str = ""
    usage: Usage | None = None
    finish_reason: str = "unknown"
    steps: Sequence[StepResult] = ()
