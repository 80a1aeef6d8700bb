"""A blocking scanner whose match is only settled at a block's end trips there,
before the step's hooks and tools run (they run before the step's step-finish,
so a trip deferred to "the next chunk" came too late). And custom patterns with
inline flags or bad syntax. Each failed before its fix."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from procession import Agent, ConfigurationError, Processor, tool
from procession.processors import PatternRule, RegexFilter
from procession.testing import ScriptedModel, text_turn, tool_call_turn


class Record(Processor):
    id = "record"

    def __init__(self) -> None:
        self.steps: list[str] = []

    def process_output_step(self, args: Any) -> None:
        self.steps.append(args.text)


ran: list[str] = []


@attrs.frozen
class Empty:
    pass


@tool(description="has side effects")
def send_email(args: Empty) -> str:
    ran.append("send_email")
    return "sent"


@pytest.mark.parametrize("mode", ["adaptive", "fused", "actors"])
async def test_a_match_settled_at_text_end_trips_before_the_step_hooks_and_tools(
    mode: Any,
) -> None:
    ran.clear()
    record = Record()
    guard = RegexFilter(
        rules=[{"name": "password", "pattern": r"internal password"}],
        strategy="block",
    )
    turn = [
        *text_turn("you need the internal password now"),
        *tool_call_turn("send_email", {}),
    ]
    agent = Agent(
        id="a",
        model=ScriptedModel([turn]),
        tools=[send_email],
        output_processors=[guard, record],
        execution_mode=mode,
    )
    result = await agent.generate("hi")
    assert result.tripwire is not None
    assert result.tripwire.processor_id == "regex-filter"
    assert record.steps == []  # the blocked step was never judged
    assert ran == []  # and its tool never ran
    assert "password" not in result.text


async def test_inline_flags_match_case_insensitively() -> None:
    guard = RegexFilter(
        rules=[PatternRule(name="pw", pattern=r"(?i)internal\s+password")],
        strategy="block",
    )
    agent = Agent(
        id="a",
        model=ScriptedModel([text_turn("the INTERNAL  Password is x")]),
        output_processors=[guard],
    )
    result = await agent.generate("hi")
    assert result.tripwire is not None


def test_a_bad_custom_pattern_is_a_configuration_error_naming_it() -> None:
    with pytest.raises(
        ConfigurationError, match=r"pattern '\(unclosed' is not a regular"
    ):
        PatternRule(name="bad", pattern="(unclosed")
