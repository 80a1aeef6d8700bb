"""A run's result, derived from its bookkeeping and its one outcome."""

from __future__ import annotations

from typing import Any

import attrs

from ..data import (
    DataChunk,
    Message,
    PendingToolCall,
    RunOutcome,
    StepResult,
    TripwireInfo,
    Usage,
)
from ..processors import MessageList
from ._state import RunState

__all__ = ["AgentResult", "build_result"]


@attrs.frozen(kw_only=True)
class AgentResult:
    """What a run produced. ``generate()`` returns it; so does
    ``await stream.result()``. A failed or blocked run returns one too (it does
    not raise): look at ``finish_reason``, ``tripwire`` and ``error``, or at
    ``outcome``, the one value they are all derived from."""

    run_id: str
    text: str
    """The text the client saw (all accepted steps), or, when
    ``process_output_result`` changed the response messages, their text."""
    finish_reason: str
    """``stop``, ``length``, ``tool-calls``, ``content-filter``, ``other`` (a
    tripwire), ``error``, ``aborted`` (cancelled) or ``suspended`` (the run
    waits for a person: see ``pending_tool_calls``)."""
    tripwire: TripwireInfo | None
    usage: Usage
    """Tokens of every model call of the run, retried ones included."""
    steps: tuple[StepResult, ...]
    """Every step, including rejected attempts (their ``tripwire`` set, text
    empty)."""
    response_messages: tuple[Message, ...]
    error: BaseException | None
    custom_chunks: tuple[DataChunk, ...]
    """Every ``data-*`` chunk the client received (``writer.custom`` output and
    tool data)."""
    retry_count: int
    model_chunks_after_end: int
    """Model chunks read after the run ended (a tripwire, an error, a
    cancel): what the provider streamed that nobody used."""
    object: Any = None
    """The structured output: the value of the last ``object-result`` chunk
    the client received (``StructuredOutput`` writes one), unless the attempt
    it came in was retried (Mastra 1G.60); None when there is none."""
    pending_tool_calls: tuple[PendingToolCall, ...] = ()
    """A ``suspended`` run's waiting calls (answer one with
    ``Agent.approve_tool_call`` / ``decline_tool_call`` / ``resume_stream``)."""
    outcome: RunOutcome = attrs.field(eq=False, repr=False)
    """How the run ended (``kind`` finish / error / tripwire / abort /
    suspended)."""
    message_list: MessageList = attrs.field(eq=False, repr=False)


def build_result(state: RunState, outcome: RunOutcome) -> AgentResult:
    """The result of a run that ended with ``outcome``.

    One rule for every way a run ends (SPEC rule 18g): ``text`` and
    ``response_messages`` are what the client was shown and not retracted by a
    ``step-retry``. An attempt cut by a tripwire, an error or an abort keeps its
    text up to the last chunk delivered (Mastra 1F.43), and its message, though
    the conversation (``message_list``) does not keep it; a tripwire raised on
    a chunk makes the step read as tripped.
    """
    all_text = list(state.all_text)
    view = state.view
    steps = state.steps
    ml = state.message_list
    response = list(ml.get.response.db())
    if not view.committed and outcome.kind != "finish":
        # The attempt in flight: the client saw it; no step kept it.
        all_text.append(view.text_value)
        shown = view.message or view.build_message(state.spec.model_label)
        if view.shown_anything() and all(m.id != shown.id for m in response):
            response.append(shown)
    if outcome.kind == "tripwire" and outcome.in_stream:
        step = state.current_step
        if step is not None and not any(
            s.step_number == step and s.finish_reason != "retry" for s in steps
        ):
            steps.append(
                StepResult(
                    step_number=step,
                    finish_reason="tripwire",
                    tripwire=outcome.tripwire,
                )
            )
    text = state.final_text if state.final_text is not None else "".join(all_text)
    # A retried attempt's view is neither kept by a step nor the last one.
    kept = [o for v, o in state.objects if v.committed or v is state.view]
    return AgentResult(
        run_id=state.run_id,
        text=text,
        finish_reason=outcome.finish_reason,
        tripwire=outcome.tripwire,
        usage=state.usage or Usage(),
        steps=tuple(steps),
        response_messages=() if state.output_result_tripped else tuple(response),
        error=outcome.error,
        custom_chunks=tuple(state.custom_chunks),
        object=kept[-1] if kept else None,
        retry_count=state.retry_count,
        model_chunks_after_end=state.model_chunks_after_end,
        pending_tool_calls=outcome.pending,
        outcome=outcome,
        message_list=ml,
    )
