"""The agent: its configuration, and ``generate`` / ``stream`` applying a
call's options (their one list is ``CallOptions``, in ``_options``) to it.

One call is one *run*: ``procession.runtime._run`` is its coordinator (the step
loop), ``_step`` one attempt, ``_hooks`` the hook lanes, ``_stream`` the client
end and supervisor, ``_result`` the result, built from the run's one outcome
(``RunOutcome``, decided in ``procession.actors.RunControl.conclude``).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final

from .._errors import ConfigurationError, NoRunStorageError
from ..actors import ExecutionMode
from ..data import Message, SystemMessage
from ..memory import Memory, RunRecord, RunStorage, memory_ids
from ..models import LanguageModel, resolve_model
from ..processors import MessageList, ProcessInputStepArgs, ProcessorSet, RequestContext
from ._answer import SuspendedRun, continue_run, suspended_runs
from ._approval import RequireToolApproval
from ._durable import Durable, check_durable, require_durable_storage
from ._options import (
    CallOptions,
    ProcessorList,
    UseAgentDefault,
    check_approval_policy,
    check_callable,
    check_execution_mode,
    check_int,
    check_seconds,
    new_run_id,
    or_default,
    resolve_lane,
    takes_call_options,
)
from ._registrations import Registrations
from ._result import AgentResult
from ._state import RunSpec
from ._stream import AgentStream, open_stream
from ._takeover import take_over_run
from .tools import Tool, ToolSet, ToolSource

__all__ = ["Agent"]

_DEFAULT_BUDGET_WITH_ERROR_PROCESSORS: Final = 10  # the seed's number (SPEC §2.3)
DEFAULT_IDLE_TIMEOUT: Final = 60.0
"""Seconds a model stream may go without an event before ``ModelIdleTimeout``."""


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
        require_tool_approval: which tool calls wait for a person's approval
            before they run: ``True`` (all), ``False`` (the default: those
            whose tool says ``require_approval``), or ``fn(tool_name, args,
            request_context) -> bool`` (sync or async; one that raises
            requires approval). A tool whose ``require_approval`` is a function
            decides for itself (Mastra's rule). A call that waits ends the
            stream with a ``tool-call-approval`` chunk; answer it with
            ``approve_tool_call`` / ``decline_tool_call``.
        approval_ttl: seconds a call may wait for its approval; an answer
            after that declines it, telling the model the approval expired
            (default None: it waits for good).
        storage: where runs that wait for a person are kept (a
            ``SqliteStorage`` or ``PostgresStorage``); default the memory's
            storage. A run that must wait without one fails at that point
            with ``NoRunStorageError``, never a hang.
        durable: ``True`` (or ``Durable(lease_s=...)``): each run is kept in
            ``storage`` from its start and checkpointed at every step, and
            another process serving this agent takes it over if this one
            dies (``take_over``; ``procession serve`` does it). Needs storage
            other processes read (a SQLite file, PostgreSQL): without it a
            run fails before it starts, never silently non-durable.
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
        require_tool_approval: RequireToolApproval = False,
        approval_ttl: float | None = None,
        storage: RunStorage | None = None,
        durable: bool | Durable = False,
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
        self.prepare_step = check_callable("prepare_step", prepare_step)
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
        self.require_tool_approval = check_approval_policy(require_tool_approval)
        self.approval_ttl = check_seconds("approval_ttl", approval_ttl)
        if storage is not None and not isinstance(storage, RunStorage):
            raise ConfigurationError(
                f"storage must be a procession.memory storage that keeps runs "
                f"(SqliteStorage or PostgresStorage), got {storage!r}"
            )
        self.storage = storage
        self.durable = check_durable(durable)
        self._runs_kept_by: tuple[object, RunStorage | None] | None = None

    @property
    def run_storage(self) -> RunStorage | None:
        """Where this agent's waiting runs are kept: ``storage``, else the
        memory's storage when it keeps runs, else None."""
        if self.storage is not None:
            return self.storage
        memory_storage = self.memory.storage if self.memory is not None else None
        if memory_storage is None:
            return None
        # Asked for every run: a runtime-checkable protocol's isinstance walks
        # every member (tens of µs), so the answer is kept per storage object.
        known = self._runs_kept_by
        if known is None or known[0] is not memory_storage:
            kept = memory_storage if isinstance(memory_storage, RunStorage) else None
            known = self._runs_kept_by = (memory_storage, kept)
        return known[1]

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
        self, messages: Any, options: CallOptions
    ) -> tuple[RunSpec, MessageList]:
        """The call's spec and conversation: the agent's values with the call's
        ``options`` applied. Every option is checked here, before anything runs,
        in the order written (a ``ConfigurationError`` names the first bad one)."""
        idle_timeout = check_seconds(
            "idle_timeout", or_default(options.idle_timeout, self.idle_timeout)
        )
        run_deadline = check_seconds(
            "run_deadline", or_default(options.run_deadline, self.run_deadline)
        )
        context, thread_id, resource_id = self._call_context(options)
        processors = self._processors(options, context)
        budget = self._budget(options, processors)
        max_steps = or_default(options.max_steps, self.max_steps)
        check_int("max_steps", max_steps, minimum=1, allow_none=False)
        prepare_step = check_callable(
            "prepare_step", or_default(options.prepare_step, self.prepare_step)
        )
        mode = check_execution_mode(
            or_default(options.execution_mode, self.execution_mode)
        )
        model = self._model(options)
        tools = self._tools()
        active_tools = _active_tools(options, tools)
        spec = RunSpec(
            run_id=options.run_id or new_run_id(),
            processors=processors,
            prepare_step=prepare_step,
            budget=budget,
            max_steps=max_steps,
            request_context=context,
            model=model,
            model_for=self.model_for,
            tools=tools,
            tool_choice=or_default(options.tool_choice, self.tool_choice),
            active_tools=active_tools,
            model_settings={**self.model_settings, **(options.model_settings or {})},
            provider_options={
                **self.provider_options,
                **(options.provider_options or {}),
            },
            mode=mode,
            idle_timeout=idle_timeout,
            run_deadline=run_deadline,
            agent_id=self.id,
            agent_name=self.name,
            tracer_provider=self.tracer_provider,
            meter_provider=self.meter_provider,
            memory=self.memory,
            require_tool_approval=check_approval_policy(
                or_default(options.require_tool_approval, self.require_tool_approval)
            ),
            approval_ttl=check_seconds(
                "approval_ttl", or_default(options.approval_ttl, self.approval_ttl)
            ),
            run_storage=self.run_storage,
            durable=check_durable(or_default(options.durable, self.durable)),
        )
        if spec.durable is not None:
            require_durable_storage(spec.agent_id, spec.run_storage)
        return spec, self._conversation(messages, context, thread_id, resource_id)

    def _call_context(
        self, options: CallOptions
    ) -> tuple[RequestContext, str | None, str | None]:
        """The call's request context, thread and resource. With memory, both
        ids are required, and the context carries them (as in Mastra)."""
        thread_id, resource_id = _memory_ids(
            options.memory, options.thread_id, options.resource_id
        )
        given = options.request_context
        context = (
            given if isinstance(given, RequestContext) else RequestContext(given or {})
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
        return context, thread_id, resource_id

    def _processors(
        self, options: CallOptions, context: RequestContext
    ) -> ProcessorSet:
        """The call's three lanes (a lane may be a callable of ``context``),
        registered; memory's processors come first in the input lane."""
        input_lane = resolve_lane(
            or_default(options.input_processors, self.input_processors),
            context,
            "input_processors",
        )
        output_lane = resolve_lane(
            or_default(options.output_processors, self.output_processors),
            context,
            "output_processors",
        )
        error_lane = resolve_lane(
            or_default(options.error_processors, self.error_processors),
            context,
            "error_processors",
        )
        if self.memory is not None:
            # The seed: memory's processors "always stay, before your lists"; one
            # the caller lists explicitly (same id) replaces the automatic one.
            listed = {getattr(p, "id", None) for p in input_lane}
            automatic = [
                p for p in self.memory.input_processors() if p.id not in listed
            ]
            input_lane = [*automatic, *input_lane]
        return self._registrations.register(
            input=input_lane, output=output_lane, error=error_lane
        )

    def _tools(self) -> ToolSet:
        """The agent's tools, plus ``updateWorkingMemory`` with working memory."""
        if self.memory is None:
            return self.tools
        return _with_working_memory_tool(self.tools, self.memory)

    def _budget(self, options: CallOptions, processors: ProcessorSet) -> int | None:
        """The retry budget: unset means none, or the seed's 10 once error
        processors are configured."""
        budget = or_default(options.max_processor_retries, self.max_processor_retries)
        check_int("max_processor_retries", budget, minimum=0, allow_none=True)
        if budget is None and processors.error:
            return _DEFAULT_BUDGET_WITH_ERROR_PROCESSORS
        return budget

    def _model(self, options: CallOptions) -> LanguageModel:
        if isinstance(options.model, UseAgentDefault):
            return self.model
        return self.model_for(options.model)

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

    @takes_call_options
    def stream(
        self, messages: Any, options: CallOptions
    ) -> AbstractAsyncContextManager[AgentStream]:
        """Start a run; ``async with agent.stream(...) as stream:`` then iterate.

        Takes the same per-call options as ``generate``. Arguments are checked
        now (an unknown keyword is a ``TypeError``, a bad value a
        ``ConfigurationError``); the run's tasks live inside the ``async with``,
        and leaving it early cancels the run and closes the provider connection.
        """
        spec, message_list = self._prepare(messages, options)
        return open_stream(spec, message_list)

    @takes_call_options
    def generate(
        self, messages: Any, options: CallOptions
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
        Mastra's call option), ``thread_id`` and ``resource_id`` (its aliases),
        ``require_tool_approval`` and ``approval_ttl`` (a person in the loop:
        see ``Agent``), ``durable`` (the run outlives its process: see
        ``Agent``).
        """
        spec, message_list = self._prepare(messages, options)
        return _generate(spec, message_list)

    # --- a person in the loop ---------------------------------------------------

    def approve_tool_call(
        self,
        run_id: str,
        tool_call_id: str | None = None,
        *,
        resource_id: str | None = None,
        decided_by: str | None = None,
    ) -> AbstractAsyncContextManager[AgentStream]:
        """Approve the call run ``run_id`` waits on and go on with the run:
        ``async with agent.approve_tool_call(run_id) as stream:``, a stream
        like ``stream()``'s (the same run id; its first chunks are the paused
        step's tool results, with no ``start``). ``tool_call_id`` None
        answers the only waiting call. The answer is applied exactly once,
        whoever else answers (another process on the same storage included):
        entering raises ``ApprovalAlreadyDecided`` for a call answered
        before, ``WaitingRunNotFound`` for a run of another agent (or of
        another resource, when ``resource_id`` is given), and
        ``ToolCallNotPendingError`` naming the waiting calls. An approval past
        the call's ``approval_ttl`` declines it instead (the model is told
        it expired). ``decided_by`` is recorded with the decision. Entering
        checkpoints (the storage)."""
        return continue_run(
            self,
            self._prepare,
            run_id,
            tool_call_id,
            "approved",
            resource_id=resource_id,
            decided_by=decided_by,
        )

    def decline_tool_call(
        self,
        run_id: str,
        tool_call_id: str | None = None,
        reason: str | None = None,
        *,
        resource_id: str | None = None,
        decided_by: str | None = None,
    ) -> AbstractAsyncContextManager[AgentStream]:
        """Decline the call run ``run_id`` waits on and go on with the run, as
        ``approve_tool_call``: the call does not run; the model reads
        ``reason`` (default "Tool call was not approved by the user", Mastra's
        words) as its result, and the stream shows a ``tool-output-denied``
        chunk. Entering checkpoints."""
        return continue_run(
            self,
            self._prepare,
            run_id,
            tool_call_id,
            "declined",
            reason=reason,
            resource_id=resource_id,
            decided_by=decided_by,
        )

    def resume_stream(
        self,
        run_id: str,
        resume_data: Any,
        tool_call_id: str | None = None,
        *,
        resource_id: str | None = None,
        decided_by: str | None = None,
    ) -> AbstractAsyncContextManager[AgentStream]:
        """Give the tool that suspended itself in run ``run_id`` its
        ``resume_data`` (JSON) and go on with the run: the tool runs again
        from the top with ``context.resume_data`` set. Resume data
        ``{"approved": bool, "reason": ...}`` answers an approval too
        (Mastra's ``resumeStream``). As ``approve_tool_call`` otherwise.
        Entering checkpoints."""
        return continue_run(
            self,
            self._prepare,
            run_id,
            tool_call_id,
            "resumed",
            data=resume_data,
            resource_id=resource_id,
            decided_by=decided_by,
        )

    async def approve_tool_call_generate(
        self,
        run_id: str,
        tool_call_id: str | None = None,
        *,
        resource_id: str | None = None,
        decided_by: str | None = None,
    ) -> AgentResult:
        """``approve_tool_call`` run to its end: the result (which may be
        ``suspended`` again). Checkpoints."""
        async with self.approve_tool_call(
            run_id, tool_call_id, resource_id=resource_id, decided_by=decided_by
        ) as stream:
            return await stream.result()

    async def decline_tool_call_generate(
        self,
        run_id: str,
        tool_call_id: str | None = None,
        reason: str | None = None,
        *,
        resource_id: str | None = None,
        decided_by: str | None = None,
    ) -> AgentResult:
        """``decline_tool_call`` run to its end: the result. Checkpoints."""
        async with self.decline_tool_call(
            run_id,
            tool_call_id,
            reason,
            resource_id=resource_id,
            decided_by=decided_by,
        ) as stream:
            return await stream.result()

    async def resume_generate(
        self,
        run_id: str,
        resume_data: Any,
        tool_call_id: str | None = None,
        *,
        resource_id: str | None = None,
        decided_by: str | None = None,
    ) -> AgentResult:
        """``resume_stream`` run to its end: the result. Checkpoints."""
        async with self.resume_stream(
            run_id,
            resume_data,
            tool_call_id,
            resource_id=resource_id,
            decided_by=decided_by,
        ) as stream:
            return await stream.result()

    async def list_suspended_runs(
        self, *, resource_id: str | None = None, thread_id: str | None = None
    ) -> list[SuspendedRun]:
        """This agent's runs that wait for a person (of ``resource_id`` and
        ``thread_id``, when given), most recent first, each with the calls it
        waits on. ``NoRunStorageError`` without storage. Checkpoints."""
        return await suspended_runs(self, resource_id=resource_id, thread_id=thread_id)

    # --- durable runs -------------------------------------------------------------

    async def lapsed_runs(self, *, limit: int = 100) -> list[RunRecord]:
        """This agent's durable runs whose lease lapsed (their process died,
        or handed them over), oldest lapse first: the runs ``take_over`` can
        take. ``NoRunStorageError`` without storage. Checkpoints."""
        storage = self.run_storage
        if storage is None:
            raise NoRunStorageError(
                f"agent {self.id!r} has no storage that keeps durable runs"
            )
        return await storage.lapsed_runs([self.id], limit=limit)

    def take_over(
        self, run: RunRecord, *, durable: bool | Durable = True
    ) -> AbstractAsyncContextManager[AgentStream]:
        """Take over the lapsed durable run ``run`` (as ``lapsed_runs`` listed
        it) and go on with it here: ``async with agent.take_over(run) as
        stream:``, a stream like ``stream()``'s under the same run id. It
        starts with a ``step-retry`` (reason ``takeover``) for the step it
        redoes from the run's last checkpoint (or with ``start``, if nothing
        of the run had been sent). Recorded tool outcomes are not run again;
        a tool cut off mid-call runs again only if it is idempotent. Entering
        raises ``RunLostError`` when the run was not there to take (another
        process took it first, or its owner renewed its lease). Checkpoints.

        ``durable``: how this process holds the run (its lease), by default
        as the agent's ``durable`` says.

        ``procession serve`` takes runs over by itself; a process of your own
        takes over its runs at start with ``adopt_lapsed_runs``."""
        holding = check_durable(durable)
        if holding is None:
            raise ConfigurationError(
                "take_over(durable=False): a run taken over stays durable"
            )
        return take_over_run(
            self, self._prepare, run, None if durable is True else holding
        )


def _memory_ids(
    option: object, thread_id: str | None, resource_id: str | None
) -> tuple[str | None, str | None]:
    """The call's thread and resource: the ``memory`` option (Mastra's
    ``{thread, resource}``; ``thread`` a str or ``{"id": ...}``) or its aliases
    ``thread_id=`` / ``resource_id=``; both forms must agree."""
    _check_text(thread_id=thread_id, resource_id=resource_id)
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
    _check_text(**{"memory['thread']": thread, "memory['resource']": resource})
    return thread or thread_id, resource or resource_id


def _check_text(**ids: object) -> None:
    """``ConfigurationError`` naming an id that is not valid text (a lone
    UTF-16 surrogate: no store can keep it, and the error would come from deep
    inside one)."""
    for name, value in ids.items():
        if isinstance(value, str) and not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise ConfigurationError(
                    f"{name}={value!r} is not valid text (a lone UTF-16 "
                    f"surrogate): no store can keep it"
                ) from None


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


def _active_tools(options: CallOptions, tools: ToolSet) -> list[str] | None:
    """The call's ``active_tools``, each a name in ``tools``. A tool source
    that is not open, or two tools of one name, is an error now (each step
    takes its own snapshot: a source's list may change between steps)."""
    offered = tools.snapshot()
    if options.active_tools is None:
        return None
    offered.names(list(options.active_tools))  # unknown names are an error now
    return list(options.active_tools)


async def _generate(spec: RunSpec, message_list: MessageList) -> AgentResult:
    async with open_stream(spec, message_list) as stream:
        return await stream.result()
