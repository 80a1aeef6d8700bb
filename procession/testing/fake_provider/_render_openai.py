"""A ``Stream`` as OpenAI Chat Completions and Responses SSE events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from ._script import Stream, TokenCounts, _Error, _split, _Text, _Thinking, _ToolCall
from ._sse import (
    TO_CHAT_STOP,
    TO_INCOMPLETE_REASON,
    data,
    neutral_stop,
    rendered_parts,
    sse,
    usage_of,
)

__all__ = ["chat_events", "responses_events"]

# A fixed creation time, offset by the request's ordinal, keeps the events
# deterministic (the golden tests compare them byte for byte).
_CREATED = 1_700_000_000

# --------------------------------------------------------------------------
# Chat Completions


def chat_events(
    stream: Stream,
    *,
    model: str = "fake-model",
    include_usage: bool = False,
    ordinal: int = 1,
) -> list[str]:
    """The OpenAI Chat Completions SSE events (data-only) for ``stream``.

    A role chunk (merged into the first tool call's header when the stream
    starts with one), content / ``reasoning_content`` / ``tool_calls`` deltas
    (tool calls by ``index``: a header with id, type and name, then argument
    pieces), a chunk with ``finish_reason``, with ``include_usage`` one chunk
    with ``choices: []`` and ``usage`` (and ``"usage": null`` on every earlier
    chunk), then ``data: [DONE]``. An error part ends the list with a
    ``{"error": {...}}`` chunk and no ``[DONE]``.
    """
    parts = rendered_parts(stream, "chat_events")
    chunks = _ChatChunks(
        completion_id=stream.id or f"chatcmpl-fake{ordinal}",
        model=stream.model or model,
        ordinal=ordinal,
        include_usage=include_usage,
    )
    events: list[str] = []
    tool_index = 0
    for index, part in enumerate(parts):
        if isinstance(part, _Error):
            error = {
                "message": part.message,
                "type": part.type,
                "param": None,
                "code": part.code,
            }
            events.append(data({"error": error}))
            return events
        if isinstance(part, _ToolCall):
            events += chunks.tool_call(part, index, tool_index)
            tool_index += 1
            continue
        events += chunks.role()
        if isinstance(part, _Text):
            events += [chunks.chunk({"content": t}) for t in part.pieces]
        elif isinstance(part, _Thinking):
            events += [chunks.chunk({"reasoning_content": t}) for t in part.pieces]
    events += chunks.role()
    stop = neutral_stop(stream)
    events.append(chunks.chunk({}, TO_CHAT_STOP.get(stop, stop)))
    if include_usage:
        events.append(chunks.usage(usage_of(stream)))
    events.append(data("[DONE]"))
    return events


@attrs.define
class _ChatChunks:
    """Chunks of one completion; remembers whether the role was sent yet."""

    completion_id: str
    model: str
    ordinal: int
    include_usage: bool
    role_pending: bool = True

    def _head(self) -> dict[str, Any]:
        return {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": _CREATED + self.ordinal,
            "model": self.model,
        }

    def chunk(self, delta: Mapping[str, Any], finish_reason: str | None = None) -> str:
        choice = {
            "index": 0,
            "delta": delta,
            "logprobs": None,
            "finish_reason": finish_reason,
        }
        body: dict[str, Any] = {**self._head(), "choices": [choice]}
        if self.include_usage:
            body["usage"] = None
        return data(body)

    def role(self) -> list[str]:
        """The role chunk if it is still due (a text or reasoning part, or the
        end of a stream that had no part), else nothing."""
        if not self.role_pending:
            return []
        self.role_pending = False
        return [self.chunk({"role": "assistant", "content": "", "refusal": None})]

    def tool_call(self, part: _ToolCall, index: int, tool_index: int) -> list[str]:
        """The call's header (carrying the role if it is still due), then its
        argument pieces."""
        call = {
            "index": tool_index,
            "id": part.id or f"call_fake_{self.ordinal}_{index}",
            "type": "function",
            "function": {"name": part.name, "arguments": ""},
        }
        header: dict[str, Any] = {"tool_calls": [call]}
        if self.role_pending:
            header = {"role": "assistant", "content": None, **header}
            self.role_pending = False
        events = [self.chunk(header)]
        for piece in _split(part.arguments, part.chunks):
            args = {"index": tool_index, "function": {"arguments": piece}}
            events.append(self.chunk({"tool_calls": [args]}))
        return events

    def usage(self, usage: TokenCounts) -> str:
        counts = {
            "prompt_tokens": usage.input_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.input_tokens + usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        }
        return data({**self._head(), "choices": [], "usage": counts})


# --------------------------------------------------------------------------
# Responses


def responses_events(
    stream: Stream, *, model: str = "fake-model", ordinal: int = 1
) -> list[str]:
    """The OpenAI Responses SSE events (``event:`` + ``data:``) for ``stream``.

    ``response.created``, ``response.in_progress``, per part one output item
    (``message`` with ``output_text`` deltas, ``reasoning`` with summary-text
    deltas, ``function_call`` with argument deltas) from ``output_item.added``
    to ``output_item.done``, then ``response.completed`` with the output and
    usage (``response.incomplete`` for a ``max_tokens``/``refusal`` stop).
    ``sequence_number`` counts from 0. An error part ends the list as
    ``Stream.error`` describes.
    """
    parts = rendered_parts(stream, "responses_events")
    out = _ResponseEvents(
        response_id=stream.id or f"resp_fake{ordinal}",
        model=stream.model or model,
        ordinal=ordinal,
    )
    out.emit("response.created", response=out.response("in_progress"))
    out.emit("response.in_progress", response=out.response("in_progress"))
    for index, part in enumerate(parts):
        if isinstance(part, _Error):
            _responses_error(out, part)
            return out.events
        at = {"output_index": index}
        if isinstance(part, _Text):
            item = _message_item(out, part, at)
        elif isinstance(part, _Thinking):
            item = _reasoning_item(out, part, at)
        else:
            assert isinstance(part, _ToolCall)
            item = _function_call_item(out, part, at)
        out.emit("response.output_item.done", item=item, **at)
        out.done_items.append(item)
    _responses_end(out, stream)
    return out.events


@attrs.define
class _ResponseEvents:
    """The events of one response so far, and its finished output items."""

    response_id: str
    model: str
    ordinal: int
    events: list[str] = attrs.field(factory=list)
    done_items: list[dict[str, Any]] = attrs.field(factory=list)

    def emit(self, event_type: str, **fields: Any) -> None:
        body = {"type": event_type, "sequence_number": len(self.events), **fields}
        self.events.append(sse(event_type, body))

    def response(self, status: str, **fields: Any) -> dict[str, Any]:
        """The response object as it stands (the output items done so far)."""
        return {
            "id": self.response_id,
            "object": "response",
            "created_at": _CREATED + self.ordinal,
            "status": status,
            "error": None,
            "incomplete_details": None,
            "model": self.model,
            "output": list(self.done_items),
            "usage": None,
            **fields,
        }


def _responses_error(out: _ResponseEvents, part: _Error) -> None:
    code = part.code if part.code is not None else part.type
    if part.responses in ("error", "both"):
        if part.nested:
            error = {
                "type": part.type,
                "code": code,
                "message": part.message,
                "param": None,
            }
            out.emit("error", error=error)
        else:
            out.emit("error", code=code, message=part.message, param=None)
    if part.responses in ("failed", "both"):
        failed = out.response("failed", error={"code": code, "message": part.message})
        out.emit("response.failed", response=failed)


def _message_item(
    out: _ResponseEvents, part: _Text, at: Mapping[str, int]
) -> dict[str, Any]:
    """Emit a ``message`` item up to its last content event; the done item."""
    item_id = f"msg_fake_{out.ordinal}_{at['output_index']}"
    item: dict[str, Any] = {
        "id": item_id,
        "type": "message",
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    }
    out.emit("response.output_item.added", item=item, **at)
    where = {"item_id": item_id, **at, "content_index": 0}
    text_part: dict[str, Any] = {
        "type": "output_text",
        "text": "",
        "annotations": [],
        "logprobs": [],
    }
    out.emit("response.content_part.added", part=text_part, **where)
    for t in part.pieces:
        out.emit("response.output_text.delta", delta=t, logprobs=[], **where)
    text = "".join(part.pieces)
    out.emit("response.output_text.done", text=text, logprobs=[], **where)
    text_part = {**text_part, "text": text}
    out.emit("response.content_part.done", part=text_part, **where)
    return {**item, "status": "completed", "content": [text_part]}


def _reasoning_item(
    out: _ResponseEvents, part: _Thinking, at: Mapping[str, int]
) -> dict[str, Any]:
    """Emit a ``reasoning`` item up to its last summary event; the done item."""
    item_id = f"rs_fake_{out.ordinal}_{at['output_index']}"
    item: dict[str, Any] = {"id": item_id, "type": "reasoning", "summary": []}
    out.emit("response.output_item.added", item=item, **at)
    where = {"item_id": item_id, **at, "summary_index": 0}
    summary: dict[str, Any] = {"type": "summary_text", "text": ""}
    out.emit("response.reasoning_summary_part.added", part=summary, **where)
    for t in part.pieces:
        out.emit("response.reasoning_summary_text.delta", delta=t, **where)
    text = "".join(part.pieces)
    out.emit("response.reasoning_summary_text.done", text=text, **where)
    summary = {**summary, "text": text}
    out.emit("response.reasoning_summary_part.done", part=summary, **where)
    return {**item, "summary": [summary], "encrypted_content": part.signature}


def _function_call_item(
    out: _ResponseEvents, part: _ToolCall, at: Mapping[str, int]
) -> dict[str, Any]:
    """Emit a ``function_call`` item up to its arguments; the done item."""
    index = at["output_index"]
    item_id = f"fc_fake_{out.ordinal}_{index}"
    item: dict[str, Any] = {
        "id": item_id,
        "type": "function_call",
        "status": "in_progress",
        "arguments": "",
        "call_id": part.id or f"call_fake_{out.ordinal}_{index}",
        "name": part.name,
    }
    out.emit("response.output_item.added", item=item, **at)
    for piece in _split(part.arguments, part.chunks):
        out.emit(
            "response.function_call_arguments.delta",
            item_id=item_id,
            delta=piece,
            **at,
        )
    out.emit(
        "response.function_call_arguments.done",
        item_id=item_id,
        arguments=part.arguments,
        **at,
    )
    return {**item, "status": "completed", "arguments": part.arguments}


def _responses_end(out: _ResponseEvents, stream: Stream) -> None:
    """``response.completed``, or ``response.incomplete`` for a cut-short stop."""
    usage = usage_of(stream)
    wire_usage = {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens,
    }
    reason = TO_INCOMPLETE_REASON.get(neutral_stop(stream))
    if reason is None:
        completed = out.response("completed", usage=wire_usage)
        out.emit("response.completed", response=completed)
    else:
        incomplete = out.response(
            "incomplete", usage=wire_usage, incomplete_details={"reason": reason}
        )
        out.emit("response.incomplete", response=incomplete)
