"""The script language of ``ScriptedModel``: turns, items, ``Delay``, the turn
builders (``text_turn``, ``tool_call_turn``, ``reasoning_turn``), and how a
script is checked and planned (see ``procession.testing._scripted`` for what a
turn may be).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeAlias, TypeGuard

import attrs

from .._errors import ConfigurationError, ProcessionError
from ..data import (
    CHUNK_TYPES,
    Chunk,
    DataChunk,
    FinishChunk,
    PromptAssistantMessage,
    PromptMessage,
    PromptSystemMessage,
    PromptTextPart,
    PromptUserMessage,
    ReasoningDeltaChunk,
    ReasoningDeltaPayload,
    ReasoningEndChunk,
    ReasoningEndPayload,
    ReasoningSignatureChunk,
    ReasoningSignaturePayload,
    ReasoningStartChunk,
    ReasoningStartPayload,
    StepFinishChunk,
    TextDeltaChunk,
    TextDeltaPayload,
    TextEndChunk,
    TextEndPayload,
    TextStartChunk,
    TextStartPayload,
    ToolCallChunk,
    ToolCallDeltaChunk,
    ToolCallDeltaPayload,
    ToolCallInputStreamingEndChunk,
    ToolCallInputStreamingEndPayload,
    ToolCallInputStreamingStartChunk,
    ToolCallInputStreamingStartPayload,
    ToolCallPayload,
    Usage,
)
from ..models import (
    ModelFinish,
    ModelRequest,
)
from ..wire import from_wire

__all__ = [
    "CheckedTurn",
    "Delay",
    "ScriptError",
    "ScriptExhausted",
    "ScriptItem",
    "ScriptedTurn",
    "check_turn",
    "reasoning_turn",
    "text_turn",
    "tool_call_turn",
]

# --------------------------------------------------------------------------- #
# Errors
# --------------------------------------------------------------------------- #


class ScriptError(ConfigurationError):
    """A ``ScriptedModel`` script is malformed (an item of an unknown kind, a
    wire dict that is not a chunk, items after an exception or a finish, ...).

    Raised by ``ScriptedModel(...)`` for list turns, and on entering
    ``model.stream(...)`` for what a callable turn returned.
    """


class ScriptExhausted(ProcessionError):
    """A ``ScriptedModel`` was called more times than it has turns.

    Raised on entering ``model.stream(...)``; the call is still recorded in
    ``model.calls``.
    """

    def __init__(self, call_index: int, scripted: int) -> None:
        turns = "turn was" if scripted == 1 else "turns were"
        super().__init__(
            f"ScriptedModel received call #{call_index + 1} but only {scripted} "
            f"{turns} scripted; add a turn for this call, or check why the agent "
            f"called the model again"
        )
        self.call_index = call_index
        self.scripted = scripted


# --------------------------------------------------------------------------- #
# Script items
# --------------------------------------------------------------------------- #


def _check_seconds(_instance: object, _attribute: object, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"Delay(seconds) must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(
            f"Delay(seconds) must be finite and >= 0, got {value!r}; a stream that "
            f"never ends is a test of cancellation: use trio.sleep_forever elsewhere"
        )


@attrs.frozen
class Delay:
    """A script item: ``await trio.sleep(seconds)`` before the next item.

    The sleep runs on trio's clock, so under ``MockClock(autojump_threshold=0)``
    it takes no real time. It is a checkpoint: a cancelled consumer stops here.
    """

    seconds: float = attrs.field(validator=_check_seconds)


_FinishItem: TypeAlias = ModelFinish | FinishChunk | StepFinishChunk

ScriptItem: TypeAlias = (
    Chunk | Mapping[str, Any] | str | Delay | Usage | ModelFinish | BaseException
)
"""One item of a list turn (see the module docstring)."""

_CHUNK_CLASSES: tuple[type[Any], ...] = (*CHUNK_TYPES.values(), DataChunk)


def _is_chunk(value: object) -> TypeGuard[Chunk]:
    return isinstance(value, _CHUNK_CLASSES)


_Step: TypeAlias = Chunk | Delay | BaseException


@attrs.frozen
class CheckedTurn:
    """A turn, checked: what to stream and how the response ends. Made by
    ``check_turn`` (built by hand, nothing is checked). Frozen, so one
    checked turn may answer any number of calls of any number of
    ``ScriptedModel`` s (an exception in it is raised afresh each time,
    without the frames of earlier raises)."""

    steps: tuple[_Step, ...]
    finish: _FinishItem | None
    usage: Usage | None
    # Read from the steps once, when the turn is checked, not at the end of
    # every call that streams it (the steps are frozen chunks).
    output_words: int = 0
    """The words of the turn's text (the usage made up when none is given)."""
    tool_called: bool = False
    """Whether the turn streams a tool call."""


