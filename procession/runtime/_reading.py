"""Reading one model response into the run.

The coordinator owns the model call; every await on the model's stream happens
in its task, inside the run's cancel scopes (the run's end, a granted retry,
the idle timeout, the run deadline). When the response can give a chunk
without waiting (``next_nowait``: a scripted model, a parsed backlog) and the
run is not ``"actors"``, the pipeline pulls chunks straight from it in the
consumer's task and hands the response back to the coordinator only when the
next chunk would have to be waited for: no task switch per chunk while data is
at hand, and a cancelled read of the stream never cancels an await inside the
model source (a provider's generator that received ``Cancelled`` would be
finished for good, the stream silently cut short).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Final

import attrs
import trio

from .._errors import ProviderError, ProviderStreamError
from ..actors import RunControl
from ..data import (
    ErrorChunk,
    FinishChunk,
    StartChunk,
    StepFinishChunk,
    StepStartChunk,
    ToolCallChunk,
)
from ..models import ModelFinish
from ._idle import IdleWatch
from ._state import RunState

__all__ = [
    "LIFECYCLE",
    "ModelReader",
    "merged_finish",
    "replay_reason",
    "told_finish",
]

READ_AHEAD: Final = 16
"""How many chunks the run's task reads ahead of the pipeline once the model's
response has to be waited for (one network read after another): handing each
one over and waiting to be asked again cost a task switch and ~45% more CPU
per event. A rejected attempt may thus be read up to this far past its cut."""

_END: Final = object()
"""The end of the model's stream (``_next``)."""


