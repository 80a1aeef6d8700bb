"""One processor's ``process_output_stream`` as a stage of the chain.

A stage runs its hook on one chunk at a time under its actor's turn, with a
sync fast path (``apply_nowait``), and turns what the hook did into items for
the chain: the chunk(s) it returned, its custom chunks and violations, its
abort (``_StageEnd``) or its failure under the processor's ``on_error`` policy.
"""

from __future__ import annotations

import inspect
import weakref
from collections import deque
from typing import Any, Final

import trio

from .._errors import (
    TripWire,
)
from .._secrets import get_logger
from ..data import (
    CHUNK_CLASSES,
    DataChunk,
    FinishChunk,
    StartChunk,
    StepFinishChunk,
)
from ..processors import (
    AbortSignal,
    ProcessorStreamWriter,
    ProcessorViolation,
    RequestContext,
    StreamParts,
    TracingContext,
)
from ..processors._calling import on_error_outcome, tripwire_in
from ..processors._contract import ProcessOutputStreamArgs
from ..processors._readers import stream_result_error
from ._actor import ProcessorActor
from ._flow import Flow
from ._markers import (
    Barrier,
    EndRun,
    NewAttempt,
    _Custom,
    _DrainBarrier,
    _Marker,
    _Raise,
    _StageEnd,
    _Violation,
)
from ._watch import (
    COUNTED,
    DRIVEN,
    PROBATION,
    Parked,
    driven,
    first_probation,
    schedule_points,
)

__all__: list[str] = []

logger = get_logger("procession")

HOOK: Final = "process_output_stream"

_STOP: Final = object()
_SLOW: Final = object()  # apply_nowait: use the awaited path


def _is_awaitable_result(result: Any, item: Any) -> bool:
    return (
        result is not item
        and result is not None
        and result.__class__ not in _CHUNK_SET
        and inspect.isawaitable(result)
    )


class _Pending:
    """A sync hook's awaitable result, still to be awaited."""

    __slots__ = ("awaitable",)

    def __init__(self, awaitable: Any) -> None:
        self.awaitable = awaitable


class _Outlet:
    """A stage's emitter (``args.emitter``, behind ``args.writer``): custom
    chunks and violations go to ``out`` in order. Apart from the stage, so a
    stage and its hook's arguments make no reference cycle (a run is freed by
    reference counting when it ends, not left to the cyclic GC: that was ~35%
    of the time with 1,000 concurrent runs)."""

    __slots__ = ("actor", "out")

    def __init__(self, actor: ProcessorActor) -> None:
        self.actor = actor
        self.out: list[Any] | deque[Any] = []

    def emit_custom(self, processor_id: str, chunk: Any) -> None:
        self.out.append(_Custom(chunk))

    def emit_violation(self, violation: ProcessorViolation) -> None:
        self.out.append(_Violation(self.actor, violation))


# --- a stage -------------------------------------------------------------------