ScriptedTurn: TypeAlias = (
    Sequence[ScriptItem]
    | str
    | BaseException
    | CheckedTurn
    | Callable[[ModelRequest], Sequence[ScriptItem] | str | BaseException | CheckedTurn]
)
"""One turn of a script: a list of items, a text shorthand, an exception raised
at the call, a turn checked once by ``check_turn``, or a callable computing one
of those from the request."""


def _where(turn: int | None, item: int | None = None) -> str:
    where = "the turn" if turn is None else f"turn {turn}"
    return where if item is None else f"{where}, item {item}"


def _plan_list(items: Sequence[ScriptItem], turn: int | None) -> CheckedTurn:
    steps: list[_Step | str] = []
    finish: _FinishItem | None = None
    usage: Usage | None = None
    raised_at: int | None = None
    for i, item in enumerate(items):
        if finish is not None:
            raise ScriptError(
                f"{_where(turn, i)}: {item!r} follows the finish item {finish!r}; "
                f"a ModelFinish, FinishChunk or StepFinishChunk must come last"
            )
        if raised_at is not None:
            raise ScriptError(
                f"{_where(turn, i)}: {item!r} follows the exception at item "
                f"{raised_at}, so it could never be streamed; end the turn there"
            )
        if isinstance(item, ModelFinish | FinishChunk | StepFinishChunk):
            finish = item
        elif isinstance(item, Usage):
            if usage is not None:
                raise ScriptError(
                    f"{_where(turn, i)}: a second Usage {item!r}; give one per turn"
                )
            usage = item
        elif isinstance(item, BaseException):
            raised_at = i
            steps.append(item)
        elif isinstance(item, Delay) or _is_chunk(item):
            steps.append(item)
        elif isinstance(item, str):
            steps.append(item)  # expanded below, once the ids in use are known
        elif isinstance(item, Mapping):
            try:
                steps.append(from_wire(item))
            except ProcessionError as exc:
                raise ScriptError(
                    f"{_where(turn, i)}: the wire dict is not a chunk: {exc}"
                ) from exc
        else:
            raise ScriptError(
                f"{_where(turn, i)}: {item!r} is not a script item; expected a chunk, "
                f"a chunk wire dict, a str, Delay(seconds), an exception instance, "
                f"a Usage or a final ModelFinish/FinishChunk/StepFinishChunk"
            )
    if usage is not None and _finish_usage(finish) is not None:
        raise ScriptError(
            f"{_where(turn)}: usage is given twice, by {usage!r} and by {finish!r}; "
            f"keep one"
        )
    expanded = _expand_text(steps)
    return CheckedTurn(
        steps=expanded,
        finish=finish,
        usage=usage,
        output_words=_text_words(expanded),
        tool_called=any(isinstance(s, ToolCallChunk) for s in expanded),
    )


def _expand_text(steps: list[_Step | str]) -> tuple[_Step, ...]:
    """Each ``str`` as a whole text block, ids ``text-1``, ``text-2``, ... skipping
    the ids the turn's own text chunks use."""
    taken = {
        step.payload.id
        for step in steps
        if isinstance(step, TextStartChunk | TextDeltaChunk | TextEndChunk)
    }
    out: list[_Step] = []
    number = 0
    for step in steps:
        if not isinstance(step, str):
            out.append(step)
            continue
        number += 1
        while f"text-{number}" in taken:
            number += 1
        out.extend(_text_block(step, id=f"text-{number}"))
    return tuple(out)


