"""``ScriptedModel``: a ``LanguageModel`` that answers from a script.

Each call to the model takes the next *turn* of the script::

    model = ScriptedModel([
        [*tool_call_turn("weather", {"city": "Oslo"})],    # call 0: a tool call
        "It is sunny in Oslo.",                            # call 1: one text block
        ProviderError("overloaded", status_code=529),      # call 2: rejected
    ])

A turn is one of

* a **list of items**, streamed in order:

  - a chunk object (``text_delta("hi")``) or its Mastra wire dict
    (``{"type": "text-delta", "payload": {"id": "t", "text": "hi"}}``);
  - a ``str``: shorthand for one whole text block, ``text-start``, a single
    ``text-delta`` and ``text-end``, with ids ``"text-1"``, ``"text-2"``, ...
    numbered per turn, skipping ids the turn's own text chunks use;
  - ``Delay(seconds)``: ``trio.sleep`` (on trio's clock, so an autojump clock
    skips it) before the next item;
  - an exception instance: raised from ``__anext__`` at that point (the stream
    broke); nothing may follow it;
  - a ``Usage``: the usage reported in ``response.finish`` (not streamed);
  - last, optionally, a ``ModelFinish``, ``FinishChunk`` or ``StepFinishChunk``
    (not streamed) saying how the response ended;

* a **str**: shorthand for ``[that_str]``;
* an **exception instance**: raised on entering ``model.stream(request)`` (the
  provider rejected the call);
* a **callable** ``(request) -> list | str | exception``, called when the call
  is made, so a test can answer from the prompt it was sent.

Unless the script says otherwise, ``response.finish`` has the reason
``"tool-calls"`` when a ``tool-call`` chunk was streamed and ``"stop"``
otherwise, and a deterministic usage: input tokens are the words (whitespace
separated) of the prompt's text, output tokens the words of the streamed text.

Scripts are checked when the model is built (callable turns: when called), and a
malformed one raises ``ScriptError`` naming the turn and item. A call beyond the
script raises ``ScriptExhausted``. ``model.calls`` records every call, including
rejected ones and those that found the script exhausted.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, TypeAlias, TypeGuard

import attrs
import trio

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
    ToolChoice,
    ToolDefinition,
)
from ..wire import from_wire

__all__ = [
    "CallLog",
    "Delay",
    "RecordedCall",
    "ScriptError",
    "ScriptExhausted",
    "ScriptItem",
    "ScriptedModel",
    "ScriptedResponse",
    "ScriptedTurn",
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

ScriptedTurn: TypeAlias = (
    Sequence[ScriptItem]
    | str
    | BaseException
    | Callable[[ModelRequest], "Sequence[ScriptItem] | str | BaseException"]
)
"""One turn of a script: a list of items, a text shorthand, an exception raised
at the call, or a callable computing one of those from the request."""

_CHUNK_CLASSES: tuple[type[Any], ...] = (*CHUNK_TYPES.values(), DataChunk)


def _is_chunk(value: object) -> TypeGuard[Chunk]:
    return isinstance(value, _CHUNK_CLASSES)


_Step: TypeAlias = Chunk | Delay | BaseException


@attrs.frozen
class _Plan:
    """A turn, checked: what to stream and how the response ends."""

    steps: tuple[_Step, ...]
    finish: _FinishItem | None
    usage: Usage | None


def _where(turn: int, item: int | None = None) -> str:
    return f"turn {turn}" if item is None else f"turn {turn}, item {item}"


def _plan_list(items: Sequence[ScriptItem], turn: int) -> _Plan:
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
    return _Plan(steps=_expand_text(steps), finish=finish, usage=usage)


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


def _plan(turn: object, index: int) -> _Plan | BaseException:
    """Check one (non-callable) turn: a plan to stream, or the exception to raise
    at the call."""
    if isinstance(turn, BaseException):
        return turn
    if isinstance(turn, str):
        return _plan_list([turn], index)
    if isinstance(turn, Sequence):
        return _plan_list(turn, index)
    raise ScriptError(
        f"{_where(index)}: {turn!r} is not a turn; expected a list of items, a str, "
        f"an exception instance or a callable taking the ModelRequest"
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
    blocks: dict[str, str] = {}
    for step in steps:
        if isinstance(step, TextDeltaChunk):
            block = step.payload.id
            blocks[block] = blocks.get(block, "") + step.payload.text
    return sum(_words(text) for text in blocks.values())


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


def _finish_for(plan: _Plan, request: ModelRequest) -> ModelFinish:
    """``response.finish`` for a turn streamed to its end."""
    finish = plan.finish
    if isinstance(finish, ModelFinish):
        # Taken as written; only a separate Usage item fills its missing usage.
        if finish.usage is None and plan.usage is not None:
            return attrs.evolve(finish, usage=plan.usage)
        return finish
    usage = _finish_usage(finish) or plan.usage
    if usage is None:
        output = _text_words(plan.steps)
        input_ = _prompt_words(request.prompt)
        usage = Usage(
            input_tokens=input_, output_tokens=output, total_tokens=input_ + output
        )
    if finish is None:
        called = any(isinstance(s, ToolCallChunk) for s in plan.steps)
        return ModelFinish(
            finish_reason="tool-calls" if called else "stop", usage=usage
        )
    info = finish.payload.step_result
    return ModelFinish(
        finish_reason=info.reason,
        usage=usage,
        warnings=info.warnings or (),
        provider_metadata=finish.payload.provider_metadata,
    )


# --------------------------------------------------------------------------- #
# Records
# --------------------------------------------------------------------------- #


@attrs.define
class CallLog:
    """What happened to one call so far; updated in place as it streams.

    Attributes:
        chunks_streamed: chunks handed to the consumer.
        finish: ``response.finish``, once the stream ended normally.
        error: the exception the call raised (at the call or mid-stream), if any.
        closed_early: the consumer left the ``async with`` before the stream
            ended (normally or with its scripted exception).
    """

    chunks_streamed: int = 0
    finish: ModelFinish | None = None
    error: BaseException | None = None
    closed_early: bool = False


@attrs.frozen
class RecordedCall:
    """One request a ``ScriptedModel`` received, in ``model.calls``.

    The request is a frozen value; how the call went is in ``log``, a mutable
    ``CallLog`` the model keeps updating (``chunks_streamed``, ``finish``,
    ``error`` and ``closed_early`` read through to it).
    """

    index: int
    """0 for the model's first call, 1 for the second, ..."""
    request: ModelRequest = attrs.field(repr=False)
    log: CallLog = attrs.field(factory=CallLog)

    @property
    def prompt(self) -> Sequence[PromptMessage]:
        """The prompt messages sent."""
        return self.request.prompt

    @property
    def tools(self) -> Sequence[ToolDefinition]:
        """The tools offered."""
        return self.request.tools

    @property
    def tool_choice(self) -> ToolChoice:
        return self.request.tool_choice

    @property
    def settings(self) -> Mapping[str, Any]:
        """Call settings (``temperature``, ``max_tokens``, ...)."""
        return self.request.settings

    @property
    def provider_options(self) -> Mapping[str, Any]:
        return self.request.provider_options

    @property
    def tool_names(self) -> list[str]:
        """The names of the tools offered, in order."""
        return [tool.name for tool in self.request.tools]

    @property
    def chunks_streamed(self) -> int:
        return self.log.chunks_streamed

    @property
    def finish(self) -> ModelFinish | None:
        return self.log.finish

    @property
    def error(self) -> BaseException | None:
        return self.log.error

    @property
    def closed_early(self) -> bool:
        return self.log.closed_early


