"""ScriptedModel: every item kind, finishes, errors, records, cancellation."""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from procession import (
    ConfigurationError,
    ProcessionError,
    ProviderError,
)
from procession.chunks import (
    Chunk,
    ReasoningDeltaChunk,
    ReasoningEndChunk,
    ReasoningSignatureChunk,
    ReasoningStartChunk,
    StepFinishChunk,
    StepFinishPayload,
    StepOutput,
    StepResultInfo,
    TextDeltaChunk,
    ToolCallChunk,
    ToolCallDeltaChunk,
    ToolCallInputStreamingEndChunk,
    ToolCallInputStreamingStartChunk,
    Usage,
    data,
    finish,
    from_wire,
    text_delta,
    text_end,
    text_start,
    tool_call,
)
from procession.models import (
    LanguageModel,
    ModelFinish,
    ModelRequest,
    ToolDefinition,
)
from procession.processors import (
    PromptMessage,
    PromptSystemMessage,
    PromptTextPart,
    PromptUserMessage,
)
from procession.testing import (
    Delay,
    RecordedCall,
    ScriptedModel,
    ScriptedResponse,
    ScriptError,
    ScriptExhausted,
    reasoning_turn,
    text_turn,
    tool_call_turn,
)


def request(text: str = "hi", *, system: str | None = None, **kw: Any) -> ModelRequest:
    prompt: list[PromptMessage] = []
    if system is not None:
        prompt.append(PromptSystemMessage(system))
    prompt.append(PromptUserMessage([PromptTextPart(text)]))
    return ModelRequest(prompt=prompt, **kw)


async def collect(
    model: ScriptedModel, req: ModelRequest | None = None
) -> tuple[list[Chunk], ModelFinish | None]:
    async with model.stream(req or request()) as response:
        chunks = [chunk async for chunk in response]
    return chunks, response.finish


def kinds(chunks: list[Chunk]) -> list[str]:
    return [chunk.type for chunk in chunks]


# --------------------------------------------------------------------------- #
# The model as a LanguageModel
# --------------------------------------------------------------------------- #


def test_is_a_language_model_with_provider_and_model_id() -> None:
    model: LanguageModel = ScriptedModel([])
    assert isinstance(model, LanguageModel)
    assert (model.provider, model.model_id) == ("scripted", "scripted-model")
    named = ScriptedModel([], provider="anthropic", model_id="claude-x")
    assert (named.provider, named.model_id) == ("anthropic", "claude-x")
    assert repr(named) == (
        "ScriptedModel(provider='anthropic', model_id='claude-x', turns=0, calls=0)"
    )


def test_turns_must_be_a_list_of_turns() -> None:
    with pytest.raises(ScriptError, match=r"takes a list of turns, got 'hello'"):
        ScriptedModel("hello")
    with pytest.raises(ScriptError, match=r"turn 1: 42 is not a turn"):
        ScriptedModel(["ok", 42])  # type: ignore[list-item]


async def test_stream_rejects_what_is_not_a_request() -> None:
    model = ScriptedModel(["x"])
    with pytest.raises(TypeError, match=r"expects a ModelRequest, got 'hi'"):
        model.stream("hi")  # type: ignore[arg-type]  # the bad value under test
    assert model.calls == []


# --------------------------------------------------------------------------- #
# Item kinds
# --------------------------------------------------------------------------- #


async def test_chunk_objects_are_streamed_as_they_are() -> None:
    script: list[Chunk] = [text_start(), text_delta("a b"), text_end(), data("p", 1)]
    chunks, _ = await collect(ScriptedModel([script]))
    assert len(chunks) == len(script)
    assert all(got is sent for got, sent in zip(chunks, script, strict=True))
    assert all(getattr(chunk, "run_id", None) is None for chunk in chunks)


async def test_wire_dicts_become_chunks() -> None:
    wire = {"type": "text-delta", "payload": {"id": "t", "text": "hey"}}
    chunks, _ = await collect(ScriptedModel([[wire, {"type": "data-x", "data": 2}]]))
    assert chunks == [from_wire(wire), data("x", 2)]
    assert isinstance(chunks[0], TextDeltaChunk)


def test_a_bad_wire_dict_is_a_script_error_at_construction() -> None:
    with pytest.raises(ScriptError, match=r"turn 0, item 1: the wire dict is not a"):
        ScriptedModel([["ok", {"type": "no-such-chunk"}]])
    with pytest.raises(ConfigurationError, match=r"missing the required field"):
        ScriptedModel([[{"payload": {}}]])


