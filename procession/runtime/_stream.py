"""The client end of a run, and the run's supervisor.

``open_stream`` starts the coordinator in a nursery of its own, beside the
output pipeline, and yields the ``AgentStream``. Any terminal event (the run's
outcome being decided: a tripwire, an error, a cancel, the consumer leaving)
cancels the run's scope: the model call and its HTTP stream, running tools and
every processor task stop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, NoReturn

import attrs
import sniffio
import trio

from .._errors import ConfigurationError
from ..actors import (
    OutputPipeline,
    RunControl,
    open_output_pipeline,
)
from ..data import (
    AbortChunk,
    Chunk,
    FinishChunk,
    FinishPayload,
    RunOutcome,
    StepFinishChunk,
    StepFinishPayload,
    StepOutput,
    StepResultInfo,
    Usage,
)
from ..processors import MessageList
from ..telemetry import start_run
from ._hooks import HookLanes
from ._result import AgentResult, build_result
from ._run import Coordinator
from ._state import RunSpec, RunState

__all__ = ["AgentStream", "open_stream"]

_COORDINATOR_NAME = "procession.run_coordinator"
"""The coordinator task's name, given, not derived by trio from the function
per run (a string made per task, ~250 B while the run lasts)."""


class _CoordinatorTask:
    """The run's coordinator task, and the one thing others wait for: that it
    stopped (``wait``, as a ``trio.Event``'s; its waiters' list is made only
    if one waits). ``cancel`` ends it (the run's outcome was decided); one
    object instead of closures and an event per run."""

    __slots__ = ("_done", "_scope", "_waiters")

    def __init__(self) -> None:
        self._scope = trio.CancelScope()
        self._done = False
        self._waiters: list[trio.lowlevel.Task] | None = None

    def cancel(self, _outcome: object = None) -> None:
        """Stop the coordinator (at once if it has not started); nothing once
        it has stopped (a run read to its end: trio's ``cancel`` formats the
        calling task's repr for its reason each time)."""
        if not self._done:
            self._scope.cancel()

    async def run_coordinator(
        self, coordinator: Coordinator, control: RunControl
    ) -> None:
        """The coordinator's task: the run, then the control's source closed
        and the waiters woken, however it ends."""
        try:
            with self._scope:
                await coordinator.drive()
        finally:
            control.close()
            self._done = True
            waiters, self._waiters = self._waiters, None
            for task in waiters or ():
                trio.lowlevel.reschedule(task)

    async def wait(self) -> None:
        """Until the coordinator has stopped. Checkpoints; a cancelled wait
        propagates ``Cancelled``."""
        if self._done:
            await trio.lowlevel.checkpoint()
            return
        task = trio.lowlevel.current_task()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(task)

        def abort(_: object) -> trio.lowlevel.Abort:
            if self._waiters is not None:
                self._waiters.remove(task)
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)


class AgentStream(AsyncIterator[Chunk]):
    """The client end of a streamed run: ``async for chunk in stream``, then
    ``await stream.result()``. ``await stream.cancel()`` ends the run early."""

    def __init__(
        self,
        state: RunState,
        control: RunControl,
        pipeline: OutputPipeline,
        coordinator: Coordinator,
        coordinator_done: _CoordinatorTask,
    ) -> None:
        self._state = state
        self._control = control
        self._pipeline = pipeline
        self._coordinator = coordinator
        self._coordinator_done = coordinator_done
        self._closing: list[Chunk] | None = None
        self._cancelled = False
        self._done = False
        self._result: AgentResult | None = None

    @property
    def run_id(self) -> str:
        return self._state.run_id

    @property
    def message_list(self) -> MessageList:
        return self._state.message_list

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""
        return self._cancelled

    @property
    def outcome(self) -> RunOutcome | None:
        """How the run ended, once that is decided (before the last chunk is
        read, for a tripwire or an error)."""
        return self._control.outcome

    def __aiter__(self) -> AgentStream:
        return self

    async def __anext__(self) -> Chunk:
        """The next chunk the client sees.

        Runs the output processors on the way (in ``"fused"`` mode, in this
        task), so it checkpoints whenever a hook or the model read does, and at
        least every ``checkpoint_every`` chunks. If this read is cancelled, no
        chunk is lost: a hook cut off is called again with the same chunk on
        the next read (see the README, "Cancelled reads"). After ``cancel()``
        the next read is an ``abort`` chunk; then ``StopAsyncIteration``.
        """
        if self._done:
            raise StopAsyncIteration
        if self._closing is not None:
            return self._next_closing()
        if self._cancelled:
            self._done = True
            self._settle(self._control.abort())
            return AbortChunk(run_id=self.run_id)
        pipeline = self._pipeline
        chunk: Chunk | None = pipeline.next_ready()
        if chunk is not None:  # ready (a batch run ahead): no await
            self._control.on_delivered(chunk)
            return chunk
        try:
            chunk = await pipeline.__anext__()
        except StopAsyncIteration:
            if self.cancelled:  # cancel() from another task while we waited
                self._done = True
                self._settle(self._control.abort())
                return AbortChunk(run_id=self.run_id)
            state = self._state
            outcome = self._control.conclude_stream_end(
                completed=state.completed, finish_reason=state.finish_reason
            )
            if outcome.kind != "error":
                self._done = True
                self._settle(outcome)
                raise
            await self._close_after_error()
            return self._next_closing()
        self._control.on_delivered(chunk)
        return chunk

    def next_ready(self) -> Chunk | None:
        """The next chunk if it is at hand now (run ahead in the output
        pipeline's batch), else ``None``: what ``__anext__`` would return
        without awaiting. Never awaits, never runs a hook, never checkpoints;
        ``None`` says nothing of the stream's end (read on with
        ``__anext__``). A writer takes what is at hand this way and sends it
        at once, with no read-ahead."""
        if self._closing is not None or self._cancelled or self._done:
            return None
        chunk: Chunk | None = self._pipeline.next_ready()
        if chunk is not None:
            self._control.on_delivered(chunk)
        return chunk

    def end_nowait(self) -> bool:
        """Whether the stream has ended, found without awaiting: True when
        the next ``__anext__`` would raise ``StopAsyncIteration`` at once (the
        run is then settled, as that read settles it; reading again raises
        it); False otherwise, with nothing delivered (a barrier the run
        waits on may have passed, as a read passes it), which says nothing
        of the end (read on with ``__anext__``). A writer that took what was at hand
        (``next_ready``) asks this before it sends, so the stream's end goes
        out with its last chunks. Never awaits, never runs a hook, never
        checkpoints."""
        if self._done:
            return True
        if self._closing is not None or self._cancelled:
            return False
        control = self._control
        # An error (proposed by the coordinator, or decided at this end: a
        # processor's failure or error chunk) is followed by the chunks that
        # close the run (_close_after_error): a read finds them.
        decided = control.outcome or control.proposed
        if decided is not None and decided.kind == "error":
            return False
        if not self._pipeline.end_nowait():
            return False
        state = self._state
        self._done = True
        self._settle(
            control.conclude_stream_end(
                completed=state.completed, finish_reason=state.finish_reason
            )
        )
        return True

    async def _close_after_error(self) -> None:
        """After a terminal ``error``: the final output pass, then the chunks
        that close the run as Mastra does (``step-finish`` with reason
        ``error`` if a step was open, ``finish`` with reason ``error`` and the
        run's usage). They reach the client past the output processors (Mastra's
        ``deferErrorChunks``: a finish with reason ``error`` bypasses them)."""
        self._closing = []
        await self._coordinator_done.wait()  # no hook of the run still runs
        state = self._state
        self._closing.extend(await self._coordinator.output_result_after_error())
        if state.view.finished:
            # process_output_result failed after the finish chunk had gone out:
            # the error is the last chunk; the run was closed already.
            return
        if state.view.step_open:
            self._closing.append(
                StepFinishChunk(
                    payload=StepFinishPayload(
                        step_result=StepResultInfo(reason="error"),
                        message_id=state.view.message.id
                        if state.view.message is not None
                        else None,
                    ),
                    run_id=self.run_id,
                )
            )
        self._closing.append(
            FinishChunk(
                payload=FinishPayload(
                    step_result=StepResultInfo(reason="error"),
                    output=StepOutput(usage=state.usage or Usage()),
                ),
                run_id=self.run_id,
            )
        )

    def _next_closing(self) -> Chunk:
        if not self._closing:
            self._done = True
            outcome = self._control.outcome
            assert outcome is not None
            self._settle(outcome)
            raise StopAsyncIteration
        chunk = self._closing.pop(0)
        self._state.delivered(chunk)
        if not self._closing:
            self._done = True
            outcome = self._control.outcome
            assert outcome is not None
            self._settle(outcome)
        return chunk

    async def cancel(self) -> None:
        """End the run now: the model call (and its HTTP stream), running tools
        and the processors running in the run's own tasks are cancelled before
        this returns; the next chunk read is an ``abort`` chunk, then the stream
        ends. ``finish_reason`` is ``"aborted"``; it is not a tripwire.

        A hook running inline in the *reading* task (fused mode, and adaptive
        mode before a stage splits off) belongs to that task: a read blocked in
        it ends when the hook returns, or at once if the reader's own cancel
        scope is cancelled too (the chunk it held is not lost; the next read is
        the ``abort``). The server does both for its cancel routes.

        Waits (checkpointing) until the coordinator has stopped; returns at once
        if the stream already ended."""
        if self._done:
            return
        self._cancelled = True
        self._state.abort_signal.set("cancelled by the caller")
        self._control.abort()
        await self._coordinator_done.wait()

    @property
    def durable(self) -> bool:
        """Whether the run is durable (``Agent(durable=...)``): kept in
        storage, taken over by another process if this one dies."""
        return self._coordinator.durable is not None

    async def hand_over(self) -> bool:
        """A durable run: stop at the next safe point (now, or once the tools
        running now have returned and been recorded) and let its lease lapse
        at once, so that another process serving the agent takes it over
        without waiting (a graceful shutdown). The stream then ends with no
        terminal chunk and the outcome ``moved``. True if handed over; False
        for a run that is not durable or has ended. Checkpoints (waits for the
        tools, and for the coordinator to stop)."""
        durable = self._coordinator.durable
        if durable is None or self._done:
            await trio.lowlevel.checkpoint()
            return False
        return await durable.hand_over(self._coordinator_done.wait)

    async def _abandon(self) -> bool:
        """``procession.testing.crash_run``: end the run as if its process
        had died (``DurableRun.abandon``)."""
        durable = self._coordinator.durable
        if durable is None or self._done:
            await trio.lowlevel.checkpoint()
            return False
        return await durable.abandon(self._coordinator_done.wait)

    async def result(self) -> AgentResult:
        """The run's result. Reads the rest of the stream first if the caller has
        not (so it always settles); that reading checkpoints. If the caller's
        scope is cancelled while it reads, ``Cancelled`` propagates and leaving
        the ``async with`` block settles the run as aborted."""
        if self._result is None:
            async for _chunk in self:
                pass
        assert self._result is not None
        return self._result

    def _left(self) -> None:
        """The run's block was left: settled as aborted if it had not ended."""
        if self._result is None:
            self._state.abort_signal.set("the stream was closed early")
            self._settle(self._control.abort())

    def _settle(self, outcome: RunOutcome) -> AgentResult:
        if self._result is None:
            self._result = build_result(self._state, outcome)
            self._ended(self._result)
        return self._result

    def _ended(self, result: AgentResult) -> None:
        """The run settled (telemetry hooks in here)."""


class _TracedAgentStream(AgentStream):
    """The client end when the run's telemetry records: counts what it delivers
    and closes the run's spans when the run settles. Chosen per run, so a run
    without telemetry pays nothing per chunk."""

    _delivered = 0

    async def __anext__(self) -> Chunk:
        chunk = await super().__anext__()
        if not self._delivered:
            self._state.telemetry.delivered_first_chunk()
        self._delivered += 1
        return chunk

    def next_ready(self) -> Chunk | None:
        chunk = super().next_ready()
        if chunk is not None:
            if not self._delivered:
                self._state.telemetry.delivered_first_chunk()
            self._delivered += 1
        return chunk

    def _ended(self, result: AgentResult) -> None:
        state = self._state
        telemetry = state.telemetry
        for tracker in state.traced_streams:
            tracker.close()
        outcome = result.outcome
        if outcome.kind == "tripwire" and outcome.tripwire is not None:
            telemetry.tripwire(outcome.tripwire)
        telemetry.end(outcome, state.usage, state.retry_count, self._delivered)


@attrs.frozen
class Continuation:
    """How a continued run starts: ``restore`` fills its fresh state from the
    snapshot; ``processor_state`` is each processor's ``state`` by id."""

    restore: Callable[[RunState], None]
    processor_state: Mapping[str, Any]


def open_stream(
    spec: RunSpec,
    message_list: MessageList,
    *,
    continuation: Continuation | None = None,
) -> AbstractAsyncContextManager[AgentStream]:
    """Run ``spec`` on ``message_list``: ``async with open_stream(...) as
    stream``. The coordinator runs in a cancel scope of its own, so ending the
    run never cancels the caller's code, and the caller's own exceptions come
    out of the block unwrapped (SPEC §2.7). ``continuation``: the run goes on
    from a pause (its bookkeeping and its processors' state restored first).
    Nothing runs before the block is entered.
    """
    return _RunBlock(spec, message_list, continuation)


class _RunBlock(AbstractAsyncContextManager[AgentStream]):
    """``open_stream``'s block: an object, not a generator (one per run).

    Entering starts the run: its state, its nursery (which only ever holds
    the coordinator, and the tasks a split pipeline or a durable run's lease
    adds) and its output pipeline. Leaving ends it: the coordinator
    cancelled, the run settled as aborted if the block left before its end,
    the pipeline and the nursery left; the block's own exception comes out
    as itself (caught before the nursery could group it, raised after), and
    a group of one exception from the nursery as that exception."""

    __slots__ = (
        "_continuation",
        "_message_list",
        "_nursery",
        "_pipeline",
        "_spec",
        "_stream",
        "_task",
    )

    def __init__(
        self,
        spec: RunSpec,
        message_list: MessageList,
        continuation: Continuation | None,
    ) -> None:
        self._spec = spec
        self._message_list = message_list
        self._continuation = continuation
        self._nursery: AbstractAsyncContextManager[trio.Nursery] | None = None
        self._pipeline: AbstractAsyncContextManager[OutputPipeline] | None = None
        self._stream: AgentStream | None = None
        self._task: _CoordinatorTask | None = None

    async def __aenter__(self) -> AgentStream:
        if self._nursery is not None:
            raise RuntimeError("a run's stream is entered once")
        _require_trio()
        spec, message_list = self._spec, self._message_list
        continuation = self._continuation
        state = RunState(spec=spec, message_list=message_list)
        if continuation is not None:
            continuation.restore(state)
        # Read in the caller's task: the run's span is a child of the caller's.
        state.telemetry = start_run(
            agent_id=spec.agent_id,
            agent_name=spec.agent_name,
            run_id=spec.run_id,
            thread_id=message_list.thread_id,
            tracer_provider=spec.tracer_provider,
            meter_provider=spec.meter_provider,
        )
        task = _CoordinatorTask()
        control = RunControl(
            run_id=spec.run_id,
            may_retry=state.may_retry,
            on_outcome=task.cancel,
            observer=state,
            # Actors mode's reader task would take what is queued ahead of its
            # stages (RunControl's docstring).
            queue_ahead=spec.mode != "actors",
        )
        lanes = HookLanes(state, control)
        if continuation is not None:
            for processor_id, saved in continuation.processor_state.items():
                actor = lanes.actors.get(processor_id)
                if actor is not None:
                    actor.state = dict(saved)
        coordinator = Coordinator(state, lanes, control)
        nursery_block = self._nursery = trio.open_nursery()
        nursery = await nursery_block.__aenter__()
        try:
            pipeline_block = open_output_pipeline(
                lanes.output_actors(),
                control.source,
                run_id=spec.run_id,
                request_context=spec.request_context,
                message_list=message_list,
                mode=spec.mode,
                driver=control,
                tracing_context=state.tracing_context,
                abort_signal=state.abort_signal,
                nursery=nursery,
            )
            pipeline = await pipeline_block.__aenter__()
        except BaseException as exc:
            failure = await _left(nursery_block, exc)
            if failure is None or failure is exc:
                raise
            _raise_unwrapped(failure)
        self._pipeline = pipeline_block
        state.spawn = nursery.start_soon
        cls = _TracedAgentStream if state.telemetry.active else AgentStream
        stream = self._stream = cls(state, control, pipeline, coordinator, task)
        self._task = task
        nursery.start_soon(
            task.run_coordinator, coordinator, control, name=_COORDINATOR_NAME
        )
        return stream

    async def __aexit__(
        self,
        _type: type[BaseException] | None,
        body_error: BaseException | None,
        _tb: Any,
    ) -> bool:
        """Returns False: the block's own exception (if any) goes on as it
        was; an exception from leaving the run is raised instead."""
        stream, task = self._stream, self._task
        assert stream is not None
        assert task is not None
        assert self._nursery is not None
        assert self._pipeline is not None
        failure: BaseException | None = None
        try:
            task.cancel()
            stream._left()  # noqa: SLF001 - its own block's exit
        except BaseException as exc:
            failure = exc
        failure = await _left(self._pipeline, failure)
        failure = await _left(self._nursery, failure)
        if failure is not None:
            _raise_unwrapped(failure)
        return False


async def _left(
    block: AbstractAsyncContextManager[Any], error: BaseException | None
) -> BaseException | None:
    """Leave ``block`` with ``error`` (None: cleanly); what comes out of it:
    None, ``error`` if it went on, or what leaving raised instead."""
    try:
        if error is None:
            await block.__aexit__(None, None, None)
            return None
        if await block.__aexit__(type(error), error, error.__traceback__):
            return None
        return error
    except BaseException as raised:
        return raised


def _raise_unwrapped(error: BaseException) -> NoReturn:
    """Raise ``error``, a group of one exception from the run's nursery as
    that exception (``unwrapping_a_lone_exception``'s rule), with its own
    context (raised here, whatever is being handled would become it)."""
    if isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    context = error.__context__
    try:
        raise error
    finally:
        error.__context__ = context


def _require_trio() -> None:
    """A run needs trio's scheduler; under asyncio (or no loop) say so plainly
    instead of failing deep inside trio."""
    try:
        library = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        library = None
    if library != "trio":
        where = f"from {library}" if library else "outside an event loop"
        raise ConfigurationError(
            f"procession runs on trio (or anyio's trio backend); this run was "
            f"started {where}. Run it with trio.run(...), or anyio.run(..., "
            f"backend='trio')"
        )
