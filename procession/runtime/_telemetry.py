"""The runtime's side of tracing: one output processor's stream hook counted
and timed per step, installed only when the run's telemetry records (so a run
without an SDK does no per-chunk work for it)."""

from __future__ import annotations

import time
from typing import Any

import attrs

from ..data import FinishChunk, StepFinishChunk, StepRetryChunk
from ..processors import ProcessorSpec
from ..telemetry import names

__all__ = ["traced_spec", "traced_stream_spec"]

_STEP_END = (StepFinishChunk, FinishChunk)


class _StreamSpan:
    """One processor's ``process_output_stream`` over one step: ONE span with
    the chunk count, drops, emitted chunks and the time spent in the hook."""

    __slots__ = ("dropped", "emitted", "seconds", "seen", "span", "spec", "telemetry")

    def __init__(self, telemetry: Any, spec: ProcessorSpec) -> None:
        self.telemetry = telemetry
        self.spec = spec
        self.span: Any = None
        self.seen = self.dropped = self.emitted = 0
        self.seconds = 0.0

    def before(self, part: Any) -> None:
        if part.__class__ is StepRetryChunk:
            self.close()  # the rejected attempt's span ends; the retry opens one
        if self.span is None:
            self.span = self.telemetry.span(
                f"process_output_stream {self.spec.id}",
                {
                    names.PROCESSOR_ID: self.spec.id,
                    names.PROCESSOR_INDEX: self.spec.index,
                    names.HOOK: "process_output_stream",
                    names.ON_ERROR: self.spec.on_error,
                },
            )
        self.seen += 1

    def after(self, part: Any, result: Any, seconds: float) -> None:
        self.seconds += seconds
        if result is None:
            self.dropped += 1
        elif isinstance(result, list | tuple):
            self.emitted += len(result)
        else:
            self.emitted += 1
        if part.__class__ in _STEP_END:
            self.close()

    def close(self, error: BaseException | None = None, tripwire: Any = None) -> None:
        span = self.span
        if span is None:
            return
        span.set_attribute(names.CHUNKS_IN, self.seen)
        span.set_attribute(names.CHUNKS_DROPPED, self.dropped)
        span.set_attribute(names.CHUNKS_EMITTED, self.emitted)
        span.set_attribute(names.HOOK_SECONDS, self.seconds)
        self.telemetry.hook_ended(span, error=error, tripwire=tripwire)
        self.span = None
        self.seen = self.dropped = self.emitted = 0
        self.seconds = 0.0


def traced_stream_spec(
    spec: ProcessorSpec, telemetry: Any, open_spans: list[Any]
) -> ProcessorSpec:
    """``spec`` with its ``process_output_stream`` counted and timed per step.
    Spans still open when the run ends are closed by the caller
    (``open_spans``)."""
    hook = spec.hooks.get("process_output_stream")
    if hook is None:
        return spec
    tracker = _StreamSpan(telemetry, spec)
    open_spans.append(tracker)
    fn = hook.fn
    clock = time.perf_counter

    if hook.is_async:

        async def traced_async(args: Any) -> Any:
            tracker.before(args.part)
            start = clock()
            try:
                result = await fn(args)
            except BaseException as exc:
                _failed(tracker, exc)
                raise
            tracker.after(args.part, result, clock() - start)
            return result

        traced: Any = traced_async
    else:

        def traced_sync(args: Any) -> Any:
            tracker.before(args.part)
            start = clock()
            try:
                result = fn(args)
            except BaseException as exc:
                _failed(tracker, exc)
                raise
            tracker.after(args.part, result, clock() - start)
            return result

        traced = traced_sync
    hooks = {**spec.hooks, "process_output_stream": attrs.evolve(hook, fn=traced)}
    return attrs.evolve(spec, hooks=hooks)


def _failed(tracker: _StreamSpan, exc: BaseException) -> None:
    from .._errors import TripWire

    if isinstance(exc, TripWire):
        tracker.close(tripwire=exc)
    elif isinstance(exc, Exception):
        tracker.close(error=exc)


def traced_spec(
    spec: ProcessorSpec, telemetry: Any, open_spans: list[Any], *, output: bool
) -> ProcessorSpec:
    """``spec`` as a recording run uses it: its violations become span events
    (then reach its own ``on_violation``, if any), and, in the output lane, its
    stream hook is counted and timed per step (``traced_stream_spec``)."""
    if output:
        spec = traced_stream_spec(spec, telemetry, open_spans)
    callback = spec.on_violation

    async def on_violation(violation: Any) -> None:
        if not violation.blocking:  # a blocking one is the tripwire's own event
            telemetry.violation(violation.processor_id, violation.message, False)
        if callback is not None:
            result = callback(violation)
            if hasattr(result, "__await__"):
                await result

    return attrs.evolve(spec, on_violation=on_violation)
