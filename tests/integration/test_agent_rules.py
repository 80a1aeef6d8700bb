"""The agent, end to end, as a user sees it: one or more tests per rule of SPEC §2
that concerns a run (1-14, 16, 17), plus structured cancellation, per-call
overrides, tool restriction, ``prepare_step``, per-step models and API errors.

Every test drives a real ``Agent`` with a ``ScriptedModel`` and checks what the
client receives (chunks, in order, as Mastra wire JSON where the shape matters),
what the result says, and what the model was sent (``model.calls``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from seed_processors import content_filter_for

from procession import (
    Agent,
    AgentResult,
    ConfigurationError,
    Message,
    MessageList,
    Processor,
    ProcessorViolation,
    ProviderError,
    message_text,
    tool,
)
from procession.actors import ExecutionMode
from procession.chunks import (
    AbortChunk,
    ErrorChunk,
    FinishChunk,
    StepRetryChunk,
    TextDeltaChunk,
    TextDeltaPayload,
    ToolErrorChunk,
    ToolResultChunk,
    TripwireChunk,
    data,
    to_wire,
)
from procession.processors import (
    DuplicateProcessorIdError,
    MessageContent,
    ProcessAPIErrorArgs,
    ProcessInputArgs,
    ProcessInputStepArgs,
    ProcessLLMRequestArgs,
    ProcessLLMRequestResult,
    ProcessLLMResponseArgs,
    ProcessorContractError,
    ProcessorError,
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
    PromptToolResultPart,
    TextPart,
)
from procession.runtime import RETRY_FEEDBACK_TAG, ToolContext, register_provider
from procession.testing import Delay, ScriptedModel, text_turn, tool_call_turn

MODES: tuple[ExecutionMode, ...] = ("fused", "actors")
each_mode = pytest.mark.parametrize("mode", MODES)


# --- helpers -------------------------------------------------------------------


def feedback(reason: str) -> str:
    """The retry feedback text of SPEC §2.5."""
    return (
        f"Your previous response was not accepted: {reason}. Please try again with "
        f"the feedback in mind."
    )


async def run_stream(
    agent: Agent, messages: Any = "hi", **options: Any
) -> tuple[list[Any], AgentResult]:
    """Read a whole streamed run; return the client's chunks and the result."""
    async with agent.stream(messages, **options) as stream:
        chunks = [chunk async for chunk in stream]
        result = await stream.result()
    return chunks, result


def types(chunks: Sequence[Any]) -> list[str]:
    return [chunk.type for chunk in chunks]


def deltas(chunks: Sequence[Any]) -> list[str]:
    return [c.payload.text for c in chunks if isinstance(c, TextDeltaChunk)]


def wire(chunks: Sequence[Any]) -> list[dict[str, Any]]:
    """The chunks as Mastra wire JSON, minus the random response-message id of
    ``step-start`` / ``step-finish`` (message ids are fresh uuids in every run)."""
    out = []
    for chunk in chunks:
        item = to_wire(chunk)
        if item.get("type") in ("step-start", "step-finish"):
            item = {**item, "payload": dict(item["payload"])}
            item["payload"].pop("messageId", None)
        out.append(item)
    return out


def prompt_texts(prompt: Sequence[Any]) -> list[str]:
    """Each prompt message as ``"role: text"`` (tool results as their value)."""
    out = []
    for message in prompt:
        if isinstance(message.content, str):
            out.append(f"{message.role}: {message.content}")
            continue
        pieces = []
        for part in message.content:
            if isinstance(part, PromptToolResultPart):
                pieces.append(f"result[{part.tool_call_id}]={part.result}")
            elif hasattr(part, "text"):
                pieces.append(part.text)
            elif hasattr(part, "tool_name"):
                pieces.append(f"call[{part.tool_call_id}]:{part.tool_name}")
        out.append(f"{message.role}: {' '.join(pieces)}")
    return out


def system_texts(prompt: Sequence[Any]) -> list[str]:
    return [m.content for m in prompt if m.role == "system"]


def upper(chunk: TextDeltaChunk) -> TextDeltaChunk:
    return attrs.evolve(
        chunk, payload=attrs.evolve(chunk.payload, text=chunk.payload.text.upper())
    )


@attrs.frozen
class EchoInput:
    text: str


@tool
def echo(args: EchoInput) -> str:
    """Echo the text back."""
    return f"echo:{args.text}"


@tool
def other(args: EchoInput) -> str:
    """Another tool."""
    return f"other:{args.text}"


@attrs.frozen
class NapInput:
    seconds: float


def user_message(text: str) -> Message:
    return Message(role="user", content=MessageContent(parts=[TextPart(text=text)]))


# --- processors used by several tests -------------------------------------------


class Upper(Processor):
    id = "upper"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        return upper(part) if isinstance(part, TextDeltaChunk) else part


class Observer(Processor):
    """Records every chunk type it is shown (last in the output lane)."""

    id = "observer"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        self.seen.append(args.part.type)
        return args.part


class RetryStepWhile(Processor):
    """``process_output_step``: asks for a retry while the text contains
    ``word``."""

    id = "retry-step"

    def __init__(self, word: str = "bad", reason: str = "too short") -> None:
        self.word = word
        self.reason = reason
        self.seen: list[tuple[int, int, str]] = []

    def process_output_step(self, args: ProcessOutputStepArgs) -> None:
        self.seen.append((args.step_number, args.retry_count, args.text))
        if self.word in args.text:
            args.abort(self.reason, retry=True)


class AlwaysRetryStep(Processor):
    id = "always-retry"

    def __init__(self) -> None:
        self.seen: list[int] = []

    def process_output_step(self, args: ProcessOutputStepArgs) -> None:
        self.seen.append(args.retry_count)
        args.abort("again", retry=True)


class NoopErrorProcessor(Processor):
    id = "noop-error"

    def process_api_error(self, args: ProcessAPIErrorArgs) -> None:
        return None


class RetryApiErrors(Processor):
    """Asks for a retry of every failed model call, ``times`` times."""

    id = "retry-api"

    def __init__(self, times: int = 1_000) -> None:
        self.times = times
        self.seen: list[tuple[int, str]] = []

    def process_api_error(self, args: ProcessAPIErrorArgs) -> Any:
        self.seen.append((args.retry_count, str(args.error)))
        if len(self.seen) <= self.times:
            return {"retry": True}
        return None


# === 1. Drop ====================================================================


@each_mode
async def test_rule1_returning_none_drops_the_chunk_and_the_stream_goes_on(
    mode: ExecutionMode,
) -> None:
    class DropSecret(Processor):
        id = "drop-secret"

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            part = args.part
            if isinstance(part, TextDeltaChunk) and "secret" in part.payload.text:
                return None
            return part

    observer = Observer()
    model = ScriptedModel([text_turn("one secret two")])
    agent = Agent(
        id="a",
        model=model,
        output_processors=[DropSecret(), observer],
        execution_mode=mode,
    )
    chunks, result = await run_stream(agent)
    assert deltas(chunks) == ["one", " two"]
    assert observer.seen.count("text-delta") == 2  # the later processor never saw it
    assert types(chunks)[-1] == "finish"
    assert result.finish_reason == "stop"
    assert result.text == "one two"


@each_mode
async def test_rule1_returning_a_list_emits_each_chunk_through_the_rest_of_the_chain(
    mode: ExecutionMode,
) -> None:
    class Split(Processor):
        id = "split"

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            part = args.part
            if isinstance(part, TextDeltaChunk) and part.payload.text == "ab":
                return [
                    attrs.evolve(part, payload=attrs.evolve(part.payload, text="a")),
                    attrs.evolve(part, payload=attrs.evolve(part.payload, text="b")),
                ]
            return part

    observer = Observer()
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("ab")]),
        output_processors=[Split(), Upper(), observer],
        execution_mode=mode,
    )
    chunks, result = await run_stream(agent)
    assert deltas(chunks) == ["A", "B"]
    assert observer.seen.count("text-delta") == 2
    assert result.text == "AB"


# === 2. on_error policies, in every hook kind ====================================

INPUT_HOOKS = (
    "process_input",
    "process_input_step",
    "process_llm_request",
    "process_llm_response",
)
OUTPUT_HOOKS = (
    "process_output_stream",
    "process_output_step",
    "process_tool_result",
    "process_output_result",
)
ALL_HOOKS = INPUT_HOOKS + OUTPUT_HOOKS


