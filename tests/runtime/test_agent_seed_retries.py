"""The seed's example processors inside a real ``Agent`` loop with a
``ScriptedModel``, written the way a user would use them: QualityGuardrail
retries a step with feedback (and blocks when the budget is spent), and
ErrorRecoveryProcessor trims the messages and retries a context-length error
once.
"""

from __future__ import annotations

import pytest

from procession import Agent, Processor, ProviderError
from procession.actors import ExecutionMode
from procession.chunks import (
    ErrorChunk,
    StepRetryChunk,
    TextDeltaChunk,
    TripwireChunk,
    to_wire,
)
from procession.messages import (
    TextPart,
    message_text,
)
from procession.processors import (
    ProcessInputStepArgs,
)
from procession.runtime import RETRY_FEEDBACK_TAG
from procession.runtime.tools import tool
from procession.testing import (
    ScriptedModel,
    assert_run_shape,
    text_turn,
    tool_call_turn,
)
from tests.runtime.seed_agent_helpers import (
    FEEDBACK,
    GOOD_ANSWER,
    HISTORY,
    MODES,
    CityInput,
    context_length_error,
    conversation_texts,
    of_type,
    run_stream,
    system_texts,
    tool_results_in,
)
from tests.seed_processors import (
    ErrorRecoveryProcessor,
    QualityGuardrail,
)

# --- QualityGuardrail (process_output_step, retry with feedback) --------------------


@pytest.mark.parametrize("mode", MODES)
async def test_quality_guardrail_retries_low_quality_answers_with_feedback(
    mode: ExecutionMode,
) -> None:
    """Two short answers are rejected and retried with the feedback as a system
    message; the third is accepted. The rejected attempts are recorded as steps
    with their tripwire, each retry is announced by a step-retry chunk, and only
    the accepted text is the result's."""
    model = ScriptedModel(
        [
            text_turn("Too short."),
            text_turn("Still rather short."),
            text_turn(GOOD_ANSWER),
        ]
    )
    agent = Agent(
        id="weather",
        model=model,
        instructions="Answer about the weather.",
        output_processors=[QualityGuardrail()],
        max_processor_retries=3,
        execution_mode=mode,
    )
    chunks, result = await run_stream(agent, "What is the weather in Paris?")

    assert len(model.calls) == 3
    assert system_texts(model.calls[0].prompt) == ["Answer about the weather."]
    for call in model.calls[1:]:
        assert system_texts(call.prompt) == ["Answer about the weather.", FEEDBACK]
        # The rejected answer is not part of the conversation the model sees.
        assert conversation_texts(call.prompt) == ["What is the weather in Paris?"]

    assert result.finish_reason == "stop"
    assert result.tripwire is None
    assert result.text == GOOD_ANSWER
    assert result.retry_count == 2
    rejected, accepted = result.steps[:2], result.steps[2]
    assert len(result.steps) == 3
    for step, score in zip(rejected, [0.1, 0.15], strict=True):
        assert step.step_number == 0
        assert step.text == ""
        assert step.tripwire is not None
        assert step.tripwire.reason == (
            "Response quality too low. Please provide more detail."
        )
        assert step.tripwire.retry is True
        assert step.tripwire.processor_id == "quality-guardrail"
        assert step.tripwire.metadata == {"qualityScore": pytest.approx(score)}
    assert accepted.tripwire is None
    assert accepted.text == GOOD_ANSWER

    retries = of_type(chunks, StepRetryChunk)
    assert [(r.payload.step_number, r.payload.retry_count) for r in retries] == [
        (0, 1),
        (0, 2),
    ]
    for retry in retries:
        assert retry.payload.processor_id == "quality-guardrail"
        assert retry.payload.reason == (
            "Response quality too low. Please provide more detail."
        )
        assert retry.run_id == result.run_id
    # Each step-retry chunk follows the text of the attempt it discards.
    deltas_and_retries = [
        c.payload.text if isinstance(c, TextDeltaChunk) else "<retry>"
        for c in chunks
        if isinstance(c, TextDeltaChunk | StepRetryChunk)
    ]
    assert deltas_and_retries == [
        "Too",
        " short.",
        "<retry>",
        "Still",
        " rather",
        " short.",
        "<retry>",
        *(
            c.payload.text
            for c in text_turn(GOOD_ANSWER)
            if isinstance(c, TextDeltaChunk)
        ),
    ]
    assert not of_type(chunks, TripwireChunk)

    # The feedback is gone once a step succeeded, and it is never persisted.
    ml = result.message_list
    assert ml.get_system_messages(RETRY_FEEDBACK_TAG) == []
    assert [m.role for m in result.response_messages] == ["assistant"]
    texts = [
        part.text
        for m in ml.get.all.db()
        for part in m.content.parts
        if isinstance(part, TextPart)
    ]
    assert texts == ["What is the weather in Paris?", GOOD_ANSWER]


