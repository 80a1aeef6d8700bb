"""A tool call streamed as chunks, the same way in every dialect.

Anthropic's ``tool_use`` blocks, Chat Completions' ``tool_calls`` deltas and
Responses' ``function_call`` items all come down to one block: a
``tool-call-input-streaming-start`` when the call opens, a ``tool-call-delta``
for every piece of argument text, and, when it closes, a
``tool-call-input-streaming-end`` and the ``tool-call`` with the arguments
parsed. ``ToolCallEmitter`` is that block; a dialect keeps its open blocks by
its own key (an index, an item id) and says when each one opens, grows and
closes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ..data import (
    Chunk,
    ToolCallChunk,
    ToolCallDeltaChunk,
    ToolCallDeltaPayload,
    ToolCallInputStreamingEndChunk,
    ToolCallInputStreamingEndPayload,
    ToolCallInputStreamingStartChunk,
    ToolCallInputStreamingStartPayload,
    ToolCallPayload,
)
from ._json import parse_args

__all__ = ["ToolCallBlock", "ToolCallEmitter"]


@attrs.define
class ToolCallBlock:
    """One tool call being streamed: its id and name, the argument text so far
    and whether it was closed. ``initial_args`` are arguments the opening event
    carried whole (Anthropic's ``input``), used when no text streamed."""

    tool_call_id: str
    tool_name: str
    initial_args: Any = None
    args_text: str = ""
    done: bool = False


class ToolCallEmitter:
    """Opens, grows and closes ``ToolCallBlock``s, handing each chunk to
    ``emit`` (a response's ``_emit``)."""

    __slots__ = ("_emit",)

    def __init__(self, emit: Callable[[Chunk], None]) -> None:
        self._emit = emit

    def start(
        self, tool_call_id: str, tool_name: str, *, initial_args: Any = None
    ) -> ToolCallBlock:
        """Open a block: emits ``tool-call-input-streaming-start``."""
        block = ToolCallBlock(tool_call_id, tool_name, initial_args)
        self._emit(
            ToolCallInputStreamingStartChunk(
                payload=ToolCallInputStreamingStartPayload(
                    tool_call_id=tool_call_id, tool_name=tool_name
                )
            )
        )
        return block

    def delta(self, block: ToolCallBlock, piece: str | None) -> None:
        """Add a piece of argument text: a ``tool-call-delta``, unless the
        piece is empty or the block is closed."""
        if piece and not block.done:
            block.args_text += piece
            self._emit(
                ToolCallDeltaChunk(
                    payload=ToolCallDeltaPayload(
                        tool_call_id=block.tool_call_id,
                        args_text_delta=piece,
                        tool_name=block.tool_name,
                    )
                )
            )

    def end(self, block: ToolCallBlock, args_text: str | None = None) -> bool:
        """Close the block, once: ``tool-call-input-streaming-end`` and the
        ``tool-call``, whose arguments are ``args_text`` (when the closing event
        carries the whole text) or else the text streamed, parsed, falling back
        to ``initial_args`` (a dict) and then ``{}``. Whether the block was
        open."""
        if block.done:
            return False
        block.done = True
        text = block.args_text if args_text is None else args_text
        if text:
            args = parse_args(text)
        elif isinstance(block.initial_args, dict):
            args = block.initial_args
        else:
            args = {}
        self._emit(
            ToolCallInputStreamingEndChunk(
                payload=ToolCallInputStreamingEndPayload(
                    tool_call_id=block.tool_call_id
                )
            )
        )
        self._emit(
            ToolCallChunk(
                payload=ToolCallPayload(
                    tool_call_id=block.tool_call_id,
                    tool_name=block.tool_name,
                    args=args,
                )
            )
        )
        return True