async def test_a_str_is_a_whole_text_block_with_a_fresh_id() -> None:
    chunks, _ = await collect(ScriptedModel([["Hello there.", "Bye."]]))
    assert kinds(chunks) == ["text-start", "text-delta", "text-end"] * 2
    assert [c.payload.id for c in chunks] == ["text-1"] * 3 + ["text-2"] * 3  # type: ignore[union-attr]
    assert [c.payload.text for c in chunks if isinstance(c, TextDeltaChunk)] == [
        "Hello there.",
        "Bye.",
    ]


async def test_a_str_turn_is_shorthand_for_a_one_block_list() -> None:
    model = ScriptedModel(["first", "second"])
    first, _ = await collect(model)
    second, _ = await collect(model)
    assert first == (await collect(ScriptedModel([["first"]])))[0]
    assert [c.payload.text for c in second if isinstance(c, TextDeltaChunk)] == [
        "second"
    ]


def test_an_unknown_item_is_a_script_error() -> None:
    with pytest.raises(ScriptError, match=r"turn 0, item 0: 3.5 is not a script item"):
        ScriptedModel([[3.5]])  # type: ignore[list-item]


def test_nothing_may_follow_an_exception_or_a_finish() -> None:
    with pytest.raises(ScriptError, match=r"item 1: 'late' follows the exception at"):
        ScriptedModel([[ProviderError("boom"), "late"]])
    with pytest.raises(ScriptError, match=r"item 1: 'late' follows the finish item"):
        ScriptedModel([[ModelFinish(finish_reason="stop"), "late"]])
    with pytest.raises(ScriptError, match=r"a second Usage"):
        ScriptedModel([[Usage(), Usage()]])


# --------------------------------------------------------------------------- #
# Finish and usage
# --------------------------------------------------------------------------- #


async def test_default_finish_is_stop_with_word_counts() -> None:
    req = request("what is the weather", system="be brief")
    chunks, fin = await collect(
        ScriptedModel([[*text_turn("it is  sunny today")]]), req
    )
    assert kinds(chunks)[0] == "text-start"
    assert fin == ModelFinish(
        finish_reason="stop",
        usage=Usage(input_tokens=6, output_tokens=4, total_tokens=10),
    )


async def test_output_words_are_counted_per_text_block() -> None:
    # "one two" + "three" must not be read as "one twothree".
    turn = [*text_turn("one two", chunk_size=2), "three", *reasoning_turn("not me")]
    chunks, fin = await collect(ScriptedModel([turn]), request("a"))
    assert fin is not None
    assert fin.usage == Usage(input_tokens=1, output_tokens=3, total_tokens=4)
    # The str block steers clear of the id text_turn used.
    ids = [c.payload.id for c in chunks if isinstance(c, TextDeltaChunk)]
    assert ids == ["text-1"] * 4 + ["text-2"]


async def test_default_finish_is_tool_calls_when_a_tool_was_called() -> None:
    turn = ["let me look", *tool_call_turn("weather", {"city": "Oslo"})]
    _, fin = await collect(ScriptedModel([turn]))
    assert fin is not None
    assert fin.finish_reason == "tool-calls"
    assert fin.usage is not None
    assert fin.usage.output_tokens == 3


async def test_a_usage_item_is_reported_not_streamed() -> None:
    usage = Usage(input_tokens=100, output_tokens=7)
    chunks, fin = await collect(ScriptedModel([["hi", usage]]))
    assert kinds(chunks) == ["text-start", "text-delta", "text-end"]
    assert fin == ModelFinish(finish_reason="stop", usage=usage)


async def test_a_model_finish_is_taken_as_written() -> None:
    written = ModelFinish(finish_reason="length", warnings=("w",))
    chunks, fin = await collect(ScriptedModel([["cut", written]]))
    assert fin is written
    assert len(chunks) == 3
    usage = Usage(output_tokens=1)
    _, filled = await collect(ScriptedModel([["cut", usage, written]]))
    assert filled == attrs.evolve(written, usage=usage)


def test_usage_given_twice_is_a_script_error() -> None:
    with pytest.raises(ScriptError, match=r"turn 0: usage is given twice"):
        ScriptedModel([[Usage(), ModelFinish(usage=Usage(output_tokens=1))]])


