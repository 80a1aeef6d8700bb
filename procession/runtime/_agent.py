"""The agent: ``generate`` / ``stream`` and the agentic loop.

One call is one *run*. Its parts, as actors:

* the **coordinator** (``_Run.drive``, a task) owns the ``MessageList``, the
  retry budget and the step loop; it runs every non-stream hook of every
  processor in the seed's order, calls the model and the tools, and feeds the
  output pipeline with the model's chunks and its own (start, step-start,
  tool-result, step-retry, step-finish, finish);
* the **output pipeline** (``procession.actors``) carries those chunks through
  the output processors to the client, with tripwires and retry requests
  in-band; the coordinator is its driver;
* the **supervisor** is the run's nursery: any terminal event (finish, error,
  tripwire, cancel, the consumer leaving) cancels the model call, running tools
  and every processor task.
"""

from __future__ import annotations

import copy
import logging
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Final, Literal, NoReturn

import attrs
import trio

from .._errors import (
    ConfigurationError,
    ProcessionError,
    ProcessorError,
    ProviderError,
    ToolArgumentsError,
    TripWire,
)
from ..actors import (
    Barrier,
    Deliver,
    EndRun,
    ExecutionMode,
    NewAttempt,
    OutputPipeline,
    ProcessorActor,
    open_output_pipeline,
)
from ..data import (
    AbortChunk,
    DataChunk,
    ErrorChunk,
    ErrorPayload,
    FileChunk,
    FinishChunk,
    FinishPayload,
    Message,
    MessageContent,
    OutputResult,
    ReasoningDeltaChunk,
    ReasoningDetail,
    ReasoningEndChunk,
    ReasoningPart,
    ReasoningSignatureChunk,
    ReasoningStartChunk,
    RedactedReasoningChunk,
    SourceChunk,
    StartChunk,
    StepFinishChunk,
    StepFinishPayload,
    StepOutput,
    StepResult,
    StepResultInfo,
    StepRetryChunk,
    StepRetryPayload,
    StepStartChunk,
    StepStartPart,
    StepStartPayload,
    SystemMessage,
    TextDeltaChunk,
    TextPart,
    ToolCallChunk,
    ToolCallInfo,
    ToolErrorChunk,
    ToolErrorPayload,
    ToolInvocation,
    ToolInvocationPart,
    ToolResultChunk,
    ToolResultInfo,
    ToolResultPayload,
    TripwireChunk,
    TripwireInfo,
    Usage,
    message_text,
    new_message_id,
)
from ..models import (
    LanguageModel,
    ModelFinish,
    ModelRequest,
    ToolDefinition,
    resolve_model,
)
from ..processors import (
    AbortSignal,
    MessageList,
    ProcessorSet,
    ProcessorStreamWriter,
    ProcessorViolation,
    RequestContext,
    TracingContext,
    register_processors,
)
from ..processors._contract import (
    HookArgs,
    ProcessAPIErrorArgs,
    ProcessInputArgs,
    ProcessInputStepArgs,
    ProcessInputStepResult,
    ProcessLLMRequestArgs,
    ProcessLLMResponseArgs,
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
    ProcessToolResultArgs,
    read_api_error_result,
    read_input_step_result,
    read_llm_request_result,
    read_message_result,
    tripwire_in,
)
from .tools import Tool, ToolContext, ToolSet, execute_tool, parse_arguments

__all__ = ["Agent", "AgentResult", "AgentStream", "RETRY_FEEDBACK_TAG"]

logger = logging.getLogger("procession")

RETRY_FEEDBACK_TAG: Final = "processor-retry-feedback"
"""The tag of the system message that carries a retry's feedback (SPEC §2.5)."""
PREPARE_STEP_ID: Final = "prepare-step"
_DEFAULT_BUDGET_WITH_ERROR_PROCESSORS: Final = 10  # the seed's number (SPEC §2.3)
_UNSET: Final = object()

ProcessorList = Sequence[object] | Callable[[RequestContext], Sequence[object]]


def _feedback(reason: str) -> str:
    return (
        f"Your previous response was not accepted: {reason}. Please try again with "
        f"the feedback in mind."
    )


def _add_usage(total: Usage | None, more: Usage | None) -> Usage | None:
    if more is None:
        return total
    if total is None:
        return more

    def plus(a: int | None, b: int | None) -> int | None:
        return None if a is None and b is None else (a or 0) + (b or 0)

    return Usage(
        input_tokens=plus(total.input_tokens, more.input_tokens),
        output_tokens=plus(total.output_tokens, more.output_tokens),
        total_tokens=plus(total.total_tokens, more.total_tokens),
        reasoning_tokens=plus(total.reasoning_tokens, more.reasoning_tokens),
        cached_input_tokens=plus(total.cached_input_tokens, more.cached_input_tokens),
    )


# --- the result ----------------------------------------------------------------


@attrs.frozen(kw_only=True)
class AgentResult:
    """What a run produced. ``generate()`` returns it; so does
    ``await stream.result()``. A failed or blocked run returns one too (it does
    not raise): look at ``finish_reason``, ``tripwire`` and ``error``."""

    run_id: str
    text: str
    """The text the client saw (all accepted steps), or, when
    ``process_output_result`` changed the response messages, their text."""
    finish_reason: str
    """``stop``, ``length``, ``tool-calls``, ``content-filter``, ``other`` (a
    tripwire), ``error`` or ``aborted`` (cancelled)."""
    tripwire: TripwireInfo | None
    usage: Usage
    """Tokens of every model call of the run, retried ones included."""
    steps: tuple[StepResult, ...]
    """Every step, including rejected attempts (their ``tripwire`` set, text
    empty)."""
    response_messages: tuple[Message, ...]
    error: BaseException | None
    custom_chunks: tuple[DataChunk, ...]
    """Every ``data-*`` chunk the client received (``writer.custom`` output and
    tool data)."""
    retry_count: int
    model_chunks_after_end: int
    """Model chunks read after the run's terminal event (a tripwire, an error, a
    cancel): what the provider streamed that nobody used."""
    message_list: MessageList = attrs.field(eq=False, repr=False)


# --- step bookkeeping ----------------------------------------------------------


@attrs.define
class _StepView:
    """What the client received during one attempt (filled at the client end)."""

    text: list[str] = attrs.Factory(list)
    reasoning: dict[str, list[str]] = attrs.Factory(dict)
    signatures: dict[str, str] = attrs.Factory(dict)
    # Reasoning blocks in arrival order: ("text", block id) or ("redacted", data),
    # so they go back to the provider in the order it sent them.
    blocks: list[tuple[str, str]] = attrs.Factory(list)
    tool_calls: list[ToolCallChunk] = attrs.Factory(list)
    sources: list[Any] = attrs.Factory(list)
    files: list[Any] = attrs.Factory(list)
    committed: bool = False
    """Set once a step kept this attempt (its text is in the result)."""
    committed_len: int = 0
    """How many text pieces the kept step holds."""
    message: Message | None = None
    """The response message built from this attempt."""

    def _block(self, block_id: str) -> list[str]:
        if block_id not in self.reasoning:
            self.reasoning[block_id] = []
            self.blocks.append(("text", block_id))
        return self.reasoning[block_id]

    def observe(self, chunk: Any) -> None:
        cls = chunk.__class__
        if cls is TextDeltaChunk:
            self.text.append(chunk.payload.text)
        elif cls is ReasoningDeltaChunk:
            self._block(chunk.payload.id).append(chunk.payload.text)
        elif cls is ReasoningStartChunk:
            self._block(chunk.payload.id)
        elif cls is ReasoningEndChunk or cls is ReasoningSignatureChunk:
            # A block may carry a signature and no visible text (omitted
            # thinking); Anthropic still needs the signature back.
            self._block(chunk.payload.id)
            if chunk.payload.signature:
                self.signatures[chunk.payload.id] = chunk.payload.signature
        elif cls is RedactedReasoningChunk:
            self.blocks.append(("redacted", chunk.payload.data))
        elif cls is ToolCallChunk:
            self.tool_calls.append(chunk)
        elif cls is SourceChunk:
            self.sources.append(chunk.payload)
        elif cls is FileChunk:
            self.files.append(chunk.payload)

    @property
    def text_value(self) -> str:
        return "".join(self.text)

    @property
    def reasoning_value(self) -> str:
        return "".join("".join(v) for v in self.reasoning.values())

    def build_message(self, model_label: str) -> Message:
        """The assistant message this attempt produced."""
        parts: list[Any] = [StepStartPart(model=model_label)]
        details = [
            ReasoningDetail(
                type="text",
                text="".join(self.reasoning[key]),
                signature=self.signatures.get(key),
            )
            if kind == "text"
            else ReasoningDetail(type="redacted", data=key)
            for kind, key in self.blocks
        ]
        if details:
            parts.append(ReasoningPart(reasoning=self.reasoning_value, details=details))
        if self.text:
            parts.append(TextPart(text=self.text_value))
        for call in self.tool_calls:
            parts.append(
                ToolInvocationPart(
                    tool_invocation=ToolInvocation(
                        state="call",
                        tool_call_id=call.payload.tool_call_id,
                        tool_name=call.payload.tool_name,
                        args=call.payload.args,
                    ),
                    provider_executed=call.payload.provider_executed,
                )
            )
        return Message(role="assistant", content=MessageContent(parts=parts))