# --------------------------------------------------------------------------- #
# The response
# --------------------------------------------------------------------------- #


class ScriptedResponse:
    """The response to one call: an async iterator of the turn's chunks.

    Every ``__anext__`` checkpoints (as a network read would), so cancellation
    reaches a consumer waiting on it; a ``Delay`` sleeps on trio's clock. A
    scripted exception is raised from ``__anext__`` and ends the stream.
    ``finish`` is set once iteration ended normally. Iterating after the
    ``async with`` has exited raises ``trio.ClosedResourceError``; two tasks
    iterating at once get ``trio.BusyResourceError``.
    """

    __slots__ = ("_busy", "_call", "_closed", "_done", "_next", "_plan", "finish")

    def __init__(self, call: RecordedCall, plan: _Plan) -> None:
        self.finish: ModelFinish | None = None
        self._call = call
        self._plan = plan
        self._next = 0
        self._done = False
        self._closed = False
        self._busy = False

    @property
    def call(self) -> RecordedCall:
        """The record of the call this response answers."""
        return self._call

    def __aiter__(self) -> ScriptedResponse:
        return self

    async def __anext__(self) -> Chunk:
        """The next scripted chunk. Always checkpoints first (a ``Delay`` sleeps
        on trio's clock); a cancelled read loses nothing: the chunk is given by
        the next read. Raises the scripted error where the script has one."""
        if self._closed:
            raise trio.ClosedResourceError(
                f"call #{self._call.index + 1} to the ScriptedModel is closed: its "
                f"response was iterated after its 'async with' block exited"
            )
        if self._busy:
            raise trio.BusyResourceError(
                "another task is already iterating this ScriptedResponse"
            )
        self._busy = True
        try:
            return await self._advance()
        finally:
            self._busy = False

    async def _advance(self) -> Chunk:
        steps = self._plan.steps
        while not self._done:
            if self._next == len(steps):
                await trio.lowlevel.checkpoint()
                self._done = True
                self.finish = _finish_for(self._plan, self._call.request)
                self._call.log.finish = self.finish
                break
            step = steps[self._next]
            if isinstance(step, Delay):
                await trio.sleep(step.seconds)
                self._next += 1
                continue
            await trio.lowlevel.checkpoint()
            # Advance only after the checkpoint: a cancelled read loses nothing.
            self._next += 1
            if isinstance(step, BaseException):
                self._done = True
                self._call.log.error = step
                raise step
            self._call.log.chunks_streamed += 1
            return step
        raise StopAsyncIteration

    def _close(self) -> None:
        if not self._closed and not self._done:
            self._call.log.closed_early = True
        self._closed = True

    def __repr__(self) -> str:
        state = "closed" if self._closed else "ended" if self._done else "streaming"
        return (
            f"<ScriptedResponse call={self._call.index} "
            f"chunks_streamed={self._call.log.chunks_streamed} {state}>"
        )