def check_turn(turn: Sequence[ScriptItem] | str) -> CheckedTurn:
    """``turn`` (a list of items or a text shorthand) checked once, for any
    number of ``ScriptedModel`` s: ``ScriptedModel([checked])`` (or a callable
    turn returning it) streams it without checking it again. A script that
    answers many calls with the same long turn (a server's load test, a
    property test building a model per example) checks it once instead of per
    model. Raises ``ScriptError`` for a malformed turn, as ``ScriptedModel``
    does."""
    given: object = turn  # checked at run time too: bytes is a Sequence
    if isinstance(given, str | Sequence) and not isinstance(given, bytes | bytearray):
        plan = _plan(given, None)
        assert isinstance(plan, CheckedTurn)
        return plan
    raise ScriptError(
        f"check_turn takes a list of script items or a str, got {turn!r}; an "
        f"exception turn or a callable turn needs no checking"
    )


def _plan(turn: object, index: int | None) -> CheckedTurn | BaseException:
    """Check one (non-callable) turn: a plan to stream, or the exception to raise
    at the call. A turn checked already is taken as it is."""
    if turn.__class__ is CheckedTurn or isinstance(turn, BaseException):
        return turn
    if isinstance(turn, str):
        return _plan_list([turn], index)
    if isinstance(turn, Sequence):
        return _plan_list(turn, index)
    raise ScriptError(
        f"{_where(index)}: {turn!r} is not a turn; expected a list of items, a str, "
        f"an exception instance, a checked turn or a callable taking the "
        f"ModelRequest"
    )


def _finish_usage(finish: _FinishItem | None) -> Usage | None:
    if finish is None:
        return None
    if isinstance(finish, ModelFinish):
        return finish.usage
    return finish.payload.output.usage or finish.payload.total_usage


def _words(text: str) -> int:
    return len(text.split())


def _text_words(steps: Iterable[_Step]) -> int:
    # Deltas of one block join into one text; separate blocks never share a word.
    # The pieces are joined once per block (not appended to a growing str),
    # so counting is linear in the stream's length.
    blocks: dict[str, list[str]] = {}
    for step in steps:
        if isinstance(step, TextDeltaChunk):
            payload = step.payload
            pieces = blocks.get(payload.id)
            if pieces is None:
                blocks[payload.id] = pieces = []
            pieces.append(payload.text)
    return sum(_words("".join(pieces)) for pieces in blocks.values())


def _prompt_words(prompt: Iterable[PromptMessage]) -> int:
    count = 0
    for message in prompt:
        if isinstance(message, PromptSystemMessage):
            count += _words(message.content)
        elif isinstance(message, PromptUserMessage | PromptAssistantMessage):
            for part in message.content:
                if isinstance(part, PromptTextPart):
                    count += _words(part.text)
    return count


def _finish_for(plan: CheckedTurn, request: ModelRequest) -> ModelFinish:
    """``response.finish`` for a turn streamed to its end."""
    finish = plan.finish
    if isinstance(finish, ModelFinish):
        # Taken as written; only a separate Usage item fills its missing usage.
        if finish.usage is None and plan.usage is not None:
            return attrs.evolve(finish, usage=plan.usage)
        return finish
    usage = _finish_usage(finish) or plan.usage
    if usage is None:
        output = plan.output_words
        input_ = _prompt_words(request.prompt)
        usage = Usage(
            input_tokens=input_, output_tokens=output, total_tokens=input_ + output
        )
    if finish is None:
        return ModelFinish(
            finish_reason="tool-calls" if plan.tool_called else "stop", usage=usage
        )
    info = finish.payload.step_result
    return ModelFinish(
        finish_reason=info.reason,
        usage=usage,
        warnings=info.warnings or (),
        provider_metadata=finish.payload.provider_metadata,
    )


# --------------------------------------------------------------------------- #
# Turn builders
# --------------------------------------------------------------------------- #