def failing_processor(hook: str, policy: str, calls: list[str]) -> Any:
    def fail(self: Any, args: Any) -> Any:
        calls.append(hook)
        raise ValueError("boom")

    cls = type(
        "Failing", (Processor,), {"id": "failing", "on_error": policy, hook: fail}
    )
    return cls()


def tool_then_text_agent(
    hook: str, processor: Any, **options: Any
) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([tool_call_turn("echo", {"text": "x"}), "all done"])
    lane = "input_processors" if hook in INPUT_HOOKS else "output_processors"
    lanes: dict[str, Any] = {lane: [processor], **options}
    agent = Agent(id="a", model=model, tools=[echo], **lanes)
    return agent, model


@pytest.mark.parametrize("hook", ALL_HOOKS)
async def test_rule2_on_error_raise_ends_the_run_with_one_error_chunk(
    hook: str,
) -> None:
    calls: list[str] = []
    agent, _ = tool_then_text_agent(hook, failing_processor(hook, "raise", calls))
    chunks, result = await run_stream(agent)
    assert calls == [hook]
    assert types(chunks).count("error") == 1
    assert isinstance(chunks[-1], ErrorChunk)
    assert result.finish_reason == "error"
    assert result.tripwire is None
    assert isinstance(result.error, ProcessorError)
    assert result.error.processor_id == "failing"
    assert isinstance(result.error.__cause__, ValueError)
    assert str(result.error.__cause__) == "boom"


@pytest.mark.parametrize("hook", ALL_HOOKS)
async def test_rule2_on_error_pass_fails_open(hook: str) -> None:
    calls: list[str] = []
    agent, model = tool_then_text_agent(hook, failing_processor(hook, "pass", calls))
    chunks, result = await run_stream(agent)
    assert hook in calls
    assert result.finish_reason == "stop"
    assert result.error is None
    assert result.tripwire is None
    assert result.text == "all done"
    assert "error" not in types(chunks)
    assert types(chunks)[-1] == "finish"
    assert len(model.calls) == 2
    # The tool result went through unchanged.
    assert "tool: result[call-1]=echo:x" in prompt_texts(model.calls[1].prompt)


@pytest.mark.parametrize("hook", ALL_HOOKS)
async def test_rule2_on_error_block_fails_closed_with_a_tripwire(hook: str) -> None:
    calls: list[str] = []
    agent, _ = tool_then_text_agent(hook, failing_processor(hook, "block", calls))
    chunks, result = await run_stream(agent)
    assert calls == [hook]
    assert types(chunks).count("tripwire") == 1
    assert isinstance(chunks[-1], TripwireChunk)
    assert chunks[-1].payload.reason == "failing failed: boom"
    assert chunks[-1].payload.processor_id == "failing"
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert result.tripwire.reason == "failing failed: boom"
    assert result.error is None


@pytest.mark.parametrize("hook", ["process_output_stream", "process_output_step"])
async def test_rule2_a_fail_open_processor_cannot_swallow_its_abort_in_a_group(
    hook: str,
) -> None:
    """The abort is raised inside the processor's own nursery, so it arrives as
    an ExceptionGroup; ``on_error="pass"`` must not turn it into "no change"."""

    async def body(self: Any, args: Any) -> Any:
        async def trip() -> None:
            args.abort("grouped abort")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(trip)
        return getattr(args, "part", None)

    cls = type(
        "Grouped", (Processor,), {"id": "grouped", "on_error": "pass", hook: body}
    )
    agent = Agent(id="a", model=ScriptedModel(["hello"]), output_processors=[cls()])
    chunks, result = await run_stream(agent)
    assert isinstance(chunks[-1], TripwireChunk)
    assert result.tripwire is not None
    assert result.tripwire.reason == "grouped abort"
    assert result.tripwire.processor_id == "grouped"
    assert result.finish_reason == "other"


# === 3. The retry budget =========================================================


async def test_rule3_without_a_budget_a_retry_request_is_a_plain_abort() -> None:
    model = ScriptedModel(["bad", "good"])
    agent = Agent(id="a", model=model, output_processors=[RetryStepWhile()])
    result = await agent.generate("hi")
    assert len(model.calls) == 1
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert (result.tripwire.reason, result.tripwire.retry) == ("too short", True)
    assert result.retry_count == 0


async def test_rule3_error_processors_enable_a_budget_of_ten() -> None:
    guard = AlwaysRetryStep()
    model = ScriptedModel(["x"] * 11)
    agent = Agent(
        id="a",
        model=model,
        output_processors=[guard],
        error_processors=[NoopErrorProcessor()],
    )
    result = await agent.generate("hi")
    assert len(model.calls) == 11
    assert guard.seen == list(range(11))
    assert result.retry_count == 10
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert result.tripwire.reason == "again"


@pytest.mark.parametrize("where", ["agent", "call"])
async def test_rule3_zero_disables_retries_even_with_error_processors(
    where: str,
) -> None:
    model = ScriptedModel(["bad", "good"])
    agent = Agent(
        id="a",
        model=model,
        output_processors=[RetryStepWhile()],
        error_processors=[NoopErrorProcessor()],
        max_processor_retries=0 if where == "agent" else None,
    )
    options: dict[str, Any] = {"max_processor_retries": 0} if where == "call" else {}
    result = await agent.generate("hi", **options)
    assert len(model.calls) == 1
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert result.tripwire.reason == "too short"


async def test_rule3_an_explicit_budget_bounds_the_attempts() -> None:
    guard = AlwaysRetryStep()
    model = ScriptedModel(["x"] * 5)
    agent = Agent(id="a", model=model, output_processors=[guard])
    result = await agent.generate("hi", max_processor_retries=2)
    assert len(model.calls) == 3
    assert guard.seen == [0, 1, 2]
    assert result.retry_count == 2
    assert result.tripwire is not None


async def test_rule3_an_always_retrying_error_processor_is_not_unbounded() -> None:
    errors = [ProviderError(f"down {i}", status_code=503) for i in range(20)]
    model = ScriptedModel(errors)
    handler = RetryApiErrors()
    agent = Agent(id="a", model=model, error_processors=[handler])
    result = await agent.generate("hi")
    assert len(model.calls) == 11  # 1 + the default budget of 10
    assert [count for count, _ in handler.seen] == list(range(11))
    assert result.finish_reason == "error"
    assert result.error is errors[10]  # the last attempt's error is surfaced
    assert result.retry_count == 10


async def test_rule3_api_error_and_step_retries_share_one_counter() -> None:
    guard = RetryStepWhile()
    model = ScriptedModel([ProviderError("overloaded", status_code=529), "bad", "ok"])
    agent = Agent(
        id="a",
        model=model,
        output_processors=[guard],
        error_processors=[RetryApiErrors()],
    )
    result = await agent.generate("hi", max_processor_retries=1)
    # One retry went to the API error; the step retry finds the budget used up.
    assert len(model.calls) == 2
    assert guard.seen == [(0, 1, "bad")]
    assert result.tripwire is not None
    assert result.finish_reason == "other"

    model = ScriptedModel([ProviderError("overloaded", status_code=529), "bad", "ok"])
    agent = Agent(
        id="a",
        model=model,
        output_processors=[RetryStepWhile()],
        error_processors=[RetryApiErrors()],
    )
    result = await agent.generate("hi", max_processor_retries=2)
    assert len(model.calls) == 3
    assert result.text == "ok"
    assert result.retry_count == 2


# === 4. Which hooks may retry ====================================================


@each_mode
async def test_rule4_process_output_stream_may_retry(mode: ExecutionMode) -> None:
    class RejectBad(Processor):
        id = "reject-bad"

        def __init__(self) -> None:
            self.final_parts: list[str] = []

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            part = args.part
            if isinstance(part, TextDeltaChunk):
                args.state.setdefault("texts", []).append(part.payload.text)
                if "bad" in part.payload.text:
                    args.abort("no bad words", retry=True)
            if isinstance(part, FinishChunk):
                self.final_parts = [
                    p.payload.text if isinstance(p, TextDeltaChunk) else p.type
                    for p in args.stream_parts
                ]
                self.final_state = list(args.state["texts"])
                self.final_retry_count = args.retry_count
            return part

    guard = RejectBad()
    model = ScriptedModel(
        [[*text_turn("bad", id="t"), Delay(1), *text_turn("never", id="u")], "good"]
    )
    agent = Agent(
        id="a",
        model=model,
        output_processors=[guard],
        max_processor_retries=2,
        execution_mode=mode,
    )
    chunks, result = await run_stream(agent, run_id="r1")
    assert "bad" not in deltas(chunks)
    assert deltas(chunks) == ["good"]
    retries = [c for c in chunks if isinstance(c, StepRetryChunk)]
    assert len(retries) == 1
    assert to_wire(retries[0]) == {
        "type": "step-retry",
        "runId": "r1",
        "from": "AGENT",
        "payload": {
            "stepNumber": 0,
            "reason": "no bad words",
            "retryCount": 1,
            "processorId": "reject-bad",
        },
    }
    assert result.text == "good"
    assert result.finish_reason == "stop"
    assert len(model.calls) == 2
    assert model.calls[0].closed_early  # the rejected response was not read on
    # state persists across attempts; stream_parts exclude the discarded one.
    assert guard.final_state == ["bad", "good"]
    assert guard.final_retry_count == 1
    assert "bad" not in guard.final_parts
    assert "good" in guard.final_parts
    assert guard.final_parts[-1] == "finish"
    assert guard.final_parts.count("step-start") == 1