@attrs.define
class _StepConfig:
    """The step's configuration as ``process_input_step`` processors chain it."""

    model: LanguageModel
    tools: ToolSet
    tool_choice: Any
    active_tools: list[str] | None
    provider_options: Mapping[str, Any]
    model_settings: Mapping[str, Any]
    structured_output: Any


class _Retry(Exception):
    """Internal: the current attempt is rejected; retry it. ``feedback`` says
    whether the model is told why (a processor rejected its answer) or not (the
    API call failed: there was no answer to reject)."""

    def __init__(self, tripwire: TripWire, *, feedback: bool = True) -> None:
        self.tripwire = tripwire
        self.feedback = feedback


class _Terminal(Exception):
    """Internal: the run ends (a tripwire, or an error)."""

    def __init__(
        self, *, tripwire: TripWire | None = None, error: BaseException | None = None
    ) -> None:
        self.tripwire = tripwire
        self.error = error


class _PrepareStep:
    """The ``prepare_step`` call option, run as processor ``prepare-step`` after
    the input lane (seed)."""

    id = PREPARE_STEP_ID

    def __init__(self, fn: Callable[[ProcessInputStepArgs], Any]) -> None:
        self._fn = fn

    async def process_input_step(self, args: ProcessInputStepArgs) -> Any:
        result = self._fn(args)
        if hasattr(result, "__await__"):
            result = await result
        return result


class _HookEmitter:
    """Side outputs of hooks that run in the coordinator: custom chunks wait to be
    sent (in order) once the hook returns; violations are kept likewise."""

    def __init__(self) -> None:
        self.custom: list[Any] = []
        self.violations: list[ProcessorViolation] = []

    def emit_custom(self, processor_id: str, chunk: Any) -> None:
        self.custom.append(chunk)

    def emit_violation(self, violation: ProcessorViolation) -> None:
        self.violations.append(violation)


# --- the run (coordinator) -----------------------------------------------------


