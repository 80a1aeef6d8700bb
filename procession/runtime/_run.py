"""The coordinator: one run's step loop, in the seed's order.

``process_input`` once (the input lane); then steps (``StepRunner.attempt``)
until the model stops calling tools or ``max_steps`` is reached, retrying an
attempt when a processor asks and the budget allows; then the ``finish`` chunk
through the output processors and ``process_output_result`` once. The
coordinator owns the ``MessageList`` and the run's bookkeeping (``RunState``);
it talks to the output pipeline only through ``RunControl``.

It never decides the run's outcome itself: when it meets a tripwire or an error
it *proposes* the end (``RunControl.end``), and the client end decides (an
earlier terminal in the stream wins).
"""

from __future__ import annotations

import copy
from typing import Any

import attrs
import trio

from .._errors import (
    ProcessionError,
    ProcessorContractError,
    RunDeadlineExceeded,
    SnapshotError,
    TripWire,
)
from .._secrets import get_logger
from ..actors import RetryRequested, RunControl
from ..data import (
    FinishChunk,
    FinishPayload,
    OutputResult,
    RunOutcome,
    StartChunk,
    StepOutput,
    StepResult,
    StepResultInfo,
    StepRetryChunk,
    StepRetryPayload,
    TextPart,
    TripwireInfo,
    message_text,
)
from ..memory import StorageError
from ..processors import MessageList
from ._approval import PauseRun
from ._control_flow import EndOfRun, Retry
from ._durable import DurableRun
from ._hooks import HookLanes
from ._pause import Pauses
from ._state import RETRY_FEEDBACK_TAG, RunState, StepView, feedback_text
from ._step import StepRunner

__all__ = ["Coordinator"]

logger = get_logger("procession")