async def test_rule4_process_output_step_retry_reruns_the_step() -> None:
    guard = RetryStepWhile()
    model = ScriptedModel(["bad answer", "good answer"])
    agent = Agent(
        id="a",
        model=model,
        output_processors=[guard],
        max_processor_retries=3,
    )
    chunks, result = await run_stream(agent, run_id="r1")
    assert guard.seen == [(0, 0, "bad answer"), (0, 1, "good answer")]
    assert result.text == "good answer"
    assert result.retry_count == 1
    step_retry = next(c for c in chunks if isinstance(c, StepRetryChunk))
    assert to_wire(step_retry)["payload"] == {
        "stepNumber": 0,
        "reason": "too short",
        "retryCount": 1,
        "processorId": "retry-step",
    }
    # Everything of the rejected attempt comes before the step-retry chunk.
    index = chunks.index(step_retry)
    assert deltas(chunks[:index]) == ["bad answer"]
    assert deltas(chunks[index:]) == ["good answer"]


async def test_rule4_process_tool_result_retry_reruns_the_step() -> None:
    class RejectFirstResult(Processor):
        id = "reject-result"

        def __init__(self) -> None:
            self.seen: list[tuple[int, Any]] = []

        def process_tool_result(self, args: ProcessToolResultArgs) -> None:
            self.seen.append((args.retry_count, args.result))
            if args.retry_count == 0:
                args.abort("suspicious tool output", retry=True)

    guard = RejectFirstResult()
    model = ScriptedModel(
        [
            tool_call_turn("echo", {"text": "first"}),
            tool_call_turn("echo", {"text": "second"}),
            "done",
        ]
    )
    agent = Agent(
        id="a",
        model=model,
        tools=[echo],
        output_processors=[guard],
        max_processor_retries=1,
    )
    chunks, result = await run_stream(agent)
    assert guard.seen == [(0, "echo:first"), (1, "echo:second")]
    assert len(model.calls) == 3
    retried = prompt_texts(model.calls[1].prompt)
    assert feedback("suspicious tool output") in system_texts(model.calls[1].prompt)
    assert not any("first" in text for text in retried)  # the rejected step is gone
    results = [c for c in chunks if isinstance(c, ToolResultChunk)]
    assert [r.payload.result for r in results] == ["echo:second"]
    assert types(chunks).count("step-retry") == 1
    assert result.text == "done"


async def test_rule4_process_input_step_retry_reruns_the_steps_input_chain() -> None:
    class Counter(Processor):
        id = "counter"

        def __init__(self) -> None:
            self.calls = 0

        def process_input_step(self, args: ProcessInputStepArgs) -> None:
            self.calls += 1

    class NeedsContext(Processor):
        id = "needs-context"

        def __init__(self) -> None:
            self.seen: list[tuple[int, int, list[str]]] = []

        def process_input_step(self, args: ProcessInputStepArgs) -> None:
            self.seen.append(
                (
                    args.step_number,
                    args.retry_count,
                    [m.content for m in args.system_messages],
                )
            )
            if args.retry_count == 0:
                args.abort("need more context", retry=True)

    counter, guard = Counter(), NeedsContext()
    model = ScriptedModel(["fine"])
    agent = Agent(
        id="a",
        model=model,
        instructions="be nice",
        input_processors=[counter, guard],
        max_processor_retries=2,
    )
    result = await agent.generate("hi")
    assert counter.calls == 2
    assert guard.seen == [
        (0, 0, ["be nice"]),
        (0, 1, ["be nice", feedback("need more context")]),
    ]
    assert len(model.calls) == 1
    assert system_texts(model.calls[0].prompt) == [
        "be nice",
        feedback("need more context"),
    ]
    assert result.text == "fine"
    assert result.retry_count == 1


async def test_rule4_process_input_retry_reruns_from_the_original_input() -> None:
    class EditThenRetry(Processor):
        id = "edit-then-retry"

        def __init__(self) -> None:
            self.seen: list[tuple[int, str]] = []

        def process_input(self, args: ProcessInputArgs) -> None:
            message = args.messages[0]
            self.seen.append((args.retry_count, message_text(message)))
            part = message.content.parts[0]
            assert isinstance(part, TextPart)
            part.text += " (edited)"  # in place, as the seed allows
            if args.retry_count == 0:
                args.abort("rephrase", retry=True)

    guard = EditThenRetry()
    model = ScriptedModel(["ok"])
    agent = Agent(
        id="a",
        model=model,
        instructions="be nice",
        input_processors=[guard],
        max_processor_retries=1,
    )
    result = await agent.generate("hello")
    assert guard.seen == [(0, "hello"), (1, "hello")]
    assert "user: hello (edited)" in prompt_texts(model.calls[0].prompt)
    assert "user: hello (edited) (edited)" not in prompt_texts(model.calls[0].prompt)
    # SPEC §2.4/2.5: the re-run carries the feedback to the model.
    assert feedback("rephrase") in system_texts(model.calls[0].prompt)
    assert result.text == "ok"
    assert result.retry_count == 1


@pytest.mark.parametrize(
    "hook", ["process_llm_request", "process_llm_response", "process_output_result"]
)
async def test_rule4_hooks_that_cannot_retry_abort_with_retry_in_the_payload(
    hook: str,
) -> None:
    def trip(self: Any, args: Any) -> None:
        args.abort("not retryable here", retry=True)

    cls = type("NoRetry", (Processor,), {"id": "no-retry", hook: trip})
    lane = (
        "output_processors" if hook == "process_output_result" else "input_processors"
    )
    model = ScriptedModel(["one", "two", "three"])
    lanes: dict[str, Any] = {lane: [cls()]}
    agent = Agent(id="a", model=model, max_processor_retries=5, **lanes)
    chunks, result = await run_stream(agent)
    assert len(model.calls) == (0 if hook == "process_llm_request" else 1)
    assert "step-retry" not in types(chunks)
    assert isinstance(chunks[-1], TripwireChunk)
    assert chunks[-1].payload.retry is True
    assert result.tripwire is not None
    assert result.tripwire.retry is True
    assert result.retry_count == 0


async def test_rule4_process_api_error_abort_is_a_plain_abort() -> None:
    class AbortOnError(Processor):
        id = "abort-on-error"

        def process_api_error(self, args: ProcessAPIErrorArgs) -> None:
            args.abort("provider refused", retry=True, metadata={"status": 400})

    model = ScriptedModel([ProviderError("bad request", status_code=400), "never"])
    agent = Agent(id="a", model=model, error_processors=[AbortOnError()])
    chunks, result = await run_stream(agent)
    assert len(model.calls) == 1
    assert to_wire(chunks[-1])["payload"] == {
        "reason": "provider refused",
        "retry": True,
        "metadata": {"status": 400},
        "processorId": "abort-on-error",
    }
    assert result.finish_reason == "other"


# === 5. Feedback =================================================================