class _Run:
    """One call's coordinator and the output pipeline's driver."""

    def __init__(
        self,
        agent: Agent,
        *,
        message_list: MessageList,
        processors: ProcessorSet,
        prepare_step: _PrepareStep | None,
        budget: int | None,
        max_steps: int,
        request_context: RequestContext,
        model: LanguageModel,
        tools: ToolSet,
        tool_choice: Any,
        active_tools: list[str] | None,
        model_settings: Mapping[str, Any],
        provider_options: Mapping[str, Any],
        mode: ExecutionMode,
        run_id: str,
    ) -> None:
        self.agent = agent
        self.message_list = message_list
        self.processors = processors
        self.actors: dict[str, ProcessorActor] = {
            spec.id: ProcessorActor(spec) for spec in processors.all
        }
        self.prepare_step = prepare_step
        self.prepare_actor = (
            ProcessorActor(register_processors(input=[prepare_step]).input[0])
            if prepare_step is not None
            else None
        )
        self.budget = budget
        self.max_steps = max_steps
        self.request_context = request_context
        self.model = model
        self.tools = tools
        self.tool_choice = tool_choice
        self.active_tools = active_tools
        self.model_settings = model_settings
        self.provider_options = provider_options
        self.mode = mode
        self.run_id = run_id
        self.abort_signal = AbortSignal()
        self.tracing_context = TracingContext(trace_id=run_id)
        self.retry_count = 0
        self.steps: list[StepResult] = []
        self.usage: Usage | None = None
        self.view = _StepView()
        self.all_text: list[str] = []
        self.custom_chunks: list[DataChunk] = []
        self.feedback: str | None = None
        self.stream_retry: TripWire | None = None
        self.model_scope: trio.CancelScope | None = None
        self.ended = False
        self.model_chunks_after_end = 0
        self.outcome_tripwire: TripWire | None = None
        self.outcome_error: BaseException | None = None
        self.finish_reason = "unknown"
        self.output_result_tripped = False
        self.final_text: str | None = None
        self.current_step: int | None = None  # the attempt in flight, if any
        self.run_scope: trio.CancelScope | None = None
        self.completed = False  # the coordinator reached a terminal on its own
        self.accepting_retries = False  # inside an attempt, until it is settled
        self.settled = trio.Event()
        self.result: AgentResult | None = None

    # --- retry budget -------------------------------------------------------

    def _may_retry(self) -> bool:
        return self.budget is not None and self.retry_count < self.budget

    # --- PipelineDriver ----------------------------------------------------------

    async def on_retry_request(self, tripwire: TripWire) -> bool:
        """A stream processor asked for a retry (at the client end, in position)."""
        if not self.accepting_retries:
            logger.warning(
                "processor %r requested a retry after the step's chunks were "
                "settled (e.g. on the finish chunk); treating it as an abort",
                tripwire.processor_id,
            )
            return False
        if not self._may_retry():
            logger.warning(
                "processor %r requested a retry but the retry budget (%s) is %s; "
                "treating it as an abort",
                tripwire.processor_id,
                self.budget,
                "not set" if self.budget is None else "used up",
            )
            return False
        self.stream_retry = tripwire
        if self.model_scope is not None:
            self.model_scope.cancel()  # stop reading a response that is rejected
        return True

    def on_attempt(self, marker: NewAttempt) -> None:
        """A NewAttempt reached the client end: what is delivered from now on
        belongs to the attempt whose view it carries."""
        if isinstance(marker.context, _StepView):
            self.view = marker.context

    def on_terminal(self, outcome: Any) -> None:
        """The stream's terminal item reached the client end: stop the model and
        everything else now (chunks read after this are counted, not sent)."""
        self.ended = True
        if self.run_scope is not None:
            self.run_scope.cancel()

    async def on_error_chunk(self, chunk: ErrorChunk) -> bool:
        # The coordinator decides about model errors before it sends anything;
        # an error chunk it sends is terminal.
        return False

    def observe(self, chunk: Any) -> None:
        """Called at the client end for every chunk delivered."""
        self.view.observe(chunk)
        if chunk.__class__ is DataChunk:
            self.custom_chunks.append(chunk)

    # --- calling hooks ------------------------------------------------------

    def _base_args(
        self, actor: ProcessorActor, emitter: _HookEmitter
    ) -> dict[str, Any]:
        return {
            "processor_id": actor.id,
            "state": actor.state,
            "retry_count": self.retry_count,
            "request_context": self.request_context,
            "tracing_context": self.tracing_context,
            "abort_signal": self.abort_signal,
            "emitter": emitter,
            "writer": ProcessorStreamWriter(emitter, actor.id),
        }

    async def _call(
        self,
        send: trio.MemorySendChannel[Any],
        actor: ProcessorActor,
        hook: str,
        make_args: Callable[[dict[str, Any]], HookArgs],
    ) -> Any:
        """Run one non-stream hook with the processor's failure policy; flush its
        custom chunks and violations in order. Raises ``TripWire`` (attributed) or
        ``_Terminal`` (the hook failed and its policy is "raise")."""
        # The run may have ended at the client end (a stream tripwire) while we
        # ran synchronously: no hook runs after that.
        await trio.lowlevel.checkpoint_if_cancelled()
        emitter = _HookEmitter()
        args = make_args(self._base_args(actor, emitter))
        try:
            try:
                result = await actor.call(hook, args)
            except BaseExceptionGroup as group:
                tripwire = tripwire_in(group)
                if tripwire is None:
                    raise
                raise tripwire from None
        except TripWire as tripwire:
            if tripwire.processor_id is None:
                tripwire.processor_id = actor.id
            await self._flush(send, actor, emitter)
            raise
        except Exception as exc:
            await self._flush(send, actor, emitter)
            policy = actor.spec.on_error
            if policy == "pass":
                logger.warning(
                    "processor %r failed in %s; continuing as if it returned "
                    "nothing (on_error='pass'): %r",
                    actor.id,
                    hook,
                    exc,
                    exc_info=exc,
                )
                return None
            if policy == "block":
                raise TripWire(
                    f"{actor.id} failed: {exc}", processor_id=actor.id
                ) from exc
            error = ProcessorError(actor.id, hook, exc)
            error.__cause__ = exc  # the documented place of the original
            raise _Terminal(error=error) from exc
        await self._flush(send, actor, emitter)
        return result

    async def _flush(
        self,
        send: trio.MemorySendChannel[Any],
        actor: ProcessorActor,
        emitter: _HookEmitter,
    ) -> None:
        for violation in emitter.violations:
            await actor.notify_violation(violation)
        for chunk in emitter.custom:
            await send.send(Deliver(chunk))

    def _lane(self, hook: str, *lanes: str) -> list[ProcessorActor]:
        """The actors of ``lanes`` (in order) with ``hook``, each instance once."""
        seen: set[str] = set()
        out: list[ProcessorActor] = []
        for lane in lanes:
            for spec in getattr(self.processors, lane):
                if hook in spec.hooks and spec.id not in seen:
                    seen.add(spec.id)
                    out.append(self.actors[spec.id])
        return out

    # --- the loop ----------------------------------------------------------------

    async def drive(self, send: trio.MemorySendChannel[Any]) -> None:
        """The run, start to finish. Ends by closing ``send``."""
        with send:
            try:
                await self._input_phase(send)
                await send.send(StartChunk(run_id=self.run_id))
                await self._steps(send)
                # Mastra 1I.67: process_output_result runs once the final finish
                # chunk has been through the output processors (a processor may
                # flush held-back text on it).
                await send.send(
                    FinishChunk(
                        payload=FinishPayload(
                            step_result=StepResultInfo(reason=self.finish_reason),
                            output=StepOutput(usage=self.usage),
                        ),
                        run_id=self.run_id,
                    )
                )
                await self._settle_stream(send)
                self._late_text()
                await self._output_result(send)
                self.completed = True
            except _Terminal as end:
                await self._end(send, end)
                self.completed = True
            except ProcessionError as exc:
                # A processor broke the contract (wrong return type, a different
                # MessageList, a bad model id...): the run fails with that error.
                await self._end(send, _Terminal(error=exc))
                self.completed = True
            except Exception as exc:
                # Anything else is a bug (ours or a processor's that slipped past
                # the contract checks): the run fails with it rather than tearing
                # the caller's block down with an exception group.
                logger.exception("run %s failed unexpectedly", self.run_id)
                await self._end(send, _Terminal(error=exc))
                self.completed = True

    async def _end(self, send: trio.MemorySendChannel[Any], end: _Terminal) -> None:
        # An earlier terminal at the client end wins; this one is moot.
        await trio.lowlevel.checkpoint_if_cancelled()
        self.ended = True
        if end.tripwire is not None:
            tripwire = end.tripwire
            self.outcome_tripwire = tripwire
            self.finish_reason = "other"
            actor = self.actors.get(tripwire.processor_id or "")
            if actor is None and self.prepare_actor is not None:
                actor = self.prepare_actor
            # on_violation is awaited at the client end, and only if this
            # tripwire wins there (an earlier one in the stream may have).
            await send.send(EndRun(tripwire, actor))
        else:
            self.outcome_error = end.error
            self.finish_reason = "error"
            await send.send(
                ErrorChunk(payload=ErrorPayload(error=end.error), run_id=self.run_id)
            )

    async def _input_phase(self, send: trio.MemorySendChannel[Any]) -> None:
        """``process_input`` once (re-run from the original input on a retry)."""
        actors = self._lane("process_input", "input")
        if not actors:
            return
        original = copy.deepcopy(self.message_list.get.input.db())
        while True:
            try:
                for actor in actors:
                    ml = self.message_list

                    def make(base: dict[str, Any], ml: MessageList = ml) -> HookArgs:
                        return ProcessInputArgs(
                            messages=ml.get.input.db(),
                            system_messages=ml.get_system_messages(),
                            message_list=ml,
                            **base,
                        )

                    result = await self._call(send, actor, "process_input", make)
                    self._apply_messages(result, actor.id, "process_input", "input")
                return
            except TripWire as tripwire:
                if tripwire.retry and self._may_retry():
                    # SPEC §2.4: re-run the input phase from the original input;
                    # the feedback is shown to the processors now and to the
                    # model at step 0.
                    self.retry_count += 1
                    self.message_list.remove_by_ids(
                        [m.id for m in self.message_list.get.input.db()]
                    )
                    self.message_list.add(copy.deepcopy(original), "input")
                    self.feedback = _feedback(tripwire.reason)
                    self.message_list.clear_system_messages(RETRY_FEEDBACK_TAG)
                    self.message_list.add_system(self.feedback, tag=RETRY_FEEDBACK_TAG)
                    continue
                raise _Terminal(tripwire=tripwire) from None

    def _apply_messages(
        self,
        result: Any,
        processor_id: str,
        hook: str,
        scope: Literal["input", "all", "response"],
    ) -> bool:
        normalised = read_message_result(result, processor_id, hook, self.message_list)
        if normalised is None:
            return False
        self.message_list.reconcile(
            normalised.messages,
            scope=scope,
            default_source="response" if scope == "response" else "input",
            system_messages=normalised.system_messages,
            processor_id=processor_id,
            hook=hook,
        )
        return True

    async def _steps(self, send: trio.MemorySendChannel[Any]) -> None:
        system_snapshot = self.message_list.snapshot_system_messages()
        # The input phase's feedback (if it retried) is not part of the snapshot.
        step_retry: StepRetryChunk | None = None
        while self._accepted_steps() < self.max_steps:
            step_number = self._accepted_steps()
            self.message_list.restore_system_messages(system_snapshot)
            self.message_list.clear_system_messages(RETRY_FEEDBACK_TAG)
            if self.feedback is not None:
                self.message_list.add_system(self.feedback, tag=RETRY_FEEDBACK_TAG)
            # The client end switches to this view when the NewAttempt reaches it
            # (on_attempt), so chunks are counted to the attempt they belong to.
            view = _StepView()
            self.stream_retry = None
            self.accepting_retries = True
            # A retried attempt is discarded first; its step-retry chunk belongs to
            # the new attempt (it would be dropped with the old one otherwise).
            await send.send(
                NewAttempt(
                    self.retry_count, discard=step_retry is not None, context=view
                )
            )
            if step_retry is not None:
                await send.send(step_retry)
                step_retry = None
            try:
                more = await self._attempt(send, step_number, view)
            except _Retry as retry:
                self._record_rejected(step_number, retry.tripwire)
                self.retry_count += 1
                if retry.feedback:
                    self.feedback = _feedback(retry.tripwire.reason)
                step_retry = StepRetryChunk(
                    payload=StepRetryPayload(
                        step_number=step_number,
                        reason=retry.tripwire.reason,
                        retry_count=self.retry_count,
                        processor_id=retry.tripwire.processor_id,
                    ),
                    run_id=self.run_id,
                )
                continue
            # SPEC §2.5: the feedback goes once a step succeeds.
            self.feedback = None
            self.message_list.clear_system_messages(RETRY_FEEDBACK_TAG)
            # Every chunk of the step has been decided (the last barrier): a
            # retry asked for on a later chunk (finish, say) cannot be granted.
            self.accepting_retries = False
            if not more:
                return

    def _accepted_steps(self) -> int:
        return sum(1 for s in self.steps if s.finish_reason != "retry")

    def _record_rejected(self, step_number: int, tripwire: TripWire) -> None:
        self.steps.append(
            StepResult(
                step_number=step_number,
                finish_reason="retry",
                tripwire=TripwireInfo(
                    reason=tripwire.reason,
                    retry=True,
                    metadata=tripwire.metadata,
                    processor_id=tripwire.processor_id,
                ),
            )
        )

    async def _attempt(
        self, send: trio.MemorySendChannel[Any], step_number: int, view: _StepView
    ) -> bool:
        """One attempt at step ``step_number``. Returns whether another step
        follows. Raises ``_Retry`` or ``_Terminal``.

        Chunk order: step-start, the model's chunks, step-finish; then (once the
        client end has decided everything before) the step's hooks, its tools
        and their tool-result chunks.
        """
        self.current_step = step_number
        retries_before = self.retry_count
        config = await self._input_step(send, step_number)
        if self.retry_count != retries_before:
            # The input chain retried: hooks downstream see the new count.
            await send.send(NewAttempt(self.retry_count, discard=False, context=view))
        prompt = self.message_list.get.all.prompt()
        prompt, cached = await self._llm_request(send, step_number, config, prompt)
        response_id = new_message_id()
        await send.send(
            StepStartChunk(
                payload=StepStartPayload(message_id=response_id), run_id=self.run_id
            )
        )
        raw, finish = await self._model_call(send, step_number, config, prompt, cached)
        # Tokens are spent whether or not the attempt is kept.
        self.usage = _add_usage(self.usage, finish.usage)
        finish_reason = finish.finish_reason
        called_tools = any(c.__class__ is ToolCallChunk for c in raw)
        await send.send(
            StepFinishChunk(
                payload=StepFinishPayload(
                    step_result=StepResultInfo(
                        reason=finish_reason, is_continued=called_tools or None
                    ),
                    output=StepOutput(usage=finish.usage),
                    message_id=response_id,
                ),
                run_id=self.run_id,
            )
        )
        # Everything of this attempt, step-finish included, has reached the client
        # end: in-band signals raised on its chunks have been decided, and the
        # view holds what the client saw (a processor may flush on step-finish).
        await self._settle_stream(send)
        await self._llm_response(send, step_number, config, raw, finish, cached)

        self.message_list.mark_response_message_boundary()
        message = view.build_message(f"{config.model.provider}/{config.model.model_id}")
        message.id = response_id
        view.message = message
        self.message_list.add(message, "response")
        tool_calls = [
            ToolCallInfo(
                tool_call_id=c.payload.tool_call_id,
                tool_name=c.payload.tool_name,
                args=c.payload.args,
                provider_executed=c.payload.provider_executed,
            )
            for c in view.tool_calls
        ]
        current = StepResult(
            step_number=step_number,
            text=view.text_value,
            reasoning=view.reasoning_value,
            tool_calls=tuple(tool_calls),
            finish_reason=finish_reason,
            usage=finish.usage,
            warnings=tuple(finish.warnings),
            provider_metadata=finish.provider_metadata,
            sources=tuple(view.sources),
            files=tuple(view.files),
            request=finish.request,
            response=finish.raw_response,
        )
        try:
            await self._output_step(send, step_number, current, tool_calls)
            tool_results = await self._run_tools(send, step_number, config, tool_calls)
            if tool_calls:
                # A stream processor may ask for a retry on a tool-result chunk.
                await self._settle_stream(send)
        except _Retry:
            self.message_list.remove_by_ids([response_id])
            raise
        except TripWire as tripwire:
            self.message_list.remove_by_ids([response_id])
            if tripwire.retry and self._may_retry():
                raise _Retry(tripwire) from None
            self.steps.append(
                attrs.evolve(
                    current,
                    text="",
                    finish_reason="tripwire",
                    tripwire=TripwireInfo(
                        reason=tripwire.reason,
                        retry=tripwire.retry,
                        metadata=tripwire.metadata,
                        processor_id=tripwire.processor_id,
                    ),
                )
            )
            raise _Terminal(tripwire=tripwire) from None
        self.steps.append(attrs.evolve(current, tool_results=tuple(tool_results)))
        self.all_text.append(view.text_value)
        view.committed = True
        view.committed_len = len(view.text)
        self.finish_reason = finish_reason
        return bool(tool_calls) and finish_reason != "length"

    def _late_text(self) -> None:
        """Text the client received after the last step was kept (a processor
        that flushed on ``finish``) belongs to that step: add it."""
        view = self.view
        if not view.committed or len(view.text) <= view.committed_len:
            return
        late = "".join(view.text[view.committed_len :])
        view.committed_len = len(view.text)
        self.all_text.append(late)
        if view.message is not None:
            view.message.content.parts.append(TextPart(text=late))
        for index in range(len(self.steps) - 1, -1, -1):
            if self.steps[index].finish_reason != "retry":
                step = self.steps[index]
                self.steps[index] = attrs.evolve(step, text=step.text + late)
                break

    async def _settle_stream(self, send: trio.MemorySendChannel[Any]) -> None:
        """Wait until everything sent so far has reached the client end; then
        act on a retry a stream processor asked for meanwhile."""
        barrier = Barrier()
        await send.send(barrier)
        await barrier.wait()
        if self.stream_retry is not None:
            raise _Retry(self.stream_retry)

    async def _input_step(
        self, send: trio.MemorySendChannel[Any], step_number: int
    ) -> _StepConfig:
        """Chain ``process_input_step`` over the input lane, then ``prepare_step``.
        A retry re-runs the chain from the step's starting configuration and
        system messages, with the feedback (SPEC §2.4); in-place edits of the
        conversation made by the rejected pass stay (they are the conversation).
        """
        actors = self._lane("process_input_step", "input")
        if self.prepare_actor is not None:
            actors.append(self.prepare_actor)
        system = self.message_list.snapshot_system_messages()
        while True:
            config = _StepConfig(
                model=self.model,
                tools=self.tools,
                tool_choice=self.tool_choice,
                active_tools=self.active_tools,
                provider_options=self.provider_options,
                model_settings=self.model_settings,
                structured_output=None,
            )
            try:
                for actor in actors:
                    await self._one_input_step(send, actor, step_number, config)
                return config
            except TripWire as tripwire:
                if tripwire.retry and self._may_retry():
                    self.retry_count += 1
                    self.feedback = _feedback(tripwire.reason)
                    self.message_list.restore_system_messages(system)
                    self.message_list.clear_system_messages(RETRY_FEEDBACK_TAG)
                    self.message_list.add_system(self.feedback, tag=RETRY_FEEDBACK_TAG)
                    continue
                raise _Terminal(tripwire=tripwire) from None

    async def _one_input_step(
        self,
        send: trio.MemorySendChannel[Any],
        actor: ProcessorActor,
        step_number: int,
        config: _StepConfig,
    ) -> None:
        ml = self.message_list

        def make(base: dict[str, Any]) -> HookArgs:
            return ProcessInputStepArgs(
                messages=ml.get.all.db(),
                message_list=ml,
                step_number=step_number,
                steps=tuple(self.steps),
                system_messages=ml.get_all_system_messages(),
                model=config.model,
                tools=dict(config.tools),
                tool_choice=config.tool_choice,
                active_tools=config.active_tools,
                provider_options=config.provider_options,
                model_settings=config.model_settings,
                structured_output=config.structured_output,
                **base,
            )

        raw = await self._call(send, actor, "process_input_step", make)
        result = read_input_step_result(raw, actor.id)
        if result is None or isinstance(result, MessageList):
            if isinstance(result, MessageList) and result is not ml:
                read_message_result(result, actor.id, "process_input_step", ml)
            return
        if isinstance(result, list):
            self._apply_messages(result, actor.id, "process_input_step", "all")
            return
        assert isinstance(result, ProcessInputStepResult)
        if result.messages is not None:
            self._apply_messages(
                list(result.messages), actor.id, "process_input_step", "all"
            )
        if result.message_list is not None and result.message_list is not ml:
            read_message_result(result.message_list, actor.id, "process_input_step", ml)
        if result.system_messages is not None:
            # args.system_messages showed every system message, tagged ones
            # (e.g. retry feedback) included; those keep their tags and are not
            # added again from the returned list.
            tagged = ml.get_tagged_system_messages()
            kept = {m.content for bucket in tagged.values() for m in bucket}
            ml.replace_all_system_messages(
                [m for m in result.system_messages if _system_text(m) not in kept]
            )
            for tag, bucket in tagged.items():
                ml.add_system(bucket, tag=tag)
        if result.model is not None:
            config.model = self.agent.model_for(result.model)
        if result.tools is not None:
            config.tools = ToolSet.of(result.tools)
        if result.tool_choice is not None:
            config.tool_choice = result.tool_choice
        if result.active_tools is not None:
            config.active_tools = list(result.active_tools)
        if result.provider_options is not None:
            config.provider_options = result.provider_options
        if result.model_settings is not None:
            config.model_settings = result.model_settings
        if result.structured_output is not None:
            config.structured_output = result.structured_output

    async def _llm_request(
        self,
        send: trio.MemorySendChannel[Any],
        step_number: int,
        config: _StepConfig,
        prompt: list[Any],
    ) -> tuple[list[Any], Sequence[Any] | None]:
        cached: Sequence[Any] | None = None
        for actor in self._lane("process_llm_request", "input"):
            current = prompt

            def make(base: dict[str, Any], current: list[Any] = current) -> HookArgs:
                return ProcessLLMRequestArgs(
                    prompt=current,
                    model=config.model,
                    step_number=step_number,
                    steps=tuple(self.steps),
                    **base,
                )

            try:
                raw = await self._call(send, actor, "process_llm_request", make)
            except TripWire as tripwire:
                raise _Terminal(tripwire=tripwire) from None
            result = read_llm_request_result(raw, actor.id)
            if result is None:
                continue
            if result.prompt is not None:
                prompt = list(result.prompt)
            if result.response is not None and cached is None:
                cached = list(result.response)  # the first cached response wins
        return prompt, cached

    def _request(self, config: _StepConfig, prompt: list[Any]) -> ModelRequest:
        tools: list[ToolDefinition] = []
        if config.tool_choice != "none":
            tools = config.tools.definitions(config.active_tools)
        return ModelRequest(
            prompt=prompt,
            tools=tools,
            tool_choice=config.tool_choice,
            settings=dict(config.model_settings),
            provider_options=dict(config.provider_options),
            structured_output=config.structured_output,
        )

    async def _model_call(
        self,
        send: trio.MemorySendChannel[Any],
        step_number: int,
        config: _StepConfig,
        prompt: list[Any],
        cached: Sequence[Any] | None,
    ) -> tuple[list[Any], ModelFinish]:
        """Stream the model (or the cached replay) into the pipeline. API errors go
        to the error processors; a retry raises ``_Retry``."""
        raw: list[Any] = []
        if cached is not None:
            for chunk in cached:
                raw.append(chunk)
                await send.send(self._stamp(chunk))
            return raw, ModelFinish(finish_reason=_replay_reason(cached))
        request = self._request(config, prompt)
        try:
            with trio.CancelScope() as scope:
                self.model_scope = scope
                async with config.model.stream(request) as response:
                    async for chunk in response:
                        if chunk.__class__ is ErrorChunk:
                            # A model that reports a failure as a chunk rather
                            # than raising: the same path as a raised error.
                            raise _error_from_chunk(chunk)
                        raw.append(chunk)
                        if self.ended:
                            self.model_chunks_after_end += 1
                            continue
                        await send.send(self._stamp(chunk))
                        if self.stream_retry is not None:
                            break
                    finish = response.finish or ModelFinish(
                        finish_reason="tool-calls"
                        if any(isinstance(c, ToolCallChunk) for c in raw)
                        else "stop"
                    )
            self.model_scope = None
            if scope.cancelled_caught:
                return raw, ModelFinish(finish_reason="other")
            return raw, finish
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise  # the client end is gone: the run is being torn down
        except ProcessionError as exc:
            self.model_scope = None
            if not isinstance(exc, ProviderError):
                # Not an API failure (a missing key, a malformed request...):
                # error processors are not asked and nothing is retried.
                raise _Terminal(error=exc) from exc
            await self._api_error(send, step_number, exc)
        except Exception as exc:
            self.model_scope = None
            await self._api_error(send, step_number, exc)
            raise AssertionError("unreachable") from exc  # _api_error always raises

    def _stamp(self, chunk: Any) -> Any:
        if (
            chunk.__class__ is DataChunk
            or getattr(chunk, "run_id", None) == self.run_id
        ):
            return chunk
        return attrs.evolve(chunk, run_id=self.run_id)

    async def _api_error(
        self, send: trio.MemorySendChannel[Any], step_number: int, error: Exception
    ) -> NoReturn:
        """The model call failed: let what was sent settle, then ask the error
        processors (input, output, then error lane; the first ``retry`` wins)."""
        await self._settle_stream(send)
        ml = self.message_list
        retry_by: str | None = None
        for actor in self._lane("process_api_error", "input", "output", "error"):

            def make(base: dict[str, Any]) -> HookArgs:
                return ProcessAPIErrorArgs(
                    error=error,
                    messages=ml.get.all.db(),
                    message_list=ml,
                    step_number=step_number,
                    steps=tuple(self.steps),
                    **base,
                )

            try:
                raw = await self._call(send, actor, "process_api_error", make)
            except TripWire as tripwire:
                raise _Terminal(tripwire=tripwire) from None
            except _Terminal as failed:
                # SPEC §1E.29: a failing error processor is logged and skipped.
                logger.warning(
                    "error processor %r failed; trying the next one: %r",
                    actor.id,
                    failed.error,
                )
                continue
            if read_api_error_result(raw, actor.id):
                retry_by = actor.id  # the first {retry: True} wins (Mastra 1E.28)
                break
        if retry_by is not None and self._may_retry():
            raise _Retry(
                TripWire(f"API error: {error}", retry=True, processor_id=retry_by),
                feedback=False,
            )
        raise _Terminal(error=error)

    async def _llm_response(
        self,
        send: trio.MemorySendChannel[Any],
        step_number: int,
        config: _StepConfig,
        raw: list[Any],
        finish: ModelFinish,
        cached: Sequence[Any] | None,
    ) -> None:
        for actor in self._lane("process_llm_response", "input"):

            def make(base: dict[str, Any]) -> HookArgs:
                return ProcessLLMResponseArgs(
                    chunks=tuple(raw),
                    model=config.model,
                    step_number=step_number,
                    steps=tuple(self.steps),
                    from_cache=cached is not None,
                    warnings=tuple(finish.warnings),
                    request=finish.request,
                    raw_response=finish.raw_response,
                    **base,
                )

            try:
                await self._call(send, actor, "process_llm_response", make)
            except TripWire as tripwire:
                raise _Terminal(tripwire=tripwire) from None

    async def _output_step(
        self,
        send: trio.MemorySendChannel[Any],
        step_number: int,
        current: StepResult,
        tool_calls: list[ToolCallInfo],
    ) -> None:
        ml = self.message_list
        for actor in self._lane("process_output_step", "output"):

            def make(base: dict[str, Any]) -> HookArgs:
                return ProcessOutputStepArgs(
                    messages=ml.get.all.db(),
                    message_list=ml,
                    step_number=step_number,
                    system_messages=ml.get_all_system_messages(),
                    steps=(*self.steps, current),
                    text=current.text,
                    finish_reason=current.finish_reason,
                    tool_calls=tuple(tool_calls) or None,
                    usage=current.usage,
                    provider_metadata=current.provider_metadata,
                    **base,
                )

            result = await self._call(send, actor, "process_output_step", make)
            self._apply_messages(result, actor.id, "process_output_step", "all")

    async def _run_tools(
        self,
        send: trio.MemorySendChannel[Any],
        step_number: int,
        config: _StepConfig,
        calls: list[ToolCallInfo],
    ) -> list[ToolResultInfo]:
        """Run the step's tool calls concurrently; handle their results, hooks and
        chunks in call order (SPEC §2.13)."""
        if not calls:
            return []
        outcomes: list[tuple[bool, Any, list[Any]]] = [(False, None, [])] * len(calls)
        available = set(config.tools.names(config.active_tools))
        if config.tool_choice == "none":
            available = set()

        async def run_one(index: int, call: ToolCallInfo) -> None:
            emitter = _HookEmitter()
            try:
                if call.tool_name not in available:
                    raise ToolArgumentsError(
                        call.tool_name,
                        f"no tool named {call.tool_name!r} is available in this step; "
                        f"available: {sorted(available)}",
                    )
                tool: Tool = config.tools[call.tool_name]
                args = parse_arguments(tool, call.args)
                context = ToolContext(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    writer=ProcessorStreamWriter(emitter, f"tool:{call.tool_name}"),
                    request_context=self.request_context,
                    abort_signal=self.abort_signal,
                    messages=tuple(self.message_list.get.all.db()),
                )
                result = await execute_tool(tool, args, context)
            except Exception as exc:
                outcomes[index] = (False, exc, emitter.custom)
            else:
                outcomes[index] = (True, result, emitter.custom)

        async with trio.open_nursery() as nursery:
            for index, call in enumerate(calls):
                nursery.start_soon(run_one, index, call)

        results: list[ToolResultInfo] = []
        for index, (call, (ok, value, custom)) in enumerate(
            zip(calls, outcomes, strict=True)
        ):
            if index:
                # As in a sequential run, the previous tool-result chunk has been
                # through the output processors (which may end the run or ask a
                # retry) before the next process_tool_result runs.
                await self._settle_stream(send)
            for chunk in custom:
                await send.send(self._stamp(chunk))  # tool data reaches processors
            if not ok:
                results.append(await self._tool_failed(send, call, value))
                continue
            results.append(await self._tool_succeeded(send, step_number, call, value))
        return results

    async def _tool_failed(
        self, send: trio.MemorySendChannel[Any], call: ToolCallInfo, error: Exception
    ) -> ToolResultInfo:
        text = str(error) if isinstance(error, ToolArgumentsError) else repr(error)
        _set_invocation(
            self.message_list, call, "output-error", result=text, error_text=text
        )
        await send.send(
            ToolErrorChunk(
                payload=ToolErrorPayload(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    error=error,
                    args=call.args,
                ),
                run_id=self.run_id,
            )
        )
        return ToolResultInfo(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=call.args,
            result=text,
            is_error=True,
        )

    async def _tool_succeeded(
        self,
        send: trio.MemorySendChannel[Any],
        step_number: int,
        call: ToolCallInfo,
        value: Any,
    ) -> ToolResultInfo:
        ml = self.message_list
        _set_invocation(ml, call, "result", result=value)
        for actor in self._lane("process_tool_result", "output", "input"):

            def make(base: dict[str, Any]) -> HookArgs:
                return ProcessToolResultArgs(
                    messages=ml.get.all.db(),
                    message_list=ml,
                    step_number=step_number,
                    tool_name=call.tool_name,
                    tool_call_id=call.tool_call_id,
                    args=call.args,
                    result=value,
                    system_messages=ml.get_all_system_messages(),
                    steps=tuple(self.steps),
                    provider_executed=call.provider_executed,
                    **base,
                )

            try:
                result = await self._call(send, actor, "process_tool_result", make)
            except TripWire:
                # The raw result must not stay in the history (Mastra 1H.64).
                _set_invocation(ml, call, "call")
                raise
            self._apply_messages(result, actor.id, "process_tool_result", "all")
        # Re-read: processors may have replaced it (update_tool_invocation).
        final = _find_result(ml, call.tool_call_id, value)
        await send.send(
            ToolResultChunk(
                payload=ToolResultPayload(
                    tool_call_id=call.tool_call_id,
                    tool_name=call.tool_name,
                    result=final,
                    args=call.args,
                    provider_executed=call.provider_executed,
                ),
                run_id=self.run_id,
            )
        )
        return ToolResultInfo(
            tool_call_id=call.tool_call_id,
            tool_name=call.tool_name,
            args=call.args,
            result=final,
            provider_executed=call.provider_executed,
        )

    async def _output_result(self, send: trio.MemorySendChannel[Any]) -> None:
        ml = self.message_list
        text = "".join(self.all_text)
        result = OutputResult(
            text=text,
            usage=self.usage,
            finish_reason=self.finish_reason,
            steps=tuple(self.steps),
        )
        changed = False
        for actor in self._lane("process_output_result", "output"):

            def make(base: dict[str, Any]) -> HookArgs:
                return ProcessOutputResultArgs(
                    messages=ml.get.response.db(),
                    message_list=ml,
                    result=result,
                    **base,
                )

            try:
                raw = await self._call(send, actor, "process_output_result", make)
            except TripWire as tripwire:
                # A tripwire rejects the output, it does not erase it (SPEC §2.6).
                self.output_result_tripped = True
                self.final_text = text
                raise _Terminal(tripwire=tripwire) from None
            changed |= self._apply_messages(
                raw, actor.id, "process_output_result", "response"
            )
        if changed:
            self.final_text = "".join(
                message_text(m) for m in ml.get.response.db() if m.role == "assistant"
            )

    # --- settling ---------------------------------------------------------------

    def settle(self, *, aborted: bool, pipeline: OutputPipeline | None) -> AgentResult:
        if self.result is not None:
            return self.result
        tripwire = self.outcome_tripwire
        error = self.outcome_error
        finish_reason = self.finish_reason
        all_text = list(self.all_text)
        in_flight = not self.view.committed  # the client saw it; no step kept it
        if pipeline is not None and pipeline.outcome is not None:
            outcome = pipeline.outcome
            if outcome.kind == "tripwire" and outcome.tripwire is not None:
                tripwire = outcome.tripwire
                finish_reason = "other"
                if tripwire is not self.outcome_tripwire:
                    # Tripped in the stream: the attempt in flight ends here. Its
                    # text up to the blocked chunk stays in the result (Mastra
                    # 1F.43); the step itself reads empty, like every tripped step.
                    if in_flight:
                        all_text.append(self.view.text_value)
                    if self.current_step is not None and not any(
                        s.step_number == self.current_step
                        and s.finish_reason != "retry"
                        for s in self.steps
                    ):
                        self.steps.append(
                            StepResult(
                                step_number=self.current_step,
                                finish_reason="tripwire",
                                tripwire=TripwireInfo(
                                    reason=tripwire.reason,
                                    retry=tripwire.retry,
                                    metadata=tripwire.metadata,
                                    processor_id=tripwire.processor_id,
                                ),
                            )
                        )
            elif outcome.kind == "error":
                error = outcome.error
                finish_reason = "error"
        if aborted and tripwire is None and error is None:
            finish_reason = "aborted"
            if in_flight:
                all_text.append(self.view.text_value)  # what the client saw
        text = self.final_text if self.final_text is not None else "".join(all_text)
        self.result = AgentResult(
            run_id=self.run_id,
            text=text,
            finish_reason=finish_reason,
            tripwire=None
            if tripwire is None
            else TripwireInfo(
                reason=tripwire.reason,
                retry=tripwire.retry,
                metadata=tripwire.metadata,
                processor_id=tripwire.processor_id,
            ),
            usage=self.usage or Usage(),
            steps=tuple(self.steps),
            response_messages=()
            if self.output_result_tripped
            else tuple(self.message_list.get.response.db()),
            error=error,
            custom_chunks=tuple(self.custom_chunks),
            retry_count=self.retry_count,
            model_chunks_after_end=self.model_chunks_after_end,
            message_list=self.message_list,
        )
        self.settled.set()
        return self.result


