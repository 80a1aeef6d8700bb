"""The seed's example processors inside a real ``Agent`` loop with a
``ScriptedModel``: what the model is given, as DynamicModelProcessor (model and
tool choice per step), ReasoningTransformer (in-place edits) and
LowercaseProcessor (new messages) change it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from procession import Agent, Processor
from procession.chunks import (
    Chunk,
)
from procession.messages import (
    ReasoningPart,
    TextPart,
)
from procession.models import register_provider, unregister_provider
from procession.processors import (
    ProcessOutputStepArgs,
    PromptAssistantMessage,
    PromptReasoningPart,
)
from procession.testing import (
    ScriptedModel,
    reasoning_turn,
    tool_call_turn,
)
from tests.runtime.seed_agent_helpers import (
    conversation_texts,
    get_weather,
    system_texts,
    tool_results_in,
    user_texts,
)
from tests.seed_processors import (
    DynamicModelProcessor,
    LowercaseProcessor,
    ReasoningTransformer,
)

# --- DynamicModelProcessor (process_input_step: model and tool choice) ---------------


@pytest.fixture
def openai_models() -> Iterator[dict[str, ScriptedModel]]:
    """Route "openai/<id>" to the ScriptedModels the test puts in the returned
    dict; the provider registry is restored afterwards."""
    models: dict[str, ScriptedModel] = {}
    # Put the built-in "openai" factory back afterwards, so the fake does not
    # leak into other tests.
    previous = unregister_provider("openai")
    try:
        register_provider("openai", lambda model_id: models[model_id])
        yield models
    finally:
        unregister_provider("openai")
        if previous is not None:
            register_provider("openai", previous)


async def test_dynamic_model_switches_model_after_a_tool_call(
    openai_models: dict[str, ScriptedModel],
) -> None:
    """Step 0 runs on the fast model; after a tool call the strong one takes
    over; the agent's own model is never called."""
    fast = openai_models["gpt-5-mini"] = ScriptedModel(
        [[*tool_call_turn("get_weather", {"city": "Paris"})]],
        provider="openai",
        model_id="gpt-5-mini",
    )
    strong = openai_models["gpt-5.6-sol"] = ScriptedModel(
        ["It is 21 degrees in Paris."], provider="openai", model_id="gpt-5.6-sol"
    )
    default = ScriptedModel([], model_id="default")
    agent = Agent(
        id="a",
        model=default,
        tools=[get_weather],
        input_processors=[DynamicModelProcessor()],
    )
    result = await agent.generate("Weather in Paris?")

    assert result.finish_reason == "stop"
    assert result.text == "It is 21 degrees in Paris."
    assert default.calls == []
    assert len(fast.calls) == 1
    assert len(strong.calls) == 1
    assert user_texts(fast.calls[0].prompt) == ["Weather in Paris?"]
    assert tool_results_in(strong.calls[0].prompt) == ["21 degrees in Paris"]
    assert fast.calls[0].tool_names == ["get_weather"]
    assert strong.calls[0].tool_names == ["get_weather"]


class RejectOnceAtStep(Processor):
    """Asks for one retry of step ``step_number`` (to reach DynamicModel's
    ``step_number > 5`` rule: its previous step then has no tool calls)."""

    id = "reject-once"

    def __init__(self, step_number: int) -> None:
        self.step_number = step_number

    def process_output_step(self, args: ProcessOutputStepArgs) -> None:
        if args.step_number == self.step_number and args.retry_count == 0:
            args.abort("try again without tools", retry=True)