async def test_rule5_feedback_is_a_tagged_system_message_for_one_step_only() -> None:
    class Recorder(Processor):
        id = "recorder"

        def __init__(self) -> None:
            self.system: list[list[str]] = []
            self.tagged: list[list[str]] = []

        def process_input_step(self, args: ProcessInputStepArgs) -> None:
            self.system.append([m.content for m in args.system_messages])
            tagged = args.message_list.get_system_messages(RETRY_FEEDBACK_TAG)
            self.tagged.append([m.content for m in tagged])

    recorder = Recorder()
    model = ScriptedModel(
        ["bad answer", tool_call_turn("echo", {"text": "x"}), "final answer"]
    )
    agent = Agent(
        id="a",
        model=model,
        instructions="be nice",
        tools=[echo],
        input_processors=[recorder],
        output_processors=[RetryStepWhile(reason="be better")],
        max_processor_retries=3,
    )
    result = await agent.generate("hi")
    text = feedback("be better")
    assert recorder.tagged == [[], [text], []]
    assert recorder.system == [["be nice"], ["be nice", text], ["be nice"]]
    # The retried call carries it after the instructions; the next step not.
    assert system_texts(model.calls[1].prompt) == ["be nice", text]
    assert system_texts(model.calls[2].prompt) == ["be nice"]
    # The rejected response is gone from the conversation and from the prompt.
    assert not any("bad answer" in t for t in prompt_texts(model.calls[1].prompt))
    stored = result.message_list.get.all.db()
    assert not any("bad answer" in message_text(m) for m in stored)
    # Never persisted.
    assert result.message_list.get_system_messages(RETRY_FEEDBACK_TAG) == []
    assert not any(text in message_text(m) for m in stored)
    assert not any(text in message_text(m) for m in result.response_messages)
    assert result.text == "final answer"


# === 6. Tripwire results =========================================================


class StreamGuard(Processor):
    """Aborts on a text delta containing ``secret``; logs ``on_violation``."""

    id = "stream-guard"

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk) and "secret" in part.payload.text.lower():
            args.abort("leak", metadata={"kind": "pii"})
        return part

    async def on_violation(self, violation: ProcessorViolation) -> None:
        await trio.sleep(1)  # awaited: the tripwire chunk must wait for this
        self.log.append(("violation", violation.message, violation.blocking))


@each_mode
async def test_rule6_a_stream_tripwire_is_one_last_chunk_with_the_mastra_shape(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    log: list[Any] = []
    model = ScriptedModel([text_turn("hello there secret stuff more words")])
    agent = Agent(
        id="a", model=model, output_processors=[StreamGuard(log)], execution_mode=mode
    )
    async with agent.stream("hi", run_id="run-7") as stream:
        chunks = []
        async for chunk in stream:
            if isinstance(chunk, TripwireChunk):
                log.append("tripwire-chunk")
            chunks.append(chunk)
        result = await stream.result()
    assert types(chunks).count("tripwire") == 1
    assert to_wire(chunks[-1]) == {
        "type": "tripwire",
        "runId": "run-7",
        "from": "AGENT",
        "payload": {
            "reason": "leak",
            "retry": False,
            "metadata": {"kind": "pii"},
            "processorId": "stream-guard",
        },
    }
    assert deltas(chunks) == ["hello", " there"]
    assert log == [("violation", "leak", True), "tripwire-chunk"]
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert result.tripwire.processor_id == "stream-guard"
    assert result.error is None


async def test_rule6_a_process_input_tripwire_is_the_only_chunk() -> None:
    class Block(Processor):
        id = "block-input"

        def process_input(self, args: ProcessInputArgs) -> None:
            args.abort("no", metadata={"why": "test"})

    model = ScriptedModel(["never"])
    agent = Agent(id="a", model=model, input_processors=[Block()])
    chunks, result = await run_stream(agent, run_id="r-in")
    assert wire(chunks) == [
        {
            "type": "tripwire",
            "runId": "r-in",
            "from": "AGENT",
            "payload": {
                "reason": "no",
                "retry": False,
                "metadata": {"why": "test"},
                "processorId": "block-input",
            },
        }
    ]
    assert model.calls == []
    assert result.text == ""


async def test_rule6_generate_returns_on_a_tripwire() -> None:
    class Block(Processor):
        id = "quality"

        def process_output_step(self, args: ProcessOutputStepArgs) -> None:
            args.abort("too vague", metadata={"score": 0.2})

    agent = Agent(id="a", model=ScriptedModel(["meh"]), output_processors=[Block()])
    result = await agent.generate("hi")
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert attrs.asdict(result.tripwire) == {
        "reason": "too vague",
        "retry": False,
        "metadata": {"score": 0.2},
        "processor_id": "quality",
    }
    assert result.error is None


async def test_rule6_output_result_tripwire_keeps_text_and_persists_nothing() -> None:
    class Reject(Processor):
        id = "final-check"

        def process_output_result(self, args: ProcessOutputResultArgs) -> None:
            assert args.result.text == "the full answer"
            args.abort("rejected at the end")

    model = ScriptedModel(["the full answer"])
    agent = Agent(id="a", model=model, output_processors=[Reject()])
    chunks, result = await run_stream(agent)
    assert deltas(chunks) == ["the full answer"]
    # process_output_result runs once the finish chunk has been through the
    # output processors (Mastra 1I.67); its tripwire is still the last chunk.
    assert types(chunks)[-2:] == ["finish", "tripwire"]
    assert result.text == "the full answer"
    assert result.response_messages == ()
    assert result.finish_reason == "other"
    assert result.tripwire is not None
    assert result.tripwire.processor_id == "final-check"


@pytest.mark.parametrize("hook", ["process_input", "process_output_step"])
async def test_rule6_on_violation_is_awaited_once_before_the_tripwire_chunk(
    hook: str, autojump_clock: trio.testing.MockClock
) -> None:
    log: list[Any] = []

    def trip(self: Any, args: Any) -> None:
        args.abort("blocked", metadata=1)

    async def on_violation(self: Any, violation: ProcessorViolation) -> None:
        await trio.sleep(5)
        log.append((violation.processor_id, violation.message, violation.blocking))

    cls = type(
        "Tripper",
        (Processor,),
        {"id": "tripper", hook: trip, "on_violation": on_violation},
    )
    lane = "input_processors" if hook == "process_input" else "output_processors"
    lanes: dict[str, Any] = {lane: [cls()]}
    agent = Agent(id="a", model=ScriptedModel(["x"]), **lanes)
    async with agent.stream("hi") as stream:
        async for chunk in stream:
            if isinstance(chunk, TripwireChunk):
                log.append("tripwire-chunk")
    assert log == [("tripper", "blocked", True), "tripwire-chunk"]


async def test_rule6_on_violation_errors_are_swallowed() -> None:
    class Tripper(Processor):
        id = "tripper"

        def process_output_step(self, args: ProcessOutputStepArgs) -> None:
            args.abort("blocked")

        def on_violation(self, violation: ProcessorViolation) -> None:
            raise RuntimeError("callback broke")

    agent = Agent(id="a", model=ScriptedModel(["x"]), output_processors=[Tripper()])
    chunks, result = await run_stream(agent)
    assert isinstance(chunks[-1], TripwireChunk)
    assert result.tripwire is not None
    assert result.tripwire.reason == "blocked"
    assert result.error is None


@each_mode
async def test_rule6_report_violation_does_not_block(mode: ExecutionMode) -> None:
    class Warner(Processor):
        id = "warner"

        def __init__(self) -> None:
            self.violations: list[ProcessorViolation] = []

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            part = args.part
            if isinstance(part, TextDeltaChunk) and "damn" in part.payload.text:
                args.report_violation("profanity", {"word": "damn"})
            return part

        def on_violation(self, violation: ProcessorViolation) -> None:
            self.violations.append(violation)

    warner = Warner()
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("oh damn it")]),
        output_processors=[warner],
        execution_mode=mode,
    )
    chunks, result = await run_stream(agent)
    assert warner.violations == [
        ProcessorViolation(
            processor_id="warner",
            message="profanity",
            detail={"word": "damn"},
            blocking=False,
        )
    ]
    assert result.finish_reason == "stop"
    assert result.tripwire is None
    assert result.text == "oh damn it"
    assert types(chunks)[-1] == "finish"


# === 7. Errors ===================================================================


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"max_processor_retries": -1}, "max_processor_retries"),
        ({"max_processor_retries": "3"}, "max_processor_retries"),
        ({"max_steps": 0}, "max_steps"),
        ({"execution_mode": "warp"}, "execution_mode"),
        ({"active_tools": ["nope"]}, "nope"),
        ({"output_processors": "upper"}, "output_processors"),
        ({"model": "no-such-provider/x"}, "no-such-provider"),
        ({"prepare_step": 42}, "prepare_step"),
        ({"input_processors": [object()]}, "has no id"),
    ],
)
async def test_rule7_bad_call_arguments_raise_before_any_model_call(
    options: dict[str, Any], match: str
) -> None:
    model = ScriptedModel(["x"])
    agent = Agent(id="a", model=model, tools=[echo])
    with pytest.raises(ConfigurationError, match=match):
        agent.stream("hi", **options)  # raises at once, not on entering
    with pytest.raises(ConfigurationError, match=match):
        await agent.generate("hi", **options)
    assert model.calls == []


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"id": ""}, "id"),
        ({"max_steps": 0}, "max_steps"),
        ({"max_processor_retries": -2}, "max_processor_retries"),
        ({"instructions": [1]}, "instructions"),
        ({"execution_mode": "threads"}, "execution_mode"),
        ({"model": "nonsense"}, "provider/model-id"),
    ],
)
def test_rule7_bad_agent_arguments_raise_at_once(
    options: dict[str, Any], match: str
) -> None:
    model = ScriptedModel(["x"])
    kwargs: dict[str, Any] = {"id": "a", "model": model, **options}
    with pytest.raises(ConfigurationError, match=match):
        Agent(**kwargs)
    assert model.calls == []


