"""Issue 9 §1: what the client and the processors see, as Mastra 1.71 shows it
(SPEC rule 18). Each test failed before the change it pins."""

from __future__ import annotations

from typing import Any, Literal

import attrs
import pytest

from procession import Agent, Processor, ProcessorContractError, ProviderError, tool
from procession.chunks import (
    DataChunk,
    FinishChunk,
    StepFinishChunk,
    StepStartChunk,
    TextDeltaChunk,
    Usage,
    to_wire,
)
from procession.messages import message_text
from procession.processors import (
    ProcessLLMRequestArgs,
    ProcessLLMResponseArgs,
    ProcessOutputResultArgs,
    ProcessOutputStepArgs,
    ProcessOutputStreamArgs,
)
from procession.testing import (
    ScriptedModel,
    assert_run_shape,
    fail_at,
    text_turn,
    tool_call_turn,
)

MODES = pytest.mark.parametrize("mode", ["adaptive", "fused", "actors"])
Mode = Literal["adaptive", "fused", "actors"]


async def run(agent: Agent, messages: Any = "hi") -> tuple[list[Any], Any]:
    async with agent.stream(messages) as stream:
        chunks = [chunk async for chunk in stream]
        result = await stream.result()
    return chunks, result


def types(chunks: list[Any]) -> list[str]:
    return [c.type for c in chunks]


@attrs.frozen
class LookupInput:
    city: str


@tool(description="look a city up")
async def lookup(args: LookupInput, context: Any) -> str:
    await context.writer.custom({"type": "data-progress", "data": {"city": args.city}})
    return f"sunny in {args.city}"


@tool(description="always fails")
def broken(args: LookupInput) -> str:
    raise RuntimeError("boom")


# --- 1.1 a tool step's results come before its step-finish ----------------------


@MODES
async def test_tool_results_and_tool_data_come_before_the_steps_step_finish(
    mode: Mode,
) -> None:
    model = ScriptedModel([tool_call_turn("lookup", {"city": "Oslo"}), "done"])
    agent = Agent(id="a", model=model, tools=[lookup], execution_mode=mode)
    chunks, result = await run(agent)
    names = types(chunks)
    first_finish = names.index("step-finish")
    assert names.index("tool-result") < first_finish
    assert names.index("data-progress") < names.index("tool-result") < first_finish
    assert names.index("tool-call") < names.index("tool-result")
    assert assert_run_shape(chunks) == "finish"
    assert names.count("step-start") == names.count("step-finish") == 2
    assert result.text == "done"


@MODES
async def test_a_tool_error_comes_before_the_steps_step_finish(mode: Mode) -> None:
    model = ScriptedModel([tool_call_turn("broken", {"city": "Oslo"}), "sorry"])
    agent = Agent(id="a", model=model, tools=[broken], execution_mode=mode)
    chunks, _ = await run(agent)
    names = types(chunks)
    assert names.index("tool-error") < names.index("step-finish")
    assert assert_run_shape(chunks) == "finish"


# --- 1.2 after a terminal error: step-finish and finish with reason error ------


class Record(Processor):
    """Records process_output_result calls; writes a custom chunk there."""

    id = "record"

    def __init__(self) -> None:
        self.results: list[Any] = []

    async def process_output_result(self, args: ProcessOutputResultArgs) -> None:
        self.results.append(args.result)
        assert args.writer is not None
        await args.writer.custom({"type": "data-audit", "data": {"ok": False}})


@MODES
async def test_a_terminal_api_error_closes_the_step_and_the_run(mode: Mode) -> None:
    spent = Usage(input_tokens=7, output_tokens=2, total_tokens=9)
    turn = fail_at(text_turn("one two three"), 3, ProviderError("busy"))
    model = ScriptedModel([[spent, *tool_call_turn("lookup", {"city": "Oslo"})], turn])
    record = Record()
    agent = Agent(
        id="a",
        model=model,
        tools=[lookup],
        output_processors=[record],
        execution_mode=mode,
    )
    chunks, result = await run(agent)
    assert assert_run_shape(chunks) == "error"
    tail = chunks[types(chunks).index("error") :]
    assert types(tail) == ["error", "data-audit", "step-finish", "finish"]
    assert tail[2].payload.step_result.reason == "error"
    finish = tail[3]
    assert finish.payload.step_result.reason == "error"
    # The run's usage: the first step's (the failed call reported none).
    assert finish.payload.output.usage == result.usage == spent
    # Mastra PR #21299: the final output pass runs on an error terminal too.
    assert [r.finish_reason for r in record.results] == ["error"]
    assert result.finish_reason == "error"
    assert isinstance(result.error, ProviderError)