async def test_dynamic_model_disables_tools_after_step_five(
    openai_models: dict[str, ScriptedModel],
) -> None:
    """Steps 0-6 each call a tool (fast model at step 0, the strong one after
    each tool call); step 6 is rejected once, so its retry follows a step
    without tool calls: past step 5 the processor sets tool_choice "none" (and
    no model, so the agent's own model answers), and no tools are offered."""

    def call(n: int) -> list[Chunk]:
        return [
            *tool_call_turn(
                "get_weather", {"city": f"City{n}"}, tool_call_id=f"call-{n}"
            )
        ]

    fast = openai_models["gpt-5-mini"] = ScriptedModel([call(0)])
    strong = openai_models["gpt-5.6-sol"] = ScriptedModel(
        [call(n) for n in range(1, 7)]
    )
    default = ScriptedModel(["Done: it is warm everywhere."])
    agent = Agent(
        id="a",
        model=default,
        tools=[get_weather],
        input_processors=[DynamicModelProcessor()],
        output_processors=[RejectOnceAtStep(6)],
        max_processor_retries=1,
        max_steps=10,
    )
    result = await agent.generate("Weather everywhere?")

    assert result.finish_reason == "stop", result.error
    assert result.text == "Done: it is warm everywhere."
    assert len(fast.calls) == 1
    assert len(strong.calls) == 6
    assert all(c.tool_choice == "auto" for c in [*fast.calls, *strong.calls])
    (final,) = default.calls
    assert final.tool_choice == "none"
    assert final.tools == []
    assert result.retry_count == 1
    assert [s.step_number for s in result.steps] == [0, 1, 2, 3, 4, 5, 6, 6]


# --- ReasoningTransformer (process_input_step, in-place edits) ----------------------


async def test_reasoning_transformer_renames_earlier_reasoning_parts() -> None:
    """At each step the reasoning parts of earlier assistant messages become
    "thinking" parts, in place: the run's message list keeps the change. The
    last step's reasoning (no step after it) stays "reasoning"."""
    model = ScriptedModel(
        [
            [
                *reasoning_turn("The user wants weather.", signature="sig-1"),
                *tool_call_turn("get_weather", {"city": "Paris"}),
            ],
            [*reasoning_turn("Now answer.", id="reasoning-2"), "It is 21 degrees."],
        ]
    )
    agent = Agent(
        id="a",
        model=model,
        tools=[get_weather],
        input_processors=[ReasoningTransformer()],
    )
    result = await agent.generate("Weather in Paris?")

    assert result.text == "It is 21 degrees."
    reasoning_parts = [
        part
        for m in result.message_list.get.all.db()
        if m.role == "assistant"
        for part in m.content.parts
        if isinstance(part, ReasoningPart)
    ]
    assert [(p.reasoning, p.type) for p in reasoning_parts] == [
        ("The user wants weather.", "thinking"),
        ("Now answer.", "reasoning"),
    ]
    # The renamed part is the same object the response messages hold.
    response_reasoning = [
        part
        for m in result.response_messages
        for part in m.content.parts
        if isinstance(part, ReasoningPart)
    ]
    assert [p.type for p in response_reasoning] == ["thinking", "reasoning"]
    # The model still gets the reasoning back (with its signature) at step 1.
    sent = [
        part
        for m in model.calls[1].prompt
        if isinstance(m, PromptAssistantMessage)
        for part in m.content
        if isinstance(part, PromptReasoningPart)
    ]
    # ... as the processor renamed it: the edit reaches the request.
    assert [(p.text, p.signature, p.type) for p in sent] == [
        ("The user wants weather.", "sig-1", "thinking")
    ]


# --- LowercaseProcessor (process_input returning new messages) ----------------------


async def test_lowercase_processor_lowercases_what_the_model_sees() -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(
        id="a",
        model=model,
        instructions="Answer in CAPITALS.",
        input_processors=[LowercaseProcessor()],
    )
    result = await agent.generate(
        [
            {"role": "user", "content": "Hello WORLD"},
            {"role": "assistant", "content": "Hi THERE"},
            {"role": "user", "content": "What Is UP?"},
        ]
    )

    prompt = model.calls[0].prompt
    assert user_texts(prompt) == ["hello world", "what is up?"]
    assert conversation_texts(prompt) == ["hello world", "hi there", "what is up?"]
    assert system_texts(prompt) == ["Answer in CAPITALS."]
    assert [m.content.parts[0] for m in result.message_list.get.input.db()] == [
        TextPart(text="hello world"),
        TextPart(text="hi there"),
        TextPart(text="what is up?"),
    ]