async def test_rule7_a_failed_run_returns_error() -> None:
    failure = ProviderError("internal", status_code=500)
    agent = Agent(id="a", model=ScriptedModel([failure]))
    result = await agent.generate("hi")
    assert result.finish_reason == "error"
    assert result.error is failure
    assert result.tripwire is None


@each_mode
async def test_rule7_user_exceptions_in_the_stream_block_come_out_unwrapped(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    model = ScriptedModel([[*text_turn("a b c d"), Delay(10), *text_turn("e", id="x")]])
    agent = Agent(id="a", model=model, execution_mode=mode, output_processors=[Upper()])

    async def consume() -> None:
        async with agent.stream("hi") as stream:
            async for chunk in stream:
                if isinstance(chunk, TextDeltaChunk):
                    raise KeyError("mine")

    with pytest.raises(KeyError, match="mine") as caught:
        await consume()
    assert type(caught.value) is KeyError  # not an ExceptionGroup
    assert model.calls[0].closed_early


# === 8. Cancellation =============================================================


@each_mode
async def test_rule8_cancel_ends_with_an_abort_chunk_not_a_tripwire(
    mode: ExecutionMode, autojump_clock: trio.testing.MockClock
) -> None:
    slow = [item for word in ("one", "two", "three") for item in (word, Delay(1))]
    model = ScriptedModel([slow])
    agent = Agent(id="a", model=model, output_processors=[Upper()], execution_mode=mode)
    async with agent.stream("hi") as stream:
        seen = []
        async for chunk in stream:
            seen.append(chunk)
            if isinstance(chunk, TextDeltaChunk):
                break
        await stream.cancel()
        assert model.calls[0].closed_early  # closed before cancel() returned
        rest = [chunk async for chunk in stream]
        result = await stream.result()
    assert len(rest) == 1
    assert isinstance(rest[0], AbortChunk)
    assert "tripwire" not in types(seen + rest)
    assert result.finish_reason == "aborted"
    assert result.tripwire is None
    assert result.error is None


async def test_rule8_leaving_the_block_early_closes_the_provider_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([[*text_turn("a b"), Delay(100), "never read"]])
    agent = Agent(id="a", model=model)
    async with agent.stream("hi") as stream:
        async for chunk in stream:
            if isinstance(chunk, TextDeltaChunk):
                break
    assert model.calls[0].closed_early
    result = await stream.result()
    assert result.finish_reason == "aborted"
    assert result.tripwire is None


async def test_rule8_the_caller_cancelling_closes_the_provider_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([[*text_turn("a b"), Delay(100), "never read"]])
    agent = Agent(id="a", model=model)
    with trio.move_on_after(50) as scope:
        await agent.generate("hi")
    assert scope.cancelled_caught
    assert model.calls[0].closed_early


# === 9. Retries vs max_steps; recovered errors; terminal paths ====================


async def test_rule9_retries_do_not_consume_max_steps() -> None:
    model = ScriptedModel(["bad 1", "bad 2", "good"])
    agent = Agent(
        id="a",
        model=model,
        output_processors=[RetryStepWhile()],
        max_processor_retries=5,
        max_steps=1,
    )
    result = await agent.generate("hi")
    assert len(model.calls) == 3
    assert result.text == "good"
    assert result.finish_reason == "stop"
    assert result.steps[-1].text == "good"
    assert [m for m in result.response_messages if "bad" in message_text(m)] == []


@each_mode
async def test_rule9_error_chunks_of_recovered_attempts_never_reach_processors(
    mode: ExecutionMode,
) -> None:
    observer = Observer()
    handler = RetryApiErrors(times=1)
    model = ScriptedModel(
        [
            [*text_turn("partial"), ProviderError("reset", code="ECONNRESET")],
            "recovered",
        ]
    )
    agent = Agent(
        id="a",
        model=model,
        output_processors=[observer],
        error_processors=[handler],
        execution_mode=mode,
    )
    chunks, result = await run_stream(agent, run_id="r9")
    assert "error" not in observer.seen
    assert "error" not in types(chunks)
    retry = [c for c in chunks if isinstance(c, StepRetryChunk)]
    assert len(retry) == 1  # chunks of the failed attempt had reached the client
    payload = to_wire(retry[0])["payload"]
    assert payload["stepNumber"] == 0
    assert payload["processorId"] == "retry-api"
    assert payload["retryCount"] == 1
    assert "reset" in payload["reason"]
    assert result.text == "recovered"
    assert result.finish_reason == "stop"
    assert handler.seen == [(0, "reset")]


@each_mode
async def test_rule9_a_terminal_error_is_shown_once(mode: ExecutionMode) -> None:
    observer = Observer()
    failure = ProviderError("bad request", status_code=400)
    model = ScriptedModel([[*text_turn("so far"), failure]])
    agent = Agent(
        id="a",
        model=model,
        output_processors=[observer],
        error_processors=[NoopErrorProcessor()],
        execution_mode=mode,
    )
    chunks, result = await run_stream(agent)
    assert observer.seen.count("error") == 1
    assert types(chunks).count("error") == 1
    assert isinstance(chunks[-1], ErrorChunk)
    assert result.error is failure
    assert result.finish_reason == "error"


@pytest.mark.parametrize("ending", ["finish", "error", "tripwire", "abort"])
async def test_rule9_every_terminal_path_ends_the_stream_and_settles_the_result(
    ending: str, autojump_clock: trio.testing.MockClock
) -> None:
    turn: Any = {
        "finish": ["done"],
        "error": [ProviderError("nope", status_code=500)],
        "tripwire": [text_turn("a secret")],
        "abort": [[*text_turn("a b"), Delay(1000), "c"]],
    }[ending]
    log: list[Any] = []
    agent = Agent(
        id="a", model=ScriptedModel(turn), output_processors=[StreamGuard(log)]
    )
    with trio.fail_after(100):
        async with agent.stream("hi") as stream:
            chunks = []
            async for chunk in stream:
                chunks.append(chunk)
                if ending == "abort" and isinstance(chunk, TextDeltaChunk):
                    await stream.cancel()
            again = [chunk async for chunk in stream]
            result = await stream.result()
    assert again == []
    expected = {
        "finish": ("finish", "stop"),
        "error": ("error", "error"),
        "tripwire": ("tripwire", "other"),
        "abort": ("abort", "aborted"),
    }[ending]
    assert (chunks[-1].type, result.finish_reason) == expected


# === 10. Sequential equivalence at agent level ===================================


class Stamp(Processor):
    """Writes a custom data chunk at every text-end: how many deltas it has seen
    in this run (from ``stream_parts``, which excludes discarded attempts; its
    ``state`` may legitimately differ between modes, SPEC §2.10)."""

    id = "stamp"

    async def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if part.type == "text-end":
            n = sum(isinstance(p, TextDeltaChunk) for p in args.stream_parts)
            assert args.writer is not None
            await args.writer.custom(data("count", {"n": n}))
        return part


class DropWord(Processor):
    id = "drop-word"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        text = part.payload.text if isinstance(part, TextDeltaChunk) else ""
        if text.strip().lower() == "um":
            return None
        return part


def equivalence_scenario(name: str) -> tuple[ScriptedModel, dict[str, Any]]:
    log: list[Any] = []
    processors = [Upper(), DropWord(), Stamp()]
    if name == "tools":
        turns: list[Any] = [
            [*text_turn("let me um check"), *tool_call_turn("echo", {"text": "a"})],
            text_turn("it is um fine"),
        ]
    elif name == "tripwire":
        turns = [text_turn("one two um secret three four")]
        processors.append(StreamGuard(log))
    else:
        turns = [text_turn("a bad um answer"), text_turn("a good um answer")]

        class RejectStream(Processor):
            id = "reject-stream"

            def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
                part = args.part
                if isinstance(part, TextDeltaChunk) and "BAD" in part.payload.text:
                    args.abort("no bad", retry=True)
                return part

        processors.append(RejectStream())
    options = {
        "output_processors": processors,
        "tools": [echo],
        "max_processor_retries": 2,
        "log": log,
    }
    return ScriptedModel(turns), options


@pytest.mark.parametrize("scenario", ["tools", "tripwire", "retry"])
async def test_rule10_fused_and_actors_runs_give_identical_chunks(
    scenario: str, autojump_clock: trio.testing.MockClock
) -> None:
    outcomes = []
    for mode in MODES:
        model, options = equivalence_scenario(scenario)
        log = options.pop("log")
        agent = Agent(id="a", model=model, execution_mode=mode, **options)
        chunks, result = await run_stream(agent, run_id="same-run")
        outcomes.append(
            (
                wire(chunks),
                result.text,
                result.finish_reason,
                result.tripwire,
                [c.data for c in result.custom_chunks],
                log,
                len(model.calls),
            )
        )
    fused, actors = outcomes
    assert fused == actors
    assert fused[0]  # something was streamed
    if scenario == "tripwire":
        assert fused[0][-1]["type"] == "tripwire"
        assert fused[5] == [("violation", "leak", True)]
    if scenario == "tools":
        assert fused[1] == "LET ME CHECKIT IS FINE"
        assert any(c["type"] == "data-count" for c in fused[0])


# === 11. Return values of message hooks ==========================================


@pytest.mark.parametrize("hook", ["process_output_step", "process_tool_result"])
@pytest.mark.parametrize("returned", ["none", "empty", "same-list"])
async def test_rule11_none_empty_or_the_message_list_mean_no_change(
    hook: str, returned: str
) -> None:
    def make_agent(processors: list[Any]) -> tuple[Agent, ScriptedModel]:
        model = ScriptedModel([tool_call_turn("echo", {"text": "x"}), "done"])
        return Agent(
            id="a", model=model, tools=[echo], output_processors=processors
        ), model

    def hook_fn(self: Any, args: Any) -> Any:
        return {"none": None, "empty": [], "same-list": args.message_list}[returned]

    cls = type("Returner", (Processor,), {"id": "returner", hook: hook_fn})
    baseline_agent, baseline_model = make_agent([])
    await baseline_agent.generate("hi")
    agent, model = make_agent([cls()])
    result = await agent.generate("hi")
    assert result.finish_reason == "stop"
    assert prompt_texts(model.calls[1].prompt) == prompt_texts(
        baseline_model.calls[1].prompt
    )


@pytest.mark.parametrize("hook", ["process_output_step", "process_tool_result"])
async def test_rule11_a_non_empty_list_replaces_the_messages(hook: str) -> None:
    def hook_fn(self: Any, args: Any) -> Any:
        return [*args.messages, user_message("a note from the processor")]

    cls = type("Adder", (Processor,), {"id": "adder", hook: hook_fn})
    model = ScriptedModel([tool_call_turn("echo", {"text": "x"}), "done"])
    agent = Agent(id="a", model=model, tools=[echo], output_processors=[cls()])
    result = await agent.generate("hi")
    assert result.finish_reason == "stop"
    assert "user: a note from the processor" in prompt_texts(model.calls[1].prompt)


@pytest.mark.parametrize("hook", ["process_output_step", "process_tool_result"])
async def test_rule11_returning_a_different_message_list_is_an_error(
    hook: str,
) -> None:
    def hook_fn(self: Any, args: Any) -> Any:
        return MessageList()

    cls = type("Foreign", (Processor,), {"id": "foreign", hook: hook_fn})
    model = ScriptedModel([tool_call_turn("echo", {"text": "x"}), "done"])
    agent = Agent(id="a", model=model, tools=[echo], output_processors=[cls()])
    chunks, result = await run_stream(agent)
    assert result.finish_reason == "error"
    assert isinstance(result.error, ProcessorContractError)
    assert result.error.processor_id == "foreign"
    assert "different MessageList" in str(result.error)
    assert isinstance(chunks[-1], ErrorChunk)
    assert len(model.calls) == 1


async def test_rule11_input_step_returning_messages_and_message_list_is_an_error() -> (
    None
):
    class Both(Processor):
        id = "both"

        def process_input_step(self, args: ProcessInputStepArgs) -> Any:
            return {"messages": args.messages, "message_list": args.message_list}

    model = ScriptedModel(["x"])
    agent = Agent(id="a", model=model, input_processors=[Both()])
    result = await agent.generate("hi")
    assert result.finish_reason == "error"
    assert isinstance(result.error, ProcessorContractError)
    assert "both messages and message_list" in str(result.error)
    assert model.calls == []


# === 12. Registration ============================================================


async def test_rule12_one_instance_in_two_lanes_shares_its_state() -> None:
    class Both(Processor):
        id = "both-lanes"

        def __init__(self) -> None:
            self.seen: list[Any] = []

        def process_input(self, args: ProcessInputArgs) -> None:
            args.state["from_input"] = message_text(args.messages[0])

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            self.seen.append(args.state.get("from_input"))
            return args.part

    both = Both()
    agent = Agent(
        id="a",
        model=ScriptedModel(["x"]),
        input_processors=[both],
        output_processors=[both],
    )
    result = await agent.generate("remember me")
    assert result.finish_reason == "stop"
    assert both.seen
    assert set(both.seen) == {"remember me"}


async def test_rule12_state_is_fresh_for_every_call() -> None:
    class Count(Processor):
        id = "count"

        def __init__(self) -> None:
            self.totals: list[int] = []

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            args.state["n"] = args.state.get("n", 0) + 1
            if isinstance(args.part, FinishChunk):
                self.totals.append(args.state["n"])
            return args.part

    counter = Count()
    agent = Agent(id="a", model=ScriptedModel(["x", "x"]), output_processors=[counter])
    await agent.generate("hi")
    await agent.generate("hi")
    assert len(counter.totals) == 2
    assert counter.totals[0] == counter.totals[1]


async def test_rule12_duplicate_ids_are_an_error_before_any_model_call() -> None:
    model = ScriptedModel(["x"])
    agent = Agent(
        id="a", model=model, input_processors=[Upper()], output_processors=[Upper()]
    )
    with pytest.raises(DuplicateProcessorIdError, match="'upper'"):
        await agent.generate("hi")
    assert model.calls == []


async def test_rule12_a_processor_without_hooks_is_an_error() -> None:
    class Empty:
        id = "empty"

    model = ScriptedModel(["x"])
    agent = Agent(id="a", model=model, output_processors=[Empty()])
    with pytest.raises(ConfigurationError, match="implements none of the hooks"):
        await agent.generate("hi")
    assert model.calls == []


async def test_rule12_processor_index_is_the_merged_position() -> None:
    class P(Processor):
        def __init__(self, ident: str) -> None:
            self.id = ident

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            return args.part

        def process_input(self, args: ProcessInputArgs) -> None:
            return None

    a, b, c, d = P("a"), P("b"), P("c"), P("d")
    agent = Agent(
        id="agent",
        model=ScriptedModel(["x"]),
        input_processors=[a, b],
        output_processors=[b, c],
        error_processors=[d],
    )
    await agent.generate("hi")
    assert [p.processor_index for p in (a, b, c, d)] == [0, 1, 2, 3]


async def test_rule12_a_tool_result_only_processor_is_accepted_in_the_output_lane() -> (
    None
):
    class Redact(Processor):
        id = "redact"

        def process_tool_result(self, args: ProcessToolResultArgs) -> None:
            part = args.message_list
            del part  # only counts calls
            self.calls = getattr(self, "calls", 0) + 1

    redact = Redact()
    model = ScriptedModel([tool_call_turn("echo", {"text": "x"}), "done"])
    agent = Agent(id="a", model=model, tools=[echo], output_processors=[redact])
    result = await agent.generate("hi")
    assert result.finish_reason == "stop"
    assert redact.calls == 1


# === 13. Parallel tools ==========================================================


async def test_rule13_tools_run_concurrently_results_come_in_call_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    finished: list[str] = []

    @tool
    async def nap(args: NapInput, context: ToolContext) -> str:
        await trio.sleep(args.seconds)
        finished.append(context.tool_call_id)
        return f"slept {args.seconds:g}"

    class ResultOrder(Processor):
        id = "result-order"

        def __init__(self) -> None:
            self.order: list[str] = []

        def process_tool_result(self, args: ProcessToolResultArgs) -> None:
            self.order.append(args.tool_call_id)

    recorder = ResultOrder()
    model = ScriptedModel(
        [
            [
                *tool_call_turn("nap", {"seconds": 5}, tool_call_id="c1"),
                *tool_call_turn("nap", {"seconds": 1}, tool_call_id="c2"),
                *tool_call_turn("nap", {"seconds": 3}, tool_call_id="c3"),
            ],
            "rested",
        ]
    )
    agent = Agent(id="a", model=model, tools=[nap], output_processors=[recorder])
    start = trio.current_time()
    chunks, result = await run_stream(agent)
    assert trio.current_time() - start == pytest.approx(5)  # max, not the sum (9)
    assert finished == ["c2", "c3", "c1"]
    results = [c for c in chunks if isinstance(c, ToolResultChunk)]
    assert [r.payload.tool_call_id for r in results] == ["c1", "c2", "c3"]
    assert [r.payload.result for r in results] == ["slept 5", "slept 1", "slept 3"]
    assert recorder.order == ["c1", "c2", "c3"]
    assert prompt_texts(model.calls[1].prompt)[-1] == (
        "tool: result[c1]=slept 5 result[c2]=slept 1 result[c3]=slept 3"
    )
    assert result.text == "rested"


# === 14. Raw chunks for process_llm_response; cached replay =====================


async def test_rule14_process_llm_response_sees_raw_chunks() -> None:
    class RawRecorder(Processor):
        id = "raw-recorder"

        def __init__(self) -> None:
            self.texts: list[str] = []
            self.from_cache: list[bool] = []

        def process_llm_response(self, args: ProcessLLMResponseArgs) -> None:
            self.texts += [
                c.payload.text for c in args.chunks if isinstance(c, TextDeltaChunk)
            ]
            self.from_cache.append(args.from_cache)

    recorder = RawRecorder()
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("quiet words")]),
        input_processors=[recorder],
        output_processors=[Upper()],
    )
    chunks, result = await run_stream(agent)
    assert deltas(chunks) == ["QUIET", " WORDS"]
    assert recorder.texts == ["quiet", " words"]
    assert recorder.from_cache == [False]
    assert result.text == "QUIET WORDS"


