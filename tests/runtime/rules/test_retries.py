"""SPEC §2 rules 3, 4, 5 and 9: retries. The retry budget (3), which hooks may
ask for a retry and what it re-runs (4), the feedback a retried step carries (5),
and retries against ``max_steps``, recovered errors and the terminal paths of a
run (9)."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent, Processor, ProviderError, message_text
from procession.actors import ExecutionMode
from procession.chunks import (
    FinishChunk,
    StepRetryChunk,
    TextDeltaChunk,
    ToolResultChunk,
    TripwireChunk,
    to_wire,
)
from procession.messages import TextPart
from procession.processors import (
    ProcessAPIErrorArgs,
    ProcessInputArgs,
    ProcessInputStepArgs,
    ProcessOutputStepArgs,
    ProcessOutputStreamArgs,
    ProcessToolResultArgs,
)
from procession.runtime import RETRY_FEEDBACK_TAG
from procession.testing import (
    Delay,
    ScriptedModel,
    assert_run_shape,
    text_turn,
    tool_call_turn,
)
from tests.runtime.rules._helpers import (
    Observer,
    RetryApiErrors,
    StreamGuard,
    deltas,
    each_mode,
    echo,
    prompt_texts,
    run_stream,
    system_texts,
    types,
)


def feedback(reason: str) -> str:
    """The retry feedback text of SPEC §2.5."""
    return (
        f"Your previous response was not accepted: {reason}. Please try again with "
        f"the feedback in mind."
    )


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
    assert assert_run_shape(chunks) == "error"
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
    assert (assert_run_shape(chunks), result.finish_reason) == expected
