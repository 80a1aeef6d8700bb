"""Regressions found in review: each test pins a behaviour that was wrong once.

Every test runs in both execution modes; several repeat a run because the bug
they pin depended on task scheduling.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent, Processor, ProcessorContractError, message_text, tool
from procession.actors import ExecutionMode
from procession.chunks import TextDeltaChunk, error
from procession.processors import (
    ProcessInputStepResult,
    ProcessorViolation,
    PromptTextPart,
    StreamErrorRetryProcessor,
)
from procession.testing import Delay, ScriptedModel, text_turn, tool_call_turn
from tests.runtime.flushing import Batch

each_mode = pytest.mark.parametrize("mode", ["adaptive", "fused", "actors"])


@tool
def lookup() -> str:
    """Look up."""
    return "data"


def run(fn: Callable[..., Any], *args: Any) -> Any:
    return trio.run(fn, *args, clock=trio.testing.MockClock(autojump_threshold=0))


async def stream_types(agent: Agent, prompt: str = "hi") -> tuple[list[str], Any]:
    async with agent.stream(prompt) as stream:
        types = [chunk.type async for chunk in stream]
        return types, await stream.result()


class RetryOn(Processor):
    """Asks for a retry, once, on the first chunk of type ``kind``."""

    id = "retry-on"

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def process_output_stream(self, args: Any) -> Any:
        if args.part.type == self.kind and args.retry_count == 0:
            args.abort(f"bad {self.kind}", retry=True)
        return args.part


@each_mode
@pytest.mark.parametrize("kind", ["step-finish", "tool-result"])
def test_a_retry_asked_on_a_lifecycle_chunk_retries_the_step(
    mode: ExecutionMode, kind: str
) -> None:
    async def main() -> None:
        model = ScriptedModel(
            [[*tool_call_turn("lookup", {})], *(["done"] * 3)]
            if kind == "tool-result"
            else ["short", "a longer answer"]
        )
        agent = Agent(
            id="a",
            model=model,
            tools=[lookup],
            output_processors=[RetryOn(kind)],
            max_processor_retries=3,
            execution_mode=mode,
        )
        types, result = await stream_types(agent)
        assert "step-retry" in types
        assert result.retry_count == 1
        assert result.tripwire is None
        assert result.finish_reason == "stop"
        assert types[-1] == "finish"

    run(main)


@each_mode
def test_a_retry_asked_on_the_finish_chunk_is_a_tripwire_not_silence(
    mode: ExecutionMode,
) -> None:
    async def main() -> None:
        model = ScriptedModel(["short"])
        agent = Agent(
            id="a",
            model=model,
            output_processors=[RetryOn("finish")],
            max_processor_retries=3,
            execution_mode=mode,
        )
        types, result = await stream_types(agent)
        assert types[-1] == "tripwire"
        assert result.tripwire is not None
        assert result.tripwire.reason == "bad finish"
        assert result.finish_reason == "other"
        assert len(model.calls) == 1

    run(main)


@each_mode
@pytest.mark.parametrize("flush_on", ["text-end", "step-finish", "finish"])
def test_text_flushed_late_is_in_the_result_and_the_messages(
    mode: ExecutionMode, flush_on: str
) -> None:
    async def main() -> None:
        model = ScriptedModel([text_turn("hello brave new world", chunk_size=6)])
        agent = Agent(
            id="a",
            model=model,
            output_processors=[Batch(flush_on)],
            execution_mode=mode,
        )
        async with agent.stream("hi") as stream:
            seen = "".join(
                [c.payload.text async for c in stream if isinstance(c, TextDeltaChunk)]
            )
            result = await stream.result()
        assert seen == "hello brave new world"
        assert result.text == seen
        assert result.steps[-1].text == seen
        assert [message_text(m) for m in result.response_messages] == [seen]

    run(main)


@each_mode
def test_each_step_keeps_its_own_text_when_flushed_on_step_finish(
    mode: ExecutionMode,
) -> None:
    async def main() -> None:
        model = ScriptedModel(
            [[*text_turn("let me check"), *tool_call_turn("lookup", {})], "done now"]
        )
        agent = Agent(
            id="a",
            model=model,
            tools=[lookup],
            output_processors=[Batch("step-finish")],
            execution_mode=mode,
        )
        result = await agent.generate("hi")
        assert [s.text for s in result.steps] == ["let me check", "done now"]
        assert result.text == "let me checkdone now"
        # The first step's text went back to the model with its tool call.
        assistant = [m for m in model.calls[1].prompt if m.role == "assistant"]
        first = assistant[0].content[0]
        assert isinstance(first, PromptTextPart)
        assert first.text == "let me check"

    run(main)


@each_mode
def test_stream_hooks_see_the_retry_count_of_an_input_step_retry(
    mode: ExecutionMode,
) -> None:
    seen: list[tuple[str, int]] = []

    class RetryInput(Processor):
        id = "retry-input"

        def process_input_step(self, args: Any) -> None:
            seen.append(("input_step", args.retry_count))
            if args.retry_count == 0:
                args.abort("again", retry=True)

    class Watch(Processor):
        id = "watch"

        def process_output_stream(self, args: Any) -> Any:
            if args.part.type == "text-delta":
                seen.append(("output_stream", args.retry_count))
            return args.part

        def process_output_step(self, args: Any) -> None:
            seen.append(("output_step", args.retry_count))

    async def main() -> None:
        agent = Agent(
            id="a",
            model=ScriptedModel(["x"]),
            input_processors=[RetryInput()],
            output_processors=[Watch()],
            max_processor_retries=2,
            execution_mode=mode,
        )
        await agent.generate("hi")

    run(main)
    assert seen == [
        ("input_step", 0),
        ("input_step", 1),
        ("output_stream", 1),
        ("output_step", 1),
    ]


def test_an_input_step_retry_starts_from_the_steps_configuration() -> None:
    class Halve(Processor):
        id = "halve"

        def process_input_step(self, args: Any) -> Any:
            tokens = args.model_settings.get("max_tokens", 100) // 2
            return ProcessInputStepResult(
                model_settings={**args.model_settings, "max_tokens": tokens},
                system_messages=[*args.system_messages, "Step hint: be brief."],
            )

    class RetryOnce(Processor):
        id = "retry-once"

        def process_input_step(self, args: Any) -> None:
            if args.retry_count == 0:
                args.abort("retry once", retry=True)

    async def main() -> ScriptedModel:
        model = ScriptedModel(["x"])
        agent = Agent(
            id="a",
            instructions="You are helpful.",
            model=model,
            model_settings={"max_tokens": 100},
            input_processors=[Halve(), RetryOnce()],
            max_processor_retries=2,
        )
        await agent.generate("hi")
        return model

    model = run(main)
    assert model.calls[0].settings["max_tokens"] == 50  # halved once, not twice
    system = [m.content for m in model.calls[0].prompt if m.role == "system"]
    assert system.count("Step hint: be brief.") == 1
    assert sum("not accepted" in text for text in system) == 1


def test_the_retry_feedback_reaches_the_model_once() -> None:
    class Hint(Processor):
        id = "hint"

        def process_input_step(self, args: Any) -> Any:
            return {"system_messages": [*args.system_messages, "Step hint."]}

    class Guard(Processor):
        id = "guard"

        def process_output_step(self, args: Any) -> None:
            if args.text == "vague":
                args.abort("too vague", retry=True)

    async def main() -> ScriptedModel:
        model = ScriptedModel(["vague", "better"])
        agent = Agent(
            id="a",
            instructions="You are helpful.",
            model=model,
            input_processors=[Hint()],
            output_processors=[Guard()],
            max_processor_retries=2,
        )
        await agent.generate("hi")
        return model

    model = run(main)
    system = [m.content for m in model.calls[1].prompt if m.role == "system"]
    assert system[:2] == ["You are helpful.", "Step hint."]
    assert sum("not accepted: too vague" in text for text in system) == 1


@each_mode
def test_a_heartbeat_timeout_around_reads_loses_no_chunk(mode: ExecutionMode) -> None:
    class SlowModeration(Processor):
        id = "slow-moderation"

        async def process_output_stream(self, args: Any) -> Any:
            if args.part.type == "text-delta" and "three" in args.part.payload.text:
                await trio.sleep(0.7)  # one slow moderation call
            return args.part

    async def main() -> tuple[str, str]:
        model = ScriptedModel([["one ", "two ", "three ", "four"]])
        agent = Agent(
            id="a",
            model=model,
            output_processors=[SlowModeration()],
            execution_mode=mode,
        )
        got: list[str] = []
        async with agent.stream("hi") as stream:
            reader = stream.__aiter__()
            while True:
                with trio.move_on_after(0.5):  # a heartbeat every 0.5 s
                    try:
                        chunk = await reader.__anext__()
                    except StopAsyncIteration:
                        break
                    if isinstance(chunk, TextDeltaChunk):
                        got.append(chunk.payload.text)
            result = await stream.result()
        return "".join(got), result.text

    seen, text = run(main)
    assert seen == "one two three four"
    assert text == "one two three four"


@each_mode
def test_a_read_timeout_during_on_violation_loses_neither_alert_nor_tripwire(
    mode: ExecutionMode,
) -> None:
    alerts: list[str] = []

    class Leak(Processor):
        id = "leak"

        def process_output_stream(self, args: Any) -> Any:
            if args.part.type == "text-delta" and "secret" in args.part.payload.text:
                args.abort("secret leaked")
            return args.part

        async def on_violation(self, violation: ProcessorViolation) -> None:
            await trio.sleep(0.7)  # a webhook
            alerts.append(violation.message)

    async def main() -> list[str]:
        model = ScriptedModel([["before ", "the secret is out"]])
        agent = Agent(
            id="a", model=model, output_processors=[Leak()], execution_mode=mode
        )
        types: list[str] = []
        async with agent.stream("hi") as stream:
            reader = stream.__aiter__()
            while True:
                with trio.move_on_after(0.5):
                    try:
                        types.append((await reader.__anext__()).type)
                    except StopAsyncIteration:
                        break
        return types

    types = run(main)
    assert types[-1] == "tripwire"
    assert alerts == ["secret leaked"]


@each_mode
@pytest.mark.parametrize("with_retry", [False, True])
def test_an_error_chunk_from_the_model_is_an_api_error(
    mode: ExecutionMode, with_retry: bool
) -> None:
    async def main() -> Any:
        failing = [
            *text_turn("par"),
            error({"code": "server_error", "message": "oops"}),
        ]
        model = ScriptedModel([failing, "whole"])
        agent = Agent(
            id="a",
            model=model,
            error_processors=[StreamErrorRetryProcessor()] if with_retry else [],
            execution_mode=mode,
        )
        types, result = await stream_types(agent)
        return types, result, len(model.calls)

    types, result, calls = run(main)
    if with_retry:
        # The built-in OpenAI matcher knows server_error: the step is retried.
        assert calls == 2
        assert result.text == "whole"
        assert "error" not in types
        assert "step-retry" in types
    else:
        assert calls == 1
        assert result.finish_reason == "error"
        assert result.error is not None
        assert "oops" in str(result.error)
        assert types[-3:] == ["error", "step-finish", "finish"]


@each_mode
def test_a_malformed_step_result_fails_the_run_with_a_typed_error(
    mode: ExecutionMode,
) -> None:
    class Bad(Processor):
        id = "bad"

        def process_input_step(self, args: Any) -> Any:
            return ProcessInputStepResult(model_settings=42)  # type: ignore[arg-type]  # the bad value under test

    async def main() -> Any:
        model = ScriptedModel(["x"])
        agent = Agent(
            id="a", model=model, input_processors=[Bad()], execution_mode=mode
        )
        for _ in range(10):  # the bug depended on scheduling
            result = await agent.generate("hi")
            assert result.finish_reason == "error"
            assert isinstance(result.error, ProcessorContractError)
            assert "model_settings=42" in str(result.error)
        return model

    model = run(main)
    assert model.calls == []


@each_mode
def test_only_the_winning_tripwire_calls_on_violation(mode: ExecutionMode) -> None:
    violations: list[str] = []

    class StreamScan(Processor):
        id = "stream-scan"

        def on_violation(self, violation: ProcessorViolation) -> None:
            violations.append(violation.processor_id)

        def process_output_stream(self, args: Any) -> Any:
            if (
                args.part.type == "tool-result"
                and args.part.payload.tool_call_id == "call-1"
            ):
                args.abort("call-1 result blocked")
            return args.part

    class ToolScan(Processor):
        id = "tool-scan"

        def on_violation(self, violation: ProcessorViolation) -> None:
            violations.append(violation.processor_id)

        def process_tool_result(self, args: Any) -> None:
            if args.tool_call_id == "call-2":
                args.abort("call-2 result blocked")

    async def main() -> None:
        for _ in range(10):  # the bug depended on scheduling
            violations.clear()
            model = ScriptedModel(
                [
                    [
                        *tool_call_turn("lookup", {}, tool_call_id="call-1"),
                        *tool_call_turn("lookup", {}, tool_call_id="call-2"),
                    ],
                    "x",
                ]
            )
            agent = Agent(
                id="a",
                model=model,
                tools=[lookup],
                output_processors=[StreamScan(), ToolScan()],
                execution_mode=mode,
            )
            result = await agent.generate("hi")
            assert result.tripwire is not None
            assert result.tripwire.processor_id == "stream-scan"
            assert violations == ["stream-scan"]
            assert [
                (s.finish_reason, s.tripwire.processor_id if s.tripwire else None)
                for s in result.steps
            ] == [("tripwire", "stream-scan")]

    run(main)


def test_usage_of_a_retried_attempt_is_counted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Tokens are spent whether or not the attempt is kept."""

    async def main() -> Any:
        model = ScriptedModel(["short", "a longer answer"])
        agent = Agent(
            id="a",
            model=model,
            output_processors=[RetryOn("step-finish")],
            max_processor_retries=1,
        )
        return await agent.generate("hi")

    result = trio.run(main, clock=autojump_clock)
    assert result.retry_count == 1
    # ScriptedModel counts output tokens as words: "short" (1) + 3.
    assert result.usage.output_tokens == 4