async def test_finish_chunks_give_reason_and_usage_and_are_not_streamed() -> None:
    usage = Usage(input_tokens=1, output_tokens=2, total_tokens=3)
    chunks, fin = await collect(
        ScriptedModel([["x", finish("content-filter", usage=usage)]])
    )
    assert "finish" not in kinds(chunks)
    assert fin == ModelFinish(finish_reason="content-filter", usage=usage)

    step = StepFinishChunk(
        payload=StepFinishPayload(
            step_result=StepResultInfo(reason="length", warnings=["truncated"]),
            output=StepOutput(),
            total_usage=usage,
            provider_metadata={"p": {"k": 1}},
        )
    )
    chunks, fin = await collect(ScriptedModel([["x", step]]))
    assert "step-finish" not in kinds(chunks)
    assert fin == ModelFinish(
        finish_reason="length",
        usage=usage,
        warnings=["truncated"],
        provider_metadata={"p": {"k": 1}},
    )


async def test_a_finish_chunk_without_usage_gets_the_counted_one() -> None:
    _, fin = await collect(ScriptedModel([["one two", finish("other")]]), request("a"))
    assert fin == ModelFinish(
        finish_reason="other",
        usage=Usage(input_tokens=1, output_tokens=2, total_tokens=3),
    )


# --------------------------------------------------------------------------- #
# Exceptions
# --------------------------------------------------------------------------- #


async def test_an_exception_turn_is_raised_on_entering() -> None:
    error = ProviderError(
        "overloaded", status_code=529, headers={"Retry-After": "2"}, is_retryable=True
    )
    model = ScriptedModel([error, "after"])
    cm = model.stream(request())
    assert model.calls == []  # the call is made on entering
    with pytest.raises(ProviderError, match=r"^overloaded$") as info:
        async with cm:
            pytest.fail("the body must not run")
    assert info.value is error
    assert info.value.status_code == 529
    assert info.value.headers["retry-after"] == "2"
    [call] = model.calls
    assert call.error is error
    assert call.finish is None
    assert not call.closed_early
    chunks, _ = await collect(model)
    assert len(chunks) == 3


async def test_an_exception_item_is_raised_mid_stream() -> None:
    error = ProviderError("connection reset", code="ECONNRESET")
    model = ScriptedModel([[text_delta("partial"), error]])
    got: list[Chunk] = []
    async with model.stream(request()) as response:
        got.append(await response.__anext__())
        with pytest.raises(ProviderError, match=r"connection reset") as info:
            await response.__anext__()
        assert info.value.code == "ECONNRESET"
        with pytest.raises(StopAsyncIteration, match=r"^$"):
            await response.__anext__()
    assert got == [text_delta("partial")]
    assert response.finish is None
    [call] = model.calls
    assert (call.error, call.chunks_streamed, call.closed_early) == (error, 1, False)


# --------------------------------------------------------------------------- #
# Callable turns
# --------------------------------------------------------------------------- #


async def test_a_callable_turn_sees_the_request() -> None:
    seen: list[ModelRequest] = []

    def echo(req: ModelRequest) -> list[Any]:
        seen.append(req)
        last = req.prompt[-1]
        assert isinstance(last, PromptUserMessage)
        part = last.content[0]
        assert isinstance(part, PromptTextPart)
        return [f"you said {part.text}"]

    model = ScriptedModel([echo, echo])
    first, second = request("ping"), request("pong")
    a, _ = await collect(model, first)
    b, _ = await collect(model, second)
    assert seen == [first, second]
    assert [c.payload.text for c in a + b if isinstance(c, TextDeltaChunk)] == [
        "you said ping",
        "you said pong",
    ]


async def test_a_callable_turn_may_answer_with_an_exception_or_raise() -> None:
    error = ProviderError("bad request", status_code=400)

    def refuse(req: ModelRequest) -> ProviderError:
        return error

    def crash(req: ModelRequest) -> list[Any]:
        raise KeyError("no answer")

    model = ScriptedModel([refuse, crash])
    with pytest.raises(ProviderError, match=r"bad request"):
        await collect(model)
    with pytest.raises(KeyError, match=r"no answer"):
        await collect(model)
    assert model.calls[0].error is error
    assert isinstance(model.calls[1].error, KeyError)


async def test_what_a_callable_turn_returns_is_checked_at_the_call() -> None:
    model = ScriptedModel([lambda req: [object()], lambda req: lambda r: ["x"]])  # type: ignore[list-item, return-value]
    with pytest.raises(ScriptError, match=r"turn 0, item 0: <object object"):
        await collect(model)
    with pytest.raises(ScriptError, match=r"turn 1: the callable turn .* returned"):
        await collect(model)
    assert len(model.calls) == 2
    assert all(isinstance(call.error, ScriptError) for call in model.calls)


# --------------------------------------------------------------------------- #
# Timing, checkpoints, cancellation
# --------------------------------------------------------------------------- #


