"""The processor contract: the ``Processor`` base class, one argument class per
hook, the result types, and how a hook's return value is read.

A processor implements any of nine hooks (snake_case versions of the seed's):

===========================  ======================================================
hook                         runs
===========================  ======================================================
``process_input``            once, before the agentic loop
``process_input_step``       before every model call (every step and every retry)
``process_llm_request``      after the prompt is built, before the provider call
``process_llm_response``     after a step's chunks were collected (paired with the
                             request hook; same ``state``)
``process_api_error``        when the model call fails
``process_output_stream``    on every streamed chunk
``process_output_step``      after each model step, before tools run
``process_tool_result``      after each tool returned, before the model sees it
``process_output_result``    once, after the run completed
===========================  ======================================================

Each hook takes ONE argument object (read-only to the processor) and may be a
plain ``def`` or an ``async def``. ``args.abort(...)`` raises ``TripWire`` and never
returns.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn, TypeAlias

import attrs

from .._errors import ProcessorContractError, ProcessorError, TripWire
from .._secrets import get_logger
from ..data import Message, OutputResult, StepResult, SystemMessage, ToolCallInfo
from ._context import (
    AbortSignal,
    Emitter,
    ProcessorStreamWriter,
    ProcessorViolation,
    RequestContext,
    TracingContext,
)

if TYPE_CHECKING:
    from ..data import Chunk, PromptMessage, Usage
    from ._message_list import MessageList

__all__ = [
    "HOOK_NAMES",
    "INPUT_HOOKS",
    "OUTPUT_HOOKS",
    "HookArgs",
    "OnError",
    "ProcessAPIErrorArgs",
    "ProcessAPIErrorResult",
    "ProcessInputArgs",
    "ProcessInputResult",
    "ProcessInputStepArgs",
    "ProcessInputStepResult",
    "ProcessLLMRequestArgs",
    "ProcessLLMRequestResult",
    "ProcessLLMResponseArgs",
    "ProcessOutputResultArgs",
    "ProcessOutputStepArgs",
    "ProcessOutputStreamArgs",
    "ProcessToolResultArgs",
    "Processor",
    "ProcessorMessageResult",
    "default_abort_reason",
    "tripwire_in",
]

logger = get_logger("procession")

OnError: TypeAlias = Literal["raise", "pass", "block"]
"""What happens when a hook raises a plain exception (SPEC §2.2):

* ``"raise"`` (default): the run ends with an ``error`` chunk and
  ``finish_reason == "error"``; the exception is kept on the result.
* ``"pass"`` (fail-open): logged with the processor id; the chunk continues
  unchanged / the hook counts as returning nothing.