async def test_rule14_a_cached_response_replays_without_calling_the_model() -> None:
    class Cache(Processor):
        id = "cache"

        def __init__(self) -> None:
            self.from_cache: list[bool] = []
            self.replayed: list[str] = []

        def process_llm_request(self, args: ProcessLLMRequestArgs) -> Any:
            return ProcessLLMRequestResult(response=text_turn("cached answer"))

        def process_llm_response(self, args: ProcessLLMResponseArgs) -> None:
            self.from_cache.append(args.from_cache)
            self.replayed += [
                c.payload.text for c in args.chunks if isinstance(c, TextDeltaChunk)
            ]

    cache = Cache()
    model = ScriptedModel([])
    agent = Agent(
        id="a", model=model, input_processors=[cache], output_processors=[Upper()]
    )
    chunks, result = await run_stream(agent)
    assert len(model.calls) == 0
    assert deltas(chunks) == ["CACHED", " ANSWER"]  # replay goes through processors
    assert cache.from_cache == [True]
    assert cache.replayed == ["cached", " answer"]
    assert result.text == "CACHED ANSWER"
    assert result.finish_reason == "stop"


# === 16. No real sleeps ==========================================================


async def test_rule16_scripted_delays_and_processor_waits_use_trios_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Slow(Processor):
        id = "slow"

        async def process_output_step(self, args: ProcessOutputStepArgs) -> None:
            await trio.sleep(3600)

    model = ScriptedModel([["a", Delay(7200), "b"]])
    agent = Agent(id="a", model=model, output_processors=[Slow()])
    start = trio.current_time()
    result = await agent.generate("hi")
    assert trio.current_time() - start == pytest.approx(10800)
    assert result.text == "ab"