def test_delay_import_is_used() -> None:
    """Delay items pause on trio's clock (keeps the helper import honest)."""

    async def main() -> float:
        model = ScriptedModel([["a", Delay(3), "b"]])
        await Agent(id="a", model=model).generate("hi")
        return trio.current_time()

    assert run(main) == pytest.approx(3)


def test_a_run_id_is_run_and_128_random_bits() -> None:
    """Run ids key resumable runs across a fleet and name runs in cancel
    routes: ``run-`` + ``secrets.token_hex(16)``, never a short uuid."""

    async def main() -> list[str]:
        agent = Agent(id="a", model=ScriptedModel(["ok", "ok"]))
        ids = []
        for _ in range(2):
            async with agent.stream("hi") as stream:
                await stream.result()
                ids.append(stream.run_id)
        return ids

    first, second = run(main)
    assert re.fullmatch(r"run-[0-9a-f]{32}", first), first
    assert first != second


async def test_run_storage_follows_the_memory_it_is_asked_of() -> None:
    """``Agent.run_storage`` keeps its answer per storage object (the
    protocol check costs tens of µs, and every run asks), so it must follow
    a memory swapped on the agent, and an explicit ``storage``."""
    from procession.memory import Memory, SqliteStorage

    first, second = SqliteStorage(":memory:"), SqliteStorage(":memory:")
    agent = Agent(id="a", model=ScriptedModel(["x"]))

    def kept() -> object:
        return agent.run_storage

    assert kept() is None
    agent.memory = Memory(storage=first)
    assert kept() is first
    assert kept() is first  # (kept)
    agent.memory = Memory(storage=second)
    assert kept() is second
    agent.memory = None
    assert kept() is None
    agent.storage = first
    assert kept() is first
    await first.aclose()
    await second.aclose()
