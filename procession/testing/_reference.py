"""The sequential reference runner: the executable meaning of SPEC §2.10.

``run_sequential`` applies output processors to a chunk stream one chunk at a
time, in one task, as plainly as possible: a fresh argument object per call, each
chunk carried through the rest of the chain before the next one starts, every
side output (custom chunk, violation, tripwire) acted on the moment it happens.
Every execution mode of ``procession.actors.open_output_pipeline`` must give the
client exactly what this gives.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Callable, Sequence
from typing import Any

import attrs

from .._errors import TripWire
from .._secrets import get_logger
from ..actors import PipelineDriver, PipelineOutcome
from ..actors._markers import Barrier, NewAttempt
from ..data import (
    CHUNK_CLASSES,
    DataChunk,
    ErrorChunk,
    ErrorPayload,
    TripwireChunk,
    TripwirePayload,
)
from ..processors import (
    ProcessorSpec,
    ProcessorStreamWriter,
    ProcessorViolation,
    RequestContext,
    StreamParts,
    register_processors,
)
from ..processors._calling import call_hook, on_error_outcome, tripwire_in
from ..processors._contract import ProcessOutputStreamArgs
from ..processors._readers import stream_result_error

__all__ = ["SequentialRun", "run_sequential"]

logger = get_logger("procession")


@attrs.frozen
class SequentialRun:
    """What the client saw: the chunks, in order, and how the stream ended."""

    chunks: list[Any]
    outcome: PipelineOutcome


class _EndOfAttempt(Exception):
    """Internal: the attempt (or the run) ended inside the chain."""

    def __init__(
        self,
        tripwire: TripWire | None,
        error: BaseException | None,
        spec: ProcessorSpec,
    ) -> None:
        self.tripwire = tripwire
        self.error = error
        self.spec = spec


class _Sink:
    def __init__(self, run: _Run, spec: ProcessorSpec) -> None:
        self.run = run
        self.spec = spec

    def emit_custom(self, processor_id: str, chunk: Any) -> None:
        self.run.out.append(chunk)

    def emit_violation(self, violation: ProcessorViolation) -> None:
        self.run.out.append(_ViolationEvent(self.spec, violation))


class _ViolationEvent:
    """A violation at its place among the chunks; ``on_violation`` is awaited
    when delivery reaches it, as the client end of the pipeline does."""

    def __init__(self, spec: ProcessorSpec, violation: ProcessorViolation) -> None:
        self.spec = spec
        self.violation = violation


class _Run:
    def __init__(
        self,
        specs: Sequence[ProcessorSpec],
        *,
        run_id: str | None,
        request_context: RequestContext,
        message_list: Any,
    ) -> None:
        self.specs = specs
        self.run_id = run_id
        self.request_context = request_context
        self.message_list = message_list
        self.out: list[Any] = []  # chunks and _ViolationEvents, in delivery order
        self.state: dict[str, dict[str, Any]] = {s.id: {} for s in specs}
        self.parts: dict[str, list[Any]] = {s.id: [] for s in specs}
        self.attempt_start: dict[str, int] = {s.id: 0 for s in specs}
        self.retry_count = 0
        self.discarding = False

    async def take(
        self, item: Any, driver: PipelineDriver | None
    ) -> PipelineOutcome | None:
        """One source item, all the way; the outcome if the stream ends on it."""
        if isinstance(item, NewAttempt):
            if item.discard:
                for spec in self.specs:
                    del self.parts[spec.id][self.attempt_start[spec.id] :]
            for spec in self.specs:
                self.attempt_start[spec.id] = len(self.parts[spec.id])
            self.retry_count = item.retry_count
            self.discarding = False
            return None
        if isinstance(item, Barrier):
            item.release()
            return None
        if self.discarding:
            return None
        if (
            isinstance(item, ErrorChunk)
            and driver is not None
            and await driver.on_error_chunk(item)
        ):
            self.discarding = True
            return None
        try:
            await self.chain(0, item)
        except _EndOfAttempt as end:
            return await self._ended(end, driver)
        return None

    async def _ended(
        self, end: _EndOfAttempt, driver: PipelineDriver | None
    ) -> PipelineOutcome | None:
        """A processor ended its attempt: a failure, a granted retry, or the
        stream's tripwire."""
        if end.error is not None:
            self.out.append(
                ErrorChunk(payload=ErrorPayload(error=end.error), run_id=self.run_id)
            )
            return PipelineOutcome("error", error=end.error)
        tripwire = end.tripwire
        assert tripwire is not None
        if (
            tripwire.retry
            and driver is not None
            and await driver.on_retry_request(tripwire)
        ):
            self.discarding = True
            return None
        self.out.append(
            _ViolationEvent(
                end.spec,
                ProcessorViolation(
                    processor_id=tripwire.processor_id or end.spec.id,
                    message=tripwire.reason,
                    detail=tripwire.metadata,
                    blocking=True,
                ),
            )
        )
        self.out.append(
            TripwireChunk(payload=TripwirePayload.of(tripwire), run_id=self.run_id)
        )
        return PipelineOutcome("tripwire", tripwire=tripwire)

    async def chain(self, k: int, chunk: Any) -> None:
        """Carry ``chunk`` through processors k.. and into ``out``."""
        if k == len(self.specs):
            self.out.append(chunk)
            return
        spec = self.specs[k]
        if isinstance(chunk, DataChunk) and not spec.process_data_parts:
            await self.chain(k + 1, chunk)
            return
        self.parts[spec.id].append(chunk)
        hook = spec.hooks["process_output_stream"]
        args = ProcessOutputStreamArgs(
            processor_id=spec.id,
            state=self.state[spec.id],
            part=chunk,
            stream_parts=StreamParts(self.parts[spec.id]),
            message_list=self.message_list,
            retry_count=self.retry_count,
            request_context=self.request_context,
            emitter=_Sink(self, spec),
        )
        args.writer = ProcessorStreamWriter(_Sink(self, spec), spec.id)
        try:
            result = await call_hook(hook.fn, hook.is_async, args)
        except TripWire as tripwire:
            raise self._tripped(spec, tripwire) from None
        except BaseExceptionGroup as group:
            found = tripwire_in(group)
            if found is None:
                raise
            raise self._tripped(spec, found) from None
        except Exception as exc:
            result = self._failed(spec, exc, chunk)
        else:
            if not _valid(result):
                result = self._failed(spec, stream_result_error(spec.id, result), chunk)
        if result is None:
            return
        for sub in result if isinstance(result, list | tuple) else [result]:
            await self.chain(k + 1, sub)

    def _tripped(self, spec: ProcessorSpec, tripwire: TripWire) -> _EndOfAttempt:
        if tripwire.processor_id is None:
            tripwire.processor_id = spec.id
        return _EndOfAttempt(tripwire, None, spec)

    def _failed(self, spec: ProcessorSpec, exc: Exception, chunk: Any) -> Any:
        # The pipeline's own failure policy, so the two cannot drift apart (the
        # error's __cause__, the tripwire's reason, a contract error unwrapped).
        outcome = on_error_outcome(
            spec.on_error,
            spec.id,
            "process_output_stream",
            exc,
            passing="passing the chunk on unchanged",
        )
        if outcome is None:
            return chunk
        if isinstance(outcome, TripWire):
            raise _EndOfAttempt(outcome, None, spec)
        raise _EndOfAttempt(None, outcome, spec)


