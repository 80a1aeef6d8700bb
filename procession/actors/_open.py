"""Opening a run's output pipeline: ``open_output_pipeline`` checks its
arguments, registers bare processors, runs the ``"actors"`` mode's tasks in a
nursery of their own, and closes the source however the block is left."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import trio

from .._errors import ConfigurationError
from .._secrets import get_logger
from ..processors import (
    AbortSignal,
    RequestContext,
    TracingContext,
    register_processors,
)
from ._actor import ProcessorActor
from ._actors_mode import ActorsMode
from ._control import ControlSource
from ._flow import Flow
from ._interface import (
    ExecutionMode,
    PipelineDriver,
    PipelineOutcome,
    check_arguments,
)
from ._pipeline import GRACE_SECONDS, OutputPipeline
from ._split import DEFAULT_LINK_CAPACITY, Splitter
from ._stage import HOOK, _Stage
from ._supervision import unwrapping_a_lone_exception

__all__ = ["open_output_pipeline"]

logger = get_logger("procession")


def open_output_pipeline(
    processors: Sequence[object] | Sequence[ProcessorActor],
    source: AsyncIterable[Any],
    *,
    run_id: str | None = None,
    request_context: RequestContext | dict[str, Any] | None = None,
    message_list: Any = None,
    mode: ExecutionMode = "adaptive",
    link_capacity: int | float | None = None,
    checkpoint_every: int = 64,
    driver: PipelineDriver | None = None,
    tracing_context: TracingContext | None = None,
    abort_signal: AbortSignal | None = None,
    retry_count: int = 0,
    nursery: trio.Nursery | None = None,
) -> AbstractAsyncContextManager[OutputPipeline]:
    """Run ``source`` through the output processors: ``async with
    open_output_pipeline(...) as pipeline``, the client end.

    Args:
        processors: output processors (each registered as in the output lane,
            so one without any output hook is refused; those with
            ``process_output_stream`` become stages), or the run's actors.
        source: chunks (plus ``NewAttempt`` / ``Barrier`` markers from a driver).
        run_id: stamped on the chunks the pipeline itself makes (tripwire, error).
        request_context: given to every hook.
        message_list: given to every hook as ``message_list``.
        mode: ``"adaptive"`` (default), ``"fused"`` or ``"actors"``; see
            ``procession.actors._pipeline``'s docstring.
        link_capacity: buffer size of each link, in messages: in ``"actors"``
            mode (default 1), and in ``"adaptive"`` mode once it has split
            (default 4; each message a batch of up to 16 chunks).
        checkpoint_every: the cancellation-latency bound, in source items.
        driver: decides retries and error recovery; without one, a retry request
            ends the stream as a tripwire and error chunks pass through.
        nursery: where an ``"adaptive"`` pipeline starts its segments'
            supervisor if it splits (its lifetime must cover the block; the
            agent's run passes its own); by default the pipeline opens one.

    Leaving the block cancels every task of the pipeline and closes the source
    (``aclose()``), whether or not the stream was read to the end. The
    arguments are checked (``ConfigurationError``) when this is called.
    """
    check_arguments(mode, link_capacity, checkpoint_every, source)
    if link_capacity is None:
        link_capacity = DEFAULT_LINK_CAPACITY if mode == "adaptive" else 1
    actors = _actors(processors)
    context = (
        request_context
        if isinstance(request_context, RequestContext)
        else RequestContext(request_context or {})
    )
    flow = Flow(driver)
    watch = mode == "adaptive"
    stages = [
        _Stage(
            actor,
            flow,
            index=k,
            watch=watch,
            message_list=message_list,
            retry_count=retry_count,
            request_context=context,
            tracing_context=tracing_context,
            abort_signal=abort_signal,
        )
        for k, actor in enumerate(a for a in actors if HOOK in a.spec.hooks)
    ]
    splitter = (
        Splitter(flow, stages, link_capacity)
        if mode == "adaptive" and _may_split(stages)
        else None
    )
    pipeline = OutputPipeline(
        flow,
        stages,
        splitter,
        run_id=run_id,
        request_context=context,
        message_list=message_list,
        mode=mode,
        link_capacity=link_capacity,
        checkpoint_every=checkpoint_every,
        driver=driver,
        tracing_context=tracing_context,
        abort_signal=abort_signal,
        retry_count=retry_count,
    )
    iterator = flow.iterator = source.__aiter__()
    flow.queued = getattr(iterator, "take_nowait", None)
    if mode == "actors" or (splitter is not None and nursery is None):
        return _with_tasks(
            pipeline, flow, stages, splitter, link_capacity, checkpoint_every
        )
    if splitter is not None:
        assert nursery is not None
        splitter.nursery = nursery
    return _PipelineBlock(pipeline, flow, stages, splitter)


class _PipelineBlock(AbstractAsyncContextManager[OutputPipeline]):
    """The block of a pipeline that runs no task of its own (fused, or
    adaptive in the caller's nursery): an object, not a generator, as every
    run opens one."""

    __slots__ = ("_flow", "_pipeline", "_splitter", "_stages")

    def __init__(
        self,
        pipeline: OutputPipeline,
        flow: Flow,
        stages: list[_Stage],
        splitter: Splitter | None,
    ) -> None:
        self._pipeline = pipeline
        self._flow = flow
        self._stages = stages
        self._splitter = splitter

    async def __aenter__(self) -> OutputPipeline:
        return self._pipeline

    async def __aexit__(self, *exc_info: object) -> None:
        splitter = self._splitter
        try:
            if splitter is not None:
                _leave_split(self._flow, splitter)
        finally:
            await _leave(self._pipeline, self._flow, self._stages)


@asynccontextmanager
async def _with_tasks(
    pipeline: OutputPipeline,
    flow: Flow,
    stages: list[_Stage],
    splitter: Splitter | None,
    link_capacity: int | float,
    checkpoint_every: int,
) -> AsyncIterator[OutputPipeline]:
    """The block of a pipeline with a nursery of its own: ``"actors"`` mode's
    tasks, or the segments of an adaptive pipeline that may split and was
    given no nursery."""
    try:
        if splitter is not None:
            async with _adaptive(flow, splitter):
                yield pipeline
            return
        actors_mode = ActorsMode(
            flow, stages, capacity=link_capacity, checkpoint_every=checkpoint_every
        )
        with unwrapping_a_lone_exception():
            async with trio.open_nursery() as nursery:
                receive = await nursery.start(actors_mode.supervise)
                flow.receive = receive
                try:
                    yield pipeline
                finally:
                    assert flow.cancel_scope is not None
                    flow.cancel_scope.cancel()
                    receive.close()
    finally:
        await _leave(pipeline, flow, stages)


async def _leave(pipeline: OutputPipeline, flow: Flow, stages: list[_Stage]) -> None:
    """However the block is left: the outcome settled, each stage told the
    stream ended, and the source closed."""
    if pipeline.outcome is None:
        pipeline.outcome = PipelineOutcome("cancelled")
    completed = pipeline.outcome.kind == "completed"
    for stage in stages:
        stage.at_stream_end(completed)
    if pipeline.abort_signal is not None and pipeline.outcome.kind == "cancelled":
        pipeline.abort_signal.set("the output stream was closed early")
    iterator = flow.iterator
    assert iterator is not None
    aclose = getattr(iterator, "aclose", None)
    if iterator.__class__ is ControlSource:
        # A run's own source: closing it never waits (no shielded scope).
        iterator.leave()
    elif aclose is not None:
        # Shielded so a cancelled consumer still closes the source (and with it
        # the provider's HTTP stream), with a deadline so cleanup cannot hang.
        with trio.CancelScope(shield=True) as scope:
            scope.relative_deadline = GRACE_SECONDS
            await _close(aclose())


@asynccontextmanager
async def _adaptive(flow: Flow, splitter: Splitter) -> AsyncIterator[None]:
    """An adaptive pipeline's block: a nursery its segment tasks go into if
    it splits (nothing runs there until then), all of it cancelled on leaving."""
    with unwrapping_a_lone_exception():
        async with trio.open_nursery() as nursery:
            splitter.nursery = nursery
            try:
                yield
            finally:
                _leave_split(flow, splitter)


def _may_split(stages: Sequence[_Stage]) -> bool:
    """Whether an adaptive pipeline can ever split: a stage is watched or asks
    for a boundary (otherwise it runs fused, and needs no nursery)."""
    return any(
        stage.watch is not None or stage.actor.spec.stream_boundary is True
        for stage in stages
    )


def _leave_split(flow: Flow, splitter: Splitter) -> None:
    # Only the segments' own scope, as in actors mode: cancelling the nursery's
    # would also hide, as Cancelled, the exception a segment may be raising.
    splitter.close()
    if flow.receive is not None:
        flow.receive.close()


async def _close(closing: Awaitable[Any]) -> None:
    try:
        await closing
    except Exception:
        logger.exception("closing the output pipeline's source failed")


def _actors(processors: Sequence[object]) -> list[ProcessorActor]:
    if isinstance(processors, str | bytes) or not isinstance(processors, Sequence):
        raise ConfigurationError(
            f"processors must be a list of output processors, got {processors!r}"
        )
    if all(isinstance(p, ProcessorActor) for p in processors):
        return [p for p in processors if isinstance(p, ProcessorActor)]
    registered = register_processors(output=processors)
    return [ProcessorActor(spec) for spec in registered.output]
