"""What one run keeps while it goes: its configuration, its bookkeeping, and
what the client saw of each attempt.

``RunSpec`` is fixed when the call is made (the agent's defaults merged with
the call's options); ``RunState`` is the coordinator's bookkeeping, written by
the step loop and read by the result; ``StepView`` is filled at the client end
with what one attempt delivered.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Literal, TypeAlias

import attrs

from .._secrets import get_logger
from ..actors import ExecutionMode
from ..data import (
    DataChunk,
    FileChunk,
    FinishChunk,
    Message,
    MessageContent,
    ObjectResultChunk,
    ReasoningDeltaChunk,
    ReasoningDetail,
    ReasoningEndChunk,
    ReasoningPart,
    ReasoningSignatureChunk,
    ReasoningStartChunk,
    RedactedReasoningChunk,
    SourceChunk,
    StepFinishChunk,
    StepResult,
    StepStartChunk,
    StepStartPart,
    TextDeltaChunk,
    TextPart,
    ToolCallChunk,
    ToolInvocation,
    ToolInvocationPart,
    Usage,
)
from ..models import LanguageModel
from ..processors import (
    AbortSignal,
    MessageList,
    ProcessorSet,
    RequestContext,
    TracingContext,
)
from ..processors._readers import read_message_result
from ..telemetry import DISABLED
from .tools import ToolSet

__all__ = [
    "PREPARE_STEP_ID",
    "RETRY_FEEDBACK_TAG",
    "RunSpec",
    "RunState",
    "StepConfig",
    "StepView",
    "feedback_text",
]

logger = get_logger("procession")

ReconcileScope: TypeAlias = Literal["input", "all", "response"]

RETRY_FEEDBACK_TAG: Final = "processor-retry-feedback"
"""The tag of the system message that carries a retry's feedback (SPEC §2.5)."""
PREPARE_STEP_ID: Final = "prepare-step"


def feedback_text(reason: str) -> str:
    """The feedback the model gets after a processor rejected its answer."""
    return (
        f"Your previous response was not accepted: {reason}. Please try again with "
        f"the feedback in mind."
    )


@attrs.frozen(kw_only=True)
class RunSpec:
    """One call's configuration: the agent's defaults with the call's options
    applied and checked."""

    run_id: str
    processors: ProcessorSet
    prepare_step: Callable[[Any], Any] | None
    budget: int | None
    max_steps: int
    request_context: RequestContext
    model: LanguageModel
    model_for: Callable[[Any], LanguageModel]
    """Resolves a model a processor names (``process_input_step``'s ``model``)."""
    tools: ToolSet
    tool_choice: Any
    active_tools: list[str] | None
    model_settings: Mapping[str, Any]
    provider_options: Mapping[str, Any]
    mode: ExecutionMode
    idle_timeout: float | None = None
    """Seconds the model stream may go without an event (``None``: off)."""
    run_deadline: float | None = None
    """Seconds the whole run may take (``None``: off)."""
    agent_id: str = "agent"
    agent_name: str = "agent"
    tracer_provider: Any = None
    """An OpenTelemetry tracer provider (``None``: the global one)."""
    meter_provider: Any = None
    memory: Any = None
    """The agent's ``procession.memory.Memory``, if any."""
    require_tool_approval: Any = False
    """``RequireToolApproval``: which calls wait for a person's approval."""
    approval_ttl: float | None = None
    """Seconds a call may wait for approval before it is declined."""
    run_storage: Any = None
    """Where a run that waits for a person is kept (a ``RunStorage``), if any."""
    durable: Any = None
    """``_durable.Durable`` for a durable run (checkpoints, a lease, taken
    over when its process dies), else None."""

    @property
    def model_label(self) -> str:
        """``provider/model`` of the run's model (a response message's label)."""
        return f"{self.model.provider}/{self.model.model_id}"


@attrs.define
class StepView:
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
    finished: bool = False
    """The client received the run's ``finish`` during this attempt."""
    step_open: bool = False
    """The client received this attempt's ``step-start`` and no ``step-finish``."""

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
        elif cls is StepStartChunk:
            self.step_open = True
        elif cls is StepFinishChunk:
            self.step_open = False
        elif cls is FinishChunk:
            self.finished = True

    def shown_anything(self) -> bool:
        """Whether the client received any content of this attempt."""
        return bool(self.text or self.blocks or self.tool_calls)

    @property
    def text_value(self) -> str:
        return "".join(self.text)

    @property
    def reasoning_value(self) -> str:
        return "".join("".join(v) for v in self.reasoning.values())

    def build_message(self, model_label: str, id: str | None = None) -> Message:
        """The assistant message this attempt produced (with ``id``, or a new
        one)."""
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
        content = MessageContent(parts=parts)
        if id is None:
            return Message(role="assistant", content=content)
        return Message(id=id, role="assistant", content=content)


