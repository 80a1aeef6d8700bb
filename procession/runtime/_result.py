"""A run's result, derived from its bookkeeping and its one outcome."""

from __future__ import annotations

import attrs

from ..data import (
    DataChunk,
    Message,
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
    tripwire), ``error`` or ``aborted`` (cancelled)."""
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
    """Model chunks read after the run's terminal event (a tripwire, an error, a
    cancel): what the provider streamed that nobody used."""
    outcome: RunOutcome = attrs.field(eq=False, repr=False)
    """How the run ended (``kind`` finish / error / tripwire / abort)."""
    message_list: MessageList = attrs.field(eq=False, repr=False)


def build_result(state: RunState, outcome: RunOutcome) -> AgentResult:
    """The result of a run that ended with ``outcome``.

    A tripwire raised on a chunk of the stream cuts the attempt in flight: its
    text up to the blocked chunk stays in the result (Mastra 1F.43) and the step
    reads as tripped; an abort keeps what the client saw likewise.
    """
    all_text = list(state.all_text)
    view = state.view
    in_flight = not view.committed  # the client saw it; no step kept it
    steps = state.steps
    if outcome.kind == "tripwire" and outcome.in_stream:
        if in_flight:
            all_text.append(view.text_value)
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
    elif outcome.kind == "abort" and in_flight:
        all_text.append(view.text_value)  # what the client saw
    text = state.final_text if state.final_text is not None else "".join(all_text)
    ml = state.message_list
    return AgentResult(
        run_id=state.run_id,
        text=text,
        finish_reason=outcome.finish_reason,
        tripwire=outcome.tripwire,
        usage=state.usage or Usage(),
        steps=tuple(steps),
        response_messages=()
        if state.output_result_tripped
        else tuple(ml.get.response.db()),
        error=outcome.error,
        custom_chunks=tuple(state.custom_chunks),
        retry_count=state.retry_count,
        model_chunks_after_end=state.model_chunks_after_end,
        outcome=outcome,
        message_list=ml,
    )