async def test_quality_guardrail_feedback_is_removed_after_the_step_succeeds() -> None:
    """The feedback system message belongs to the retried step only: input
    processors see it in ``system_messages`` during the retry, the next step's
    model call and processors do not."""
    seen: list[tuple[int, int, list[str]]] = []

    class SystemRecorder(Processor):
        id = "system-recorder"

        def process_input_step(self, args: ProcessInputStepArgs) -> None:
            texts = [m.content for m in args.system_messages]
            seen.append((args.step_number, args.retry_count, texts))

    @tool
    async def lookup(args: CityInput) -> str:
        """Look a city up."""
        return "Paris, France"

    model = ScriptedModel(
        [
            "Hmm.",
            [
                f"{GOOD_ANSWER} Let me look it up.",
                *tool_call_turn("lookup", {"city": "Paris"}),
            ],
            f"{GOOD_ANSWER} Paris is in France.",
        ]
    )
    agent = Agent(
        id="weather",
        model=model,
        instructions="Be helpful.",
        tools=[lookup],
        input_processors=[SystemRecorder()],
        output_processors=[QualityGuardrail()],
        max_processor_retries=3,
    )
    result = await agent.generate("Where is Paris?")

    assert result.finish_reason == "stop"
    assert result.retry_count == 1
    assert len(model.calls) == 3
    assert system_texts(model.calls[1].prompt) == ["Be helpful.", FEEDBACK]
    assert system_texts(model.calls[2].prompt) == ["Be helpful."]
    assert tool_results_in(model.calls[2].prompt) == ["Paris, France"]
    assert seen == [
        (0, 0, ["Be helpful."]),
        (0, 1, ["Be helpful.", FEEDBACK]),
        (1, 1, ["Be helpful."]),
    ]


async def test_quality_guardrail_blocks_after_three_retries() -> None:
    """Four poor answers: three retries, then QualityGuardrail blocks. The run
    ends with one tripwire chunk (last), finish_reason "other", and generate()
    returns the same tripwire instead of raising."""
    script = ["No.", "Nope.", "Still no.", "Never."]
    model = ScriptedModel(script)
    agent = Agent(
        id="weather",
        model=model,
        output_processors=[QualityGuardrail()],
        max_processor_retries=3,
    )
    chunks, result = await run_stream(agent, "Weather?")

    assert len(model.calls) == 4
    assert result.finish_reason == "other"
    assert result.retry_count == 3
    assert result.tripwire is not None
    assert result.tripwire.reason == "Response quality too low after multiple attempts."
    assert result.tripwire.retry is False
    assert result.tripwire.processor_id == "quality-guardrail"
    # SPEC rule 18g: the last answer was streamed (and blocked at step level,
    # not retracted by a step-retry): the result shows what the client saw.
    assert result.text == "Never."
    assert [message_text(m) for m in result.response_messages] == ["Never."]
    assert [s.tripwire is not None for s in result.steps] == [True] * 4
    assert [s.tripwire.retry for s in result.steps if s.tripwire] == [
        True,
        True,
        True,
        False,
    ]
    assert len(of_type(chunks, StepRetryChunk)) == 3
    tripwires = of_type(chunks, TripwireChunk)
    assert tripwires == [chunks[-1]]
    assert to_wire(chunks[-1]) == {
        "type": "tripwire",
        "runId": result.run_id,
        "from": "AGENT",
        "payload": {
            "reason": "Response quality too low after multiple attempts.",
            "retry": False,
            "metadata": None,
            "processorId": "quality-guardrail",
        },
    }
    # No rejected answer stays in the conversation.
    assert result.message_list.get.response.db() == []

    generated = await agent.generate("Weather?", model=ScriptedModel(script))
    assert generated.finish_reason == "other"
    assert generated.tripwire == result.tripwire