async def test_an_error_before_any_step_closes_the_run_without_a_step_finish() -> None:
    class Refuse(Processor):
        id = "refuse"

        def process_input(self, args: Any) -> Any:
            raise ValueError("no input today")

    agent = Agent(id="a", model=ScriptedModel(["x"]), input_processors=[Refuse()])
    chunks, result = await run(agent)
    assert types(chunks) == ["error", "finish"]
    assert assert_run_shape(chunks) == "error"
    assert "no input today" in str(result.error)


# --- 1.3 a model's own finish chunk is the step's information -------------------


RECORDED = [  # a Mastra stream as recorded on the wire, replayed as a turn
    {"type": "start", "runId": "old-run", "from": "AGENT", "payload": {}},
    {"type": "step-start", "payload": {"messageId": "old-msg"}},
    {"type": "text-start", "payload": {"id": "t1"}},
    {"type": "text-delta", "payload": {"id": "t1", "text": "cut "}},
    {"type": "text-delta", "payload": {"id": "t1", "text": "short"}},
    {"type": "text-end", "payload": {"id": "t1"}},
    {
        "type": "step-finish",
        "payload": {
            "stepResult": {"reason": "length"},
            "output": {"usage": {"inputTokens": 3, "outputTokens": 2}},
        },
    },
    {
        "type": "finish",
        "payload": {
            "stepResult": {"reason": "length"},
            "output": {
                "usage": {"inputTokens": 3, "outputTokens": 2, "totalTokens": 5}
            },
        },
    },
]


@MODES
async def test_a_replayed_streams_lifecycle_chunks_are_the_steps_information(
    mode: Mode,
) -> None:
    model = ScriptedModel([RECORDED])
    agent = Agent(id="a", model=model, execution_mode=mode)
    chunks, result = await run(agent)
    names = types(chunks)
    assert names == [
        "start",
        "step-start",
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
        "step-finish",
        "finish",
    ]
    assert {c.run_id for c in chunks} == {result.run_id}
    step_finish = chunks[names.index("step-finish")]
    assert step_finish.payload.step_result.reason == "length"
    usage = Usage(input_tokens=3, output_tokens=2, total_tokens=5)
    assert step_finish.payload.output.usage == usage
    assert result.finish_reason == "length"
    assert result.text == "cut short"


# --- 1.4 / 1.5 process_llm_response sees the whole step; replays are compact ----


class Cache(Processor):
    """A response cache keyed by the last user text, storing compact JSON."""

    id = "cache"

    def __init__(self) -> None:
        self.store: dict[str, list[dict[str, Any]]] = {}
        self.seen: list[tuple[bool, list[Any]]] = []

    def process_llm_request(self, args: ProcessLLMRequestArgs) -> Any:
        key = repr(args.prompt[-1].content)
        args.state["key"] = key
        if key in self.store:
            return {"response": {"chunks": self.store[key]}}
        return None

    def process_llm_response(self, args: ProcessLLMResponseArgs) -> None:
        self.seen.append((args.from_cache, list(args.chunks)))
        if not args.from_cache:
            self.store[args.state["key"]] = [to_wire(c) for c in args.chunks]


async def test_process_llm_response_sees_step_start_and_finish_with_usage() -> None:
    cache = Cache()
    model = ScriptedModel([text_turn("hello there")])
    agent = Agent(id="a", model=model, input_processors=[cache])
    await agent.generate("hi")
    [(from_cache, chunks)] = cache.seen
    assert not from_cache
    assert isinstance(chunks[0], StepStartChunk)
    assert isinstance(chunks[-1], FinishChunk)
    assert chunks[-1].payload.step_result.reason == "stop"
    assert [c.type for c in chunks[1:-1]] == [
        "text-start",
        "text-delta",
        "text-delta",
        "text-end",
    ]


@MODES
async def test_a_compact_json_replay_is_replayed_once_without_a_second_lifecycle(
    mode: Mode,
) -> None:
    cache = Cache()
    model = ScriptedModel(["hello there", "never asked"])
    agent = Agent(id="a", model=model, input_processors=[cache], execution_mode=mode)
    first = await agent.generate("hi")
    chunks, second = await run(agent, "hi")
    assert len(model.calls) == 1  # the second call was served from the cache
    assert second.text == first.text == "hello there"
    names = types(chunks)
    assert names.count("step-start") == names.count("step-finish") == 1
    assert names.count("finish") == 1
    assert assert_run_shape(chunks) == "finish"
    replayed = cache.seen[-1]
    assert replayed[0] is True
    assert all(hasattr(c, "type") for c in replayed[1])


