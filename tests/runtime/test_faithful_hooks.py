"""Issue 9: hook results checked, in-place edits honoured, no silent no-ops.
Each test failed before the change it pins."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from procession import (
    Agent,
    ConfigurationError,
    Processor,
    ProcessorContractError,
    ProcessorError,
    tool,
)
from procession.chunks import TextDeltaChunk, TextDeltaPayload, ToolErrorChunk
from procession.messages import SystemMessage
from procession.processors import (
    ProcessInputArgs,
    PromptSystemMessage,
    PromptToolResultPart,
)
from procession.testing import ScriptedModel, run_sequential, tool_call_turn


@attrs.frozen
class Empty:
    pass


@tool(description="always fails")
def broken(args: Empty) -> str:
    raise RuntimeError("boom")


async def test_a_thrown_tools_message_reaches_the_model_and_its_type_the_chunk() -> (
    None
):
    model = ScriptedModel([tool_call_turn("broken", {}), "sorry"])
    agent = Agent(id="a", model=model, tools=[broken])
    async with agent.stream("hi") as stream:
        chunks = [c async for c in stream]
    [error] = [c for c in chunks if isinstance(c, ToolErrorChunk)]
    assert isinstance(error.payload.error, RuntimeError)  # the type stays
    results = [
        part
        for message in model.calls[1].prompt
        if message.role == "tool"
        for part in message.content
        if isinstance(part, PromptToolResultPart)
    ]
    assert [(r.result, r.is_error) for r in results] == [("boom", True)]


async def test_a_value_returned_by_process_llm_response_is_a_contract_error() -> None:
    class Returns(Processor):
        id = "returns"

        def process_llm_response(self, args: Any) -> Any:
            return {"chunks": []}

    agent = Agent(id="a", model=ScriptedModel(["x"]), input_processors=[Returns()])
    result = await agent.generate("hi")
    assert isinstance(result.error, ProcessorContractError)
    assert "returns" in str(result.error)
    assert "process_llm_response" in str(result.error)


@pytest.mark.parametrize("choice", [5, "sometimes", {"type": "tool"}])
async def test_a_bad_tool_choice_from_process_input_step_is_a_contract_error(
    choice: Any,
) -> None:
    class Chooser(Processor):
        id = "chooser"

        def process_input_step(self, args: Any) -> Any:
            return {"tool_choice": choice}

    model = ScriptedModel(["x"])
    agent = Agent(id="a", model=model, input_processors=[Chooser()])
    result = await agent.generate("hi")
    assert isinstance(result.error, ProcessorContractError)
    assert "chooser" in str(result.error)
    assert f"tool_choice={choice!r}" in str(result.error)
    assert model.calls == []  # refused before any request


async def test_run_sequential_chains_the_hooks_error_as_the_pipeline_does() -> None:
    bug = ValueError("bad chunk")

    class Fails(Processor):
        id = "fails"

        def process_output_stream(self, args: Any) -> Any:
            raise bug

    async def source() -> AsyncIterator[Any]:
        yield TextDeltaChunk(payload=TextDeltaPayload(id="t", text="x"))

    run = await run_sequential([Fails()], source())
    error = run.chunks[-1].payload.error
    assert isinstance(error, ProcessorError)
    assert error.__cause__ is bug


async def test_system_messages_edited_in_place_in_process_input_are_kept() -> None:
    class Appends(Processor):
        id = "appends"

        def process_input(self, args: ProcessInputArgs) -> None:
            args.system_messages.append(SystemMessage(content="Answer in French."))

    model = ScriptedModel(["oui"])
    agent = Agent(
        id="a", model=model, instructions="Be brief.", input_processors=[Appends()]
    )
    await agent.generate("hi")
    system = [
        m.content for m in model.calls[0].prompt if isinstance(m, PromptSystemMessage)
    ]
    assert system == ["Be brief.", "Answer in French."]


async def test_an_input_processor_that_empties_the_prompt_is_named() -> None:
    class Keep(Processor):
        id = "keep"

        def process_input(self, args: Any) -> None:
            return None

    class Empties(Processor):
        id = "empties"

        def process_input(self, args: Any) -> list[Any]:
            return []

    model = ScriptedModel(["x"])
    agent = Agent(id="a", model=model, input_processors=[Empties(), Keep()])
    result = await agent.generate("hi")
    assert isinstance(result.error, ProcessorContractError)
    assert "'empties'" in str(result.error)
    assert "no user or assistant message" in str(result.error)
    assert model.calls == []


def test_a_run_started_from_asyncio_says_procession_runs_on_trio() -> None:
    agent = Agent(id="a", model=ScriptedModel(["x"]))
    with pytest.raises(ConfigurationError, match=r"runs on trio .*from asyncio"):
        asyncio.run(agent.generate("hi"))


async def test_a_lone_surrogate_a_processor_adds_is_refused_before_the_request() -> (
    None
):
    from procession import InvalidTextError

    class Corrupts(Processor):
        id = "corrupts"

        def process_llm_request(self, args: Any) -> Any:
            from procession.processors import PromptTextPart, PromptUserMessage

            return {"prompt": [PromptUserMessage((PromptTextPart("bad \ud800 text"),))]}

    model = ScriptedModel(["x"])
    agent = Agent(id="a", model=model, input_processors=[Corrupts()])
    result = await agent.generate("hi")
    assert isinstance(result.error, InvalidTextError)
    assert "U+D800" in str(result.error)
    assert "part #0" in str(result.error)
    assert model.calls == []