def _system_text(message: Any) -> str | None:
    """The text of a system message in any accepted form (None if unknown)."""
    if isinstance(message, SystemMessage):
        return message.content
    if isinstance(message, str):
        return message
    if isinstance(message, Mapping):
        content = message.get("content")
        return content if isinstance(content, str) else None
    return None


def _set_invocation(
    ml: MessageList, call: ToolCallInfo, state: Any, **fields: Any
) -> None:
    """Put tool call ``call`` in ``state`` (with ``result`` / ``error_text``)."""
    ml.update_tool_invocation(
        ToolInvocationPart(
            tool_invocation=ToolInvocation(
                state=state,
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                args=call.args,
                **fields,
            ),
            provider_executed=call.provider_executed,
        )
    )


def _error_from_chunk(chunk: ErrorChunk) -> ProviderError:
    """A ``ProviderError`` for an ``error`` chunk a model yielded. The body has
    the shape of a streamed error event (``{"type": "error", "error": ...}``) so
    error processors that match those (the OpenAI Responses matcher) see it."""
    error = chunk.payload.error
    if isinstance(error, ProviderError):
        return error
    message = error.get("message") if isinstance(error, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None
    return ProviderError(
        str(message or error),
        body={"type": "error", "error": error},
        code=code if isinstance(code, str) else None,
    )


def _replay_reason(chunks: Sequence[Any]) -> str:
    return "tool-calls" if any(isinstance(c, ToolCallChunk) for c in chunks) else "stop"


def _find_result(ml: MessageList, tool_call_id: str, default: Any) -> Any:
    for message in reversed(ml.get.all.db()):
        for part in message.content.parts:
            if (
                isinstance(part, ToolInvocationPart)
                and part.tool_invocation.tool_call_id == tool_call_id
            ):
                return part.tool_invocation.result
    return default


# --- the stream handle ---------------------------------------------------------


class AgentStream:
    """The client end of a streamed run: ``async for chunk in stream``, then
    ``await stream.result()``. ``await stream.cancel()`` ends the run early."""

    def __init__(
        self, run: _Run, pipeline: OutputPipeline, run_scope: trio.CancelScope
    ) -> None:
        self._run = run
        self._pipeline = pipeline
        self._run_scope = run_scope
        self._cancelled = False
        self._done = False
        self.driver_done = trio.Event()

    @property
    def run_id(self) -> str:
        return self._run.run_id

    @property
    def message_list(self) -> MessageList:
        return self._run.message_list

    def __aiter__(self) -> AgentStream:
        return self

    async def __anext__(self) -> Any:
        if self._done:
            raise StopAsyncIteration
        if self._cancelled:
            self._done = True
            self._run.settle(aborted=True, pipeline=self._pipeline)
            return AbortChunk(run_id=self._run.run_id)
        try:
            chunk = await self._pipeline.__anext__()
        except StopAsyncIteration:
            self._done = True
            self._end_run()
            cancelled = self.cancelled  # (set by another task while we waited)
            if cancelled or not self._run.completed:
                # cancel() from another task while this one waited, or the
                # coordinator was stopped: the stream ends as aborted.
                self._run.settle(aborted=True, pipeline=self._pipeline)
                if cancelled:
                    return AbortChunk(run_id=self._run.run_id)
                raise
            self._run.settle(aborted=False, pipeline=self._pipeline)
            raise
        self._run.observe(chunk)
        if chunk.__class__ is TripwireChunk or chunk.__class__ is ErrorChunk:
            # A terminal chunk: nothing after it may run (model, tools, hooks).
            self._end_run()
        return chunk

    @property
    def cancelled(self) -> bool:
        """Whether ``cancel()`` was called."""
        return self._cancelled

    def _end_run(self) -> None:
        self._run.ended = True
        self._run_scope.cancel()

    async def cancel(self) -> None:
        """End the run now: the model call (and its HTTP stream), running tools
        and processors are cancelled before this returns; the next chunk read is
        an ``abort`` chunk, then the stream ends. ``finish_reason`` is
        ``"aborted"``; it is not a tripwire."""
        if self._done:
            return
        self._cancelled = True
        self._run.abort_signal.set("cancelled by the caller")
        self._end_run()
        await self.driver_done.wait()

    async def result(self) -> AgentResult:
        """The run's result. Reads the rest of the stream first if the caller has
        not (so it always settles)."""
        if self._run.result is None:
            async for _chunk in self:
                pass
        result = self._run.result
        assert result is not None
        return result


@asynccontextmanager
async def _open_stream(run: _Run) -> AsyncIterator[AgentStream]:
    """Run ``run``; yield its stream. The coordinator runs in a cancel scope of
    its own, so ending the run never cancels the caller's code, and the caller's
    own exceptions come out of the block unwrapped (SPEC §2.7)."""
    body_error: BaseException | None = None
    run_scope = run.run_scope = trio.CancelScope()
    send, receive = trio.open_memory_channel[Any](0)
    stream: AgentStream | None = None

    async def coordinator() -> None:
        try:
            with run_scope:
                await run.drive(send)
        finally:
            send.close()
            if stream is not None:
                stream.driver_done.set()

    try:
        async with trio.open_nursery() as nursery:
            output_actors = [run.actors[spec.id] for spec in run.processors.output]
            async with open_output_pipeline(
                output_actors,
                receive,
                run_id=run.run_id,
                request_context=run.request_context,
                message_list=run.message_list,
                mode=run.mode,
                driver=run,
                tracing_context=run.tracing_context,
                abort_signal=run.abort_signal,
            ) as pipeline:
                stream = AgentStream(run, pipeline, run_scope)
                nursery.start_soon(coordinator)
                try:
                    yield stream
                except BaseException as exc:  # the body raised: end the run
                    body_error = exc
                finally:
                    run_scope.cancel()
                    if run.result is None:
                        run.ended = True
                        run.abort_signal.set("the stream was closed early")
                        run.settle(aborted=True, pipeline=pipeline)
    except BaseExceptionGroup as group:
        # Our nursery only ever holds the coordinator; a lone error of its own is
        # a bug worth seeing as itself.
        if len(group.exceptions) != 1 or body_error is not None:
            raise
        raise group.exceptions[0] from None
    if body_error is not None:
        raise body_error


# --- the agent -----------------------------------------------------------------


def _resolve_lane(
    value: Any, request_context: RequestContext, name: str
) -> list[object]:
    if value is None:
        return []
    if callable(value) and not isinstance(value, Sequence):
        value = value(request_context)
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigurationError(
            f"{name} must be a list of processors or a callable of the request "
            f"context returning one, got {value!r}"
        )
    return list(value)


def _check_int(name: str, value: Any, *, minimum: int, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(
            f"{name} must be an int >= {minimum}"
            f"{' or None' if allow_none else ''}, got {value!r}"
        )


class Agent:
    """An LLM agent whose inputs, streamed outputs, tool results and API errors
    pass through processors.

    Args:
        id: the agent's id.
        name: display name (defaults to ``id``).
        instructions: the system prompt (a str or a list of them).
        model: a ``LanguageModel`` or a ``"provider/model-id"`` string.
        tools: a list of ``Tool`` objects, or a ``{name: Tool}`` dict.
        input_processors, output_processors, error_processors: the three lanes;
            each a list, or a callable of the request context returning one.
        max_processor_retries: the retry budget shared by every retry source; no
            retries when unset, except that configuring error processors sets it
            to 10 (the seed's default). ``0`` disables retries.
        max_steps: the most model steps (tool round trips) in one call.
        prepare_step: a callable run after the input processors at each step, as
            processor ``prepare-step``.
        model_settings: temperature, max_tokens, ...; provider_options: per
            provider.
        execution_mode: how output processors run (``"fused"`` or ``"actors"``).

    Bad arguments raise ``ConfigurationError`` at once.
    """

    def __init__(
        self,
        *,
        id: str,
        model: Any,
        name: str | None = None,
        instructions: str | Sequence[str] | None = None,
        tools: Sequence[Tool] | Mapping[str, Tool] | None = None,
        input_processors: ProcessorList | None = None,
        output_processors: ProcessorList | None = None,
        error_processors: ProcessorList | None = None,
        max_processor_retries: int | None = None,
        max_steps: int = 5,
        prepare_step: Callable[[ProcessInputStepArgs], Any] | None = None,
        model_settings: Mapping[str, Any] | None = None,
        provider_options: Mapping[str, Any] | None = None,
        tool_choice: Any = "auto",
        execution_mode: ExecutionMode = "fused",
    ) -> None:
        if not isinstance(id, str) or not id:
            raise ConfigurationError(f"Agent id must be a non-empty str, got {id!r}")
        self.id = id
        self.name = name or id
        if isinstance(instructions, str):
            instructions = [instructions]
        self.instructions = list(instructions or [])
        for item in self.instructions:
            if not isinstance(item, str):
                raise ConfigurationError(
                    f"instructions must be a str or a list of str, got {item!r}"
                )
        # Resolved once: a model object owns its HTTP client and connection pool,
        # which every call of this agent then shares (ids met later are cached).
        self._models: dict[str, LanguageModel] = {}
        self.model = self.model_for(model)
        self.tools = ToolSet.of(tools or [])
        self.input_processors = input_processors
        self.output_processors = output_processors
        self.error_processors = error_processors
        _check_int(
            "max_processor_retries", max_processor_retries, minimum=0, allow_none=True
        )
        self.max_processor_retries = max_processor_retries
        _check_int("max_steps", max_steps, minimum=1, allow_none=False)
        self.max_steps = max_steps
        if prepare_step is not None and not callable(prepare_step):
            raise ConfigurationError(
                f"prepare_step must be callable, got {prepare_step!r}"
            )
        self.prepare_step = prepare_step
        self.model_settings = dict(model_settings or {})
        self.provider_options = dict(provider_options or {})
        self.tool_choice = tool_choice
        if execution_mode not in ("fused", "actors"):
            raise ConfigurationError(
                f"execution_mode must be 'fused' or 'actors', got {execution_mode!r}"
            )
        self.execution_mode: ExecutionMode = execution_mode

    def __repr__(self) -> str:
        return f"<Agent id={self.id!r}>"

    def model_for(self, model: Any) -> LanguageModel:
        """A model object for ``model`` (an object, or a ``provider/id`` string
        resolved once per agent and reused)."""
        if not isinstance(model, str):
            return resolve_model(model)
        found = self._models.get(model)
        if found is None:
            found = self._models[model] = resolve_model(model)
        return found

    def _prepare(
        self,
        messages: Any,
        *,
        input_processors: Any = _UNSET,
        output_processors: Any = _UNSET,
        error_processors: Any = _UNSET,
        max_processor_retries: Any = _UNSET,
        prepare_step: Any = _UNSET,
        request_context: RequestContext | Mapping[str, Any] | None = None,
        max_steps: Any = _UNSET,
        model_settings: Mapping[str, Any] | None = None,
        provider_options: Mapping[str, Any] | None = None,
        tool_choice: Any = _UNSET,
        active_tools: Sequence[str] | None = None,
        model: Any = _UNSET,
        execution_mode: Any = _UNSET,
        run_id: str | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
    ) -> _Run:
        context = (
            request_context
            if isinstance(request_context, RequestContext)
            else RequestContext(request_context or {})
        )
        lanes = {
            "input_processors": self.input_processors
            if input_processors is _UNSET
            else input_processors,
            "output_processors": self.output_processors
            if output_processors is _UNSET
            else output_processors,
            "error_processors": self.error_processors
            if error_processors is _UNSET
            else error_processors,
        }
        resolved = {k: _resolve_lane(v, context, k) for k, v in lanes.items()}
        processors = register_processors(
            input=resolved["input_processors"],
            output=resolved["output_processors"],
            error=resolved["error_processors"],
        )
        budget = (
            self.max_processor_retries
            if max_processor_retries is _UNSET
            else max_processor_retries
        )
        _check_int("max_processor_retries", budget, minimum=0, allow_none=True)
        if budget is None and resolved["error_processors"]:
            budget = _DEFAULT_BUDGET_WITH_ERROR_PROCESSORS
        steps = self.max_steps if max_steps is _UNSET else max_steps
        _check_int("max_steps", steps, minimum=1, allow_none=False)
        prepare = self.prepare_step if prepare_step is _UNSET else prepare_step
        if prepare is not None and not callable(prepare):
            raise ConfigurationError(f"prepare_step must be callable, got {prepare!r}")
        mode = self.execution_mode if execution_mode is _UNSET else execution_mode
        if mode not in ("fused", "actors"):
            raise ConfigurationError(
                f"execution_mode must be 'fused' or 'actors', got {mode!r}"
            )
        chosen_model = self.model if model is _UNSET else self.model_for(model)
        if active_tools is not None:
            self.tools.names(list(active_tools))  # unknown names are an error now
        message_list = MessageList(
            thread_id=thread_id or context.thread_id,
            resource_id=resource_id or context.resource_id,
        )
        for text in self.instructions:
            message_list.add_system(SystemMessage(content=text))
        if isinstance(messages, str | Mapping | Message):
            messages = [messages]
        if messages is None or isinstance(messages, bytes):
            raise ConfigurationError(
                f"messages must be a str, a message, or a list of them, got "
                f"{messages!r}"
            )
        message_list.add(messages, "input")
        return _Run(
            self,
            message_list=message_list,
            processors=processors,
            prepare_step=_PrepareStep(prepare) if prepare is not None else None,
            budget=budget,
            max_steps=steps,
            request_context=context,
            model=chosen_model,
            tools=self.tools,
            tool_choice=self.tool_choice if tool_choice is _UNSET else tool_choice,
            active_tools=list(active_tools) if active_tools is not None else None,
            model_settings={**self.model_settings, **(model_settings or {})},
            provider_options={**self.provider_options, **(provider_options or {})},
            mode=mode,
            run_id=run_id or f"run-{uuid.uuid4().hex[:12]}",
        )

    def stream(
        self, messages: Any, **options: Any
    ) -> AbstractAsyncContextManager[AgentStream]:
        """Start a run; ``async with agent.stream(...) as stream:`` then iterate.

        Accepts the same per-call options as ``generate``. Arguments are checked
        now; the run's tasks live inside the ``async with``, and leaving it early
        cancels the run and closes the provider connection.
        """
        return _open_stream(self._prepare(messages, **options))

    async def generate(self, messages: Any, **options: Any) -> AgentResult:
        """Run to the end and return the result (never raises for a tripwire or
        a failed run: see ``finish_reason``, ``tripwire`` and ``error``).

        Per-call options (each replaces the agent's): ``input_processors``,
        ``output_processors``, ``error_processors``, ``max_processor_retries``,
        ``prepare_step``, ``request_context``, ``max_steps``, ``model_settings``,
        ``provider_options``, ``tool_choice``, ``active_tools``, ``model``,
        ``execution_mode``, ``run_id``, ``thread_id``, ``resource_id``.
        """
        async with self.stream(messages, **options) as stream:
            return await stream.result()
