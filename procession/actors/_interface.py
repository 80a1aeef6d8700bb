"""What the pipeline says about itself: its driver protocol, its outcome and
its statistics, and the execution modes."""

from __future__ import annotations

import math
from collections.abc import AsyncIterable
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol, TypeAlias

import attrs

from .._errors import (
    ConfigurationError,
    TripWire,
)
from ..data import (
    ErrorChunk,
)

if TYPE_CHECKING:
    from ._markers import NewAttempt

__all__ = [
    "ExecutionMode",
    "InlineSource",
    "PipelineDriver",
    "PipelineOutcome",
    "PipelineStatistics",
]

ExecutionMode: TypeAlias = Literal["adaptive", "fused", "actors"]
MODES: Final = ("adaptive", "fused", "actors")

# --- the driver, outcome, statistics --------------------------------------------


class PipelineDriver(Protocol):
    """What drives the pipeline (the agent loop, through ``RunControl``) decides
    about retries and errors and hears where the stream is.

    ``on_retry_request`` is awaited at the client end, in stream order;
    ``on_error_chunk`` at the entry, before any processor sees the chunk;
    ``on_attempt`` when a ``NewAttempt`` reaches the client end (everything
    before it has been delivered), so the driver can tell which attempt a
    delivered chunk belongs to; ``on_terminal`` the moment the stream's terminal
    item (a tripwire or a processor failure) reaches the client end, before
    ``on_violation`` is awaited, so the driver can stop producing at once.
    A driver may also have ``on_split()``, called when an adaptive pipeline
    puts in its first boundary (its source is then read ahead by a task of
    its own).
    """

    async def on_retry_request(self, tripwire: TripWire) -> bool:
        """A processor asked to retry the attempt. Return True to retry (then yield
        ``NewAttempt`` from the source), False to end the run with the tripwire.
        Awaited at the client end; it may checkpoint (the consumer waits)."""
        ...

    async def on_error_chunk(self, chunk: ErrorChunk) -> bool:
        """The source produced an ``error`` chunk (held back from the processors).
        Return True if the attempt is recovered (the chunk is dropped; yield
        ``NewAttempt`` next), False to pass it through as the terminal error.
        Awaited at the entry; it may checkpoint."""
        ...

    def on_attempt(self, marker: NewAttempt) -> None:
        """A ``NewAttempt`` reached the client end."""
        ...

    def on_terminal(self, outcome: PipelineOutcome) -> None:
        """The stream's terminal item reached the client end."""
        ...


class InlineSource(Protocol):
    """Items the pipeline may pull straight from where they are made, in the
    task that reads the pipeline's source, instead of having a driver's task
    hand each one over a channel (no task switch per item). A driver's source
    yields ``Inline(source)``; from there on the pipeline takes its items from
    ``source`` until it says it is done, then reads the driver's source again.

    Both methods run in the pipeline's reading task (the consumer's, in
    ``"fused"`` mode); whatever must wait for I/O happens in the driver's own
    task, so a cancelled read of the pipeline never cancels an await inside
    the producer (``pull`` only waits for the driver to hand an item over).
    """

    def pull_nowait(self) -> Any:
        """The next item, if it is at hand without waiting. Raises
        ``trio.WouldBlock`` when it is not (then ``await pull()``), and
        ``trio.EndOfChannel`` once the source is done. Never checkpoints."""
        ...

    async def pull(self) -> Any:
        """The next item, waiting for it (the driver's task reads it).
        Raises ``trio.EndOfChannel`` once the source is done. A cancelled
        ``pull`` loses nothing: the item is given by the next call."""
        ...


@attrs.frozen
class PipelineOutcome:
    """How the stream ended."""

    kind: Literal["completed", "tripwire", "error", "cancelled"]
    tripwire: TripWire | None = None
    error: BaseException | None = None


@attrs.frozen
class PipelineStatistics:
    """Counters of one pipeline (for tests, tuning and benchmarks)."""

    mode: ExecutionMode
    stages: int
    pulled: int
    """Items read from the source."""
    delivered: int
    """Chunks handed to the consumer."""
    peak_in_flight: int
    """The most source items ever read but not yet settled (delivered or dropped)."""
    bound: int | float
    """The documented upper bound for ``peak_in_flight`` in this configuration."""


def check_arguments(
    mode: object, link_capacity: object, checkpoint_every: object, source: object
) -> None:
    """``open_output_pipeline``'s argument checks (a ``ConfigurationError``
    naming the argument and what was expected)."""
    if mode not in MODES:
        raise ConfigurationError(
            f"mode must be one of {', '.join(map(repr, MODES))}, got {mode!r}"
        )
    if link_capacity is None:
        pass  # the mode's default
    elif isinstance(link_capacity, bool) or not (
        (isinstance(link_capacity, int) and link_capacity >= 0)
        or link_capacity == math.inf
    ):
        raise ConfigurationError(
            f"link_capacity must be a non-negative int (or math.inf), got "
            f"{link_capacity!r}"
        )
    if not isinstance(checkpoint_every, int) or checkpoint_every < 1:
        raise ConfigurationError(
            f"checkpoint_every must be a positive int, got {checkpoint_every!r}"
        )
    if not isinstance(source, AsyncIterable):
        raise ConfigurationError(
            f"source must be an async iterable of chunks, got {source!r}"
        )