async def test_delays_run_on_trios_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([[Delay(1.5), text_delta("a"), Delay(2), text_delta("b")]])
    start = trio.current_time()
    arrivals: list[float] = []
    async with model.stream(request()) as response:
        async for _ in response:
            arrivals.append(trio.current_time() - start)
    assert arrivals == [1.5, 3.5]
    assert response.finish is not None


def test_a_delay_must_be_a_finite_non_negative_number() -> None:
    with pytest.raises(ValueError, match=r"finite and >= 0, got -1"):
        Delay(-1)
    with pytest.raises(ValueError, match=r"got inf"):
        Delay(float("inf"))
    with pytest.raises(TypeError, match=r"must be a number, got '1'"):
        Delay("1")  # type: ignore[arg-type]  # the bad value under test


async def test_every_read_and_the_call_itself_checkpoint() -> None:
    model = ScriptedModel([["a", ProviderError("x")]])
    with trio.testing.assert_checkpoints():
        response = await model.stream(request()).__aenter__()
    for _ in range(3):
        with trio.testing.assert_checkpoints():
            await response.__anext__()
    with trio.testing.assert_checkpoints(), pytest.raises(ProviderError, match="x"):
        await response.__anext__()


async def test_cancellation_reaches_a_waiting_reader(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([[text_delta("a"), Delay(100), text_delta("b")]])
    got: list[Chunk] = []
    with trio.move_on_after(5) as scope:
        async with model.stream(request()) as response:
            async for chunk in response:
                got.append(chunk)
    assert scope.cancelled_caught
    assert got == [text_delta("a")]
    assert trio.current_time() == pytest.approx(5)
    assert model.closed_early == 1
    assert response.finish is None


async def test_leaving_early_is_counted() -> None:
    model = ScriptedModel([["one", "two"], ["x"], ["y"]])
    async with model.stream(request()) as response:
        await response.__anext__()
    async with model.stream(request()):
        pass  # never iterated
    await collect(model)  # read to the end
    assert model.closed_early == 2
    assert [call.closed_early for call in model.calls] == [True, True, False]
    assert [call.chunks_streamed for call in model.calls] == [1, 0, 3]
    assert model.chunks_streamed == 4


async def test_iterating_after_the_block_exits_is_an_error() -> None:
    model = ScriptedModel([["a"]])
    async with model.stream(request()) as response:
        pass
    with pytest.raises(trio.ClosedResourceError, match=r"call #1 .* after its"):
        await response.__anext__()
    assert "closed" in repr(response)


async def test_a_call_context_is_single_use() -> None:
    model = ScriptedModel([["a"], ["b"]])
    cm = model.stream(request())
    async with cm:
        pass
    with pytest.raises(RuntimeError, match=r"can be entered only once"):
        await cm.__aenter__()
    assert len(model.calls) == 1


async def test_two_readers_at_once_are_refused() -> None:
    model = ScriptedModel([[Delay(1), "a"]])
    async with model.stream(request()) as response, trio.open_nursery() as nursery:
        nursery.start_soon(response.__anext__)
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(trio.BusyResourceError, match=r"already iterating"):
            await response.__anext__()
        nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------- #
# Exhaustion and records
# --------------------------------------------------------------------------- #


async def test_running_out_of_turns_raises_at_the_call() -> None:
    model = ScriptedModel(["only"])
    await collect(model)
    assert model.remaining == 0
    with pytest.raises(
        ScriptExhausted, match=r"call #2 but only 1 turn was scripted"
    ) as info:
        async with model.stream(request()):
            pytest.fail("the body must not run")
    assert isinstance(info.value, ProcessionError)
    assert (info.value.call_index, info.value.scripted) == (1, 1)
    assert len(model.calls) == 2
    assert model.calls[1].error is info.value
    with pytest.raises(ScriptExhausted, match=r"call #1 but only 0 turns were"):
        await collect(ScriptedModel([]))


async def test_calls_record_each_request() -> None:
    tools = [ToolDefinition(name="weather", input_schema={"type": "object"})]
    req = request(
        "hello",
        system="sys",
        tools=tools,
        tool_choice="required",
        settings={"temperature": 0.2},
        provider_options={"anthropic": {"x": 1}},
    )
    model = ScriptedModel(["a", "b"])
    assert model.remaining == 2
    await collect(model, req)
    [call] = model.calls
    assert isinstance(call, RecordedCall)
    assert call.index == 0
    assert call.request is req
    assert call.prompt == req.prompt
    assert call.tools == tools
    assert call.tool_names == ["weather"]
    assert call.tool_choice == "required"
    assert call.settings == {"temperature": 0.2}
    assert call.provider_options == {"anthropic": {"x": 1}}
    assert call.chunks_streamed == 3
    assert call.finish is not None
    assert call.finish.finish_reason == "stop"
    assert model.remaining == 1
    assert repr(call).startswith("RecordedCall(index=0, log=CallLog(chunks_streamed=3")
    with pytest.raises(
        attrs.exceptions.FrozenInstanceError, match="can't set attribute"
    ):
        call.index = 5  # type: ignore[misc]
    model.calls.clear()  # a copy: the model's record is untouched
    assert len(model.calls) == 1


async def test_the_response_knows_its_call() -> None:
    model = ScriptedModel([["a"]])
    async with model.stream(request()) as response:
        assert isinstance(response, ScriptedResponse)
        assert response.call is model.calls[0]
        assert repr(response) == (
            "<ScriptedResponse call=0 chunks_streamed=0 streaming>"
        )


# --------------------------------------------------------------------------- #
# Turn builders
# --------------------------------------------------------------------------- #


def deltas(items: list[Any]) -> list[str]:
    return [c.payload.text for c in items if isinstance(c, TextDeltaChunk)]


def test_text_turn_splits_into_words_or_fixed_sizes() -> None:
    items = text_turn("  hello big\nworld  ")
    assert [c.type for c in items] == ["text-start"] + ["text-delta"] * 3 + ["text-end"]
    assert deltas(items) == ["  hello", " big", "\nworld  "]
    assert deltas(text_turn("abcdefg", chunk_size=3)) == ["abc", "def", "g"]
    assert deltas(text_turn("")) == [""]
    assert {c.payload.id for c in text_turn("a b", id="t9")} == {"t9"}  # type: ignore[union-attr]
    with pytest.raises(ValueError, match=r"chunk_size must be at least 1, got 0"):
        text_turn("x", chunk_size=0)


def test_tool_call_turn_streams_the_arguments_json() -> None:
    args = {"city": "Oslo", "days": 3}
    items = tool_call_turn("weather", args, tool_call_id="c7", chunk_size=5)
    start, *middle, end, call = items
    assert isinstance(start, ToolCallInputStreamingStartChunk)
    assert (start.payload.tool_call_id, start.payload.tool_name) == ("c7", "weather")
    assert all(isinstance(c, ToolCallDeltaChunk) for c in middle)
    assert len(middle) > 1
    text = "".join(c.payload.args_text_delta for c in middle)  # type: ignore[union-attr]
    assert json.loads(text) == args
    assert isinstance(end, ToolCallInputStreamingEndChunk)
    assert end.payload.tool_call_id == "c7"
    assert call == tool_call("c7", "weather", args)
    assert isinstance(call, ToolCallChunk)
    assert len(tool_call_turn("t", [1, 2])) == 4  # one delta by default


def test_reasoning_turn_carries_the_signature() -> None:
    items = reasoning_turn("think hard", signature="sig==", id="r1")
    start, *pieces, sig, end = items
    assert isinstance(start, ReasoningStartChunk)
    assert all(isinstance(p, ReasoningDeltaChunk) for p in pieces)
    assert "".join(p.payload.text for p in pieces) == "think hard"  # type: ignore[union-attr]
    assert isinstance(sig, ReasoningSignatureChunk)
    assert (sig.payload.id, sig.payload.signature) == ("r1", "sig==")
    assert isinstance(end, ReasoningEndChunk)
    assert end.payload.signature == "sig=="
    unsigned = reasoning_turn("hmm")
    assert [c.type for c in unsigned] == [
        "reasoning-start",
        "reasoning-delta",
        "reasoning-end",
    ]


async def test_builders_compose_into_one_streamed_turn() -> None:
    turn = [
        *reasoning_turn("plan", signature="s"),
        *text_turn("checking now"),
        *tool_call_turn("weather", {"city": "Oslo"}),
    ]
    model = ScriptedModel([turn])
    chunks, fin = await collect(model)
    assert chunks == turn
    assert fin is not None
    assert fin.finish_reason == "tool-calls"
    assert fin.usage == Usage(input_tokens=1, output_tokens=2, total_tokens=3)


def test_strategies_without_hypothesis_say_what_to_install() -> None:
    """A user without the testing extra is told what to install, not shown a bare
    'No module named hypothesis' from deep inside."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['hypothesis'] = None\n"
        "import procession.testing.strategies\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert (
        "procession.testing.strategies needs hypothesis, which is not installed: "
        'pip install "procession[testing]"' in done.stderr
    )


def test_the_fake_provider_without_h11_says_what_to_install() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['h11'] = None\n"
        "import procession.testing.fake_provider\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert (
        "procession.testing.fake_provider needs h11, which is not installed: "
        'pip install "procession[testing]"' in done.stderr
    )