class ModelReader:
    """Reads one model response into the pipeline (see the module docstring).

    ``raw`` collects the model's content chunks as it sent them (with
    ``keep``: only ``process_llm_response`` needs them); ``told`` is the
    finish information its own lifecycle chunks gave. It is also the
    pipeline's ``InlineSource`` for the response: ``pull_nowait`` / ``pull``
    run in the pipeline's reading task, ``read`` in the coordinator's.
    """

    __slots__ = (
        "_consumer",
        "_control",
        "_coordinator",
        "_done",
        "_error",
        "_keep",
        "_nowait",
        "_reading",
        "_ready",
        "_state",
        "_watch",
        "raw",
        "told",
        "tool_called",
    )

    def __init__(
        self,
        state: RunState,
        control: RunControl,
        watch: IdleWatch,
        raw: list[Any],
        *,
        keep: bool = True,
    ) -> None:
        self._state = state
        self._control = control
        self._watch = watch
        self._keep = keep
        self.raw = raw
        self.told: ModelFinish | None = None
        self.tool_called = False
        """Whether the model sent a tool call (kept or not)."""
        self._nowait: Callable[[], Any] | None = None
        # The hand-over: chunks the coordinator read (awaiting) for the puller;
        # whether the coordinator holds the response now; whether it is done.
        # (A list, not a deque: it holds one chunk at most, and a run makes one.)
        self._ready: list[Any] = []
        self._reading = False
        self._done = False
        self._error: Exception | None = None
        # The task parked waiting for the other side, if any (not an Event
        # per wait: one side at a time waits, and it always parks).
        self._coordinator: trio.lowlevel.Task | None = None
        self._consumer: trio.lowlevel.Task | None = None

    # --- one chunk ----------------------------------------------------------------

    def accept(self, chunk: Any) -> Any:
        """What of the model's ``chunk`` goes to the pipeline: the chunk with the
        run's id, or ``None`` (a lifecycle chunk, or the run has ended). Raises
        the error an ``error`` chunk carries (a model that reports a failure as
        a chunk rather than raising: the same path as a raised error)."""
        cls = chunk.__class__
        if cls in LIFECYCLE:
            if cls is ErrorChunk:
                raise _error_from_chunk(chunk)
            self.told = told_finish(chunk, self.told)
            return None
        if self._keep:
            self.raw.append(chunk)
        if cls is ToolCallChunk:
            self.tool_called = True
        if self._control.outcome is not None:  # ``ended``, without its call
            self._state.model_chunks_after_end += 1
            return None
        return self._state.stamp(chunk)

    # --- the coordinator's side ----------------------------------------------------

    async def read(self, iterator: AsyncIterator[Any]) -> None:
        """Read the response to its end (or until a retry is granted, or the
        run ends), in the coordinator's task. Raises what the model raised.
        Checkpoints; cancellation (a granted retry, the idle timeout, the run's
        end) propagates."""
        # In "actors" mode the pipeline's reader task would pull far ahead of
        # the stages (no checkpoint stops it), reading past a cut the stages
        # are about to make; there each chunk is sent over, as before.
        nowait = (
            getattr(iterator, "next_nowait", None)
            if self._state.spec.mode != "actors"
            else None
        )
        if nowait is None:
            await self._read_awaited(iterator)
            return
        self._nowait = nowait
        try:
            await self._control.inline(self)
            # The coordinator settles right after the read (or after its
            # failure): queued now, that barrier passes as soon as the
            # pipeline has pulled the response, without a task switch to send
            # it then.
            self._control.settle_ahead()
            # Then wait while the puller takes chunks without waiting; when it
            # cannot, await the next chunk here and hand it over, and read on
            # (the next one is usually on its way) until the puller is
            # READ_AHEAD chunks behind, then wait again. (In this frame, not a
            # helper's: a paced chunk's wait resumes each frame of the chain.)
            control, watch = self._control, self._watch
            ready = self._ready
            while True:
                while not (self._reading or self._done):
                    self._coordinator = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(self._abort_coordinator)
                if self._done:
                    break
                # _next, inline: a paced chunk's wait makes no coroutine and
                # resumes one frame less.
                watch.waiting()
                try:
                    chunk = await iterator.__anext__()
                except StopAsyncIteration:
                    break
                finally:
                    watch.since = None
                item = self.accept(chunk)
                if item is None:
                    continue  # still ours: read on
                ready.append(item)
                if not self._take_at_hand(ready):
                    break  # the model's end
                if len(ready) >= READ_AHEAD or control.ended or control.retry_requested:
                    self._reading = False  # the puller takes them, then asks again
                self._wake_consumer()
        finally:
            self._finish()
        if self._error is not None:
            raise self._error

    async def _next(self, iterator: AsyncIterator[Any]) -> Any:
        """The model's next chunk, awaited with the idle timer running (it runs
        only while the run waits for the model); ``_END`` at the end."""
        watch = self._watch
        watch.waiting()
        try:
            return await iterator.__anext__()
        except StopAsyncIteration:
            return _END
        finally:
            watch.since = None

    async def _read_awaited(self, iterator: AsyncIterator[Any]) -> None:
        """Every chunk awaited here and sent over (a response without
        ``next_nowait``)."""
        control = self._control
        while True:
            chunk = await self._next(iterator)
            if chunk is _END:
                return
            item = self.accept(chunk)
            if item is None:
                continue
            await control.inject(item)
            if control.retry_requested:
                return

    def _take_at_hand(self, ready: list[Any]) -> bool:
        """After an awaited chunk, take what the same read made ready (up to
        ``READ_AHEAD``) without waiting, so the puller is woken once for all
        of it. False at the model's end; raises what the model raised."""
        nowait = self._nowait
        assert nowait is not None
        while len(ready) < READ_AHEAD:
            try:
                item = self.accept(nowait())
            except trio.WouldBlock:
                return True
            except StopAsyncIteration:
                return False
            if item is not None:
                ready.append(item)
        return True

    # --- the pipeline's side (InlineSource) ---------------------------------------

    def pull_nowait(self) -> Any:
        """The next chunk for the pipeline if it is at hand (see
        ``InlineSource``). Runs in the pipeline's reading task; never
        checkpoints and never awaits the model."""
        if self._ready:
            return self._ready.pop(0)
        if self._done:
            raise trio.EndOfChannel
        if self._reading:
            raise trio.WouldBlock  # the coordinator is awaiting the next chunk
        control = self._control
        if control.outcome is not None or control.retry_requested:
            # A rejected response is not read on; an ended run reads nothing.
            self._finish()
            raise trio.EndOfChannel
        nowait = self._nowait
        assert nowait is not None
        try:
            while True:
                item = self.accept(nowait())
                if item is not None:
                    return item
        except trio.WouldBlock:
            # The next chunk must be waited for: the coordinator awaits it, in
            # its task and its cancel scopes.
            self._reading = True
            self._wake_coordinator()
            raise
        except StopAsyncIteration:
            self._finish()
        except Exception as exc:  # the model's failure, raised by the coordinator
            self._error = exc
            self._finish()
        raise trio.EndOfChannel

    async def pull(self) -> Any:
        """The next chunk for the pipeline, waiting for the coordinator to hand
        it over. A cancelled ``pull`` loses nothing."""
        while True:
            if self._ready:
                return self._ready.pop(0)
            # While the coordinator awaits the model, pull_nowait would only
            # raise WouldBlock: park at once (a paced chunk's every wait).
            if not self._reading or self._done:
                try:
                    return self.pull_nowait()
                except trio.WouldBlock:
                    pass
            # Parked outside the handler: a waiting stream keeps no exception
            # (and its traceback's frames) alive.
            self._consumer = trio.lowlevel.current_task()
            await trio.lowlevel.wait_task_rescheduled(self._abort_consumer)

    # --- both ------------------------------------------------------------------------

    def _finish(self) -> None:
        self._done = True
        self._wake_coordinator()
        self._wake_consumer()

    def _wake_coordinator(self) -> None:
        task = self._coordinator
        if task is not None:
            self._coordinator = None
            trio.lowlevel.reschedule(task)

    def _wake_consumer(self) -> None:
        task = self._consumer
        if task is not None:
            self._consumer = None
            trio.lowlevel.reschedule(task)

    def _abort_coordinator(self, _: Any) -> trio.lowlevel.Abort:
        self._coordinator = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _abort_consumer(self, _: Any) -> trio.lowlevel.Abort:
        self._consumer = None
        return trio.lowlevel.Abort.SUCCEEDED