# === 17. Bad tool arguments go back to the model =================================


async def test_rule17_tool_args_failing_validation_become_a_tool_error() -> None:
    model = ScriptedModel(
        [
            tool_call_turn("echo", {"txt": 1}),
            tool_call_turn("echo", {"text": "ok"}),
            "done",
        ]
    )
    agent = Agent(id="a", model=model, tools=[echo])
    chunks, result = await run_stream(agent)
    errors = [c for c in chunks if isinstance(c, ToolErrorChunk)]
    assert len(errors) == 1
    assert errors[0].payload.tool_name == "echo"
    assert errors[0].payload.tool_call_id == "call-1"
    assert "echo" in str(errors[0].payload.error)
    tool_results = [
        part
        for message in model.calls[1].prompt
        if message.role == "tool"
        for part in message.content
    ]
    assert len(tool_results) == 1
    assert isinstance(tool_results[0], PromptToolResultPart)
    assert tool_results[0].is_error
    assert "text" in str(tool_results[0].result)
    assert result.finish_reason == "stop"
    assert result.text == "done"
    assert len(model.calls) == 3


# === Structured cancellation =====================================================


class QuietGuard(Processor):
    """Aborts on a text delta containing ``secret``; no ``on_violation``."""

    id = "quiet-guard"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        part = args.part
        if isinstance(part, TextDeltaChunk) and "secret" in part.payload.text:
            args.abort("leak")
        return part


