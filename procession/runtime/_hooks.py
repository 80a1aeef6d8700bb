"""The hook lanes: one runner calls every non-stream hook of every processor.

Every hook that runs between the stream's chunks (``process_input``,
``process_input_step``, ``process_llm_request``, ``process_llm_response``,
``process_api_error``, ``process_output_step``, ``process_tool_result``,
``process_output_result``) goes through ``HookLanes.call``: it builds the hook's
argument object from the run's common fields and the caller's, runs the hook in
the processor's actor (one hook of a processor at a time), applies the
processor's failure policy (``on_error_outcome``, shared with the stream
stages) and flushes what the hook wrote (custom chunks, violations) in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .._errors import TripWire
from ..actors import ProcessorActor, RunControl
from ..processors import (
    HookArgs,
    ProcessAPIErrorArgs,
    ProcessInputArgs,
    ProcessInputStepArgs,
    ProcessLLMRequestArgs,
    ProcessLLMResponseArgs,
    ProcessorStreamWriter,
    ProcessorViolation,
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
    ProcessToolResultArgs,
    register_processors,
)
from ..processors._calling import on_error_outcome, tripwire_in
from ._control_flow import EndOfRun
from ._state import RunState
from ._telemetry import traced_spec

__all__ = ["HookEmitter", "HookLanes"]

_ARGS: Final[Mapping[str, type[HookArgs]]] = {
    "process_input": ProcessInputArgs,
    "process_input_step": ProcessInputStepArgs,
    "process_llm_request": ProcessLLMRequestArgs,
    "process_llm_response": ProcessLLMResponseArgs,
    "process_api_error": ProcessAPIErrorArgs,
    "process_output_step": ProcessOutputStepArgs,
    "process_tool_result": ProcessToolResultArgs,
    "process_output_result": ProcessOutputResultArgs,
}


class HookEmitter:
    """Side outputs of hooks that run in the coordinator: custom chunks wait to be
    sent (in order) once the hook returns; violations are kept likewise."""

    __slots__ = ("custom", "violations")

    def __init__(self) -> None:
        self.custom: list[Any] = []
        self.violations: list[ProcessorViolation] = []

    def emit_custom(self, processor_id: str, chunk: Any) -> None:
        self.custom.append(chunk)

    def emit_violation(self, violation: ProcessorViolation) -> None:
        self.violations.append(violation)


class _PrepareStep:
    """The ``prepare_step`` call option, run as processor ``prepare-step`` after
    the input lane (seed)."""

    def __init__(self, fn: Any, processor_id: str) -> None:
        self.id = processor_id
        self._fn = fn

    async def process_input_step(self, args: ProcessInputStepArgs) -> Any:
        result = self._fn(args)
        if hasattr(result, "__await__"):
            result = await result
        return result


class HookLanes:
    """The run's processors as actors, and the one way their hooks are called."""

    def __init__(self, state: RunState, control: RunControl) -> None:
        spec = state.spec
        self._state = state
        self._control = control
        self._processors = spec.processors
        self.held: list[Any] | None = None
        """When set (the stream has ended), custom chunks hooks write are kept
        here for the client end to deliver, instead of sent down the stream."""
        telemetry = state.telemetry
        specs = spec.processors.all
        if telemetry.active:
            # Counted and timed per step; only a recording run pays for it.
            specs = tuple(
                traced_spec(
                    s,
                    telemetry,
                    state.traced_streams,
                    output=s in spec.processors.output,
                )
                for s in specs
            )
        self.actors: dict[str, ProcessorActor] = {
            s.id: ProcessorActor(s) for s in specs
        }
        self.prepare_actor: ProcessorActor | None = None
        if spec.prepare_step is not None:
            from ._state import PREPARE_STEP_ID

            prepare = _PrepareStep(spec.prepare_step, PREPARE_STEP_ID)
            self.prepare_actor = ProcessorActor(
                register_processors(input=[prepare]).input[0]
            )

    def output_actors(self) -> list[ProcessorActor]:
        """The output lane's actors, in order (the stream's stages)."""
        return [self.actors[spec.id] for spec in self._processors.output]

    def lane(self, hook: str, *lanes: str) -> list[ProcessorActor]:
        """The actors of ``lanes`` (in order) with ``hook``, each instance once
        (a new list)."""
        specs = self._processors.with_hook(hook, *lanes)
        if not specs:
            return []
        actors = self.actors
        return [actors[spec.id] for spec in specs]

    def actor_of(self, tripwire: TripWire) -> ProcessorActor | None:
        """The actor whose ``on_violation`` hears about ``tripwire``."""
        actor = self.actors.get(tripwire.processor_id or "")
        return actor if actor is not None else self.prepare_actor

    async def call(self, actor: ProcessorActor, hook: str, **fields: Any) -> Any:
        """Run ``actor``'s ``hook`` with the run's common fields plus ``fields``.

        Returns the hook's result (None when it failed under ``on_error="pass"``).
        Raises ``TripWire`` (attributed to the processor) for an abort or a
        failure under ``"block"``, and ``EndOfRun`` for a failure under
        ``"raise"``. Custom chunks and violations the hook wrote are flushed in
        order first. Checkpoints (the run may have ended meanwhile: then
        ``Cancelled`` propagates and no hook runs).
        """
        # Whatever the coordinator sent before is taken by the pipeline first.
        await self._control.caught_up()
        state = self._state
        emitter = HookEmitter()
        args = _ARGS[hook](
            processor_id=actor.id,
            state=actor.state,
            retry_count=state.retry_count,
            request_context=state.spec.request_context,
            tracing_context=state.tracing_context,
            abort_signal=state.abort_signal,
            emitter=emitter,
            writer=ProcessorStreamWriter(emitter, actor.id),
            **fields,
        )
        telemetry = state.telemetry
        span = None
        if telemetry.active:
            span = telemetry.hook_started(
                actor.id,
                actor.spec.index,
                hook,
                actor.spec.on_error,
                len(state.message_list),
            )
        try:
            result = await _called(actor, hook, args)
        except TripWire as tripwire:
            if tripwire.processor_id is None:
                tripwire.processor_id = actor.id
            if span is not None:
                telemetry.hook_ended(span, tripwire=tripwire)
            await self._flush(actor, emitter)
            raise
        except Exception as exc:
            await self._flush(actor, emitter)
            outcome = on_error_outcome(
                actor.spec.on_error,
                actor.id,
                hook,
                exc,
                passing="continuing as if it returned nothing",
            )
            if span is not None:
                policy = "pass" if outcome is None else actor.spec.on_error
                telemetry.hook_ended(
                    span,
                    error=exc,
                    outcome=policy,
                    tripwire=outcome if isinstance(outcome, TripWire) else None,
                )
            if outcome is None:
                return None
            if isinstance(outcome, TripWire):
                raise outcome from exc
            raise EndOfRun(error=outcome) from exc
        except BaseException:
            if span is not None:
                span.end()  # cancelled: the span ends, unmarked
            raise
        if span is not None:
            telemetry.hook_ended(span, messages=len(state.message_list))
        await self._flush(actor, emitter)
        return result

    async def _flush(self, actor: ProcessorActor, emitter: HookEmitter) -> None:
        for violation in emitter.violations:
            await actor.notify_violation(violation)
        if self.held is not None:
            self.held.extend(emitter.custom)
            return
        for chunk in emitter.custom:
            await self._control.deliver(chunk)


async def _called(actor: ProcessorActor, hook: str, args: HookArgs) -> Any:
    """The hook's result; an abort raised inside the hook's own nursery comes out
    as the ``TripWire`` itself."""
    try:
        return await actor.call(hook, args)
    except BaseExceptionGroup as group:
        tripwire = tripwire_in(group)
        if tripwire is None:
            raise
        raise tripwire from None
