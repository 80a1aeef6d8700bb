"""The coordination protocol between a run's coordinator and its output pipeline.

The coordinator (``procession.runtime``) talks in *steps*: begin an attempt,
inject a chunk, settle the step, end the run. The pipeline talks in *markers*
that travel in-band with the chunks (``NewAttempt``, ``Barrier``, ``Deliver``,
``EndRun``) and calls its driver back at the client end. ``RunControl`` is both
sides of that conversation in one object, so neither layer sees the other's
vocabulary:

* the coordinator calls ``begin_attempt`` / ``inject`` / ``inline`` /
  ``deliver`` / ``settle`` / ``end``; ``settle`` raises ``RetryRequested`` when a stream
  processor's retry was granted meanwhile (a retry crosses the layer boundary
  twice: the grant, in the pipeline, and this raise);
* the pipeline calls the ``PipelineDriver`` methods (``on_retry_request``,
  ``on_error_chunk``, ``on_attempt``, ``on_terminal``, ``on_delivered``).

**The one place where a run's outcome is decided** is ``conclude``: the first
terminal reached at the client end wins (a tripwire or error raised on a chunk,
the coordinator's own end, the end of the stream, an abort) and later ones are
ignored. ``outcome`` is written there and only there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import trio

from ..data import (
    ErrorChunk,
    ErrorPayload,
    RunOutcome,
    TripwireInfo,
)
from ..processors import TripWire
from ._actor import ProcessorActor
from ._interface import InlineSource, PipelineOutcome
from ._markers import Barrier, Deliver, EndRun, Inline, NewAttempt

__all__ = ["RetryRequested", "RunControl", "RunObserver"]

logger = logging.getLogger("procession")


class RunObserver(Protocol):
    """Who keeps what the client received (the coordinator's bookkeeping)."""

    def attempt_began(self, view: Any) -> None:
        """An attempt began at the client end; ``view`` is what the coordinator
        attached to it in ``begin_attempt``."""

    def delivered(self, chunk: Any) -> None:
        """``chunk`` was handed to the client."""


class RetryRequested(Exception):
    """Raised by ``RunControl.settle``: a stream processor asked to retry the
    attempt and the request was granted (within the budget, in time)."""

    def __init__(self, tripwire: TripWire) -> None:
        super().__init__(tripwire.reason)
        self.tripwire = tripwire


class RunControl:
    """One run's coordination protocol; see the module docstring.

    Args:
        send: where the coordinator's chunks and markers go (the pipeline's
            source).
        run_id: stamped on the chunks ``end`` makes.
        may_retry: whether the retry budget allows one more retry now.
        on_outcome: called once, with the outcome, the moment it is decided
            (the runtime cancels the run's scope there).
        observer: told which attempt the client is receiving and of every
            chunk delivered.
    """

    def __init__(
        self,
        send: trio.MemorySendChannel[Any],
        *,
        run_id: str,
        may_retry: Callable[[], bool],
        on_outcome: Callable[[RunOutcome], None],
        observer: RunObserver,
    ) -> None:
        self._send = send
        self._run_id = run_id
        self._may_retry = may_retry
        self._on_outcome = on_outcome
        self._observer = observer
        self._accepting_retries = False
        self._retry: TripWire | None = None
        self._read_scope: trio.CancelScope | None = None
        self._proposed: RunOutcome | None = None
        self._proposed_tripwire: TripWire | None = None
        self.outcome: RunOutcome | None = None
        """The run's outcome, once decided (see ``conclude``)."""

    # --- the coordinator's side ------------------------------------------------

    @property
    def ended(self) -> bool:
        """Whether the outcome is decided: nothing more may be produced."""
        return self.outcome is not None

    @property
    def retry_requested(self) -> bool:
        """Whether a stream processor's retry of the current attempt was granted
        (the coordinator stops reading the model; ``settle`` will raise)."""
        return self._retry is not None

    async def begin_attempt(
        self, retry_count: int, *, discard: bool, view: Any
    ) -> None:
        """Start an attempt (a step, or its retry); with ``discard`` the previous
        attempt's chunks still in the chain are dropped. Chunks the client
        receives from here on are shown to ``view``. Retries are accepted until
        ``close_attempt``. Blocks (checkpointing) while the pipeline is busy;
        cancellation propagates."""
        self._retry = None
        self._accepting_retries = True
        await self._send.send(NewAttempt(retry_count, discard=discard, context=view))

    async def mark_retry_count(self, retry_count: int, view: Any) -> None:
        """The input lane retried inside the attempt: hooks downstream see the
        new count (the attempt itself goes on). Checkpoints like ``inject``."""
        await self._send.send(NewAttempt(retry_count, discard=False, context=view))

    def close_attempt(self) -> None:
        """Every chunk of the attempt is decided: a retry asked for on a later
        chunk (``finish``, say) is too late and becomes a tripwire."""
        self._accepting_retries = False

    def reading(self) -> trio.CancelScope:
        """A cancel scope for reading the model: cancelled when a retry is
        granted, so a rejected response is not read on."""
        self._read_scope = trio.CancelScope()
        return self._read_scope

    async def inject(self, chunk: Any) -> None:
        """Send ``chunk`` through the output processors, at this position.
        Blocks while the pipeline is busy (backpressure): checkpoints, and a
        cancellation (the run ended) propagates with nothing sent."""
        await self._send.send(chunk)

    async def inline(self, source: InlineSource) -> None:
        """Let the pipeline pull the next items from ``source`` in its own task
        (the consumer's, in ``"fused"`` mode) until ``source`` is done, instead
        of each one being sent here: no task switch per chunk. Returns once the
        pipeline has taken the hand-over; checkpoints like ``inject``."""
        await self._send.send(Inline(source))

    async def deliver(self, chunk: Any) -> None:
        """Send ``chunk`` to the client past every processor, at this position
        (custom chunks written by hooks that run outside the stream).
        Checkpoints like ``inject``."""
        await self._send.send(Deliver(chunk))

    async def settle(self) -> None:
        """Wait until everything sent so far has reached the client end, then
        raise ``RetryRequested`` if a stream processor's retry was granted.

        Checkpoints; if the run is cancelled meanwhile, ``Cancelled`` propagates.
        """
        barrier = Barrier()
        await self._send.send(barrier)
        await barrier.wait()
        if self._retry is not None:
            raise RetryRequested(self._retry)

    async def end(
        self,
        outcome: RunOutcome,
        *,
        tripwire: TripWire | None = None,
        actor: ProcessorActor | None = None,
    ) -> None:
        """Propose the run's end (a tripwire or an error the coordinator met).

        The proposal becomes the outcome when it reaches the client end, unless
        an earlier terminal won there; a tripwire's ``on_violation`` (``actor``'s)
        is awaited there, only if it wins. Without a checkpoint if the run has
        ended already (the proposal is moot)."""
        await trio.lowlevel.checkpoint_if_cancelled()
        self._proposed = outcome
        if outcome.kind == "tripwire":
            assert tripwire is not None
            self._proposed_tripwire = tripwire
            await self._send.send(EndRun(tripwire, actor))
        else:
            await self._send.send(
                ErrorChunk(
                    payload=ErrorPayload(error=outcome.error), run_id=self._run_id
                )
            )

    # --- the decision ---------------------------------------------------------------

    def conclude(self, outcome: RunOutcome) -> RunOutcome:
        """Decide the run's outcome: the first call wins; later ones return the
        decided outcome unchanged."""
        if self.outcome is None:
            self.outcome = outcome
            if self._read_scope is not None:
                self._read_scope.cancel()
            self._on_outcome(outcome)
        return self.outcome

    def conclude_stream_end(self, *, completed: bool, finish_reason: str) -> RunOutcome:
        """The stream ended without a terminal chunk: the coordinator's own
        proposal if it made one (its error chunk may have been dropped by a
        processor), else ``finish`` when it completed, else ``abort``."""
        if self._proposed is not None:
            return self.conclude(self._proposed)
        if completed:
            return self.conclude(RunOutcome(kind="finish", finish_reason=finish_reason))
        return self.abort()

    def abort(self) -> RunOutcome:
        """The caller cancelled the run or left the stream: ``abort``, unless the
        coordinator had already proposed an end that had not reached the client
        yet (that end is what happened)."""
        return self.conclude(
            self._proposed or RunOutcome(kind="abort", finish_reason="aborted")
        )

    # --- the pipeline's side (PipelineDriver) ------------------------------------

    async def on_retry_request(self, tripwire: TripWire) -> bool:
        """A stream processor asked for a retry (at the client end, in position).
        Grants it (and stops the model read) if the attempt still accepts
        retries and the budget allows. Does not checkpoint."""
        if not self._accepting_retries:
            logger.warning(
                "processor %r requested a retry after the step's chunks were "
                "settled (e.g. on the finish chunk); treating it as an abort",
                tripwire.processor_id,
            )
            return False
        if not self._may_retry():
            logger.warning(
                "processor %r requested a retry but the retry budget is exhausted "
                "or not set; treating it as an abort",
                tripwire.processor_id,
            )
            return False
        self._retry = tripwire
        if self._read_scope is not None:
            self._read_scope.cancel()  # stop reading a response that is rejected
        return True

    async def on_error_chunk(self, chunk: ErrorChunk) -> bool:
        """The coordinator decides about model errors before it sends anything;
        an error chunk it sends is terminal. Does not checkpoint."""
        return False

    def on_attempt(self, marker: NewAttempt) -> None:
        """A ``NewAttempt`` reached the client end: what is delivered from now on
        belongs to the attempt whose view it carries."""
        self._observer.attempt_began(marker.context)

    def on_terminal(self, outcome: PipelineOutcome) -> None:
        """The stream's terminal item reached the client end (before
        ``on_violation`` is awaited and the chunk delivered)."""
        if outcome.kind == "tripwire" and outcome.tripwire is not None:
            tripwire = outcome.tripwire
            self.conclude(
                RunOutcome(
                    kind="tripwire",
                    finish_reason="other",
                    tripwire=TripwireInfo.of(tripwire),
                    # Not the coordinator's EndRun: a stream processor's abort.
                    in_stream=tripwire is not self._proposed_tripwire,
                )
            )
        elif outcome.kind == "error":
            self.conclude(
                RunOutcome(
                    kind="error",
                    finish_reason="error",
                    error=outcome.error,
                    in_stream=True,
                )
            )

    def on_delivered(self, chunk: Any) -> None:
        """Called at the client end for every chunk delivered."""
        self._observer.delivered(chunk)
        if chunk.__class__ is ErrorChunk and self.outcome is None:
            # An error chunk that is not the pipeline's own terminal: the
            # coordinator's (its proposal), or one a processor made up. Nothing
            # after it may run.
            error = chunk.payload.error
            self.conclude(
                self._proposed
                or RunOutcome(
                    kind="error",
                    finish_reason="error",
                    error=error if isinstance(error, BaseException) else None,
                    in_stream=True,
                )
            )