async def test_a_tripwire_mid_stream_cancels_the_model_stream_in_fused_mode(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """In fused mode the coordinator hands each chunk over a 0-capacity channel
    (a rendezvous) and the consumer runs the (sync) stage on it without a
    checkpoint. When the guard trips on the delta " secret", the consumer ends
    the run before the coordinator's next model read gets past its checkpoint,
    so that read is cancelled: exactly the chunks up to the tripping one were
    streamed (text-start, "a", " secret") and ``model_chunks_after_end == 0``."""
    model = ScriptedModel([text_turn("a secret b c d e f g h i")])
    agent = Agent(id="a", model=model, output_processors=[QuietGuard()])
    chunks, result = await run_stream(agent)
    assert isinstance(chunks[-1], TripwireChunk)
    assert model.calls[0].closed_early
    assert model.calls[0].chunks_streamed == 3
    assert result.model_chunks_after_end == 0


async def test_model_chunks_read_after_a_trip_are_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The guard's ``on_violation`` takes a second (awaited before the tripwire
    chunk, SPEC §2.6). Whatever the provider streamed after the trip that nobody
    used must show up in ``model_chunks_after_end`` (SPEC §3: "tokens spent
    after a trip are reported")."""
    log: list[Any] = []
    model = ScriptedModel([text_turn("a secret b c d e f g h i")])
    agent = Agent(id="a", model=model, output_processors=[StreamGuard(log)])
    chunks, result = await run_stream(agent)
    assert isinstance(chunks[-1], TripwireChunk)
    assert model.calls[0].closed_early
    read_after_trip = model.calls[0].chunks_streamed - 3
    assert result.model_chunks_after_end == read_after_trip


async def test_a_tripwire_mid_stream_cancels_the_model_stream_in_actors_mode(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel(
        [[*text_turn("a secret b"), Delay(1), *text_turn("c", id="x")]]
    )
    agent = Agent(
        id="a",
        model=model,
        output_processors=[QuietGuard()],
        execution_mode="actors",
    )
    chunks, _ = await run_stream(agent)
    assert isinstance(chunks[-1], TripwireChunk)
    assert model.calls[0].closed_early
    # Read-ahead is bounded and the part after the delay is never read.
    assert 3 <= model.calls[0].chunks_streamed <= 5


# === Per-call overrides and processor factories ==================================


async def test_per_call_processor_lists_replace_the_agents() -> None:
    class Suffix(Processor):
        id = "suffix"

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            part = args.part
            if isinstance(part, TextDeltaChunk):
                return attrs.evolve(
                    part, payload=TextDeltaPayload(id=part.payload.id, text="x!")
                )
            return part

    agent = Agent(
        id="a", model=ScriptedModel(["abc", "abc", "abc"]), output_processors=[Upper()]
    )
    assert (await agent.generate("hi")).text == "ABC"
    assert (await agent.generate("hi", output_processors=[])).text == "abc"
    assert (await agent.generate("hi", output_processors=[Suffix()])).text == "x!"


async def test_processor_lists_may_be_callables_of_the_request_context() -> None:
    seen: list[Any] = []

    def factory(context: Any) -> list[object]:
        seen.append(context.get("blockedWords"))
        return content_filter_for(context)

    agent = Agent(
        id="a",
        model=ScriptedModel(["a forbidden word", "a forbidden word"]),
        output_processors=factory,
    )
    blocked = await agent.generate(
        "hi", request_context={"blockedWords": ["forbidden"]}
    )
    assert blocked.tripwire is not None
    assert blocked.tripwire.reason == "Blocked content detected in output"
    assert blocked.tripwire.processor_id == "content-filter"
    allowed = await agent.generate("hi", request_context={"blockedWords": ["other"]})
    assert allowed.tripwire is None
    assert allowed.text == "a forbidden word"
    assert seen == [["forbidden"], ["other"]]


# === Tool restriction ============================================================


async def test_active_tools_and_tool_choice_none_restrict_the_offered_tools() -> None:
    model = ScriptedModel(["a", "b", "c", "d"])
    agent = Agent(id="a", model=model, tools=[echo, other])
    await agent.generate("hi")
    await agent.generate("hi", active_tools=["other"])
    await agent.generate("hi", tool_choice="none")

    class OnlyEcho(Processor):
        id = "only-echo"

        def process_input_step(self, args: ProcessInputStepArgs) -> Any:
            return {"active_tools": ["echo"]}

    await agent.generate("hi", input_processors=[OnlyEcho()])
    assert [call.tool_names for call in model.calls] == [
        ["echo", "other"],
        ["other"],
        [],
        ["echo"],
    ]


async def test_a_call_to_a_tool_outside_active_tools_is_a_tool_error() -> None:
    model = ScriptedModel([tool_call_turn("echo", {"text": "x"}), "ok"])
    agent = Agent(id="a", model=model, tools=[echo, other])
    chunks, result = await run_stream(agent, active_tools=["other"])
    errors = [c for c in chunks if isinstance(c, ToolErrorChunk)]
    assert [e.payload.tool_name for e in errors] == ["echo"]
    assert "ToolResultChunk" not in {type(c).__name__ for c in chunks}
    assert result.text == "ok"


# === prepare_step ================================================================


async def test_prepare_step_runs_as_processor_prepare_step_after_the_input_lane() -> (
    None
):
    order: list[str] = []

    class First(Processor):
        id = "first"

        def process_input_step(self, args: ProcessInputStepArgs) -> None:
            order.append(f"first:{args.step_number}")

    def prepare(args: ProcessInputStepArgs) -> Any:
        order.append(f"{args.processor_id}:{args.step_number}")
        return {"tool_choice": "none"} if args.step_number == 1 else None

    model = ScriptedModel([tool_call_turn("echo", {"text": "x"}), "done"])
    agent = Agent(
        id="a",
        model=model,
        tools=[echo],
        input_processors=[First()],
        prepare_step=prepare,
    )
    result = await agent.generate("hi")
    assert order == ["first:0", "prepare-step:0", "first:1", "prepare-step:1"]
    assert [call.tool_names for call in model.calls] == [["echo"], []]
    assert result.text == "done"


async def test_prepare_step_abort_is_attributed_to_prepare_step() -> None:
    def prepare(args: ProcessInputStepArgs) -> Any:
        args.abort("not today", metadata={"day": "sunday"})

    model = ScriptedModel(["x"])
    agent = Agent(id="a", model=model)
    chunks, result = await run_stream(agent, prepare_step=prepare)
    assert to_wire(chunks[-1])["payload"] == {
        "reason": "not today",
        "retry": False,
        "metadata": {"day": "sunday"},
        "processorId": "prepare-step",
    }
    assert result.tripwire is not None
    assert result.tripwire.processor_id == "prepare-step"
    assert model.calls == []


# === Switching models per step ===================================================


async def test_process_input_step_switches_the_model_by_object() -> None:
    first = ScriptedModel([tool_call_turn("echo", {"text": "x"})], model_id="fast")
    second = ScriptedModel(["from the big model"], model_id="big")

    class Switch(Processor):
        id = "switch"

        def process_input_step(self, args: ProcessInputStepArgs) -> Any:
            return {"model": second} if args.step_number == 1 else None

    agent = Agent(id="a", model=first, tools=[echo], input_processors=[Switch()])
    result = await agent.generate("hi")
    assert (len(first.calls), len(second.calls)) == (1, 1)
    assert result.text == "from the big model"


async def test_process_input_step_switches_the_model_by_id() -> None:
    models = {
        "small": ScriptedModel([tool_call_turn("echo", {"text": "x"})]),
        "large": ScriptedModel(["large answer"]),
    }
    register_provider("procession-rules-test", lambda model_id: models[model_id])

    class Switch(Processor):
        id = "switch"

        def process_input_step(self, args: ProcessInputStepArgs) -> Any:
            if args.step_number == 0:
                return {"model": "procession-rules-test/small"}
            return {"model": "procession-rules-test/large"}

    agent = Agent(
        id="a",
        model=ScriptedModel([]),
        tools=[echo],
        input_processors=[Switch()],
    )
    result = await agent.generate("hi")
    assert (len(models["small"].calls), len(models["large"].calls)) == (1, 1)
    assert result.text == "large answer"


async def test_system_messages_are_reset_at_every_step() -> None:
    class AddSystem(Processor):
        id = "add-system"

        def __init__(self) -> None:
            self.seen: list[list[str]] = []

        def process_input_step(self, args: ProcessInputStepArgs) -> Any:
            self.seen.append([m.content for m in args.system_messages])
            return {"system_messages": [f"step {args.step_number} only"]}

    adder = AddSystem()
    model = ScriptedModel([tool_call_turn("echo", {"text": "x"}), "done"])
    agent = Agent(
        id="a",
        model=model,
        instructions="base",
        tools=[echo],
        input_processors=[adder],
    )
    await agent.generate("hi")
    assert adder.seen == [["base"], ["base"]]
    assert system_texts(model.calls[0].prompt) == ["step 0 only"]
    assert system_texts(model.calls[1].prompt) == ["step 1 only"]


# === API errors ==================================================================


async def test_api_errors_go_through_input_output_then_error_lanes() -> None:
    order: list[str] = []

    def handler(name: str, answer: Any) -> Any:
        def process_api_error(self: Any, args: ProcessAPIErrorArgs) -> Any:
            order.append(name)
            return answer

        return type(
            name, (Processor,), {"id": name, "process_api_error": process_api_error}
        )()

    model = ScriptedModel([ProviderError("rejected", status_code=400), "second try"])
    agent = Agent(
        id="a",
        model=model,
        input_processors=[handler("in", None)],
        output_processors=[handler("out", {"retry": True})],
        error_processors=[handler("err", {"retry": True})],
    )
    result = await agent.generate("hi")
    assert order == ["in", "out"]  # the first {"retry": True} wins
    assert len(model.calls) == 2
    assert result.text == "second try"
    assert result.retry_count == 1


async def test_api_error_handlers_share_state_with_other_hooks() -> None:
    class Stateful(Processor):
        id = "stateful"

        def __init__(self) -> None:
            self.seen: list[Any] = []

        def process_input_step(self, args: ProcessInputStepArgs) -> None:
            args.state["steps"] = args.state.get("steps", 0) + 1

        def process_api_error(self, args: ProcessAPIErrorArgs) -> Any:
            self.seen.append(("api", args.state.get("steps")))
            args.state["errors"] = args.state.get("errors", 0) + 1
            args.message_list.add(user_message("please be brief"), "input")
            return {"retry": True}

        def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
            if isinstance(args.part, FinishChunk):
                self.seen.append(("stream", args.state.get("errors")))
            return args.part

    stateful = Stateful()
    model = ScriptedModel([ProviderError("too long", status_code=400), "short"])
    agent = Agent(
        id="a",
        model=model,
        input_processors=[stateful],
        output_processors=[stateful],
        error_processors=[stateful],
    )
    result = await agent.generate("hi")
    assert stateful.seen == [("api", 1), ("stream", 1)]
    assert "user: please be brief" in prompt_texts(model.calls[1].prompt)
    assert result.text == "short"


async def test_a_failing_api_error_handler_is_skipped() -> None:
    class Broken(Processor):
        id = "broken"

        def process_api_error(self, args: ProcessAPIErrorArgs) -> Any:
            raise RuntimeError("handler bug")

    model = ScriptedModel([ProviderError("x", status_code=500), "fine"])
    agent = Agent(
        id="a", model=model, error_processors=[Broken(), RetryApiErrors(times=1)]
    )
    result = await agent.generate("hi")
    assert result.text == "fine"
    assert len(model.calls) == 2