async def test_quality_guardrail_retry_without_a_budget_is_an_abort() -> None:
    """Without max_processor_retries (and no error processors) a retry request
    ends the run (seed): one model call, the retry's own reason and flag."""
    model = ScriptedModel(["No.", GOOD_ANSWER])
    agent = Agent(id="weather", model=model, output_processors=[QualityGuardrail()])
    result = await agent.generate("Weather?")

    assert len(model.calls) == 1
    assert result.finish_reason == "other"
    assert result.retry_count == 0
    assert result.tripwire is not None
    assert (
        result.tripwire.reason
        == "Response quality too low. Please provide more detail."
    )
    assert result.tripwire.retry is True
    assert result.tripwire.metadata == {"qualityScore": pytest.approx(0.05)}
    assert result.tripwire.processor_id == "quality-guardrail"


# --- ErrorRecoveryProcessor (process_api_error) -------------------------------------


async def test_error_recovery_trims_messages_and_retries_once() -> None:
    """The first call fails with "context length exceeded": the 2nd and 3rd
    messages are dropped and the call is retried (once) with the shorter
    conversation; the error never reaches the client."""
    model = ScriptedModel([context_length_error(), text_turn("Pack light clothes.")])
    agent = Agent(
        id="travel",
        model=model,
        instructions="You are a travel agent.",
        error_processors=[ErrorRecoveryProcessor()],
    )
    chunks, result = await run_stream(agent, HISTORY)

    assert len(model.calls) == 2
    first, second = (conversation_texts(c.prompt) for c in model.calls)
    assert first == [m["content"] for m in HISTORY]
    assert second == [
        HISTORY[0]["content"],
        HISTORY[3]["content"],
        HISTORY[4]["content"],
    ]
    assert len(second) < len(first)
    assert system_texts(model.calls[1].prompt)[0] == "You are a travel agent."

    assert result.finish_reason == "stop"
    assert result.text == "Pack light clothes."
    assert result.error is None
    assert result.tripwire is None
    assert result.retry_count == 1
    rejected = result.steps[0]
    assert rejected.tripwire is not None
    assert rejected.tripwire.retry is True
    assert rejected.tripwire.processor_id == "error-recovery"
    assert [s.step_number for s in result.steps] == [0, 0]
    assert not of_type(chunks, ErrorChunk)
    assert [c.payload.text for c in of_type(chunks, TextDeltaChunk)] == [
        "Pack",
        " light",
        " clothes.",
    ]
    # The trimmed messages are gone from the run's conversation too.
    assert [m.role for m in result.message_list.get.all.db()] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]


async def test_error_recovery_retries_only_once() -> None:
    """A second "context length exceeded" is not retried again: the run fails
    with the provider's error, shown once, and the model is not called a third
    time."""
    second_error = context_length_error()
    model = ScriptedModel([context_length_error(), second_error, "never sent"])
    agent = Agent(id="travel", model=model, error_processors=[ErrorRecoveryProcessor()])
    chunks, result = await run_stream(agent, HISTORY)

    assert len(model.calls) == 2
    assert model.remaining == 1
    assert result.finish_reason == "error"
    assert result.error is second_error
    assert result.tripwire is None
    errors = of_type(chunks, ErrorChunk)
    assert len(errors) == 1
    assert assert_run_shape(chunks) == "error"
    assert errors[0].payload.error is second_error


async def test_error_recovery_leaves_other_errors_alone() -> None:
    """An unrelated provider error is not retried."""
    overloaded = ProviderError("Overloaded", status_code=529)
    model = ScriptedModel([overloaded, "never sent"])
    agent = Agent(id="travel", model=model, error_processors=[ErrorRecoveryProcessor()])
    result = await agent.generate(HISTORY)

    assert len(model.calls) == 1
    assert result.finish_reason == "error"
    assert result.error is overloaded
    assert result.retry_count == 0