def _error_from_chunk(chunk: ErrorChunk) -> ProviderError:
    """A ``ProviderStreamError`` (an error event inside the model's stream) for an
    ``error`` chunk a model yielded, unless it carries a ``ProviderError``. The body has
    the shape of a streamed error event (``{"type": "error", "error": ...}``) so
    error processors that match those (the OpenAI Responses matcher) see it."""
    error = chunk.payload.error
    if isinstance(error, ProviderError):
        return error
    message = error.get("message") if isinstance(error, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None
    return ProviderStreamError(
        str(message or error),
        body={"type": "error", "error": error},
        code=code if isinstance(code, str) else None,
    )


LIFECYCLE: Final = frozenset(
    {StartChunk, StepStartChunk, StepFinishChunk, FinishChunk, ErrorChunk}
)
"""Chunk classes a model's stream may carry that are not content: the runtime
makes its own (``error`` is turned into a raised error)."""


def told_finish(chunk: Any, before: ModelFinish | None) -> ModelFinish | None:
    """The finish information a model's ``step-finish`` / ``finish`` chunk gives
    (the last one wins; ``start`` / ``step-start`` give none)."""
    if chunk.__class__ is not FinishChunk and chunk.__class__ is not StepFinishChunk:
        return before
    payload = chunk.payload
    return ModelFinish(
        finish_reason=payload.step_result.reason,
        usage=payload.output.usage,
        provider_metadata=payload.provider_metadata,
    )


def merged_finish(
    given: ModelFinish | None, told: ModelFinish | None
) -> ModelFinish | None:
    """The step's finish: what the model's lifecycle chunk told (a replayed
    stream's own finish), over what the response object says, whose request,
    warnings and usage fill what the chunk left out."""
    if told is None or given is None:
        return told or given
    return attrs.evolve(
        given,
        finish_reason=told.finish_reason,
        usage=told.usage or given.usage,
        provider_metadata=told.provider_metadata or given.provider_metadata,
    )


def replay_reason(chunks: Sequence[Any]) -> str:
    return "tool-calls" if any(isinstance(c, ToolCallChunk) for c in chunks) else "stop"
