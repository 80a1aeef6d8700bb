"""``HoldBackWindow``: see a match that spans chunk boundaries, holding back as
little streamed text as possible.

A provider cuts its text wherever it likes: ``"card 4111 1111"`` and
``" 1111 1111"`` may arrive as two deltas. A processor that checks each delta on
its own misses what spans the cut (Mastra's RegexFilter, LiteLLM #41611); one
that waits for the whole text delays everything. The window keeps, per text
block, only the tail of the text that could still become (or extend) a match,
and hands the rest to the processor's *scanner* once it is settled.

The scanner is the processor's knowledge of its matches, in one call::

    scan(args, text, start, final, memo) -> (output, end)

``text[:start]`` is context already released (a few characters, for
look-behind); ``text[start:]`` is unreleased. The scanner returns the output
for ``text[start:end]`` (redacted, normalised... or the same text) and ``end``:
everything before ``end`` is settled and released, the rest is held until more
text comes. With ``final=True`` (the block is ending) it must settle everything
(``end == len(text)``). It may call ``args.abort(...)`` (a tripwire) or
``args.report_violation(...)``; ``memo`` is a dict of its own for this text
block (forgotten with the block). For a scanner that only needs to know how long
a tail to hold, ``HoldBackWindow.from_hold(transform, hold)`` builds one.

What the window promises:

* the client sees text in source order, each piece under its own block's id,
  before that block's ``text-end``; a chunk of any other kind (a tool call, a
  reasoning delta, ``step-finish``, ``finish``...) first flushes the held text of
  every block, so text never moves past another chunk. ``text-start``, ``raw``,
  ``response-metadata`` and ``data-*`` chunks pass without flushing;
* a delta whose text is all held is dropped (the hook returns ``None``); a flush
  re-emits the held text as a ``text-delta`` cloned from the block's last delta
  (same id, run id and origin), then the chunk that caused it;
* a scanner that finds a tripping match after clean text may call
  ``trip_after``: the clean text is released, then the tripwire comes with the
  next chunk (so the client sees the same text however the text was cut);
* on a tripwire (the scanner's own abort, or a retry request: the next chunk
  comes with a higher ``retry_count``), an ``error`` chunk, an ``abort`` chunk,
  a ``step-retry`` or a new ``step-start`` the held text is dropped, never
  released: it may be the first digits of a card number. When the run is
  cancelled the hook is simply not called again: the held text dies with
  ``state``.

Cost: one dictionary lookup and a class check per chunk, plus the scanner's own
work on ``held + delta`` per text delta. Memory: the held tails (bounded by the
scanner).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeAlias

import attrs

from ..._errors import ConfigurationError, SnapshotError, TripWire
from ...data import (
    AbortChunk,
    Chunk,
    DataChunk,
    ErrorChunk,
    FinishChunk,
    RawChunk,
    ResponseMetadataChunk,
    StepRetryChunk,
    StepStartChunk,
    TextDeltaChunk,
    TextDeltaPayload,
    TextEndChunk,
    TextStartChunk,
    TripwireChunk,
)
from .._contract import ProcessOutputStreamArgs

__all__ = ["HoldBackWindow", "Scanner"]

Scanner: TypeAlias = Callable[
    [ProcessOutputStreamArgs, str, int, bool, dict[str, Any]], tuple[str, int]
]
"""``scan(args, text, start, final, memo) -> (output, end)``: see the module
docstring."""

_PASS_BY: Final = frozenset(
    {TextStartChunk, RawChunk, ResponseMetadataChunk, DataChunk}
)
"""Chunks that neither flush nor drop the held text (they carry no order the
client's text depends on)."""
_DROPPING: Final = frozenset(
    {ErrorChunk, AbortChunk, TripwireChunk, StepRetryChunk, StepStartChunk}
)
"""Chunks after which held text must never be released."""


@attrs.define
class _Block:
    """One text block's unreleased text."""

    template: TextDeltaChunk
    """The block's last delta: a flushed delta is a copy of it with new text."""
    held: str = ""
    context: str = ""
    """The last released characters (for a scanner's look-behind)."""
    memo: dict[str, Any] = attrs.field(factory=dict)
    """The scanner's own notes about this block."""


@attrs.define
class _Held:
    attempt: int
    blocks: dict[str, _Block] = attrs.field(factory=dict)
    pending: tuple[str, Any] | None = None
    """A tripwire a scanner asked for after clean text (``trip_after``)."""

    def __pause__(self) -> None:
        """A run that pauses (between a step's tool calls) keeps nothing of
        the window: any other chunk than text flushed it, so it is rebuilt on
        the next chunk. Text still held, or a tripwire asked for, cannot
        wait: ``SnapshotError``."""
        if self.pending is not None or any(b.held for b in self.blocks.values()):
            raise SnapshotError("a hold-back window still holds unreleased text")


class HoldBackWindow:
    """A stream processor's hold-back window (see the module docstring).

    ``scan`` is the processor's scanner; ``lookbehind`` how many released
    characters it wants to see before ``start`` (default 8); ``key`` where the
    window keeps its data in ``args.state`` (one window per key per processor).

    Use it from a ``process_output_stream`` hook::

        def process_output_stream(self, args):
            return self._window.process(args)

    ``process`` returns what the hook returns: the chunk, a new chunk, ``None``
    (drop) or a list of chunks. It never checkpoints; a scanner's ``TripWire``
    propagates after the held text was dropped.
    """

    __slots__ = ("_key", "_lookbehind", "_scan")

    def __init__(
        self, scan: Scanner, *, lookbehind: int = 8, key: str = "hold-back-window"
    ) -> None:
        if lookbehind < 0:
            raise ConfigurationError(
                f"lookbehind must be 0 or more characters, got {lookbehind!r}"
            )
        self._scan = scan
        self._lookbehind = lookbehind
        self._key = key

    @classmethod
    def from_hold(
        cls,
        transform: Callable[[str], str],
        hold: Callable[[str], int],
        *,
        key: str = "hold-back-window",
    ) -> HoldBackWindow:
        """A window for a ``transform`` that works on any piece of text cut
        where ``hold`` allows: ``hold(text)`` is how many trailing characters of
        ``text`` could still grow into a match (0: release everything).

        The promise the caller makes: ``transform(a + b) == transform(a) +
        transform(b)`` whenever ``a`` is the text before the cut ``hold`` leaves.
        """

        def scan(
            _args: ProcessOutputStreamArgs,
            text: str,
            start: int,
            final: bool,
            _memo: dict[str, Any],
        ) -> tuple[str, int]:
            body = text[start:]
            keep = 0 if final else min(max(hold(body), 0), len(body))
            end = len(text) - keep
            return transform(text[start:end]), end

        return cls(scan, lookbehind=0, key=key)

    # the hook ---------------------------------------------------------------

    def process(self, args: ProcessOutputStreamArgs) -> Chunk | list[Chunk] | None:
        """Run one chunk through the window (the body of a stream hook)."""
        part = args.part
        held = args.state.get(self._key)
        if held is None or held.attempt != args.retry_count:
            # A new run, or a retried attempt: what was held belongs to an
            # attempt the client was told to discard.
            held = args.state[self._key] = _Held(args.retry_count)
        if held.pending is not None:
            self._trip(args, held)
        result = self._process(args, held, part)
        if held.pending is None:
            return result
        # A scanner found a tripping match after clean text: the client gets
        # that text now, the tripwire with the next chunk (this one withheld),
        # so what is shown is the same however the provider cut the text.
        if part.__class__ is FinishChunk:
            self._trip(args, held)  # no chunk follows to carry it
        if part.__class__ is not TextDeltaChunk:
            # The match was found flushing at a block's end (or before another
            # chunk): trip on this chunk, the clean text held with the match
            # dropped. Waiting for a next chunk could wait past the step's end
            # (its hooks and tools run before its step-finish) and let them
            # act on a step that is blocked.
            self._trip(args, held)
        if isinstance(result, list):
            return [c for c in result if c.__class__ is TextDeltaChunk] or None
        return result if result.__class__ is TextDeltaChunk else None

    def trip_after(self, args: Any, reason: str, metadata: Any = None) -> None:
        """From a scanner: release the output of this scan, then end the run
        with a tripwire (``reason``, ``metadata``) at the next chunk; nothing
        more is released meanwhile. Use it when the text before a match is
        clean and should be shown however the text was cut."""
        args.state[self._key].pending = (reason, metadata)

    def _trip(self, args: ProcessOutputStreamArgs, held: _Held) -> None:
        assert held.pending is not None
        reason, metadata = held.pending
        held.blocks.clear()
        args.abort(reason, metadata=metadata)

    def _process(
        self, args: ProcessOutputStreamArgs, held: _Held, part: Chunk
    ) -> Chunk | list[Chunk] | None:
        cls = part.__class__
        if cls is TextDeltaChunk:
            assert isinstance(part, TextDeltaChunk)
            return self._delta(args, held, part)
        if not held.blocks or cls in _PASS_BY:
            return part
        if cls in _DROPPING:
            held.blocks.clear()
            return part
        if cls is TextEndChunk:
            assert isinstance(part, TextEndChunk)
            block = held.blocks.pop(part.payload.id, None)
            if block is None:
                return part
            out = self._flush_block(args, held, block)
            return [out, part] if out is not None else part
        out_chunks: list[Chunk] = self._flush_all(args, held)
        out_chunks.append(part)
        return out_chunks

    def flush(self, args: Any) -> list[Chunk]:
        """Settle and return every block's held text (for a processor that ends
        its text itself, e.g. on a budget). The blocks are forgotten."""
        held = args.state.get(self._key)
        if held is None:
            return []
        return self._flush_all(args, held)

    def discard(self, args: Any) -> None:
        """Forget every block's held text without releasing it."""
        held = args.state.get(self._key)
        if held is not None:
            held.blocks.clear()

    # internals ----------------------------------------------------------------

    def _delta(
        self, args: ProcessOutputStreamArgs, held: _Held, part: TextDeltaChunk
    ) -> TextDeltaChunk | None:
        block_id = part.payload.id
        block = held.blocks.get(block_id)
        if block is None:
            block = held.blocks[block_id] = _Block(part)
        else:
            block.template = part
        text = block.context + block.held + part.payload.text
        start = len(block.context)
        output, end = self._run(args, held, block, text, start, final=False)
        block.held = text[end:]
        block.context = text[:end][-self._lookbehind :] if self._lookbehind else ""
        if not output:
            return None
        return _with_text(part, output)

    def _flush_all(self, args: ProcessOutputStreamArgs, held: _Held) -> list[Chunk]:
        """Every block's held text, in the order the blocks began."""
        blocks = list(held.blocks.values())
        held.blocks.clear()
        out: list[Chunk] = []
        for block in blocks:
            chunk = self._flush_block(args, held, block)
            if chunk is not None:
                out.append(chunk)
        return out

    def _flush_block(
        self, args: ProcessOutputStreamArgs, held: _Held, block: _Block
    ) -> TextDeltaChunk | None:
        if not block.held:
            return None
        text = block.context + block.held
        output, _ = self._run(args, held, block, text, len(block.context), final=True)
        return _with_text(block.template, output) if output else None

    def _run(
        self,
        args: ProcessOutputStreamArgs,
        held: _Held,
        block: _Block,
        text: str,
        start: int,
        *,
        final: bool,
    ) -> tuple[str, int]:
        if held.pending is not None:
            return "", len(text)  # a tripwire is coming: release nothing more
        try:
            output, end = self._scan(args, text, start, final, block.memo)
        except TripWire:
            held.blocks.clear()  # never released, even by a retried attempt
            raise
        if not start <= end <= len(text) or (final and end != len(text)):
            raise ConfigurationError(
                f"the scanner {self._scan!r} returned end={end!r} for a text of "
                f"{len(text)} characters starting at {start} (final={final}); "
                f"expected {start} <= end <= {len(text)}, and end == {len(text)} "
                f"when final"
            )
        return output, end


def _with_text(template: TextDeltaChunk, text: str) -> TextDeltaChunk:
    payload = template.payload
    if text == payload.text:
        return template
    # Spelled out rather than attrs.evolve: this runs for most text deltas, and
    # evolve costs several times more.
    return TextDeltaChunk(
        payload=TextDeltaPayload(
            id=payload.id,
            text=text,
            provider_metadata=payload.provider_metadata,
            extra=payload.extra,
        ),
        run_id=template.run_id,
        from_=template.from_,
        metadata=template.metadata,
        extra=template.extra,
    )