def _pieces(text: str, chunk_size: int | None, *, by_words: bool) -> list[str]:
    if chunk_size is not None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
            raise TypeError(f"chunk_size must be an int or None, got {chunk_size!r}")
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be at least 1, got {chunk_size!r}")
        return [text[i : i + chunk_size] for i in range(0, len(text), chunk_size)] or [
            text
        ]
    if not by_words:
        return [text]
    # Each word with the whitespace before it; trailing whitespace joins the last.
    pieces: list[str] = re.findall(r"\s*\S+", text)
    rest = text[sum(map(len, pieces)) :]
    if not pieces:
        return [text]
    pieces[-1] += rest
    return pieces


def _text_block(text: str, *, id: str) -> list[Chunk]:
    return [
        TextStartChunk(payload=TextStartPayload(id=id)),
        TextDeltaChunk(payload=TextDeltaPayload(id=id, text=text)),
        TextEndChunk(payload=TextEndPayload(id=id)),
    ]


def text_turn(
    text: str, *, chunk_size: int | None = None, id: str = "text-1"
) -> list[Chunk]:
    """The items of one text block: ``text-start``, deltas, ``text-end``.

    ``chunk_size=None`` makes one delta per word (each with the whitespace
    before it); an int cuts the text into deltas of that many characters. The
    deltas always join back to ``text``. Returns a list to splice into a turn,
    e.g. ``[*text_turn("hi there"), ModelFinish(finish_reason="length")]``.
    """
    deltas = _pieces(text, chunk_size, by_words=True)
    return [
        TextStartChunk(payload=TextStartPayload(id=id)),
        *(TextDeltaChunk(payload=TextDeltaPayload(id=id, text=d)) for d in deltas),
        TextEndChunk(payload=TextEndPayload(id=id)),
    ]


def tool_call_turn(
    tool_name: str,
    args: Any,
    *,
    tool_call_id: str = "call-1",
    chunk_size: int | None = None,
) -> list[Chunk]:
    """The items of one streamed tool call.

    ``tool-call-input-streaming-start``, the argument JSON (``json.dumps(args)``)
    as ``tool-call-delta`` chunks, ``tool-call-input-streaming-end`` and the
    ``tool-call`` carrying ``args``. ``chunk_size=None`` sends the JSON in one
    delta; an int cuts it into deltas of that many characters. Give each call
    of one turn its own ``tool_call_id``.
    """
    arguments = json.dumps(args)
    deltas = _pieces(arguments, chunk_size, by_words=False)
    return [
        ToolCallInputStreamingStartChunk(
            payload=ToolCallInputStreamingStartPayload(
                tool_call_id=tool_call_id, tool_name=tool_name
            )
        ),
        *(
            ToolCallDeltaChunk(
                payload=ToolCallDeltaPayload(
                    tool_call_id=tool_call_id, args_text_delta=d, tool_name=tool_name
                )
            )
            for d in deltas
        ),
        ToolCallInputStreamingEndChunk(
            payload=ToolCallInputStreamingEndPayload(tool_call_id=tool_call_id)
        ),
        ToolCallChunk(
            payload=ToolCallPayload(
                tool_call_id=tool_call_id, tool_name=tool_name, args=args
            )
        ),
    ]


def reasoning_turn(
    text: str,
    *,
    signature: str | None = None,
    id: str = "reasoning-1",
    chunk_size: int | None = None,
) -> list[Chunk]:
    """The items of one reasoning block.

    ``reasoning-start``, deltas (split as in ``text_turn``), then, when
    ``signature`` is given, a ``reasoning-signature`` chunk, and
    ``reasoning-end`` (which also carries the signature, as Mastra's does).
    """
    deltas = _pieces(text, chunk_size, by_words=True)
    items: list[Chunk] = [
        ReasoningStartChunk(payload=ReasoningStartPayload(id=id)),
        *(
            ReasoningDeltaChunk(payload=ReasoningDeltaPayload(id=id, text=d))
            for d in deltas
        ),
    ]
    if signature is not None:
        items.append(
            ReasoningSignatureChunk(
                payload=ReasoningSignaturePayload(id=id, signature=signature)
            )
        )
    items.append(
        ReasoningEndChunk(payload=ReasoningEndPayload(id=id, signature=signature))
    )
    return items
