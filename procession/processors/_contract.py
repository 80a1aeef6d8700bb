"""The processor contract: the ``Processor`` base class, one argument class per
hook and the result types. How a hook's return value is read is in
``_readers.py``; how a hook is called and what its failure means, in
``_calling.py``.

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

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn, TypeAlias

import attrs

from .._errors import TripWire
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
]

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