class Coordinator:
    """Runs one run's step loop (see the module docstring)."""

    def __init__(self, state: RunState, lanes: HookLanes, control: RunControl) -> None:
        self._state = state
        self._lanes = lanes
        self._control = control
        self.durable = (
            DurableRun(state, lanes, control)
            if state.spec.durable is not None
            else None
        )
        """A durable run's checkpoints and lease (None for any other run)."""
        self._steps = StepRunner(state, lanes, control, self.durable)
        self._pauses = Pauses(state, lanes, control)

    async def drive(self) -> None:
        """The run, start to finish (the caller closes the control's source
        after it). A failure is
        proposed as the run's end, never raised (``generate`` does not raise).
        Checkpoints throughout; it runs in the run's cancel scope, and the
        ``Cancelled`` that ends it (the outcome was decided) propagates."""
        state = self._state
        deadline = state.spec.run_deadline
        if self.durable is not None:
            try:
                await self._durable_run(deadline)
            finally:
                self.durable.stop_renewing()
        elif deadline is None and state.spec.memory is None:
            await self._run_to_end()  # the usual case: no frame more per run
        elif deadline is None:
            await self._run_locked()
        else:
            await self._within(deadline)
        state.completed = True

    async def _within(self, deadline: float) -> None:
        with trio.move_on_after(deadline) as deadline_scope:
            await self._run_locked()
        if deadline_scope.cancelled_caught:
            await self._end(EndOfRun(error=RunDeadlineExceeded(deadline)))

    async def _durable_run(self, deadline: float | None) -> None:
        """A durable run: held (kept, or taken over) before anything of it
        runs; a run that cannot be kept fails at once."""
        assert self.durable is not None
        try:
            await self.durable.begin()
        except (StorageError, SnapshotError) as exc:
            await self._end(EndOfRun(error=exc))
            return
        if deadline is None:
            await self._run_locked()
        else:
            await self._within(deadline)

    async def _run_locked(self) -> None:
        memory = self._state.spec.memory
        if memory is None:
            await self._run_to_end()
            return
        # Runs on one thread take turns, from loading the history to saving
        # the turn (Memory's docstring). A durable run holds the thread as
        # itself, and keeps it when it goes on elsewhere.
        durable = self.durable
        thread_id = self._state.message_list.thread_id
        lock = (
            memory.thread_lock(thread_id)
            if durable is None
            else memory.thread_lock(
                thread_id, holder=durable.holder, keep=lambda: durable.moved
            )
        )
        async with lock:
            await self._run_to_end()

    async def _run_to_end(self) -> None:
        """Every phase, then the run's end (or the end a failure proposes)."""
        state, control = self._state, self._control
        try:
            takeover, state.takeover = state.takeover, None
            if state.resume is None and (
                takeover is None or takeover.step_number is None
            ):
                await self._input_phase()
                if self.durable is not None:
                    # Kept before anything of it is sent: a takeover from
                    # here sends its start.
                    await self.durable.checkpoint(0)
                # Not waited for: hooks wait for it (HookLanes.call), the model
                # call for step-start (RunControl's docstring).
                await control.send_ahead(StartChunk(run_id=state.run_id))
            elif takeover is not None and not takeover.paused:
                # Taken over: what the lost process sent of the step redone
                # (and after) is withdrawn, as for a retry.
                await control.send_ahead(
                    takeover.retry_chunk(state.run_id, state.retry_count)
                )
            # A continuation sends no start (Mastra): its stream goes on where
            # the paused one stopped.
            await self._step_loop()
            # Mastra 1I.67: process_output_result runs once the final finish
            # chunk has been through the output processors (a processor may
            # flush held-back text on it).
            await control.send_ahead(  # settled right after
                FinishChunk(
                    payload=FinishPayload(
                        step_result=StepResultInfo(reason=state.finish_reason),
                        output=StepOutput(usage=state.usage),
                    ),
                    run_id=state.run_id,
                )
            )
            if self._ends_with_finish():
                # Nothing after finish awaits: its late text is kept where
                # the stream is read, once finish got there, and the run ends
                # now (no hand-over back here; the stream's end is at hand
                # with finish: RunControl.then).
                await control.then(self._late_text)
                return
            await control.settle()
            self._late_text()
            await self._output_result()
            await self._save_turn()
        except PauseRun as pause:
            refused = await self._pauses.pause(pause)
            if refused is not None:
                await self._end(refused)
        except EndOfRun as end:
            await self._end(end)
        except RetryRequested as late:
            # Only an attempt's settle can grant a retry; defensive.
            await self._end(EndOfRun(tripwire=late.tripwire))
        except ProcessionError as exc:
            # A processor broke the contract (wrong return type, a different
            # MessageList, a bad model id...): the run fails with that error.
            await self._end(EndOfRun(error=exc))
        except Exception as exc:
            # Anything else is a bug (ours or a processor's that slipped past
            # the contract checks): the run fails with it rather than tearing
            # the caller's block down with an exception group.
            logger.exception("run %s failed unexpectedly", state.run_id)
            await self._end(EndOfRun(error=exc))
        finally:
            if state.stored_epoch is not None and not state.stored_closed:
                # A continuation that ended otherwise than by finishing: the
                # stored run ends too (its decisions stay).
                await self._pauses.close_stored()

    async def _end(self, end: EndOfRun) -> None:
        if end.tripwire is not None:
            tripwire = end.tripwire
            await self._control.end(
                RunOutcome(
                    kind="tripwire",
                    finish_reason="other",
                    tripwire=TripwireInfo.of(tripwire),
                ),
                tripwire=tripwire,
                # on_violation is awaited at the client end, only if this wins.
                actor=self._lanes.actor_of(tripwire),
            )
        else:
            await self._control.end(
                RunOutcome(kind="error", finish_reason="error", error=end.error)
            )

    async def _input_phase(self) -> None:
        """``process_input`` once (re-run from the original input on a retry)."""
        state = self._state
        actors = self._lanes.lane("process_input", "input")
        if not actors:
            return
        ml = state.message_list
        original = copy.deepcopy(ml.get.input.db())
        while True:
            try:
                emptied_by: str | None = None
                for actor in actors:
                    had_any = _has_conversation(ml)
                    system = ml.get_system_messages()
                    before = list(system)
                    result = await self._lanes.call(
                        actor,
                        "process_input",
                        messages=ml.get.input.db(),
                        system_messages=system,
                        message_list=ml,
                    )
                    state.apply_messages(result, actor.id, "process_input", "input")
                    if system != before and ml.get_system_messages() == before:
                        # The seed: system messages "may be modified and returned";
                        # an in-place edit without the return counts too.
                        ml.clear_system_messages()
                        ml.add_system(system)
                    if had_any and not _has_conversation(ml):
                        emptied_by = actor.id
                    elif _has_conversation(ml):
                        emptied_by = None
                if emptied_by is not None:
                    raise ProcessorContractError(
                        emptied_by,
                        "process_input",
                        "left no user or assistant message in the conversation, "
                        "so there is nothing to send the model; to reject the "
                        "input call args.abort(reason) instead of returning []",
                    )
                return
            except TripWire as tripwire:
                if not (tripwire.retry and state.may_retry()):
                    raise EndOfRun(tripwire=tripwire) from None
                # SPEC §2.4: re-run the input phase from the original input; the
                # feedback is shown to the processors now and to the model at
                # step 0.
                state.count_retry("processor", tripwire.processor_id)
                ml.remove_by_ids([m.id for m in ml.get.input.db()])
                ml.add(copy.deepcopy(original), "input")
                state.set_feedback(tripwire.reason)

    async def _step_loop(self) -> None:
        state, control = self._state, self._control
        ml = state.message_list
        system_snapshot = ml.snapshot_system_messages()
        # The input phase's feedback (if it retried) is not part of the snapshot.
        step_retry: StepRetryChunk | None = None
        while state.accepted_steps() < state.spec.max_steps:
            step_number = state.accepted_steps()
            if self.durable is not None and state.resume is None:
                await self.durable.checkpoint(step_number)
            ml.restore_system_messages(system_snapshot)
            ml.clear_system_messages(RETRY_FEEDBACK_TAG)
            if state.feedback is not None:
                ml.add_system(state.feedback, tag=RETRY_FEEDBACK_TAG)
            # The client end switches to this view when the attempt begins there,
            # so chunks are counted to the attempt they belong to. A retried
            # attempt is discarded first; its step-retry chunk belongs to the new
            # attempt (it would be dropped with the old one otherwise).
            view = StepView()
            await control.begin_attempt(
                state.retry_count, discard=step_retry is not None, view=view
            )
            if step_retry is not None:
                await control.send_ahead(step_retry)
                step_retry = None
            try:
                if state.resume is not None:
                    paused, state.resume = state.resume, None
                    more = await self._steps.resume(paused, view)
                else:
                    more = await self._steps.attempt(step_number, view)
            except (Retry, RetryRequested) as retry:
                feedback = retry.feedback if isinstance(retry, Retry) else True
                step_retry = self._retried(step_number, retry.tripwire, feedback)
                continue
            # SPEC §2.5: the feedback goes once a step succeeds.
            state.feedback = None
            ml.clear_system_messages(RETRY_FEEDBACK_TAG)
            # Every chunk of the step has been decided (the last settle): a retry
            # asked for on a later chunk (finish, say) cannot be granted.
            control.close_attempt()
            if not more:
                return

    def _retried(
        self, step_number: int, tripwire: TripWire, feedback: bool
    ) -> StepRetryChunk:
        """Record a rejected attempt; the ``step-retry`` chunk that announces it."""
        state = self._state
        state.steps.append(
            StepResult(
                step_number=step_number,
                finish_reason="retry",
                usage=state.attempt_usage,
                tripwire=TripwireInfo(
                    reason=tripwire.reason,
                    retry=True,
                    metadata=tripwire.metadata,
                    processor_id=tripwire.processor_id,
                ),
            )
        )
        state.count_retry(
            "processor" if feedback else "api-error", tripwire.processor_id
        )
        if feedback:
            state.feedback = feedback_text(tripwire.reason)
        return StepRetryChunk(
            payload=StepRetryPayload(
                step_number=step_number,
                reason=tripwire.reason,
                retry_count=state.retry_count,
                processor_id=tripwire.processor_id,
            ),
            run_id=state.run_id,
        )

    def _ends_with_finish(self) -> bool:
        """Whether the run does nothing after its ``finish`` that awaits: no
        ``process_output_result`` hook, no turn to save (memory, or the
        stored run a continuation ends) and no durable record to close."""
        state = self._state
        return (
            state.spec.memory is None
            and state.stored_epoch is None
            and self.durable is None
            and not self._lanes.lane("process_output_result", "output")
        )

    def _late_text(self) -> None:
        """Text the client received after the last step was kept (a processor
        that flushed on ``finish``) belongs to that step: add it."""
        state = self._state
        view = state.view
        if not view.committed or len(view.text) <= view.committed_len:
            return
        late = "".join(view.text[view.committed_len :])
        view.committed_len = len(view.text)
        state.all_text.append(late)
        if view.message is not None:
            view.message.content.parts.append(TextPart(text=late))
        for index in range(len(state.steps) - 1, -1, -1):
            step = state.steps[index]
            if step.finish_reason != "retry":
                state.steps[index] = attrs.evolve(step, text=step.text + late)
                break

    async def output_result_after_error(self) -> list[Any]:
        """``process_output_result`` once more after the run failed (Mastra
        PR #21299: the final output pass runs on an error terminal too, with
        ``finish_reason`` ``"error"``). The outcome is decided: a tripwire or an
        error raised here is logged and changes nothing. Returns the custom
        chunks the hooks wrote (the stream has ended: the client end delivers
        them). Runs in the caller's task; checkpoints."""
        state, lanes = self._state, self._lanes
        actors = lanes.lane("process_output_result", "output")
        lanes.held = []
        if not actors or state.output_result_ran:
            return lanes.held  # it ran (and failed, or the run failed after)
        ml = state.message_list
        view = state.view
        shown = [*state.all_text, *([] if view.committed else [view.text_value])]
        result = OutputResult(
            text="".join(shown),
            usage=state.usage,
            finish_reason="error",
            steps=tuple(state.steps),
        )
        for actor in actors:
            try:
                await lanes.call(
                    actor,
                    "process_output_result",
                    messages=ml.get.response.db(),
                    message_list=ml,
                    result=result,
                )
            except (TripWire, EndOfRun) as ignored:
                logger.warning(
                    "run %s: processor %r failed in process_output_result after "
                    "the run had failed; the outcome stays an error: %s",
                    state.run_id,
                    actor.id,
                    ignored if isinstance(ignored, TripWire) else ignored.error,
                )
        return lanes.held

    async def _save_turn(self) -> None:
        """Memory: save what remains of the turn once every processor finished
        (the seed), in one transaction. Only a run that got here saves; a
        tripwire, an error or an abort never do. A failed save is the run's
        error (a ``StorageError``), after its ``finish``."""
        state = self._state
        if state.stored_epoch is not None:
            await self._control.settle()
            await self._pauses.end_stored()  # the rest of the turn, and the end
            return
        memory = state.spec.memory
        if memory is None:
            return
        await self._control.settle()  # custom chunks of the last hooks, delivered
        ml = state.message_list
        await memory.save_turn(
            ml.thread_id, ml.resource_id, ml, custom_chunks=state.custom_chunks
        )

    async def _output_result(self) -> None:
        state = self._state
        ml = state.message_list
        text = "".join(state.all_text)
        result = OutputResult(
            text=text,
            usage=state.usage,
            finish_reason=state.finish_reason,
            steps=tuple(state.steps),
        )
        changed = False
        state.output_result_ran = True
        for actor in self._lanes.lane("process_output_result", "output"):
            try:
                raw = await self._lanes.call(
                    actor,
                    "process_output_result",
                    messages=ml.get.response.db(),
                    message_list=ml,
                    result=result,
                )
            except TripWire as tripwire:
                # A tripwire rejects the output, it does not erase it (SPEC §2.6).
                state.output_result_tripped = True
                state.final_text = text
                raise EndOfRun(tripwire=tripwire) from None
            changed |= state.apply_messages(
                raw, actor.id, "process_output_result", "response"
            )
        if changed:
            state.final_text = "".join(
                message_text(m) for m in ml.get.response.db() if m.role == "assistant"
            )


def _has_conversation(ml: MessageList) -> bool:
    """Whether the conversation holds a message the model can answer."""
    return any(m.role != "system" for m in ml.get.all.db())