class _ScriptedCall:
    """The context manager ``ScriptedModel.stream`` returns (single use)."""

    __slots__ = ("_entered", "_model", "_request", "_response")

    def __init__(self, model: ScriptedModel, request: ModelRequest) -> None:
        self._model = model
        self._request = request
        self._entered = False
        self._response: ScriptedResponse | None = None

    async def __aenter__(self) -> ScriptedResponse:
        """Start the call: a scripted error at the call is raised here.
        Checkpoints; cancellation propagates and the call stays unmade."""
        if self._entered:
            raise RuntimeError(
                "a ScriptedModel.stream(...) context can be entered only once; "
                "call model.stream(request) again for another call"
            )
        self._entered = True
        self._response = await self._model._start(self._request)
        return self._response

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the response. Never checkpoints, so leaving the block cannot
        replace the exception in flight with ``Cancelled``."""
        if self._response is not None:
            self._response._close()


# --------------------------------------------------------------------------- #
# The model
# --------------------------------------------------------------------------- #


class ScriptedModel:
    """A ``LanguageModel`` whose answers are scripted, one turn per call.

    Args:
        turns: the script, one turn per call (see the module docstring). List
            turns are checked now; a malformed one raises ``ScriptError``.
        provider: the ``provider`` name it reports.
        model_id: the ``model_id`` it reports.

    ``model.stream(request)`` returns an async context manager. Entering it makes
    the call: it is recorded in ``calls``, the next turn is taken (a callable turn
    is called with the request), one checkpoint passes, and then the turn's
    exception is raised or its ``ScriptedResponse`` returned. Past the end of the
    script, entering raises ``ScriptExhausted``. Leaving never checkpoints; a
    response left before its stream ended counts in ``closed_early``.

    Chunks are streamed exactly as scripted: nothing is stamped on them (no
    ``run_id``); the agent stamps its own.
    """

    __slots__ = ("_calls", "_model_id", "_provider", "_turns")

    def __init__(
        self,
        turns: Sequence[ScriptedTurn],
        *,
        provider: str = "scripted",
        model_id: str = "scripted-model",
    ) -> None:
        if isinstance(turns, str | bytes) or not isinstance(turns, Sequence):
            raise ScriptError(
                f"ScriptedModel(turns) takes a list of turns, got {turns!r}; "
                f"for one text answer write ScriptedModel([{turns!r}])"
            )
        self._turns: list[_Plan | BaseException | Callable[[ModelRequest], Any]] = [
            turn if callable(turn) else _plan(turn, i) for i, turn in enumerate(turns)
        ]
        self._provider = provider
        self._model_id = model_id
        self._calls: list[RecordedCall] = []

    @property
    def provider(self) -> str:
        return self._provider

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def calls(self) -> list[RecordedCall]:
        """Every call made so far, in order (a new list each time)."""
        return list(self._calls)

    @property
    def remaining(self) -> int:
        """How many scripted turns have not been used yet."""
        return max(0, len(self._turns) - len(self._calls))

    @property
    def closed_early(self) -> int:
        """How many responses were left before their stream ended."""
        return sum(call.log.closed_early for call in self._calls)

    @property
    def chunks_streamed(self) -> int:
        """How many chunks all calls together have handed out."""
        return sum(call.log.chunks_streamed for call in self._calls)

    def stream(
        self, request: ModelRequest
    ) -> AbstractAsyncContextManager[ScriptedResponse]:
        """Make a call; see the class docstring for what entering and leaving do."""
        if not isinstance(request, ModelRequest):
            raise TypeError(
                f"ScriptedModel.stream expects a ModelRequest, got {request!r}"
            )
        return _ScriptedCall(self, request)

    async def _start(self, request: ModelRequest) -> ScriptedResponse:
        index = len(self._calls)
        call = RecordedCall(index=index, request=request)
        self._calls.append(call)
        try:
            plan = self._take(index, request)
        except Exception as exc:
            call.log.error = exc
            raise
        # The request reached the "provider": a cancelled call still used its turn.
        await trio.lowlevel.checkpoint()
        if isinstance(plan, BaseException):
            call.log.error = plan
            raise plan
        return ScriptedResponse(call, plan)

    def _take(self, index: int, request: ModelRequest) -> _Plan | BaseException:
        if index >= len(self._turns):
            raise ScriptExhausted(index, len(self._turns))
        turn = self._turns[index]
        if isinstance(turn, _Plan | BaseException):
            return turn
        answer = turn(request)
        if callable(answer) and not isinstance(answer, BaseException):
            raise ScriptError(
                f"{_where(index)}: the callable turn {turn!r} returned another "
                f"callable, {answer!r}; return a list of items, a str or an exception"
            )
        return _plan(answer, index)

    def __repr__(self) -> str:
        return (
            f"ScriptedModel(provider={self._provider!r}, model_id={self._model_id!r}, "
            f"turns={len(self._turns)}, calls={len(self._calls)})"
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