@pytest.mark.parametrize(
    ("response", "offender"),
    [
        ({"chunks": ["text-delta"]}, "item 0 is 'text-delta'"),
        ({"chunks": [{"type": "no-such-chunk"}]}, "item 0"),
        ({"chunks": [{"payload": {}}]}, "item 0"),
        ({"cached": []}, "keys ['cached']"),
        ("hello", "of type str"),
    ],
)
async def test_a_malformed_cached_response_names_the_processor_and_the_item(
    response: Any, offender: str
) -> None:
    class BadCache(Processor):
        id = "bad-cache"

        def process_llm_request(self, args: Any) -> Any:
            return {"response": response}

    agent = Agent(id="a", model=ScriptedModel(["x"]), input_processors=[BadCache()])
    result = await agent.generate("hi")
    assert isinstance(result.error, ProcessorContractError)
    assert "bad-cache" in str(result.error)
    assert offender in str(result.error)


# --- 1.6 result.text is what the client was shown -------------------------------


class BlockStep(Processor):
    id = "block-step"

    def process_output_step(self, args: ProcessOutputStepArgs) -> None:
        args.abort("not this answer")


@MODES
async def test_an_output_step_abort_keeps_the_streamed_text(mode: Mode) -> None:
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("one two")]),
        output_processors=[BlockStep()],
        execution_mode=mode,
    )
    chunks, result = await run(agent)
    assert result.tripwire is not None
    assert result.text == "one two"
    assert [message_text(m) for m in result.response_messages] == ["one two"]
    assert result.message_list.get.response.db() == []  # not kept, not saved
    # Mastra 1G.53: the tripped step's step-finish says so; the tripwire is last.
    names = types(chunks)
    assert names[-2:] == ["step-finish", "tripwire"]
    assert chunks[-2].payload.step_result.reason == "tripwire"
    assert assert_run_shape(chunks) == "tripwire"


class FailOnThird(Processor):
    id = "fail-on-third"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        deltas = [c for c in args.stream_parts if isinstance(c, TextDeltaChunk)]
        if isinstance(args.part, TextDeltaChunk) and len(deltas) == 3:
            raise RuntimeError("hook bug")
        return args.part


@MODES
async def test_a_hook_error_mid_stream_keeps_the_text_the_client_saw(
    mode: Mode,
) -> None:
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("one two three")]),
        output_processors=[FailOnThird()],
        execution_mode=mode,
    )
    chunks, result = await run(agent)
    shown = "".join(c.payload.text for c in chunks if isinstance(c, TextDeltaChunk))
    assert shown == "one two"
    assert result.text == "one two"
    assert [message_text(m) for m in result.response_messages] == ["one two"]
    assert assert_run_shape(chunks) == "error"


async def test_custom_chunks_of_a_step_and_of_data_are_data_chunks() -> None:
    # The data chunk a tool wrote is delivered as a DataChunk, in the step.
    model = ScriptedModel([tool_call_turn("lookup", {"city": "Rome"}), "ok"])
    chunks, result = await run(Agent(id="a", model=model, tools=[lookup]))
    [data] = [c for c in chunks if isinstance(c, DataChunk)]
    assert data.data == {"city": "Rome"}
    assert result.custom_chunks == (data,)
    assert isinstance(chunks[types(chunks).index("step-finish")], StepFinishChunk)


async def test_process_llm_response_steps_include_this_step() -> None:
    seen: list[tuple[int, list[tuple[int, str]]]] = []

    class Steps(Processor):
        id = "steps"

        def process_llm_response(self, args: ProcessLLMResponseArgs) -> None:
            seen.append(
                (args.step_number, [(s.step_number, s.text) for s in args.steps])
            )

    model = ScriptedModel([tool_call_turn("lookup", {"city": "Oslo"}), "done"])
    agent = Agent(id="a", model=model, tools=[lookup], input_processors=[Steps()])
    await agent.generate("hi")
    # The seed: "every step completed so far, this one included".
    assert seen == [(0, [(0, "")]), (1, [(0, ""), (1, "done")])]
