"""``BatchParts`` (fewer, larger text deltas) and ``ToolCallFilter`` (no tool
calls in the history a call sends): two small built-ins without a window."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import trio

from ..._errors import ConfigurationError, SnapshotError
from ...data import Chunk, Message, TextDeltaChunk, TextDeltaPayload, ToolInvocationPart
from .._contract import ProcessInputArgs, Processor, ProcessOutputStreamArgs

__all__ = ["BatchParts", "ToolCallFilter"]


class BatchParts(Processor):
    """Coalesces consecutive text deltas of one text block into one delta
    (Mastra's ``BatchPartsProcessor``): fewer SSE frames for the client.

    Options: ``batch_size`` (default 5): how many deltas make one;
    ``max_wait_time`` (ms, default None): a batch older than this is released
    with the next chunk that arrives (checked on trio's clock then: no timer
    task per chunk, so a stalled provider still stalls the batch). Any other
    chunk (another block's delta, ``text-end``, a tool call, ``finish``...)
    first releases the batch, so nothing is lost or reordered (Mastra #17094).
    The batched delta keeps the id, run id and origin of the first delta.
    Cost: a list append per delta, a join per batch.
    """

    id = "batch-parts"

    def __init__(
        self, *, batch_size: int = 5, max_wait_time: float | None = None
    ) -> None:
        if batch_size < 1:
            raise ConfigurationError(
                f"batch_size must be 1 or more, got {batch_size!r}"
            )
        if max_wait_time is not None and max_wait_time < 0:
            raise ConfigurationError(
                f"max_wait_time must be 0 ms or more (or None), got {max_wait_time!r}"
            )
        self.batch_size = batch_size
        self.max_wait_time = max_wait_time
        self._key = f"{self.id}:batch"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        """Hold text deltas until the batch is full; release it before any
        other chunk."""
        part = args.part
        batch: _Batch | None = args.state.get(self._key)
        if batch is not None and batch.attempt != args.retry_count:
            batch = args.state[self._key] = None  # a discarded attempt's text
        if part.__class__ is TextDeltaChunk:
            assert isinstance(part, TextDeltaChunk)
            if batch is not None and batch.first.payload.id != part.payload.id:
                out = [batch.chunk()]
                args.state[self._key] = None
                return [*out, *self._add(args, None, part)]
            return self._add(args, batch, part) or None
        if batch is None:
            return part
        args.state[self._key] = None
        return [batch.chunk(), part]

    def _add(
        self, args: ProcessOutputStreamArgs, batch: _Batch | None, part: TextDeltaChunk
    ) -> list[Chunk]:
        now = trio.current_time() if self.max_wait_time is not None else 0.0
        if batch is None:
            batch = args.state[self._key] = _Batch(part, args.retry_count, now)
        else:
            batch.texts.append(part.payload.text)
        full = len(batch.texts) >= self.batch_size
        late = (
            self.max_wait_time is not None
            and (now - batch.started) * 1000 >= self.max_wait_time
        )
        if full or late:
            args.state[self._key] = None
            return [batch.chunk()]
        return []


class _Batch:
    __slots__ = ("attempt", "first", "started", "texts")

    def __init__(self, first: TextDeltaChunk, attempt: int, started: float) -> None:
        self.first = first
        self.attempt = attempt
        self.started = started
        self.texts = [first.payload.text]

    def __pause__(self) -> None:
        """A batch in progress cannot wait for a person (any other chunk than
        text sends it first): ``SnapshotError``."""
        raise SnapshotError("a batch of text deltas is still being gathered")

    def chunk(self) -> TextDeltaChunk:
        if len(self.texts) == 1:
            return self.first
        first = self.first
        return TextDeltaChunk(
            payload=TextDeltaPayload(
                id=first.payload.id,
                text="".join(self.texts),
                provider_metadata=first.payload.provider_metadata,
                extra=first.payload.extra,
            ),
            run_id=first.run_id,
            from_=first.from_,
            metadata=first.metadata,
            extra=first.extra,
        )


class ToolCallFilter(Processor):
    """Removes tool invocations (calls and their results) from the messages a
    call is given (Mastra's ``ToolCallFilter``, ``process_input``).

    ``exclude``: the tool names to remove; ``None`` (default) removes every
    tool invocation, ``[]`` none. A message left without parts is dropped.
    The messages are those the caller passes (the history it sends along);
    the run's own tool calls are not touched. Cost: one pass over the parts.
    """

    id = "tool-call-filter"

    def __init__(self, *, exclude: Iterable[str] | None = None) -> None:
        self.exclude = None if exclude is None else frozenset(exclude)

    def _drops(self, part: object) -> bool:
        if not isinstance(part, ToolInvocationPart):
            return False
        return self.exclude is None or part.tool_invocation.tool_name in self.exclude

    def process_input(self, args: ProcessInputArgs) -> list[Message] | None:
        """The messages without the excluded tool invocations (``None``: no
        change)."""
        if self.exclude is not None and not self.exclude:
            return None
        changed = False
        kept: list[Message] = []
        for message in args.messages:
            parts = [p for p in message.content.parts if not self._drops(p)]
            if len(parts) != len(message.content.parts):
                changed = True
                if not parts:
                    continue
                message.content.parts = parts
                message.content.tool_invocations = None
            kept.append(message)
        return kept if changed else None