@attrs.define
class StepConfig:
    """The step's configuration as ``process_input_step`` processors chain it."""

    model: LanguageModel
    tools: ToolSet
    tool_choice: Any
    active_tools: list[str] | None
    provider_options: Mapping[str, Any]
    model_settings: Mapping[str, Any]
    structured_output: Any

    @classmethod
    def start(cls, spec: RunSpec) -> StepConfig:
        """A step's starting configuration: the run's, with the tools its
        tool sources have now (``ToolSet.snapshot``)."""
        return cls(
            model=spec.model,
            tools=spec.tools.snapshot(),
            tool_choice=spec.tool_choice,
            active_tools=spec.active_tools,
            provider_options=spec.provider_options,
            model_settings=spec.model_settings,
            structured_output=None,
        )


_STAMPERS: dict[type, Callable[[Any, str], Any]] = {}
"""Per chunk class, a copier that sets ``run_id`` (``RunState.stamp``)."""


def _slot_setter(cls: type, name: str) -> Callable[[Any, Any], None]:
    """What sets field ``name`` of a new ``cls`` instance: its slot's
    descriptor (attrs chunk classes are slotted), else object.__setattr__."""
    slot = getattr(cls, name, None)
    if slot is not None and type(slot).__name__ == "member_descriptor":
        setter: Callable[[Any, Any], None] = slot.__set__
        return setter
    return lambda obj, value: object.__setattr__(obj, name, value)


def _stamper(cls: type) -> Callable[[Any, str], Any]:
    """A function copying a chunk of attrs class ``cls`` with another
    ``run_id``: what ``attrs.evolve`` gives, at about a third of its cost (no
    ``__init__`` re-run: the fields come from a valid instance). Chunks are
    copied once per model chunk, so this is on the per-chunk path. Classes
    with a ``__attrs_post_init__`` (none of the chunk classes) use evolve."""
    if hasattr(cls, "__attrs_post_init__"):
        return lambda chunk, run_id: attrs.evolve(chunk, run_id=run_id)
    names = [f.name for f in attrs.fields(cls) if f.name != "run_id"]
    # Each field set through its slot's descriptor: no name lookup, no frozen
    # __setattr__ in the way (a third faster than object.__setattr__).
    bound = ", ".join(f"set_{name}=set_{name}" for name in [*names, "run_id"])
    lines = [  # the helpers bound as defaults: locals, not global lookups
        f"def stamp(chunk, run_id, new_=new_, cls=cls, {bound}):",
        "    new = new_(cls)",
        *(f"    set_{name}(new, chunk.{name})" for name in names),
        "    set_run_id(new, run_id)",
        "    return new",
    ]
    namespace: dict[str, Any] = {"new_": object.__new__, "cls": cls}
    for name in [*names, "run_id"]:
        namespace[f"set_{name}"] = _slot_setter(cls, name)
    exec("\n".join(lines), namespace)  # code made only from field names
    stamp: Callable[[Any, str], Any] = namespace["stamp"]
    return stamp


