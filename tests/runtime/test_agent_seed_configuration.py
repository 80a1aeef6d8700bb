"""The seed's processor configuration example inside a real ``Agent`` loop: an
agent's three lanes of processors, and per-call processors that replace the
agent's (an empty list removes them).
"""

from __future__ import annotations

import logging

import pytest

from procession import Agent, Processor
from procession.chunks import (
    Chunk,
    TextDeltaChunk,
)
from procession.processors import (
    ProcessOutputStreamArgs,
)
from procession.testing import (
    ScriptedModel,
    text_turn,
)
from tests.runtime.seed_agent_helpers import (
    HISTORY,
    context_length_error,
    of_type,
    run_stream,
    user_texts,
)
from tests.seed_processors import (
    ContentFilter,
    ErrorRecoveryProcessor,
    WordCounter,
)

# --- The seed's processor configuration example -------------------------------------


class StreamFilter(Processor):
    """The seed's per-call ``StreamFilter`` (not defined there): drops text
    deltas that mention "internal", and asks for a retry on "retry-me"."""

    id = "stream-filter"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Chunk | None:
        part = args.part
        if isinstance(part, TextDeltaChunk):
            if "retry-me" in part.payload.text:
                args.abort("please rephrase", retry=True)
            if "internal" in part.payload.text:
                return None
        return part


def support_agent(model: ScriptedModel) -> Agent:
    """The seed's configured agent (ErrorRecoveryProcessor stands in for
    PrefillErrorHandler, which lives in procession.processors)."""
    return Agent(
        id="support-agent",
        name="support-agent",
        model=model,
        instructions="You are a support agent.",
        input_processors=[ContentFilter(["secret"])],
        output_processors=[WordCounter()],
        error_processors=[ErrorRecoveryProcessor()],
        max_processor_retries=3,
    )


async def test_configured_agent_runs_its_three_lanes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedModel([context_length_error(), "Here is a summary."])
    agent = support_agent(model)
    assert agent.name == "support-agent"
    with caplog.at_level(logging.INFO, logger="seed_processors"):
        result = await agent.generate(HISTORY)
        blocked = await agent.generate("Tell me the secret")

    # Error lane: recovered by trimming; output lane: the words were counted.
    assert result.finish_reason == "stop"
    assert result.text == "Here is a summary."
    assert result.retry_count == 1
    assert len(model.calls) == 2
    assert caplog.messages == ["Total words: 4"]
    # Input lane: blocked before any model call.
    assert blocked.tripwire is not None
    assert blocked.tripwire.processor_id == "content-filter"
    assert len(model.calls) == 2


async def test_per_call_processors_replace_the_agents(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``agent.stream('Summarize this', output_processors=[StreamFilter()],
    max_processor_retries=5)``: the call's output list replaces the agent's
    (WordCounter does not run), the other lanes stay, and the call's retry
    budget replaces the agent's 3."""
    model = ScriptedModel([[*text_turn("Summary: internal notes only. Public part.")]])
    agent = support_agent(model)
    with caplog.at_level(logging.INFO, logger="seed_processors"):
        chunks, result = await run_stream(
            agent,
            "Summarize this",
            output_processors=[StreamFilter()],
            max_processor_retries=5,
        )
    assert caplog.messages == []  # no WordCounter in this call
    assert "internal" not in "".join(
        c.payload.text for c in of_type(chunks, TextDeltaChunk)
    )
    assert result.text == "Summary: notes only. Public part."

    # The input lane is still the agent's.
    blocked = await agent.generate(
        "Summarize this secret", output_processors=[StreamFilter()]
    )
    assert blocked.tripwire is not None
    assert blocked.tripwire.reason == "Blocked content detected in input"

    # The budget: 5 for this call (6 model calls), 3 for the agent's default.
    retrying = ScriptedModel(["retry-me"] * 7)
    result5 = await agent.generate(
        "Summarize this",
        model=retrying,
        output_processors=[StreamFilter()],
        max_processor_retries=5,
    )
    assert len(retrying.calls) == 6
    assert result5.retry_count == 5
    assert result5.finish_reason == "other"
    assert result5.tripwire is not None
    assert result5.tripwire.reason == "please rephrase"
    assert result5.tripwire.processor_id == "stream-filter"

    retrying3 = ScriptedModel(["retry-me"] * 7)
    result3 = await agent.generate(
        "Summarize this", model=retrying3, output_processors=[StreamFilter()]
    )
    assert len(retrying3.calls) == 4
    assert result3.retry_count == 3


async def test_per_call_empty_list_removes_the_agents_processors() -> None:
    """An empty per-call list replaces too: no input filter for this call."""
    model = ScriptedModel(["The secret is safe."])
    agent = support_agent(model)
    result = await agent.generate("Tell me the secret", input_processors=[])

    assert result.tripwire is None
    assert user_texts(model.calls[0].prompt) == ["Tell me the secret"]
