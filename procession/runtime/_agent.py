"""The agent: its configuration and the per-call options of ``generate`` /
``stream``.

One call is one *run*: ``procession.runtime._run`` is its coordinator (the step
loop), ``_step`` one attempt, ``_hooks`` the hook lanes, ``_stream`` the client
end and supervisor, ``_result`` the result, built from the run's one outcome
(``RunOutcome``, decided in ``procession.actors.RunControl.conclude``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final, Never, TypeAlias

from ..actors import ExecutionMode
from ..data import Message, SystemMessage
from ..memory import Memory, memory_ids
from ..models import LanguageModel, resolve_model
from ..processors import (
    ConfigurationError,
    MessageList,
    ProcessInputStepArgs,
    RequestContext,
)
from ._options import (
    CALL_OPTIONS,
    USE_AGENT_DEFAULT,
    ProcessorList,
    UseAgentDefault,
    check_execution_mode,
    check_int,
    check_seconds,
    new_run_id,
    or_default,
    reject_unknown,
    resolve_lane,
)
from ._registrations import Registrations
from ._result import AgentResult
from ._state import RunSpec
from ._stream import AgentStream, open_stream
from .tools import Tool, ToolSet, ToolSource

__all__ = ["Agent"]

_DEFAULT_BUDGET_WITH_ERROR_PROCESSORS: Final = 10  # the seed's number (SPEC §2.3)
DEFAULT_IDLE_TIMEOUT: Final = 60.0
"""Seconds a model stream may go without an event before ``ModelIdleTimeout``."""

LaneOption: TypeAlias = ProcessorList | UseAgentDefault | None
"""A lane per call: a list, a callable of the request context, or the default."""


class Agent:
    """An LLM agent whose inputs, streamed outputs, tool results and API errors
    pass through processors.

    Args:
        id: the agent's id.
        name: display name (defaults to ``id``).
        instructions: the system prompt (a str or a list of them).
        model: a ``LanguageModel`` or a ``"provider/model-id"`` string.
        tools: a list of ``Tool`` objects and tool sources (e.g.
            ``procession.mcp.MCPTools``, whose tools are offered as the source
            has them at each step), or a ``{name: Tool}`` dict.
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
        execution_mode: how output processors run: ``"adaptive"`` (default:
            fused, with a task of its own for a processor whose hook is seen
            to wait on I/O), ``"fused"`` (awaited calls in the consumer's
            task) or ``"actors"`` (a task per processor).
        idle_timeout: seconds the model stream may go without an *event* (60 by
            default; ``None`` turns it off). The timer runs only while the run
            waits for the model, not while the consumer holds the stream back.
            It ends the model call with ``ModelIdleTimeout``, which error
            processors see and ``StreamErrorRetryProcessor`` retries.
        run_deadline: seconds the whole run may take (off by default); past it
            the run fails with ``RunDeadlineExceeded`` (never retried). These two
            are policies; a caller's own cancel scope works as ever.
        memory: conversation memory (``procession.memory.Memory``): each call
            names its thread and resource (``memory={"thread": ...,
            "resource": ...}``); the thread's last messages are loaded before
            your input processors, and the turn is saved in one transaction
            once the run finished (nothing of a run that did not).
        tracer_provider, meter_provider: where the run's OpenTelemetry spans
            and metrics go (``procession[otel]``); by default the global
            providers. Nothing is recorded, and nothing done per chunk, when no
            SDK is configured.

    Per-call options of ``generate`` / ``stream`` replace these for one call;
    ``USE_AGENT_DEFAULT`` (the default of each) keeps the agent's.

    Bad arguments raise ``ConfigurationError`` at once.
    """

    def __init__(
        self,
        *,
        id: str,
        model: Any,
        name: str | None = None,
        instructions: str | Sequence[str] | None = None,
        tools: Sequence[Tool | ToolSource] | Mapping[str, Tool] | None = None,
        input_processors: ProcessorList | None = None,
        output_processors: ProcessorList | None = None,
        error_processors: ProcessorList | None = None,
        max_processor_retries: int | None = None,
        max_steps: int = 5,
        prepare_step: Callable[[ProcessInputStepArgs], Any] | None = None,
        model_settings: Mapping[str, Any] | None = None,
        provider_options: Mapping[str, Any] | None = None,
        tool_choice: Any = "auto",
        execution_mode: ExecutionMode = "adaptive",
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        run_deadline: float | None = None,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        memory: Memory | None = None,
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
        self._registrations = Registrations()  # reused across runs
        self.model = self.model_for(model)
        self.tools = ToolSet.of(tools or [])
        self.input_processors = input_processors
        self.output_processors = output_processors
        self.error_processors = error_processors
        check_int(
            "max_processor_retries", max_processor_retries, minimum=0, allow_none=True
        )
        self.max_processor_retries = max_processor_retries
        check_int("max_steps", max_steps, minimum=1, allow_none=False)
        self.max_steps = max_steps
        if prepare_step is not None and not callable(prepare_step):
            raise ConfigurationError(
                f"prepare_step must be callable, got {prepare_step!r}"
            )
        self.prepare_step = prepare_step
        self.model_settings = dict(model_settings or {})
        self.provider_options = dict(provider_options or {})
        self.tool_choice = tool_choice
        self.execution_mode: ExecutionMode = check_execution_mode(execution_mode)
        self.idle_timeout = check_seconds("idle_timeout", idle_timeout)
        self.run_deadline = check_seconds("run_deadline", run_deadline)
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        if memory is not None and not isinstance(memory, Memory):
            raise ConfigurationError(
                f"memory must be a procession.memory.Memory, got {memory!r}"
            )
        self.memory = memory

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
        self, messages: Any, options: Mapping[str, Any]
    ) -> tuple[RunSpec, MessageList]:
        """The call's spec and conversation, every option checked. ``options``
        holds every name of ``CALL_OPTIONS``, as ``stream`` / ``generate`` took
        them (their signatures are the typed, documented form)."""
        input_processors = options["input_processors"]
        output_processors = options["output_processors"]
        error_processors = options["error_processors"]
        max_processor_retries = options["max_processor_retries"]
        prepare_step = options["prepare_step"]
        request_context = options["request_context"]
        max_steps = options["max_steps"]
        model_settings = options["model_settings"]
        provider_options = options["provider_options"]
        tool_choice = options["tool_choice"]
        active_tools = options["active_tools"]
        model = options["model"]
        execution_mode = options["execution_mode"]
        run_id = options["run_id"]
        idle_timeout = check_seconds(
            "idle_timeout", or_default(options["idle_timeout"], self.idle_timeout)
        )
        run_deadline = check_seconds(
            "run_deadline", or_default(options["run_deadline"], self.run_deadline)
        )
        thread_id, resource_id = _memory_ids(
            options["memory"], options["thread_id"], options["resource_id"]
        )
        context = (
            request_context
            if isinstance(request_context, RequestContext)
            else RequestContext(request_context or {})
        )
        if self.memory is not None:
            thread_id = thread_id or context.thread_id
            resource_id = resource_id or context.resource_id
            if not thread_id or not resource_id:
                memory_ids(None, None)  # raises MissingThreadError, naming both
            if (context.thread_id, context.resource_id) != (thread_id, resource_id):
                # Hooks and tools (updateWorkingMemory) find the call's thread and
                # resource in the request context, as in Mastra; the caller's own
                # object is not changed.
                context = RequestContext(
                    {**context, "thread_id": thread_id, "resource_id": resource_id}
                )
        lanes = {
            "input_processors": or_default(input_processors, self.input_processors),
            "output_processors": or_default(output_processors, self.output_processors),
            "error_processors": or_default(error_processors, self.error_processors),
        }
        resolved = {k: resolve_lane(v, context, k) for k, v in lanes.items()}
        tools = self.tools
        memory = self.memory
        if memory is not None:
            # The seed: memory's processors "always stay, before your lists"; one
            # the caller lists explicitly (same id) replaces the automatic one.
            listed = {getattr(p, "id", None) for p in resolved["input_processors"]}
            automatic = [p for p in memory.input_processors() if p.id not in listed]
            resolved["input_processors"] = [*automatic, *resolved["input_processors"]]
            tools = _with_working_memory_tool(tools, memory)
        processors = self._registrations.register(
            input=resolved["input_processors"],
            output=resolved["output_processors"],
            error=resolved["error_processors"],
        )
        budget = or_default(max_processor_retries, self.max_processor_retries)
        check_int("max_processor_retries", budget, minimum=0, allow_none=True)
        if budget is None and resolved["error_processors"]:
            budget = _DEFAULT_BUDGET_WITH_ERROR_PROCESSORS
        steps = or_default(max_steps, self.max_steps)
        check_int("max_steps", steps, minimum=1, allow_none=False)
        prepare = or_default(prepare_step, self.prepare_step)
        if prepare is not None and not callable(prepare):
            raise ConfigurationError(f"prepare_step must be callable, got {prepare!r}")
        mode = check_execution_mode(or_default(execution_mode, self.execution_mode))
        chosen = (
            self.model if isinstance(model, UseAgentDefault) else self.model_for(model)
        )
        # A tool source that is not open, or two tools of one name, is an
        # error now; each step takes its own snapshot (a source's list may
        # change between steps).
        offered = tools.snapshot()
        if active_tools is not None:
            offered.names(list(active_tools))  # unknown names are an error now
        spec = RunSpec(
            run_id=run_id or new_run_id(),
            processors=processors,
            prepare_step=prepare,
            budget=budget,
            max_steps=steps,
            request_context=context,
            model=chosen,
            model_for=self.model_for,
            tools=tools,
            tool_choice=or_default(tool_choice, self.tool_choice),
            active_tools=list(active_tools) if active_tools is not None else None,
            model_settings={**self.model_settings, **(model_settings or {})},
            provider_options={**self.provider_options, **(provider_options or {})},
            mode=mode,
            idle_timeout=idle_timeout,
            run_deadline=run_deadline,
            agent_id=self.id,
            agent_name=self.name,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            memory=memory,
        )
        return spec, self._conversation(messages, context, thread_id, resource_id)

    def _conversation(
        self,
        messages: Any,
        context: RequestContext,
        thread_id: str | None,
        resource_id: str | None,
    ) -> MessageList:
        message_list = MessageList(
            thread_id=thread_id or context.thread_id,
            resource_id=resource_id or context.resource_id,
        )
        for text in self.instructions:
            message_list.add_system(SystemMessage(content=text))
        if isinstance(messages, str | Mapping | Message):
            messages = [messages]
        if not isinstance(messages, Iterable) or isinstance(messages, bytes):
            raise ConfigurationError(
                f"messages must be a str, a message (a Message or a "
                f"{{'role': ..., 'content': ...}} dict), or a list of them, got "
                f"{messages!r}"
            )
        message_list.add(messages, "input")
        return message_list

    def stream(
        self,
        messages: Any,
        *,
        input_processors: ProcessorList | UseAgentDefault | None = USE_AGENT_DEFAULT,
        output_processors: ProcessorList | UseAgentDefault | None = USE_AGENT_DEFAULT,
        error_processors: ProcessorList | UseAgentDefault | None = USE_AGENT_DEFAULT,
        max_processor_retries: int | UseAgentDefault | None = USE_AGENT_DEFAULT,
        prepare_step: Callable[[ProcessInputStepArgs], Any]
        | UseAgentDefault
        | None = USE_AGENT_DEFAULT,
        request_context: RequestContext | Mapping[str, Any] | None = None,
        max_steps: int | UseAgentDefault = USE_AGENT_DEFAULT,
        model_settings: Mapping[str, Any] | None = None,
        provider_options: Mapping[str, Any] | None = None,
        tool_choice: Any = USE_AGENT_DEFAULT,
        active_tools: Sequence[str] | None = None,
        model: LanguageModel | str | UseAgentDefault = USE_AGENT_DEFAULT,
        execution_mode: ExecutionMode | UseAgentDefault = USE_AGENT_DEFAULT,
        idle_timeout: float | UseAgentDefault | None = USE_AGENT_DEFAULT,
        run_deadline: float | UseAgentDefault | None = USE_AGENT_DEFAULT,
        run_id: str | None = None,
        memory: Mapping[str, Any] | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        **unexpected: Never,
    ) -> AbstractAsyncContextManager[AgentStream]:
        """Start a run; ``async with agent.stream(...) as stream:`` then iterate.

        Takes the same per-call options as ``generate``. Arguments are checked
        now (an unknown keyword is a ``TypeError``, a bad value a
        ``ConfigurationError``); the run's tasks live inside the ``async with``,
        and leaving it early cancels the run and closes the provider connection.
        """
        reject_unknown("stream", unexpected)
        spec, message_list = self._prepare(messages, _options_of(locals()))
        return open_stream(spec, message_list)

    def generate(
        self,
        messages: Any,
        *,
        input_processors: ProcessorList | UseAgentDefault | None = USE_AGENT_DEFAULT,
        output_processors: ProcessorList | UseAgentDefault | None = USE_AGENT_DEFAULT,
        error_processors: ProcessorList | UseAgentDefault | None = USE_AGENT_DEFAULT,
        max_processor_retries: int | UseAgentDefault | None = USE_AGENT_DEFAULT,
        prepare_step: Callable[[ProcessInputStepArgs], Any]
        | UseAgentDefault
        | None = USE_AGENT_DEFAULT,
        request_context: RequestContext | Mapping[str, Any] | None = None,
        max_steps: int | UseAgentDefault = USE_AGENT_DEFAULT,
        model_settings: Mapping[str, Any] | None = None,
        provider_options: Mapping[str, Any] | None = None,
        tool_choice: Any = USE_AGENT_DEFAULT,
        active_tools: Sequence[str] | None = None,
        model: LanguageModel | str | UseAgentDefault = USE_AGENT_DEFAULT,
        execution_mode: ExecutionMode | UseAgentDefault = USE_AGENT_DEFAULT,
        idle_timeout: float | UseAgentDefault | None = USE_AGENT_DEFAULT,
        run_deadline: float | UseAgentDefault | None = USE_AGENT_DEFAULT,
        run_id: str | None = None,
        memory: Mapping[str, Any] | None = None,
        thread_id: str | None = None,
        resource_id: str | None = None,
        **unexpected: Never,
    ) -> Coroutine[Any, Any, AgentResult]:
        """Run to the end; ``await`` the returned coroutine for the result.

        Arguments are checked when this is called, before anything is awaited
        (an unknown keyword is a ``TypeError`` naming the valid options, a bad
        value a ``ConfigurationError``). The result never raises for a tripwire
        or a failed run: see ``finish_reason``, ``tripwire`` and ``error``.
        Awaiting it checkpoints; if the caller's scope is cancelled meanwhile,
        the run is cancelled and ``Cancelled`` propagates.

        Per-call options (each replaces the agent's; ``USE_AGENT_DEFAULT`` keeps
        it): ``input_processors``, ``output_processors``, ``error_processors``,
        ``max_processor_retries``, ``prepare_step``, ``request_context``,
        ``max_steps``, ``model_settings``, ``provider_options`` (merged into the
        agent's), ``tool_choice``, ``active_tools``, ``model``,
        ``execution_mode``, ``idle_timeout``, ``run_deadline``, ``run_id``,
        ``memory`` (``{"thread": id or {"id": ...}, "resource": id}``, as
        Mastra's call option), ``thread_id`` and ``resource_id`` (its aliases).
        """
        reject_unknown("generate", unexpected)
        spec, message_list = self._prepare(messages, _options_of(locals()))
        return _generate(spec, message_list)


def _memory_ids(
    option: Any, thread_id: str | None, resource_id: str | None
) -> tuple[str | None, str | None]:
    """The call's thread and resource: the ``memory`` option (Mastra's
    ``{thread, resource}``; ``thread`` a str or ``{"id": ...}``) or its aliases
    ``thread_id=`` / ``resource_id=``; both forms must agree."""
    if option is None:
        return thread_id, resource_id
    if not isinstance(option, Mapping) or not set(option) <= {"thread", "resource"}:
        raise ConfigurationError(
            f"memory={option!r}; expected {{'thread': id, 'resource': id}} (thread "
            f"may be {{'id': ...}})"
        )
    thread = option.get("thread")
    if isinstance(thread, Mapping):
        thread = thread.get("id")
    resource = option.get("resource")
    for name, value in (("thread", thread), ("resource", resource)):
        if value is not None and (not isinstance(value, str) or not value):
            raise ConfigurationError(
                f"memory['{name}'] must be a non-empty str, got {value!r}"
            )
    for name, given, alias in (
        ("thread", thread, thread_id),
        ("resource", resource, resource_id),
    ):
        if given is not None and alias is not None and given != alias:
            raise ConfigurationError(
                f"memory['{name}'] is {given!r} but {name}_id= is {alias!r}; "
                f"give one of them"
            )
    return thread or thread_id, resource or resource_id


def _with_working_memory_tool(tools: ToolSet, memory: Memory) -> ToolSet:
    """The agent's tools plus ``updateWorkingMemory`` when working memory is on."""
    spec = memory.working_memory_tool()
    if spec is None or spec.name in tools:
        return tools
    tool = Tool(
        name=spec.name,
        description=spec.description,
        input=spec.input_schema,
        execute=spec.execute,
    )
    return tools.extended([tool])


def _options_of(scope: Mapping[str, Any]) -> dict[str, Any]:
    """The per-call options out of ``stream`` / ``generate``'s own locals."""
    return {name: scope[name] for name in CALL_OPTIONS}


async def _generate(spec: RunSpec, message_list: MessageList) -> AgentResult:
    async with open_stream(spec, message_list) as stream:
        return await stream.result()
