"""SPEC §2 rules 1 and 11: what a hook's return value does. An output-stream
hook's ``None`` drops the chunk and a list emits each chunk through the rest of
the chain (1); a message hook's ``None``, empty list or own MessageList mean no
change, a non-empty list replaces the messages, anything else is an error (11)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from procession import Agent, MessageList, Processor, ProcessorContractError
from procession.actors import ExecutionMode
from procession.chunks import TextDeltaChunk
from procession.processors import ProcessInputStepArgs, ProcessOutputStreamArgs
from procession.testing import (
    ScriptedModel,
    assert_run_shape,
    text_turn,
    tool_call_turn,
)
from tests.runtime.rules._helpers import (
    Observer,
    Upper,
    deltas,
    each_mode,
    echo,
    prompt_texts,
    run_stream,
    types,
    user_message,
)

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
    assert assert_run_shape(chunks) == "error"
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
