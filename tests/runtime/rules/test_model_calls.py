"""SPEC §2 rules 14 and 16 and API errors: the model call as hooks see it.
``process_llm_response`` sees raw chunks and a cached response replays without
the model (14); scripted delays and processor waits run on trio's clock (16);
failed model calls go through the API error handlers of every lane."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from procession import Agent, Processor, ProcessorError, ProviderError
from procession.chunks import FinishChunk, TextDeltaChunk
from procession.processors import (
    ProcessAPIErrorArgs,
    ProcessInputStepArgs,
    ProcessLLMRequestArgs,
    ProcessLLMRequestResult,
    ProcessLLMResponseArgs,
    ProcessOutputStepArgs,
    ProcessOutputStreamArgs,
)
from procession.testing import Delay, ScriptedModel, text_turn
from tests.runtime.rules._helpers import (
    RetryApiErrors,
    Upper,
    deltas,
    prompt_texts,
    run_stream,
    user_message,
)

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
    # A two-hour pause in the stream: the idle timeout (60 s) is turned off.
    agent = Agent(id="a", model=model, output_processors=[Slow()], idle_timeout=None)
    start = trio.current_time()
    result = await agent.generate("hi")
    assert trio.current_time() - start == pytest.approx(10800)
    assert result.text == "ab"


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


class BrokenHandler(Processor):
    id = "broken"

    def process_api_error(self, args: ProcessAPIErrorArgs) -> Any:
        raise RuntimeError("handler bug")


class LenientHandler(BrokenHandler):
    on_error = "pass"


async def test_a_failing_api_error_handler_ends_the_run_under_raise() -> None:
    # SPEC rule 18h: on_error applies to process_api_error as to every hook.
    api_error = ProviderError("x", status_code=500)
    model = ScriptedModel([api_error, "fine"])
    agent = Agent(
        id="a",
        model=model,
        error_processors=[BrokenHandler(), RetryApiErrors(times=1)],
    )
    result = await agent.generate("hi")
    assert len(model.calls) == 1  # the next error processor was not asked
    assert result.finish_reason == "error"
    assert isinstance(result.error, ProcessorError)
    assert result.error.processor_id == "broken"
    assert "handler bug" in str(result.error)
    bug = result.error.__cause__
    assert isinstance(bug, RuntimeError)
    assert bug.__context__ is api_error


async def test_a_failing_api_error_handler_is_skipped_under_pass() -> None:
    # Mastra's fail-open, for those who ask for it.
    model = ScriptedModel([ProviderError("x", status_code=500), "fine"])
    agent = Agent(
        id="a",
        model=model,
        error_processors=[LenientHandler(), RetryApiErrors(times=1)],
    )
    result = await agent.generate("hi")
    assert result.text == "fine"
    assert len(model.calls) == 2