@attrs.define(eq=False)
class RunState:
    """The coordinator's bookkeeping for one run; the result is built from it
    and the run's outcome."""

    spec: RunSpec
    message_list: MessageList
    abort_signal: AbortSignal = attrs.Factory(AbortSignal)
    tracing_context: TracingContext = attrs.field(init=False)
    retry_count: int = 0
    steps: list[StepResult] = attrs.Factory(list)
    usage: Usage | None = None
    attempt_usage: Usage | None = None
    """What the current attempt's model call reported spending (a rejected
    attempt's step result keeps it)."""
    view: StepView = attrs.Factory(StepView)
    """The attempt the client is receiving now (switched at the client end)."""
    all_text: list[str] = attrs.Factory(list)
    custom_chunks: list[DataChunk] = attrs.Factory(list)
    feedback: str | None = None
    finish_reason: str = "unknown"
    output_result_ran: bool = False
    output_result_tripped: bool = False
    final_text: str | None = None
    current_step: int | None = None
    """The step whose attempt is in flight, if any."""
    completed: bool = False
    """The coordinator reached its end on its own (finished, or proposed an end)."""
    model_chunks_after_end: int = 0
    telemetry: Any = DISABLED
    """The run's traces and metrics (``procession.telemetry``)."""
    traced_streams: list[Any] = attrs.Factory(list)
    """Output processors' per-step stream spans still open (closed at the end)."""
    objects: list[tuple[StepView, Any]] = attrs.Factory(list)
    """Each ``object-result`` the client received, with the attempt it came in
    (``build_result`` skips those of retried attempts)."""
    spawn: Callable[[Callable[[], Awaitable[None]]], None] | None = None
    """Starts a task in the run's nursery (``open_stream``'s), beside the
    coordinator: a durable run's lease renewal."""
    resume: Any = None
    """A continuation's paused step (``_approval.PausedStep``), until the
    step loop takes it up."""
    stored_epoch: int | None = None
    """A continuation of a stored run: the epoch it holds the run at (its
    writes are fenced by it); None for a run that was never paused."""
    stored_closed: bool = False
    """The stored run was paused again or ended by this run (or, durable, went
    on in another process): nothing more to write."""
    takeover: Any = None
    """A durable run taken over from another process: where it goes on
    (``_durable.Takeover``), until the coordinator takes it up."""

    def __attrs_post_init__(self) -> None:
        self.tracing_context = TracingContext(trace_id=self.spec.run_id)

    @property
    def run_id(self) -> str:
        return self.spec.run_id

    def may_retry(self) -> bool:
        """Whether the retry budget allows one more retry."""
        budget = self.spec.budget
        return budget is not None and self.retry_count < budget

    def count_retry(self, cause: str, processor_id: str | None) -> None:
        """One more retry, granted: ``cause`` is ``"processor"`` (an abort with
        ``retry=True``) or ``"api-error"`` (an error processor's retry)."""
        self.retry_count += 1
        budget = self.spec.budget
        self.telemetry.retry(
            cause,
            None if budget is None else budget - self.retry_count,
            processor_id,
        )

    def accepted_steps(self) -> int:
        return sum(1 for s in self.steps if s.finish_reason != "retry")

    # RunObserver: what the client end reports ------------------------------------

    def attempt_began(self, view: Any) -> None:
        """The client is receiving the attempt ``view`` belongs to."""
        if isinstance(view, StepView):
            self.view = view

    def delivered(self, chunk: Any) -> None:
        """The client received ``chunk``."""
        if chunk.__class__ is TextDeltaChunk:  # observe's first case, inline
            self.view.text.append(chunk.payload.text)
            return
        self.view.observe(chunk)
        if chunk.__class__ is DataChunk:
            self.custom_chunks.append(chunk)
        elif chunk.__class__ is ObjectResultChunk:
            self.objects.append((self.view, chunk.object))

    def stamp(self, chunk: Any) -> Any:
        """``chunk`` with this run's id (``data-*`` chunks carry none): the
        chunk itself when it has it already, else a copy with it."""
        run_id = self.spec.run_id
        cls = chunk.__class__
        if cls is DataChunk or getattr(chunk, "run_id", None) == run_id:
            return chunk
        copier = _STAMPERS.get(cls)
        if copier is None:
            copier = _STAMPERS[cls] = _stamper(cls)
        return copier(chunk, run_id)

    def apply_messages(
        self, result: Any, processor_id: str, hook: str, scope: ReconcileScope
    ) -> bool:
        """Reconcile a hook's returned messages into the conversation; whether
        the hook returned any (None means "no change")."""
        ml = self.message_list
        normalised = read_message_result(result, processor_id, hook, ml)
        if normalised is None:
            return False
        ml.reconcile(
            normalised.messages,
            scope=scope,
            default_source="response" if scope == "response" else "input",
            system_messages=normalised.system_messages,
            processor_id=processor_id,
            hook=hook,
        )
        return True

    def set_feedback(self, reason: str) -> None:
        """Tell the model (and later processors) why the last answer was rejected."""
        self.feedback = feedback_text(reason)
        self.message_list.clear_system_messages(RETRY_FEEDBACK_TAG)
        self.message_list.add_system(self.feedback, tag=RETRY_FEEDBACK_TAG)
