"""Ready-made checks for your own output processors.

* ``assert_split_invariant(processors, text)``: the same verdict and the same
  client text however the model happened to cut ``text`` into deltas;
* ``assert_modes_agree(processors, chunks)``: every execution mode of the output
  pipeline gives the client what the sequential reference gives.

Both are plain functions that run trio themselves (on
``MockClock(autojump_threshold=0)``, so a processor's ``trio.sleep`` costs no real
time): call them from a plain ``def test_...``, not from inside a trio run.
Both take the processors as a list, or as a callable returning a fresh list, for
processors that keep state on ``self`` (each run then gets new instances).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, get_args

import attrs
import trio
import trio.testing

from .._errors import ConfigurationError
from ..actors import (
    GRACE_SECONDS,
    ExecutionMode,
    OutputPipeline,
    PipelineOutcome,
    open_output_pipeline,
)
from ..data import (
    Chunk,
    TextDeltaChunk,
    step_finish,
    step_start,
    text_delta,
    text_end,
    text_start,
)
from ..wire import to_wire
from ._reference import run_sequential

__all__ = ["Processors", "assert_modes_agree", "assert_split_invariant"]

Processors: TypeAlias = Sequence[object] | Callable[[], Sequence[object]]
"""Output processors, or a callable returning a fresh list of them per run."""

_MODES: tuple[ExecutionMode, ...] = get_args(ExecutionMode)


# --------------------------------------------------------------------------- #
# Shared plumbing
# --------------------------------------------------------------------------- #


def _fresh(processors: Processors) -> Sequence[object]:
    if callable(processors) and not isinstance(processors, Sequence):
        made = processors()
        if not isinstance(made, Sequence):
            raise ConfigurationError(
                f"the processors factory {processors!r} returned {made!r}; "
                f"return a list of processors"
            )
        return made
    if not isinstance(processors, Sequence):
        raise ConfigurationError(
            f"processors must be a list of processors or a callable returning one, "
            f"got {processors!r}"
        )
    return processors


def _run_on_mock_clock(fn: Callable[..., Any], *args: Any) -> Any:
    """``trio.run`` on an autojump clock, refusing clearly inside a trio run."""
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        pass  # not inside trio: the one place these checks can start it
    else:
        raise RuntimeError(
            f"{fn.__qualname__} runs trio itself, so it cannot be awaited or called "
            f"from inside a trio run (an async test); call it from a plain "
            f"'def test_...'"
        )
    return trio.run(fn, *args, clock=trio.testing.MockClock(autojump_threshold=0))


async def _source(chunks: Sequence[Chunk]) -> AsyncIterator[Chunk]:
    for chunk in chunks:
        yield chunk


@attrs.frozen
class _Verdict:
    """How a stream ended, in the terms a user compares: kind, who and why."""

    kind: str
    processor_id: str | None = None
    reason: str | None = None

    @classmethod
    def of(cls, outcome: PipelineOutcome) -> _Verdict:
        if outcome.tripwire is not None:
            tripwire = outcome.tripwire
            return cls(outcome.kind, tripwire.processor_id, tripwire.reason)
        if outcome.error is not None:
            error = outcome.error
            return cls(outcome.kind, None, f"{type(error).__name__}: {error}")
        return cls(outcome.kind)

    def __str__(self) -> str:
        if self.processor_id is not None:
            return f"{self.kind} by {self.processor_id!r}: {self.reason!r}"
        if self.reason is not None:
            return f"{self.kind}: {self.reason}"
        return self.kind


def _client_text(chunks: Iterable[Any]) -> str:
    return "".join(c.payload.text for c in chunks if isinstance(c, TextDeltaChunk))


# --------------------------------------------------------------------------- #
# Split invariance
# --------------------------------------------------------------------------- #


def _deterministic_splits(text: str) -> list[list[str]]:
    """Every split at a single cut point, then one delta per character."""
    splits = [[text[:cut], text[cut:]] for cut in range(1, len(text))]
    if len(text) > 2:
        splits.append(list(text))
    return splits


def _stream_of(pieces: Sequence[str], run_id: str) -> list[Chunk]:
    return [
        step_start(run_id=run_id),
        text_start(run_id=run_id),
        *(text_delta(piece, run_id=run_id) for piece in pieces),
        text_end(run_id=run_id),
        step_finish(run_id=run_id),
    ]


@attrs.frozen
class _SplitRun:
    verdict: _Verdict
    text: str


async def _run_split(
    processors: Processors,
    pieces: Sequence[str],
    run_id: str,
    request_context: Mapping[str, Any] | None,
) -> _SplitRun:
    run = await run_sequential(
        _fresh(processors),
        _source(_stream_of(pieces, run_id)),
        run_id=run_id,
        request_context=dict(request_context or {}),
    )
    return _SplitRun(_Verdict.of(run.outcome), _client_text(run.chunks))


def assert_split_invariant(
    processors: Processors,
    text: str,
    *,
    splits: Iterable[Sequence[str]] | None = None,
    max_examples: int | None = None,
    run_id: str = "run-1",
    request_context: Mapping[str, Any] | None = None,
) -> None:
    """Fail unless ``processors`` give one verdict and one client text for every
    way of streaming ``text`` as consecutive ``text-delta`` chunks.

    The reference is ``text`` in one delta, inside ``step-start``,
    ``text-start`` ... ``text-end``, ``step-finish``, run by ``run_sequential``.
    The verdict is how the stream ended (completed, a tripwire with its
    processor id and reason, or an error with its type and message); the client
    text is the text of the ``text-delta`` chunks the client would receive.

    The splits tried: ``splits`` if given; otherwise every split at one cut
    point and one delta per character, plus, when Hypothesis is installed,
    random splits from ``procession.testing.strategies.text_splits`` (up to
    ``max_examples``, else the current Hypothesis profile's count; a failure is
    shrunk to a small split). Raises ``AssertionError`` naming the first split
    that disagreed, both verdicts and both texts.
    """
    reference = _run_on_mock_clock(
        _run_split, processors, [text] if text else [], run_id, request_context
    )

    def check(pieces: Sequence[str]) -> None:
        if "".join(pieces) != text:
            raise ConfigurationError(
                f"the split {list(pieces)!r} does not join back to the text {text!r}"
            )
        got = _run_on_mock_clock(
            _run_split, processors, list(pieces), run_id, request_context
        )
        if got != reference:
            raise AssertionError(
                f"not split-invariant: streamed as {list(pieces)!r} the text gave\n"
                f"  verdict {got.verdict}, client text {got.text!r}\n"
                f"but in one delta it gave\n"
                f"  verdict {reference.verdict}, client text {reference.text!r}"
            )

    if splits is not None:
        for pieces in splits:
            check(pieces)
        return
    for pieces in _deterministic_splits(text):
        check(pieces)
    _random_splits(text, check, max_examples)


def _random_splits(
    text: str, check: Callable[[Sequence[str]], None], max_examples: int | None
) -> None:
    """Run ``check`` on Hypothesis-drawn splits of ``text``, if Hypothesis is
    installed (the core install has none: the deterministic splits stand)."""
    try:
        from hypothesis import HealthCheck, given, settings

        from .strategies import text_splits
    except ImportError:
        return
    if len(text) < 3:
        return  # the deterministic splits were all there are
    options: dict[str, Any] = {
        "deadline": None,
        "suppress_health_check": [HealthCheck.too_slow],
    }
    if max_examples is not None:
        options["max_examples"] = max_examples

    @settings(**options)
    @given(text_splits(text))
    def random_split(pieces: list[str]) -> None:
        check(pieces)

    random_split()


# --------------------------------------------------------------------------- #
# Mode agreement
# --------------------------------------------------------------------------- #


@attrs.frozen
class _ModeRun:
    chunks: list[Any]
    verdict: _Verdict


async def _run_reference(
    processors: Processors,
    chunks: Sequence[Chunk],
    run_id: str,
    request_context: Mapping[str, Any] | None,
) -> _ModeRun:
    run = await run_sequential(
        _fresh(processors),
        _source(chunks),
        run_id=run_id,
        request_context=dict(request_context or {}),
    )
    return _ModeRun([to_wire(c) for c in run.chunks], _Verdict.of(run.outcome))


async def _run_mode(
    processors: Processors,
    chunks: Sequence[Chunk],
    run_id: str,
    request_context: Mapping[str, Any] | None,
    mode: ExecutionMode,
    link_capacity: int,
    read_deadlines: Sequence[float] = (),
) -> _ModeRun:
    async with open_output_pipeline(
        _fresh(processors),
        _source(chunks),
        run_id=run_id,
        request_context=dict(request_context or {}),
        mode=mode,
        link_capacity=link_capacity,
    ) as stream:
        if read_deadlines:
            seen = [to_wire(c) for c in await _read_under(stream, read_deadlines)]
        else:
            seen = [to_wire(chunk) async for chunk in stream]
    # Read to its end, the stream has settled its outcome.
    assert stream.outcome is not None
    return _ModeRun(seen, _Verdict.of(stream.outcome))


class _Stalled(AssertionError):
    """Reading under deadlines got no further (``_read_under``)."""


_STILL_READS = 10_000
"""Empty reads in a row, with trio's clock standing still, that make a stall
(the stages' tasks get a turn at each: a chunk that needs no time comes in a
handful)."""


async def _read_under(stream: OutputPipeline, deadlines: Sequence[float]) -> list[Any]:
    """Read ``stream`` to its end the way a heartbeat consumer does: each read
    under the next of ``deadlines`` (in turn), a timed-out read tried again.

    A stall, reported as an ``AssertionError``, is measured on trio's clock:
    no chunk for longer than the slowest legitimate way to one (every stage
    cut off by a read and run again in each of the grace periods the
    deadlines give: ``(stages + 1) * (len(deadlines) + 1) * (max(deadlines) +
    the 5 s grace)``), or ``_STILL_READS`` empty reads while the clock stood
    still. The number of empty reads otherwise does not matter: in
    ``"actors"`` mode a hook that sleeps 1 s under a 1 ms deadline takes a
    thousand of them, and is fine."""
    seen: list[Any] = []
    stages = stream.statistics().stages
    patience = (
        (stages + 1) * (len(deadlines) + 1) * (max(max(deadlines), 0.0) + GRACE_SECONDS)
    )
    reads = still = 0
    progress = trio.current_time()
    while True:
        before = trio.current_time()
        with trio.move_on_after(deadlines[reads % len(deadlines)]) as scope:
            reads += 1
            try:
                seen.append(await stream.__anext__())
            except StopAsyncIteration:
                return seen
        now = trio.current_time()
        if not scope.cancelled_caught:
            progress, still = now, 0
            continue
        still = still + 1 if now == before else 0
        if now - progress > patience:
            raise _Stalled(
                f"no chunk for {now - progress:g} s of trio's clock: a hook "
                f"takes longer than a deadline plus the pipeline's grace period "
                f"({GRACE_SECONDS:g} s), every time it is run"
            )
        if still >= _STILL_READS:
            raise _Stalled(
                f"no chunk in {_STILL_READS} reads while trio's clock stood "
                f"still: a deadline this short leaves a hook that sleeps no "
                f"time to wake (on trio's MockClock time moves only when every "
                f"task waits)"
            )


def assert_modes_agree(
    processors: Processors,
    chunks: Sequence[Chunk],
    *,
    link_capacities: Sequence[int] = (0, 1, 4),
    run_id: str = "run-1",
    request_context: Mapping[str, Any] | None = None,
    read_deadlines: Sequence[float] = (),
) -> None:
    """Fail unless every execution mode of ``open_output_pipeline`` gives the
    client what ``run_sequential`` gives for ``chunks``: the same chunks (as
    wire JSON), in the same order, and the same verdict.

    The ``"actors"`` mode is run once per ``link_capacities`` entry (the buffer
    between stages changes how the tasks interleave). With ``read_deadlines``
    (seconds on trio's clock, each ``>= 0``, e.g. ``[0.01, 0.3]``; ``0`` is a
    read whose deadline has passed before it begins), every mode is also read
    the way a heartbeat consumer reads: each read under the next deadline in
    turn, a read that times out tried again. A hook cut off by such a timeout
    is called again with the same chunk, so a processor that changes its
    ``state`` before an ``await`` shows up here.

    A hook may take up to its read's deadline plus the pipeline's grace
    period (5 s on trio's clock, README "Cancelled reads") however many empty
    reads that takes. One that always takes longer never finishes in
    ``"fused"`` mode (each read cuts it off, each grace runs out): that is
    reported as a stall, once no chunk has come for many times the longest
    deadline plus the grace (``_read_under``), not read for ever.

    Raises ``AssertionError`` naming the mode, the capacity and the first
    difference or the stall; ``ConfigurationError`` for a deadline that is
    not a number ``>= 0``.
    """
    for deadline in read_deadlines:
        if isinstance(deadline, bool) or not (
            isinstance(deadline, int | float) and deadline >= 0
        ):
            raise ConfigurationError(
                f"read_deadlines={list(read_deadlines)!r}: {deadline!r} is not a "
                f"number of seconds >= 0"
            )
    chunks = list(chunks)
    reference = _run_on_mock_clock(
        _run_reference, processors, chunks, run_id, request_context
    )
    readings: list[tuple[float, ...]] = [()]
    if read_deadlines:
        readings.append(tuple(read_deadlines))
    runs = [
        (mode, capacity, deadlines)
        for deadlines in readings
        for mode in _MODES
        # Only the actors mode has links; the others run once.
        for capacity in (link_capacities if mode == "actors" else (1,))
    ]
    for mode, capacity, deadlines in runs:
        where = f"mode {mode!r}" + (
            f" (link_capacity={capacity})" if mode == "actors" else ""
        )
        if deadlines:
            where += f" read under the deadlines {list(deadlines)!r}"
        try:
            got = _run_on_mock_clock(
                _run_mode,
                processors,
                chunks,
                run_id,
                request_context,
                mode,
                capacity,
                deadlines,
            )
        except _Stalled as stalled:
            raise AssertionError(f"{where} stalled: {stalled}") from None
        if got != reference:
            raise AssertionError(
                f"{where} disagrees with the sequential reference:\n"
                f"{_first_difference(got, reference)}"
            )


def _first_difference(got: _ModeRun, reference: _ModeRun) -> str:
    for i, (mine, theirs) in enumerate(
        itertools.zip_longest(got.chunks, reference.chunks)
    ):
        if mine != theirs:
            return f"  chunk #{i}: {mine!r}\n  reference: {theirs!r}"
    return f"  verdict {got.verdict}\n  reference: verdict {reference.verdict}"