* ``"block"`` (fail-closed): a tripwire with reason ``"<id> failed: <exception>"``.
"""

HOOK_NAMES: Final = (
    "process_input",
    "process_input_step",
    "process_llm_request",
    "process_llm_response",
    "process_api_error",
    "process_output_stream",
    "process_output_step",
    "process_tool_result",
    "process_output_result",
)
INPUT_HOOKS: Final = (
    "process_input",
    "process_input_step",
    "process_llm_request",
    "process_llm_response",
)
OUTPUT_HOOKS: Final = (
    "process_output_stream",
    "process_output_step",
    "process_output_result",
    "process_tool_result",
)


def default_abort_reason(processor_id: str) -> str:
    """The reason used when ``abort()`` is called without one (Mastra's wording)."""
    return f"Tripwire triggered by {processor_id}"


class Processor:
    """Base class for processors. Subclassing it is optional (any object with an
    ``id`` and at least one hook works), but it gives the defaults below.

    Set ``id`` (a class attribute or in ``__init__``) and implement any of the
    hooks listed in this module's docstring, sync or async::

        class WordCounter(Processor):
            id = "word-counter"

            def process_output_stream(self, args):
                args.state.setdefault("words", 0)
                if args.part.type == "text-delta":
                    args.state["words"] += len(args.part.payload.text.split())
                return args.part

    Processors are shared objects: keep per-run data in ``args.state`` (one dict
    per processor per call), not on ``self``.
    """

    id: str
    """Unique identifier, used for tracing, state and tripwire attribution."""
    description: str | None = None
    """Human-readable description."""
    process_data_parts: bool = False
    """When true, ``process_output_stream`` also receives ``data-*`` chunks."""
    on_error: OnError = "raise"
    """Policy when a hook raises a plain exception."""
    processor_index: int | None = None
    """Position in the merged processor list; set by the runtime."""
    _name: str | None = None

    @property
    def name(self) -> str:
        """Display name; the ``id`` unless one was given."""
        return self._name if self._name is not None else self.id

    @name.setter
    def name(self, value: str) -> None:
        self._name = value

    if TYPE_CHECKING:
        # Typed stubs for editors and type checkers only: at run time a
        # processor has exactly the hooks it defines (registration looks them
        # up by name), so these must never exist on the class. Each hook may be
        # sync or async; the results each may return are on its args class.

        def process_input(self, args: ProcessInputArgs) -> Any: ...
        def process_input_step(self, args: ProcessInputStepArgs) -> Any: ...
        def process_llm_request(self, args: ProcessLLMRequestArgs) -> Any: ...
        def process_llm_response(self, args: ProcessLLMResponseArgs) -> Any: ...
        def process_api_error(self, args: ProcessAPIErrorArgs) -> Any: ...
        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any: ...
        def process_output_step(self, args: ProcessOutputStepArgs) -> Any: ...
        def process_tool_result(self, args: ProcessToolResultArgs) -> Any: ...
        def process_output_result(self, args: ProcessOutputResultArgs) -> Any: ...
        def on_violation(self, violation: ProcessorViolation) -> Any: ...

    def __repr__(self) -> str:
        ident = getattr(self, "id", "<no id>")
        return f"<{type(self).__name__} id={ident!r}>"


# --- hook arguments --------------------------------------------------------------


@attrs.define(kw_only=True, slots=True)
class HookArgs:
    """Fields and methods every hook's argument object has.

    Treat it as read-only; it is valid during the call (the per-chunk hook's
    object is reused between chunks, so don't keep it).
    """

    processor_id: str
    """The id of the processor being called (used by ``abort``)."""
    state: dict[str, Any]
    """This processor's state for the whole call, shared by all of its hooks."""
    retry_count: int = 0
    """How many processor-triggered retries this call has made so far."""
    request_context: RequestContext = attrs.field(factory=RequestContext)
    tracing_context: TracingContext | None = None
    writer: ProcessorStreamWriter | None = None
    """Emits custom ``data-*`` chunks to the client (``await writer.custom(...)``)."""
    abort_signal: AbortSignal | None = None
    emitter: Emitter | None = attrs.field(default=None, repr=False)
    """Where ``report_violation`` goes (runtime use)."""

    def abort(
        self,
        reason: str | None = None,
        *,
        retry: bool = False,
        metadata: Any = None,
    ) -> NoReturn:
        """Stop processing: raise ``TripWire``; the run ends with a ``tripwire``
        chunk (or, with ``retry=True`` and budget left, the step is retried with
        ``reason`` as feedback). Never returns."""
        raise TripWire(
            reason if reason else default_abort_reason(self.processor_id),
            retry=retry,
            metadata=metadata,
            processor_id=self.processor_id,
        )

    def report_violation(self, message: str, detail: Any = None) -> None:
        """Report a non-blocking violation: ``on_violation`` is called with it (in
        stream order) and nothing stops."""
        if self.emitter is not None:
            self.emitter.emit_violation(
                ProcessorViolation(
                    processor_id=self.processor_id, message=message, detail=detail
                )
            )


@attrs.define(kw_only=True, slots=True)
class ProcessInputArgs(HookArgs):
    """``process_input``: the new input messages (no system messages)."""

    messages: list[Message]
    system_messages: list[SystemMessage]
    message_list: MessageList


@attrs.define(kw_only=True, slots=True)
class ProcessInputStepArgs(HookArgs):
    """``process_input_step``: the step's configuration as changed by earlier
    processors in the lane (changes chain)."""

    messages: list[Message]
    message_list: MessageList
    step_number: int
    steps: Sequence[StepResult]
    system_messages: list[SystemMessage]
    model: Any
    tools: Mapping[str, Any] | None = None
    tool_choice: Any = None
    active_tools: list[str] | None = None
    provider_options: Mapping[str, Any] | None = None
    model_settings: Mapping[str, Any] | None = None
    structured_output: Any = None


@attrs.define(kw_only=True, slots=True)
class ProcessLLMRequestArgs(HookArgs):
    """``process_llm_request``: the provider-neutral prompt about to be sent."""

    prompt: list[PromptMessage]
    model: Any
    step_number: int
    steps: Sequence[StepResult]


@attrs.define(kw_only=True, slots=True)
class ProcessLLMResponseArgs(HookArgs):
    """``process_llm_response``: the step's chunks as the model produced them
    (before output processors; replayed ones when ``from_cache``), including the
    step's ``step-start`` and a ``finish`` with its reason and usage (SPEC rule
    18c). They are chunk objects; ``procession.chunks.to_wire`` gives the
    compact ``{type, payload}`` JSON a cache stores and a replay accepts."""

    chunks: Sequence[Chunk]
    model: Any
    step_number: int
    steps: Sequence[StepResult]
    from_cache: bool = False
    warnings: Sequence[Any] = ()
    request: Any = None
    raw_response: Any = None


@attrs.define(kw_only=True, slots=True)
class ProcessAPIErrorArgs(HookArgs):
    """``process_api_error``: the model call failed with ``error``."""

    error: BaseException | Any
    messages: list[Message]
    message_list: MessageList
    step_number: int
    steps: Sequence[StepResult]


@attrs.define(kw_only=True, slots=True)
class ProcessOutputStreamArgs(HookArgs):
    """``process_output_stream``: one chunk. The runtime reuses one object per
    stage and only updates ``part`` between calls."""

    part: Chunk
    stream_parts: Sequence[Chunk]
    """Every chunk this processor received in this run so far, including the
    current one (and ones it dropped); a live view, not a copy."""
    message_list: MessageList | None = None


@attrs.define(kw_only=True, slots=True)
class ProcessOutputStepArgs(HookArgs):
    """``process_output_step``: after a model step, before its tools run."""

    messages: list[Message]
    message_list: MessageList
    step_number: int
    system_messages: list[SystemMessage]
    steps: Sequence[StepResult]
    text: str = ""
    finish_reason: str | None = None
    tool_calls: Sequence[ToolCallInfo] | None = None
    usage: Usage | None = None
    provider_metadata: Any = None


@attrs.define(kw_only=True, slots=True)
class ProcessToolResultArgs(HookArgs):
    """``process_tool_result``: one tool returned ``result``. Replace it with
    ``message_list.update_tool_invocation(...)``; assigning ``args.result`` (or
    mutating it) changes nothing the model or the client sees."""

    messages: list[Message]
    message_list: MessageList
    step_number: int
    tool_name: str
    tool_call_id: str
    args: Any
    result: Any
    system_messages: list[SystemMessage]
    steps: Sequence[StepResult]
    provider_executed: bool | None = None


@attrs.define(kw_only=True, slots=True)
class ProcessOutputResultArgs(HookArgs):
    """``process_output_result``: once, with the run's response messages."""

    messages: list[Message]
    message_list: MessageList
    result: OutputResult


# --- hook results ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ProcessInputResult:
    """``process_input`` may return this to change messages and system messages."""

    messages: Sequence[Message | Mapping[str, Any]]
    system_messages: Sequence[SystemMessage | Mapping[str, Any] | str] | None = None


@attrs.frozen(kw_only=True)
class ProcessInputStepResult:
    """``process_input_step`` may return this; ``None`` fields leave the step's
    value unchanged. ``messages`` and ``message_list`` are mutually exclusive."""

    model: Any = None
    tool_choice: Any = None
    active_tools: Sequence[str] | None = None
    tools: Mapping[str, Any] | None = None
    messages: Sequence[Message | Mapping[str, Any]] | None = None
    message_list: MessageList | None = None
    system_messages: Sequence[SystemMessage | Mapping[str, Any] | str] | None = None
    provider_options: Mapping[str, Any] | None = None
    model_settings: Mapping[str, Any] | None = None
    structured_output: Any = None


@attrs.frozen(kw_only=True)
class ProcessLLMRequestResult:
    """``process_llm_request`` may replace the prompt for this call only, or give a
    cached ``response`` (raw chunks) that is replayed instead of calling the model."""

    prompt: Sequence[PromptMessage] | None = None
    response: Sequence[Chunk] | None = None


@attrs.frozen(kw_only=True)
class ProcessAPIErrorResult:
    """``process_api_error`` returns ``retry=True`` to retry the model call."""

    retry: bool = False


ProcessorMessageResult: TypeAlias = (
    "list[Message] | MessageList | ProcessInputResult | None"
)
"""What ``process_output_step``, ``process_tool_result`` and
``process_output_result`` may return: ``None``, ``[]`` or the ``message_list``
itself mean "no change"; a non-empty list replaces the conversation's messages."""


# --- reading results -------------------------------------------------------------

_INPUT_STEP_KEYS: Final = frozenset(attrs.fields_dict(ProcessInputStepResult))
_CAMEL: Final = {
    "toolChoice": "tool_choice",
    "activeTools": "active_tools",
    "messageList": "message_list",
    "systemMessages": "system_messages",
    "providerOptions": "provider_options",
    "modelSettings": "model_settings",
    "structuredOutput": "structured_output",
}


def _dict_keys(
    value: Mapping[str, Any], allowed: frozenset[str], processor_id: str, hook: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _CAMEL.get(key, key)
        if name not in allowed:
            raise ProcessorContractError(
                processor_id,
                hook,
                f"returned a dict with the unknown key {key!r}; expected only "
                f"{sorted(allowed)}",
            )
        out[name] = item
    return out


def read_input_step_result(
    value: object, processor_id: str, *, message_list: MessageList | None = None
) -> ProcessInputStepResult | list[Message] | MessageList | None:
    """Normalise what ``process_input_step`` returned.

    Accepts ``None``, a ``ProcessInputStepResult``, a dict with its fields (snake or
    camelCase), a list of messages, or a ``MessageList``. Anything else is a
    ``ProcessorContractError`` naming the processor. Given the ``message_list``
    the hook received, returning a different ``MessageList`` (bare or as the
    result's ``message_list``) is an error too (seed).
    """
    from ._message_list import MessageList

    hook = "process_input_step"
    if value is None or isinstance(value, ProcessInputStepResult | MessageList):
        result = value
    elif isinstance(value, list):
        return value
    elif isinstance(value, Mapping):
        result = ProcessInputStepResult(
            **_dict_keys(value, _INPUT_STEP_KEYS, processor_id, hook)
        )
    else:
        raise ProcessorContractError(
            processor_id,
            hook,
            f"returned {value!r}; expected None, a ProcessInputStepResult (or a dict "
            f"of its fields), a list of messages, or the message_list",
        )
    if isinstance(result, ProcessInputStepResult):
        _check_step_fields(result, processor_id)
    if (
        isinstance(result, ProcessInputStepResult)
        and result.messages is not None
        and result.message_list is not None
    ):
        raise ProcessorContractError(
            processor_id,
            hook,
            "returned both messages and message_list; return one of them",
        )
    returned = (
        result.message_list if isinstance(result, ProcessInputStepResult) else result
    )
    if (
        message_list is not None
        and returned is not None
        and returned is not message_list
    ):
        raise ProcessorContractError(
            processor_id,
            hook,
            "returned a different MessageList; modify the message_list passed in "
            "and return it (or nothing)",
        )
    return result


_STEP_MAPPINGS: Final = ("tools", "provider_options", "model_settings")
_STEP_SEQUENCES: Final = ("messages", "system_messages", "active_tools")


def is_tool_choice(value: object) -> bool:
    """Whether ``value`` is a tool choice a provider understands: ``"auto"``,
    ``"none"``, ``"required"`` or ``{"type": "tool", "tool_name": name}``
    (``toolName`` as Mastra spells it)."""
    if isinstance(value, str):
        return value in ("auto", "none", "required")
    if isinstance(value, Mapping):
        name = value.get("tool_name", value.get("toolName"))
        return value.get("type") == "tool" and isinstance(name, str)
    return False


def read_llm_response_result(value: object, processor_id: str) -> None:
    """``process_llm_response`` returns nothing (the seed: ``undefined | void``;
    the value is reserved). Anything else is an error, not silently dropped."""
    if value is not None:
        raise ProcessorContractError(
            processor_id,
            "process_llm_response",
            f"returned {value!r}; expected None (it observes the response; to "
            f"change what the client sees use process_output_stream, to change "
            f"the conversation process_output_step)",
        )


def _check_step_fields(result: ProcessInputStepResult, processor_id: str) -> None:
    """The fields a step result changes must have the right shape: a wrong one
    would otherwise fail deep inside the model call, far from its cause."""
    for name in _STEP_MAPPINGS:
        value = getattr(result, name)
        if value is not None and not isinstance(value, Mapping):
            raise ProcessorContractError(
                processor_id,
                "process_input_step",
                f"returned {name}={value!r}; expected a mapping (or None to keep "
                f"the step's)",
            )
    for name in _STEP_SEQUENCES:
        value = getattr(result, name)
        if value is not None and (
            isinstance(value, str | bytes | Mapping) or not isinstance(value, Sequence)
        ):
            raise ProcessorContractError(
                processor_id,
                "process_input_step",
                f"returned {name}={value!r}; expected a list (or None to keep the "
                f"step's)",
            )
    if result.tool_choice is not None and not is_tool_choice(result.tool_choice):
        raise ProcessorContractError(
            processor_id,
            "process_input_step",
            f"returned tool_choice={result.tool_choice!r}; expected 'auto', 'none', "
            f"'required' or {{'type': 'tool', 'tool_name': ...}}",
        )
    if result.active_tools is not None and not all(
        isinstance(n, str) for n in result.active_tools
    ):
        raise ProcessorContractError(
            processor_id,
            "process_input_step",
            f"returned active_tools={result.active_tools!r}; expected tool names",
        )


def read_api_error_result(value: object, processor_id: str) -> bool:
    """Normalise ``process_api_error``'s return value to "retry or not"."""
    if value is None:
        return False
    if isinstance(value, ProcessAPIErrorResult):
        return value.retry
    if isinstance(value, Mapping) and set(value) <= {"retry"}:
        retry = value.get("retry", False)
        if isinstance(retry, bool):
            return retry
    raise ProcessorContractError(
        processor_id,
        "process_api_error",
        f"returned {value!r}; expected None, ProcessAPIErrorResult(retry=...) or "
        f"{{'retry': bool}}",
    )


def read_llm_request_result(
    value: object, processor_id: str
) -> ProcessLLMRequestResult | None:
    """Normalise ``process_llm_request``'s return value."""
    if value is None or isinstance(value, ProcessLLMRequestResult):
        return value
    if isinstance(value, Mapping) and set(value) <= {"prompt", "response"}:
        return ProcessLLMRequestResult(
            prompt=value.get("prompt"), response=value.get("response")
        )
    raise ProcessorContractError(
        processor_id,
        "process_llm_request",
        f"returned {value!r}; expected None or ProcessLLMRequestResult(prompt=..., "
        f"response=...)",
    )


_TOOL_RESULT_HINT: Final = (
    "; to change the tool's result, call "
    "args.message_list.update_tool_invocation(...) and return None"
)


def read_message_result(
    value: object, processor_id: str, hook: str, message_list: MessageList
) -> ProcessInputResult | None:
    """``_read_message_result``; a ``process_tool_result`` that returned something
    else than messages is told how to change a tool's result instead."""
    try:
        return _read_message_result(value, processor_id, hook, message_list)
    except ProcessorContractError as error:
        if hook != "process_tool_result":
            raise
        problem = str(error).split(f"{hook} ", 1)[1]
        raise ProcessorContractError(
            processor_id, hook, problem + _TOOL_RESULT_HINT
        ) from None


def _read_message_result(
    value: object, processor_id: str, hook: str, message_list: MessageList
) -> ProcessInputResult | None:
    """Normalise what a message hook (``process_input``, ``process_output_step``,
    ``process_tool_result``, ``process_output_result``) returned (SPEC §2.11).

    ``None``, ``[]`` and the same ``message_list`` mean "no change" (returns None).
    A non-empty list, or a ``ProcessInputResult`` / ``{"messages", "system_messages"}``
    dict, is returned as a ``ProcessInputResult`` for the caller to reconcile.
    A different ``MessageList`` is an error.
    """
    from ._message_list import MessageList

    if value is None or value is message_list:
        return None
    if isinstance(value, MessageList):
        raise ProcessorContractError(
            processor_id,
            hook,
            "returned a different MessageList; modify the message_list passed in "
            "and return it (or nothing)",
        )
    if isinstance(value, ProcessInputResult):
        return value
    if isinstance(value, list | tuple):
        if hook != "process_input" and not value:
            return None
        return ProcessInputResult(messages=list(value))
    if isinstance(value, Mapping):
        keys = _dict_keys(
            value, frozenset({"messages", "system_messages"}), processor_id, hook
        )
        if "messages" not in keys:
            raise ProcessorContractError(
                processor_id, hook, f"returned {value!r} without 'messages'"
            )
        return ProcessInputResult(**keys)
    raise ProcessorContractError(
        processor_id,
        hook,
        f"returned {value!r}; expected None, a list of messages, "
        f"{{'messages': ..., 'system_messages': ...}}, or the message_list",
    )


def stream_result_error(processor_id: str, result: object) -> ProcessorContractError:
    """The error for a ``process_output_stream`` result that is not a chunk, None
    or a list of chunks."""
    return ProcessorContractError(
        processor_id,
        "process_output_stream",
        f"returned {result!r}; expected a chunk, None (drop) or a list of chunks",
    )


def tripwire_in(group: BaseExceptionGroup[Any]) -> TripWire | None:
    """The ``TripWire`` a hook raised inside an exception group (its own nursery),
    or None.

    An abort wins over plain errors raised beside it (SPEC §2.2: a tripwire is
    never swallowed), but not over cancellation or other ``BaseException``s,
    which must propagate: then None is returned and the caller re-raises.
    """
    tripwires, rest = group.split(TripWire)
    if tripwires is None:
        return None
    if rest is not None and rest.split(Exception)[1] is not None:
        return None  # Cancelled, KeyboardInterrupt...: let it through
    first: BaseException = tripwires
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    assert isinstance(first, TripWire)
    return first


def on_error_outcome(
    policy: OnError, processor_id: str, hook: str, error: Exception, *, passing: str
) -> TripWire | ProcessorError | ProcessorContractError | None:
    """What a hook's plain exception means under its processor's ``on_error``:
    the one home of the failure policy, for every lane.

    Returns None for ``"pass"`` (logged; the caller carries on as if the hook
    changed nothing, which ``passing`` describes for the log), a ``TripWire``
    attributed to the processor for ``"block"``, and for ``"raise"`` the error
    the run fails with: a ``ProcessorError`` whose ``__cause__`` is the
    original, or the ``ProcessorContractError`` itself when the hook broke the
    contract (it already names the processor and the hook).
    """
    if policy == "pass":
        logger.warning(
            "processor %r failed in %s; %s (on_error='pass'): %r",
            processor_id,
            hook,
            passing,
            error,
            exc_info=error,
        )
        return None
    if policy == "block":
        tripwire = TripWire(
            f"{processor_id} failed: {error}", processor_id=processor_id
        )
        tripwire.__cause__ = error
        return tripwire
    if isinstance(error, ProcessorContractError):
        # Already names the processor and the hook: the run fails with it as
        # it is, as it does when a hook between the stream's chunks breaks the
        # contract (never a ProcessorError around it, its message doubled).
        return error
    failed = ProcessorError(processor_id, hook, error)
    failed.__cause__ = error
    return failed


# --- calling hooks ---------------------------------------------------------------

HookFn: TypeAlias = Callable[[Any], Any]


def is_async_hook(fn: HookFn) -> bool:
    """Whether calling ``fn`` returns a coroutine (checked once, at registration)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


async def call_hook(fn: HookFn, is_async: bool, args: HookArgs) -> Any:
    """Call a sync or async hook and return its result. Checkpoints only if the
    hook does. A sync hook that returns an awaitable has it awaited."""
    if is_async:
        return await fn(args)
    result = fn(args)
    if inspect.isawaitable(result):
        return await _await(result)
    return result


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
