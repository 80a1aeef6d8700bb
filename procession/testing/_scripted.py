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
  is made, so a test can answer from the prompt it was sent;
* a ``CheckedTurn``: a list or str turn checked once by ``check_turn``, for
  any number of models (a callable may return one too).

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

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

import attrs
import trio

from ..data import (
    Chunk,
    PromptMessage,
)
from ..models import (
    ModelFinish,
    ModelRequest,
    ToolChoice,
    ToolDefinition,
)
from ._script import (
    CheckedTurn,
    Delay,
    ScriptedTurn,
    ScriptError,
    ScriptExhausted,
    _finish_for,
    _plan,
    _where,
)

__all__ = [
    "CallLog",
    "RecordedCall",
    "ScriptedModel",
    "ScriptedResponse",
]

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
    iterating at once get ``trio.BusyResourceError``. ``next_nowait`` gives
    the chunks that need no waiting without the checkpoint (the agent's run
    pulls them so, checkpointing every so many chunks itself).
    """

    __slots__ = ("_busy", "_call", "_closed", "_done", "_next", "_plan", "finish")

    def __init__(self, call: RecordedCall, plan: CheckedTurn) -> None:
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

    def next_nowait(self) -> Chunk:
        """The next scripted chunk without waiting, for a reader that pulls
        while data is at hand (the run does): what ``__anext__`` gives, without
        its checkpoint. Raises ``trio.WouldBlock`` before a ``Delay`` (the
        awaited read sleeps it), ``StopAsyncIteration`` at the end, and the
        scripted error where the script has one."""
        if self._closed or self._busy:
            raise trio.WouldBlock  # __anext__ says what is wrong
        steps = self._plan.steps
        if self._done:
            raise StopAsyncIteration
        index = self._next
        if index == len(steps):
            self._done = True
            self.finish = _finish_for(self._plan, self._call.request)
            self._call.log.finish = self.finish
            raise StopAsyncIteration
        step = steps[index]
        if isinstance(step, Delay):
            raise trio.WouldBlock
        self._next = index + 1
        if isinstance(step, BaseException):
            self._done = True
            self._call.log.error = step
            raise _fresh(step)
        self._call.log.chunks_streamed += 1
        return step

    async def _advance(self) -> Chunk:
        steps = self._plan.steps
        slept = False  # a Delay's sleep was this read's checkpoint
        while not self._done:
            if self._next == len(steps):
                if not slept:
                    await trio.lowlevel.checkpoint()
                self._done = True
                self.finish = _finish_for(self._plan, self._call.request)
                self._call.log.finish = self.finish
                break
            step = steps[self._next]
            if isinstance(step, Delay):
                await trio.sleep(step.seconds)
                self._next += 1
                slept = True
                continue
            if not slept:  # one checkpoint per read, as a provider's socket read
                await trio.lowlevel.checkpoint()
            # Advance only after the checkpoint: a cancelled read loses nothing.
            self._next += 1
            if isinstance(step, BaseException):
                self._done = True
                self._call.log.error = step
                raise _fresh(step)
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
        # The model's and the response's own steps: this context is their door.
        self._response = await self._model._start(self._request)  # noqa: SLF001
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
            self._response._close()  # noqa: SLF001


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
        self._turns: list[
            CheckedTurn | BaseException | Callable[[ModelRequest], Any]
        ] = [turn if callable(turn) else _plan(turn, i) for i, turn in enumerate(turns)]
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
            raise _fresh(plan)
        return ScriptedResponse(call, plan)

    def _take(self, index: int, request: ModelRequest) -> CheckedTurn | BaseException:
        if index >= len(self._turns):
            raise ScriptExhausted(index, len(self._turns))
        turn = self._turns[index]
        if isinstance(turn, CheckedTurn | BaseException):
            return turn
        answer = turn(request)
        if callable(answer) and not isinstance(answer, BaseException):
            raise ScriptError(
                f"{_where(index)}: the callable turn {turn!r} returned another "
                f"callable, {answer!r}; return a list of items, a str, an exception "
                f"or a checked turn"
            )
        return _plan(answer, index)

    def __repr__(self) -> str:
        return (
            f"ScriptedModel(provider={self._provider!r}, model_id={self._model_id!r}, "
            f"turns={len(self._turns)}, calls={len(self._calls)})"
        )


def _fresh(error: BaseException) -> BaseException:
    """``error`` to raise once more, without the traceback of its earlier
    raises: a scripted exception may be raised by many calls (a checked turn
    shared by many models, an exception given to several), and each raise of
    one instance would otherwise add its frames to the last."""
    return error.with_traceback(None)
