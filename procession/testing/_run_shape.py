"""``assert_run_shape``: the chunk order every run's stream keeps (SPEC rule 18).

A run streams ``start`` (unless it failed before its first step), then per
attempt ``step-start`` .. content .. ``step-finish`` (a rejected attempt is
closed by the next attempt's ``step-retry`` instead), and ends in exactly one
way:

* ``finish`` — the last chunk, exactly once;
* ``error`` — exactly once, followed only by the custom chunks of the final
  output pass, ``step-finish`` (reason ``error``, if a step was open) and
  ``finish`` (reason ``error``); or last,
  right after the run's ``finish`` (``process_output_result`` failed);
* ``tripwire`` or ``abort`` — the last chunk, no ``finish``;
* ``suspended`` — the run waits for a person: ``tool-call-approval`` or
  ``tool-call-suspended`` is the last chunk, its step left open (Mastra's
  shape). The continuation's stream (``Agent.approve_tool_call``...) starts
  without ``start``, inside that open step: check it with ``continued=True``;
* ``moved`` — a durable run that went on in another process (it lost its
  lease, or was handed over): the stream just stops, with no terminal chunk
  (check it with ``moved=True``). The taker's stream starts with a
  ``step-retry`` (reason ``takeover``) that closes the step it redoes, or with
  ``start`` if nothing of the run had been sent; a follower that read both
  sees one stream of this shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ..chunks import (
    AbortChunk,
    DataChunk,
    ErrorChunk,
    FinishChunk,
    StartChunk,
    StepFinishChunk,
    StepRetryChunk,
    StepStartChunk,
    ToolCallApprovalChunk,
    ToolCallSuspendedChunk,
    TripwireChunk,
)

_WAITING = (ToolCallApprovalChunk, ToolCallSuspendedChunk)

__all__ = ["RunEnd", "assert_run_shape"]

RunEnd = Literal["finish", "error", "tripwire", "abort", "suspended", "moved"]


def _type(chunk: Any) -> str:
    return str(getattr(chunk, "type", type(chunk).__name__))


def assert_run_shape(
    chunks: Sequence[Any], *, continued: bool = False, moved: bool = False
) -> RunEnd:
    """Check that ``chunks`` (a whole run's stream, as the client received it)
    keeps the order above; return how the run ended. ``continued``: the
    stream of a run that went on after a pause (it begins inside the paused
    step). ``moved``: the stream of a durable run that went on elsewhere (it
    stops with no terminal chunk). Raises ``AssertionError`` naming the first
    chunk out of place."""
    if not chunks:
        raise AssertionError("a run streams at least one chunk; got none")
    names = [_type(c) for c in chunks]

    def fail(index: int, problem: str) -> AssertionError:
        return AssertionError(
            f"chunk {index} ({names[index]}): {problem}; stream: {names}"
        )

    last = chunks[-1]
    if moved:
        end: RunEnd = "moved"
        body = len(chunks)
    elif last.__class__ in _WAITING:
        end = "suspended"
        body = len(chunks) - 1
    elif last.__class__ is TripwireChunk or last.__class__ is AbortChunk:
        end = "tripwire" if last.__class__ is TripwireChunk else "abort"
        body = len(chunks) - 1
    else:
        errors = [i for i, c in enumerate(chunks) if c.__class__ is ErrorChunk]
        if len(errors) > 1:
            raise fail(errors[1], "a second error chunk")
        if errors:
            end, body = "error", errors[0]
            _check_error_tail(chunks, body, fail)
        else:
            end, body = "finish", len(chunks) - 1
            if last.__class__ is not FinishChunk:
                raise fail(len(chunks) - 1, "a run that did not fail ends with finish")
    # The output pass failed after the finish: [..., finish, error].
    finish_then_error = end == "error" and body == len(chunks) - 1
    open_step: int | None = 0 if continued else None
    for index in range(body):
        cls = chunks[index].__class__
        if cls is StartChunk and (index != 0 or continued):
            raise fail(index, "start is the first chunk, once (none continued)")
        if cls in _WAITING:
            raise fail(index, "a run stops at the call it waits on")
        if moved and cls in (TripwireChunk, AbortChunk):
            raise fail(index, "a run that moved elsewhere ends nothing here")
        if cls is ErrorChunk or (
            cls is FinishChunk and not (finish_then_error and index == body - 1)
        ):
            raise fail(index, "a terminal chunk before the end")
        if cls is StepStartChunk:
            if open_step is not None:
                raise fail(
                    index, f"step-start while the step of chunk {open_step} is open"
                )
            open_step = index
        elif cls is StepFinishChunk:
            if open_step is None:
                raise fail(index, "step-finish without a step-start")
            open_step = None
        elif cls is StepRetryChunk:
            open_step = None  # the rejected attempt is closed by its retry
    if end == "finish" and open_step is not None:
        raise fail(open_step, "this step was never finished")
    return end


def _check_error_tail(chunks: Sequence[Any], error_at: int, fail: Any) -> None:
    tail = chunks[error_at + 1 :]
    if not tail and error_at and chunks[error_at - 1].__class__ is FinishChunk:
        return  # the output pass failed after the run's finish
    # Custom chunks of the final output pass, then step-finish?, then finish.
    index = error_at + 1
    while index < len(chunks) and chunks[index].__class__ is DataChunk:
        index += 1
    closing = [c.__class__ for c in chunks[index:]]
    if closing not in ([FinishChunk], [StepFinishChunk, FinishChunk]):
        at = min(index, len(chunks) - 1)
        raise fail(at, "after an error: custom chunks, step-finish?, then finish")
    for at in range(index, len(chunks)):
        if chunks[at].payload.step_result.reason != "error":
            raise fail(at, "closing chunks after an error have reason 'error'")
