"""One attempt at one step: the input-step chain, the model call, the step's
hooks and its tools.

Chunk order (Mastra 1.71, SPEC rule 18): ``step-start``, the model's chunks;
then, once the client end has decided everything before
(``RunControl.settle``), the step's hooks, its tools and their
``tool-result`` / ``tool-error`` chunks; then ``step-finish``. A model's own
lifecycle chunks (``start``, ``step-start``, ``step-finish``, ``finish``: a
recorded stream replayed, a scripted chunk list) are the step's information,
never forwarded: the client sees one ``step-start`` and one ``step-finish`` per
step. A rejected attempt is closed by its ``step-retry`` chunk instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import attrs
import trio

from .._errors import (
    ModelIdleTimeout,
    ProcessionError,
    ProcessorContractError,
    ProviderError,
    TripWire,
)
from .._secrets import get_logger
from ..actors import (
    ProcessorActor,
    RetryRequested,
    RunControl,
)
from ..chunks import CHUNK_CLASSES, from_wire
from ..data import (
    FinishChunk,
    FinishPayload,
    StepFinishChunk,
    StepFinishPayload,
    StepOutput,
    StepResult,
    StepResultInfo,
    StepStartChunk,
    StepStartPayload,
    SystemMessage,
    TextPart,
    ToolCallInfo,
    ToolInvocationPart,
    TripwireInfo,
    add_usage,
    new_message_id,
)
from ..models import ModelFinish, ModelRequest, ToolDefinition, check_prompt_text
from ..processors import MessageList, ProcessInputStepResult
from ..processors._readers import (
    read_api_error_result,
    read_input_step_result,
    read_llm_request_result,
    read_llm_response_result,
    read_message_result,
)
from ._approval import PausedStep, PauseRun
from ._control_flow import EndOfRun, Retry
from ._durable import DurableRun
from ._hooks import HookLanes
from ._idle import IdleWatch
from ._reading import (
    LIFECYCLE,
    ModelReader,
    merged_finish,
    replay_reason,
    told_finish,
)
from ._state import RunState, StepConfig, StepView
from ._tool_calls import ToolCalls
from .tools import ToolSet

__all__ = ["StepRunner"]

logger = get_logger("procession")


class StepRunner:
    """Runs attempts at steps for one run (see the module docstring)."""

    def __init__(
        self,
        state: RunState,
        lanes: HookLanes,
        control: RunControl,
        durable: DurableRun | None = None,
    ) -> None:
        self._state = state
        self._lanes = lanes
        self._control = control
        self._durable = durable
        self._tools = ToolCalls(state, lanes, control, durable)
        # Only a stream processor can ask for a retry on step-finish or hold
        # text back until it: without one, the step goes on with step-finish
        # queued, not awaited (one hand-over less a step, and the run's
        # finish may leave with it). A durable run's checkpoints keep the
        # settle (what a takeover withdraws is what the client was sent).
        self._settles_step_finish = durable is not None or bool(
            lanes.lane("process_output_stream", "output")
        )

    async def attempt(self, step_number: int, view: StepView) -> bool:
        """One attempt at step ``step_number``. Returns whether another step
        follows. Raises ``Retry`` or ``EndOfRun``, and ``RetryRequested`` from
        ``settle``. Checkpoints; cancellation (the run ended) propagates."""
        state, control = self._state, self._control
        state.current_step = step_number
        state.attempt_usage = None
        retries_before = state.retry_count
        config = await self._input_step(step_number)
        if state.retry_count != retries_before:
            await control.mark_retry_count(state.retry_count, view)
        prompt = state.message_list.get.all.prompt()
        prompt, cached = await self._llm_request(step_number, config, prompt)
        durable = self._durable
        # A durable run taken over after the model answered this step (with
        # tool calls): the recorded answer, not a new model call.
        replay = durable.replay(step_number) if durable is not None else None
        if replay is not None:
            cached = replay[0]
        if cached is None:
            # A processor may have put text in that no HTTP layer can encode:
            # say where, before any request (not a UnicodeEncodeError in httpx).
            check_prompt_text(prompt)
        response_id = new_message_id()
        step_start = StepStartChunk(
            payload=StepStartPayload(message_id=response_id), run_id=state.run_id
        )
        await control.inject(step_start)
        # Not through _traced_model_call unless the run records: one frame
        # less held by every run while it waits on the model.
        call = self._traced_model_call if state.telemetry.active else self._model_call
        raw, finish = await call(step_number, config, prompt, cached)
        if replay is not None:
            finish = replay[1]
        state.usage = add_usage(state.usage, finish.usage)  # spent, kept or not
        state.attempt_usage = finish.usage
        # Everything the model sent has reached the client end: in-band signals
        # on its chunks are decided, and the view holds what the client saw.
        await control.settle()
        current = _step_result(step_number, view, finish)
        if durable is not None and replay is None and current.tool_calls:
            # Kept before the tools run: a takeover does not ask the model
            # again (its tools' records match its calls).
            await durable.record_attempt(step_number, raw, finish)
        await self._llm_response(config, current, step_start, raw, finish, cached)
        return await self._finish_attempt(config, view, finish, response_id, current)

    def _model_finish_chunk(self, finish: ModelFinish) -> FinishChunk:
        """The step's finish information as the model gave it, as a chunk (for
        ``process_llm_response``: a cache stores it with the step)."""
        return FinishChunk(
            payload=FinishPayload(
                step_result=StepResultInfo(reason=finish.finish_reason),
                output=StepOutput(usage=finish.usage),
                provider_metadata=finish.provider_metadata,
            ),
            run_id=self._state.run_id,
        )

    async def _step_finish(
        self, finish: ModelFinish, response_id: str, reason: str, tools: bool
    ) -> None:
        # Settled (or the run ended) right after: no need to wait here.
        await self._control.send_ahead(
            StepFinishChunk(
                payload=StepFinishPayload(
                    step_result=StepResultInfo(
                        reason=reason, is_continued=tools or None
                    ),
                    output=StepOutput(usage=finish.usage),
                    message_id=response_id,
                ),
                run_id=self._state.run_id,
            )
        )

    async def _finish_attempt(
        self,
        config: StepConfig,
        view: StepView,
        finish: ModelFinish,
        response_id: str,
        current: StepResult,
    ) -> bool:
        """Keep the attempt's message, run the step's hooks and tools, close the
        step with ``step-finish``; record it (or raise ``Retry`` / ``EndOfRun``).
        """
        state = self._state
        ml = state.message_list
        step_number = current.step_number
        ml.mark_response_message_boundary()
        message = view.build_message(
            f"{config.model.provider}/{config.model.model_id}", response_id
        )
        view.message = message
        ml.add(message, "response")
        tool_calls = list(current.tool_calls)
        try:
            await self._output_step(step_number, current, tool_calls)
        except TripWire as tripwire:
            await self._tripped(tripwire, finish, response_id, current)
        except RetryRequested:
            ml.remove_by_ids([response_id])
            raise
        paused = PausedStep(
            step_number=step_number,
            config=config,
            finish=finish,
            response_id=response_id,
            current=current,
            built=len(view.text),
        )
        return await self.finish_tools(paused, view)

    async def resume(self, paused: PausedStep, view: StepView) -> bool:
        """Go on with a step that paused for a person (its answer is in
        ``paused.phase``): run the rest of its calls and close it, as
        ``attempt`` would have. Raises as ``attempt`` does, and ``PauseRun``
        again when another of its calls waits. Checkpoints."""
        view.message = self._state.message_list.get_by_id(paused.response_id)
        view.step_open = True
        return await self.finish_tools(paused, view)

    async def finish_tools(self, paused: PausedStep, view: StepView) -> bool:
        """The step's tools (``PauseRun`` when one waits for a person: the run
        keeps ``paused``), then its ``step-finish``; record the step (or raise
        ``Retry`` / ``EndOfRun``). Checkpoints; cancellation (the run ended)
        propagates."""
        state = self._state
        ml = state.message_list
        config, finish, current = paused.config, paused.finish, paused.current
        response_id, built = paused.response_id, paused.built
        message = view.message
        tool_calls = list(current.tool_calls)
        try:
            try:
                results = await self._tools.run(
                    paused.step_number, config, tool_calls, paused.phase
                )
            except PauseRun as pause:
                paused.phase = pause.phase
                # What the client was shown of the step so far: its result
                # keeps it when the run goes on.
                paused.text_before += view.text_value
                pause.paused = paused
                raise
            await self._step_finish(
                finish, response_id, finish.finish_reason, bool(tool_calls)
            )
            if self._settles_step_finish:
                # A stream processor may ask for a retry on a tool-result
                # chunk or on step-finish; text it held back until
                # step-finish arrives now.
                await self._control.settle()
        except TripWire as tripwire:
            await self._tripped(tripwire, finish, response_id, current)
        except RetryRequested:
            ml.remove_by_ids([response_id])
            raise
        if len(view.text) > built and message is not None:
            late = "".join(view.text[built:])
            _add_late_text(message.content.parts, late)
            current = attrs.evolve(current, text=current.text + late)
        if results:
            current = attrs.evolve(current, tool_results=tuple(results))
        state.steps.append(current)
        # A resumed step's text was sent before its pause (the view of this
        # stream holds only what came after it).
        state.all_text.append(paused.text_before + view.text_value)
        view.committed = True
        view.committed_len = len(view.text)
        state.finish_reason = finish.finish_reason
        return bool(tool_calls) and finish.finish_reason != "length"

    async def _tripped(
        self,
        tripwire: TripWire,
        finish: ModelFinish,
        response_id: str,
        current: StepResult,
    ) -> NoReturn:
        """A tripwire in the step's hooks or tools: the step is withdrawn and
        retried (``Retry``), or the run ends (``EndOfRun``)."""
        state = self._state
        state.message_list.remove_by_ids([response_id])
        if tripwire.retry and state.may_retry():
            raise Retry(tripwire) from None
        # Rejected: out of the conversation (nothing of it is kept or saved),
        # but the client saw it, so the result shows it (``build_result``).
        state.steps.append(
            attrs.evolve(
                current,
                text="",
                finish_reason="tripwire",
                tripwire=TripwireInfo.of(tripwire),
            )
        )
        # Mastra 1G.53: the step-finish of a tripped step says so.
        await self._step_finish(finish, response_id, "tripwire", False)
        raise EndOfRun(tripwire=tripwire) from None

    # --- before the model ---------------------------------------------------------

    async def _input_step(self, step_number: int) -> StepConfig:
        """Chain ``process_input_step`` over the input lane, then ``prepare_step``.
        A retry re-runs the chain from the step's starting configuration and
        system messages, with the feedback (SPEC §2.4); in-place edits of the
        conversation made by the rejected pass stay (they are the conversation).
        """
        state = self._state
        actors = self._lanes.lane("process_input_step", "input")
        if self._lanes.prepare_actor is not None:
            actors.append(self._lanes.prepare_actor)
        system = state.message_list.snapshot_system_messages()
        while True:
            config = StepConfig.start(state.spec)
            try:
                for actor in actors:
                    await self._one_input_step(actor, step_number, config)
                return config
            except TripWire as tripwire:
                if tripwire.retry and state.may_retry():
                    state.count_retry("processor", tripwire.processor_id)
                    state.message_list.restore_system_messages(system)
                    state.set_feedback(tripwire.reason)
                    continue
                raise EndOfRun(tripwire=tripwire) from None

    async def _one_input_step(
        self, actor: ProcessorActor, step_number: int, config: StepConfig
    ) -> None:
        state = self._state
        ml = state.message_list
        raw = await self._lanes.call(
            actor,
            "process_input_step",
            messages=ml.get.all.db(),
            message_list=ml,
            step_number=step_number,
            steps=tuple(state.steps),
            system_messages=ml.get_all_system_messages(),
            model=config.model,
            tools=dict(config.tools),
            tool_choice=config.tool_choice,
            active_tools=config.active_tools,
            provider_options=config.provider_options,
            model_settings=config.model_settings,
            structured_output=config.structured_output,
        )
        result = read_input_step_result(raw, actor.id)
        if result is None or isinstance(result, MessageList):
            if isinstance(result, MessageList) and result is not ml:
                read_message_result(result, actor.id, "process_input_step", ml)
            return
        if isinstance(result, list):
            state.apply_messages(result, actor.id, "process_input_step", "all")
            return
        assert isinstance(result, ProcessInputStepResult)
        self._apply_input_step(actor, result, config)

    def _apply_input_step(
        self, actor: ProcessorActor, result: ProcessInputStepResult, config: StepConfig
    ) -> None:
        state = self._state
        ml = state.message_list
        if result.messages is not None:
            state.apply_messages(
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
            config.model = state.spec.model_for(result.model)
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
        self, step_number: int, config: StepConfig, prompt: list[Any]
    ) -> tuple[list[Any], Sequence[Any] | None]:
        cached: Sequence[Any] | None = None
        for actor in self._lanes.lane("process_llm_request", "input"):
            try:
                raw = await self._lanes.call(
                    actor,
                    "process_llm_request",
                    prompt=prompt,
                    model=config.model,
                    step_number=step_number,
                    steps=tuple(self._state.steps),
                )
            except TripWire as tripwire:
                raise EndOfRun(tripwire=tripwire) from None
            result = read_llm_request_result(raw, actor.id)
            if result is None:
                continue
            if result.prompt is not None:
                prompt = list(result.prompt)
            if result.response is not None and cached is None:
                # The first cached response wins.
                cached = _cached_chunks(result.response, actor.id)
        return prompt, cached

    # --- the model ----------------------------------------------------------------

    async def _traced_model_call(
        self,
        step_number: int,
        config: StepConfig,
        prompt: list[Any],
        cached: Sequence[Any] | None,
    ) -> tuple[list[Any], ModelFinish]:
        """``_model_call`` inside a ``chat {model}`` span when the run records."""
        telemetry = self._state.telemetry
        if not telemetry.active:
            return await self._model_call(step_number, config, prompt, cached)
        model = config.model
        span = telemetry.model_started(
            step_number, model.provider, model.model_id, prompt
        )
        ended = {"model_id": model.model_id, "provider": model.provider}
        try:
            raw, finish = await self._model_call(step_number, config, prompt, cached)
        except (Retry, EndOfRun) as failed:
            error = failed.error if isinstance(failed, EndOfRun) else None
            cause = failed.__context__ if error is None else error
            telemetry.model_ended(
                span, **ended, error=cause if isinstance(cause, Exception) else None
            )
            raise
        except BaseException:
            span.end()
            raise
        telemetry.model_ended(
            span,
            **ended,
            finish_reason=finish.finish_reason,
            usage=finish.usage,
            from_cache=cached is not None,
        )
        return raw, finish

    async def _model_call(
        self,
        step_number: int,
        config: StepConfig,
        prompt: list[Any],
        cached: Sequence[Any] | None,
    ) -> tuple[list[Any], ModelFinish]:
        """Stream the model (or the cached replay) into the pipeline. API errors go
        to the error processors; a retry raises ``Retry``."""
        state, control = self._state, self._control
        raw: list[Any] = []
        told: ModelFinish | None = None  # a lifecycle chunk's finish information
        if cached is not None:
            for chunk in cached:
                if chunk.__class__ in LIFECYCLE:
                    told = told_finish(chunk, told)
                    continue
                raw.append(chunk)
                await control.inject(state.stamp(chunk))
            return raw, told or ModelFinish(finish_reason=replay_reason(raw))
        idle = state.spec.idle_timeout
        # Watched by the trio run's one idle watchdog (_idle) once the run
        # waits for the model, not a cancel-scope deadline moved on every
        # chunk (twice the cost); the scope it cancels is the read's own.
        watch = IdleWatch(idle if idle is not None else math.inf, control.reading())
        try:
            try:
                raw_finish = await self._read_model(config, prompt, raw, watch)
            finally:
                watch.stop()
            if watch.fired:
                raise ModelIdleTimeout(idle or 0.0, provider=config.model.provider)
            return raw_finish
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise  # the client end is gone: the run is being torn down
        except ProcessionError as exc:
            if not isinstance(exc, ProviderError):
                # Not an API failure (a missing key, a malformed request...):
                # error processors are not asked and nothing is retried.
                raise EndOfRun(error=exc) from exc
            await self._api_error(step_number, exc)
        except Exception as exc:
            await self._api_error(step_number, exc)

    async def _read_model(
        self,
        config: StepConfig,
        prompt: list[Any],
        raw: list[Any],
        watch: IdleWatch,
    ) -> tuple[list[Any], ModelFinish]:
        """Stream the model into the pipeline (``ModelReader``); ``watch`` is
        told when the run waits for the model (its timer runs only then) and
        cancels the read if the model goes quiet too long."""
        # The model's own chunks are kept only for process_llm_response, and
        # for a durable run's record of an answer that calls tools.
        keep = self._durable is not None or bool(
            self._lanes.lane("process_llm_response", "input")
        )
        reader = ModelReader(self._state, self._control, watch, raw, keep=keep)
        # One scope: a granted retry, the run's end and the idle timeout all
        # stop the read (RunControl.reading, IdleWatch).
        with watch.scope as scope:
            async with config.model.stream(_request(config, prompt)) as response:
                await reader.read(response.__aiter__())
                finish = merged_finish(response.finish, reader.told) or ModelFinish(
                    finish_reason="tool-calls" if reader.tool_called else "stop"
                )
        self._control.read_done()
        if scope.cancelled_caught or watch.fired:
            return raw, ModelFinish(finish_reason="other")
        return raw, finish

    async def _api_error(self, step_number: int, error: Exception) -> NoReturn:
        """The model call failed: let what was sent settle, then ask the error
        processors (input, output, then error lane; the first ``retry`` wins)."""
        await self._control.settle()
        state = self._state
        ml = state.message_list
        retry_by: str | None = None
        for actor in self._lanes.lane("process_api_error", "input", "output", "error"):
            try:
                raw = await self._lanes.call(
                    actor,
                    "process_api_error",
                    error=error,
                    messages=ml.get.all.db(),
                    message_list=ml,
                    step_number=step_number,
                    steps=tuple(state.steps),
                )
            except TripWire as tripwire:
                raise EndOfRun(tripwire=tripwire) from None
            except EndOfRun as failed:
                # SPEC rule 18h: on_error applies here too. Under "raise" the run
                # ends with the processor's error (its __cause__ the bug, which
                # happened while the API error was being handled); "pass" is
                # Mastra's fail-open (HookLanes.call returned None above).
                bug = failed.error.__cause__ if failed.error is not None else None
                if bug is not None and bug.__context__ is None:
                    bug.__context__ = error
                raise

            if read_api_error_result(raw, actor.id):
                retry_by = actor.id  # the first {retry: True} wins (Mastra 1E.28)
                break
        if retry_by is not None and state.may_retry():
            raise Retry(
                TripWire(f"API error: {error}", retry=True, processor_id=retry_by),
                feedback=False,
            )
        raise EndOfRun(error=error)

    # --- after the model ----------------------------------------------------------

    async def _llm_response(
        self,
        config: StepConfig,
        current: StepResult,
        step_start: StepStartChunk,
        raw: list[Any],
        finish: ModelFinish,
        cached: Sequence[Any] | None,
    ) -> None:
        actors = self._lanes.lane("process_llm_response", "input")
        if not actors:
            return  # the step's chunks are made only for a hook to see
        chunks = (step_start, *raw, self._model_finish_chunk(finish))
        for actor in actors:
            try:
                raw_result = await self._lanes.call(
                    actor,
                    "process_llm_response",
                    chunks=chunks,
                    model=config.model,
                    step_number=current.step_number,
                    # The seed: every step so far, this one included.
                    steps=(*self._state.steps, current),
                    from_cache=cached is not None,
                    warnings=tuple(finish.warnings),
                    request=finish.request,
                    raw_response=finish.raw_response,
                )
            except TripWire as tripwire:
                raise EndOfRun(tripwire=tripwire) from None
            read_llm_response_result(raw_result, actor.id)

    async def _output_step(
        self, step_number: int, current: StepResult, tool_calls: list[ToolCallInfo]
    ) -> None:
        state = self._state
        ml = state.message_list
        for actor in self._lanes.lane("process_output_step", "output"):
            result = await self._lanes.call(
                actor,
                "process_output_step",
                messages=ml.get.all.db(),
                message_list=ml,
                step_number=step_number,
                system_messages=ml.get_all_system_messages(),
                steps=(*state.steps, current),
                text=current.text,
                finish_reason=current.finish_reason,
                tool_calls=tuple(tool_calls) or None,
                usage=current.usage,
                provider_metadata=current.provider_metadata,
            )
            state.apply_messages(result, actor.id, "process_output_step", "all")


def _request(config: StepConfig, prompt: list[Any]) -> ModelRequest:
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


def _step_result(step_number: int, view: StepView, finish: ModelFinish) -> StepResult:
    """The step as the client received it and the model ended it."""
    return StepResult(
        step_number=step_number,
        text=view.text_value,
        reasoning=view.reasoning_value,
        tool_calls=tuple(
            ToolCallInfo(
                tool_call_id=c.payload.tool_call_id,
                tool_name=c.payload.tool_name,
                args=c.payload.args,
                provider_executed=c.payload.provider_executed,
            )
            for c in view.tool_calls
        ),
        finish_reason=finish.finish_reason,
        usage=finish.usage,
        warnings=tuple(finish.warnings),
        provider_metadata=finish.provider_metadata,
        sources=tuple(view.sources),
        files=tuple(view.files),
        request=finish.request,
        response=finish.raw_response,
    )


def _cached_chunks(response: Any, processor_id: str) -> list[Any]:
    """A cached response's chunks as chunk objects. ``response`` is a list of
    chunks, or ``{"chunks": [...]}`` (the seed's shape); each chunk is a chunk
    object or the compact ``{type, payload}`` JSON a cache stores. Anything else
    is the processor's contract error, naming the offending item."""

    def wrong(problem: str) -> ProcessorContractError:
        return ProcessorContractError(
            processor_id,
            "process_llm_request",
            f"returned a cached response {problem}; expected a list of chunks (or "
            f"{{'chunks': [...]}}), each a chunk object or {{'type': ..., "
            f"'payload': ...}} JSON",
        )

    if isinstance(response, Mapping):
        if set(response) != {"chunks"}:
            raise wrong(f"with keys {sorted(map(str, response))}")
        response = response["chunks"]
    if isinstance(response, (str, bytes)) or not isinstance(response, Sequence):
        raise wrong(f"of type {type(response).__name__}")
    chunks: list[Any] = []
    for index, item in enumerate(response):
        if item.__class__ in CHUNK_CLASSES:
            chunks.append(item)
            continue
        if not isinstance(item, Mapping):
            raise wrong(f"whose item {index} is {item!r}")
        try:
            chunks.append(from_wire(item))
        except ProcessionError as exc:
            raise wrong(f"whose item {index} ({item!r}) is not a chunk: {exc}") from exc
    return chunks


def _add_late_text(parts: list[Any], late: str) -> None:
    """Text that arrived after the message was built (flushed on step-finish)
    joins its text part, before the tool calls, as the model wrote it."""
    for index, part in enumerate(parts):
        if isinstance(part, TextPart):
            parts[index] = attrs.evolve(part, text=part.text + late)
            return
        if isinstance(part, ToolInvocationPart):
            parts.insert(index, TextPart(text=late))
            return
    parts.append(TextPart(text=late))
