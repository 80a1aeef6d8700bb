"""Per-step preparation: ``prepare_step`` runs after the input lane, and
``process_input_step`` may switch the model (by object or by id); system
messages are reset at every step."""

from __future__ import annotations

from typing import Any

from procession import Agent, Processor
from procession.chunks import to_wire
from procession.models import register_provider
from procession.processors import ProcessInputStepArgs
from procession.testing import ScriptedModel, tool_call_turn
from tests.runtime.rules._helpers import echo, run_stream, system_texts

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