class _Stage:
    """One processor's ``process_output_stream`` in the chain. Its hook's side
    outputs, and what it ends with, go to ``out`` in order (its ``_Outlet``)."""

    __slots__ = (
        "_flow",
        "actor",
        "args",
        "attempt",
        "attempt_start",
        "discarding",
        "drop_from",
        "fn",
        "id",
        "index",
        "is_async",
        "last_drop",
        "on_error",
        "outlet",
        "parts",
        "passed_failures",
        "probation",
        "probe",
        "seen",
        "skip_data",
        "stopped",
        "warned_drops",
        "watch",
    )

    def __init__(
        self,
        actor: ProcessorActor,
        flow: Flow,
        *,
        index: int,
        watch: bool,
        message_list: Any,
        retry_count: int,
        request_context: RequestContext,
        tracing_context: TracingContext | None,
        abort_signal: AbortSignal | None,
    ) -> None:
        spec = actor.spec
        hook = spec.hooks[HOOK]
        self.actor = actor
        self.id = spec.id
        self.fn = hook.fn
        self.is_async = hook.is_async
        self.index = index
        # "adaptive": how this stage's hook is watched for parking (_watch);
        # None when it is not (other modes, sync hooks, a stated preference).
        self.watch: str | None = (
            DRIVEN if watch and hook.is_async and spec.stream_boundary is None else None
        )
        # The registration's record of its hook's calls across runs (_watch):
        # a hook seen quiet for PROBATION driven calls in a row is counted
        # from a new run's first call.
        self.probe = spec.probe
        self.probation = first_probation() if self.watch is not None else 0
        """Whether calls are driven on probation (0: not, or no longer)."""
        if self.probation and self.probe.quiet >= PROBATION:
            self.watch = COUNTED
            self.probation = 0
        self.seen = Parked()
        self.on_error = spec.on_error
        self.skip_data = not spec.process_data_parts
        # Weakly: the flow's driver may hold the pipeline, which holds its
        # stages (no cycle; read only when a stage parks or raises a retry,
        # never per chunk).
        self._flow = weakref.ref(flow)
        self.parts: list[Any] = []
        self.outlet = outlet = _Outlet(actor)
        self.attempt = 0
        self.attempt_start = 0
        self.discarding = False
        self.stopped = False
        # Bookkeeping for the diagnostics, written only on the drop and failure
        # paths (never on the per-chunk pass path): the latest run of
        # consecutive drops, as indices into parts, and the on_error="pass"
        # failures so far.
        self.drop_from = -1
        self.last_drop = -2
        self.warned_drops = False
        self.passed_failures = 0
        # One argument object per stage, reused: only ``part`` changes per chunk.
        self.args = ProcessOutputStreamArgs(
            processor_id=spec.id,
            state=actor.state,
            part=_PLACEHOLDER,
            # One view per stage, over the list the stage appends to: no copy
            # per chunk, and a hook cannot change what it was shown.
            stream_parts=StreamParts(self.parts),
            message_list=message_list,
            retry_count=retry_count,
            request_context=request_context,
            tracing_context=tracing_context,
            abort_signal=abort_signal,
            emitter=outlet,
        )
        self.args.writer = ProcessorStreamWriter(outlet, spec.id)

    @property
    def out(self) -> list[Any] | deque[Any]:
        """Where this stage's items go (the pipeline's buffer, a segment's or an
        actor task's batch)."""
        return self.outlet.out

    @out.setter
    def out(self, out: list[Any] | deque[Any]) -> None:
        self.outlet.out = out

    @property
    def flow(self) -> Flow:
        flow = self._flow()
        assert flow is not None  # a stage only runs inside its pipeline
        return flow

    # attempts ---------------------------------------------------------------------

    def new_attempt(self, marker: NewAttempt) -> None:
        if marker.discard:
            # SPEC §2.4: stream_parts exclude discarded attempts. A signal this
            # stage raised in that attempt lost to an earlier one (the run goes
            # on), so the stage takes part again.
            del self.parts[self.attempt_start :]
            self.stopped = False
            self.last_drop = -2  # the indices of a drop run no longer hold
        self.attempt += 1
        self.attempt_start = len(self.parts)
        self.discarding = False
        self.args.retry_count = marker.retry_count

    # diagnostics ----------------------------------------------------------------

    def dropped(self) -> None:
        """The hook returned None for the chunk it was just shown (the last of
        ``parts``). The seed says None drops, so a hook that forgets its
        ``return`` drops everything, ``finish`` included: say so once per run
        when it dropped every chunk of a step (checked on ``step-finish``)."""
        parts = self.parts
        index = len(parts) - 1
        if self.last_drop != index - 1:
            self.drop_from = index
        self.last_drop = index
        if parts[index].__class__ is StepFinishChunk and self._dropped_a_whole_step():
            self._warn_dropped_everything("of a step")

    def at_stream_end(self, completed: bool) -> None:
        """The stream ended (``completed``: it ran to its end): report what the
        per-chunk paths only counted."""
        parts = self.parts
        if (
            completed
            and not self.warned_drops
            and parts
            and self.last_drop == len(parts) - 1
            and self._dropped_a_whole_step()
            # A run's closing finish alone is not a step (a processor may hide it).
            and any(c.__class__ is not FinishChunk for c in parts[self.drop_from :])
        ):
            self._warn_dropped_everything("it was shown")
        if self.passed_failures > 1:
            logger.warning(
                "processor %r failed in %s %d more times in this run (on_error="
                "'pass'; the first is logged above with its traceback); each "
                "chunk was passed on unchanged",
                self.id,
                HOOK,
                self.passed_failures - 1,
            )

    def _dropped_a_whole_step(self) -> bool:
        """Whether the current run of drops began where a step began: at the
        start of the stream or of the attempt, or after a step boundary."""
        start = self.drop_from
        if start <= 0 or start == self.attempt_start:
            return True
        return self.parts[start - 1].__class__ in _STEP_BOUNDARIES

    def _warn_dropped_everything(self, what: str) -> None:
        if self.warned_drops:
            return
        self.warned_drops = True
        logger.warning(
            "processor %r dropped every chunk %s: its %s returned None for each "
            "(a None return drops the chunk). Did it forget to return "
            "args.part? (logged once per run)",
            self.id,
            what,
            HOOK,
        )

    # "adaptive": the probe's verdicts (_watch) ---------------------------------

    def yielded(self) -> None:
        """A call of the hook yielded to trio: drive its calls from now on
        (and a new run's stage, until it is seen quiet again)."""
        self.watch = DRIVEN
        self.probe.quiet = 0

    def probed(self) -> None:
        """A driven call on probation ended without parking: once the hook's
        calls were quiet ``PROBATION`` times in a row (this run's and those
        before), they are only counted from then on; a hook seen to yield is
        driven for the rest of the run."""
        probe = self.probe
        if self.seen.yielded:
            probe.quiet = 0
            self.probation = 0
        else:
            probe.quiet += 1
            if probe.quiet >= PROBATION:
                self.watch = COUNTED
                self.probation = 0

    def parked(self) -> None:
        """A call of the hook parked: a boundary goes in before this stage."""
        self.watch = None
        self.probe.quiet = 0
        self.flow.blocked(self.index)

    async def _call_watched(self) -> Any:
        """Await the async hook under the adaptive probe (``watch`` is set)."""
        if self.watch is COUNTED:
            task = trio.lowlevel.current_task()
            points = schedule_points(task)
            result = await self.fn(self.args)
            if schedule_points(task) != points:
                self.yielded()
            return result
        result = await driven(self.fn(self.args), self.seen)
        if self.seen.parked:
            self.parked()
        elif self.probation:
            self.probed()
        return result

    # the hook -----------------------------------------------------------------

    async def apply(self, item: Any, pending: _Pending | None = None) -> Any:
        """Run the hook on ``item`` under the actor's turn. Returns the chunk to
        pass on, ``None`` (drop), a list (several chunks), or ``_STOP`` (the
        attempt ended here; an ``_StageEnd`` marker was emitted). With ``pending``,
        the hook already ran (``apply_nowait``) and returned that awaitable,
        which is awaited instead. Checkpoints if it has to wait for the actor's
        turn or if the hook does; a cancellation is the caller's to handle (the
        hook's own exceptions are classified, ``Cancelled`` propagates)."""
        if pending is None:
            self.parts.append(item)
            self.args.part = item
        actor = self.actor
        # The actor's turn, inline (take_turn_nowait / release_turn): this is
        # the per-chunk path of every async hook.
        if actor._busy or actor._waiting:  # noqa: SLF001 - the turn, inline
            await actor.acquire()  # another hook of this processor is running
        else:
            actor._busy = True  # noqa: SLF001 - the turn, inline
        try:
            if pending is not None:
                result = await pending.awaitable
            elif self.is_async:
                if self.watch is None:
                    result = await self.fn(self.args)
                else:
                    result = await self._call_watched()
            else:
                result = self.fn(self.args)
                if _is_awaitable_result(result, item):
                    # A sync def that returns an awaitable (a lambda around a
                    # coroutine function, say): the contract awaits it.
                    result = await result
        except BaseException as exc:
            return self.raised(exc, item)
        finally:
            actor.release_turn()
        if result is item or result is None or result.__class__ in _CHUNK_SET:
            return result
        return self.checked(result, item)

    def apply_nowait(self, item: Any) -> Any:
        """The fast path of ``apply`` for a sync hook when no other hook of this
        processor is running: the same outcome without a coroutine frame or
        taking the actor's turn (a sync call cannot interleave with anything).
        Returns ``_SLOW`` when ``apply`` must be awaited instead, and a
        ``_Pending`` (for ``apply``) when the hook returned an awaitable."""
        actor = self.actor
        if self.is_async or actor._busy or actor._waiting:  # noqa: SLF001 - the turn
            return _SLOW
        self.parts.append(item)
        args = self.args
        args.part = item
        try:
            result = self.fn(args)
        except BaseException as exc:
            return self.raised(exc, item)
        if result is item or result is None or result.__class__ in _CHUNK_SET:
            return result  # the common case, inline: this is the per-chunk path
        if inspect.isawaitable(result):
            return _Pending(result)
        return self.checked(result, item)

    async def take(self, item: Any, out: list[Any]) -> None:
        """Run one item through this stage as a task-mode stage does (actors
        mode, an adaptive segment): markers pass on or end the stage's
        attempt, a chunk goes through the hook; what comes out goes to ``out``."""
        if isinstance(item, _Marker):
            cls = item.__class__
            if isinstance(item, NewAttempt):
                self.new_attempt(item)
                out.append(item)
            elif (
                cls is Barrier or cls is _DrainBarrier or cls is EndRun or cls is _Raise
            ):
                out.append(item)  # never discarded
            elif self.stopped or self.discarding:
                pass  # after this stage's cut: the earliest signal already won
            elif isinstance(item, _StageEnd):
                out.append(item)
                if item.is_retry:
                    self.discarding = True
                else:
                    self.stopped = True
            else:
                out.append(item)  # custom chunks and violations from upstream
            return
        if self.stopped or self.discarding:
            return
        if self.skip_data and item.__class__ is DataChunk:
            out.append(item)
            return
        result = self.apply_nowait(item)
        if result is _SLOW:
            result = await self.apply(item)
        elif result.__class__ is _Pending:
            result = await self.apply(item, result)
        if result is None:
            self.dropped()
            return
        if result is _STOP:
            return
        if result.__class__ is list:
            out.extend(result)
        else:
            out.append(result)

    def raised(self, exc: BaseException, item: Any) -> Any:
        """What a hook's exception means: its abort, a failure under the
        policy, or (cancellation and the like) something that must propagate."""
        if isinstance(exc, TripWire):
            return self._tripped(exc)
        if isinstance(exc, Exception):
            return self._failed(exc, item)
        if isinstance(exc, BaseExceptionGroup):
            # A hook that ran its own nursery may raise its abort inside a group.
            found = tripwire_in(exc)
            if found is not None:
                return self._tripped(found)
        raise exc

    def checked(self, result: Any, item: Any) -> Any:
        """A result that is not a single chunk or None: a list of chunks, or a
        contract error handled by the failure policy."""
        if isinstance(result, list | tuple):
            for sub in result:
                if sub.__class__ not in _CHUNK_SET:
                    return self._failed(stream_result_error(self.id, result), item)
            return list(result)
        return self._failed(stream_result_error(self.id, result), item)

    def _tripped(self, tripwire: TripWire) -> Any:
        # A tripwire is a signal, kept to the run's end (the result reports
        # it): without its traceback, whose frames would hold the batch it is
        # queued in (a reference cycle in actors mode).
        tripwire.__traceback__ = None
        if tripwire.processor_id is None:
            # A TripWire raised directly (not via args.abort) is still attributed
            # to the processor that raised it (Mastra issue table #22).
            tripwire.processor_id = self.id
        if tripwire.retry:
            self.discarding = True
            self.flow.note_retry(self.attempt)
        else:
            self.stopped = True
        self.out.append(_StageEnd(self.actor, tripwire=tripwire))
        return _STOP

    def _failed(self, exc: Exception, item: Any) -> Any:
        if self.on_error == "pass":
            # One traceback per run is enough to find the bug; the rest are
            # counted and reported once, when the stream ends (at_stream_end).
            self.passed_failures += 1
            if self.passed_failures > 1:
                return item
        outcome = on_error_outcome(
            self.on_error, self.id, HOOK, exc, passing="passing the chunk on unchanged"
        )
        if outcome is None:
            return item
        if isinstance(outcome, TripWire):
            return self._tripped(outcome)
        self.stopped = True
        self.out.append(_StageEnd(self.actor, error=outcome))
        return _STOP


_CHUNK_SET: Final = CHUNK_CLASSES
_STEP_BOUNDARIES: Final = frozenset({StartChunk, StepFinishChunk})
_PLACEHOLDER: Final = StartChunk()