def _valid(result: Any) -> bool:

    if result is None or result.__class__ in CHUNK_CLASSES:
        return True
    return isinstance(result, list | tuple) and all(
        sub.__class__ in CHUNK_CLASSES for sub in result
    )


async def _notify(spec: ProcessorSpec, violation: ProcessorViolation) -> None:
    if spec.on_violation is None:
        return
    try:
        result = spec.on_violation(violation)
        if hasattr(result, "__await__"):
            await result
    except Exception:
        logger.exception("on_violation of processor %r failed", spec.id)


async def run_sequential(
    processors: Sequence[object],
    source: AsyncIterable[Any],
    *,
    run_id: str | None = None,
    request_context: RequestContext | dict[str, Any] | None = None,
    message_list: Any = None,
    driver: PipelineDriver | None = None,
    on_chunk: Callable[[Any], object] | None = None,
) -> SequentialRun:
    """Run ``source`` through ``processors`` one chunk at a time; return what the
    client sees. The same driver protocol as ``open_output_pipeline`` applies.
    Checkpoints whenever the source or a hook does; cancellation propagates.

    ``on_violation`` callbacks are awaited, and ``on_chunk`` is called for each
    delivered chunk, in one final pass in delivery order, so a test can log both
    into one list and compare the interleaving with a pipeline's.
    """
    specs = [
        spec
        for spec in register_processors(output=processors).output
        if "process_output_stream" in spec.hooks
    ]
    context = (
        request_context
        if isinstance(request_context, RequestContext)
        else RequestContext(request_context or {})
    )
    run = _Run(specs, run_id=run_id, request_context=context, message_list=message_list)
    outcome = PipelineOutcome("completed")
    iterator = source.__aiter__()
    try:
        async for item in iterator:
            ended = await run.take(item, driver)
            if ended is not None:
                outcome = ended
                break
    finally:
        aclose = getattr(iterator, "aclose", None)
        if aclose is not None:
            await aclose()
    # Delivery: chunks to the client, violations to on_violation, in order.
    chunks: list[Any] = []
    for event in run.out:
        if isinstance(event, _ViolationEvent):
            await _notify(event.spec, event.violation)
        else:
            chunks.append(event)
            if on_chunk is not None:
                on_chunk(event)
    return SequentialRun(chunks=chunks, outcome=outcome)
