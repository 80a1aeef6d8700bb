"""Issue 10 §3: an agent registers its processors once, not on every run, and
registers again when they change."""

from __future__ import annotations

from typing import Any

import pytest

from procession import Agent, Processor, ProcessorError
from procession.processors import (
    OnError,
    ProcessOutputStreamArgs,
    register_processors,
)
from procession.runtime import _registrations
from procession.testing import ScriptedModel
from tests.call_counts import python_calls_in


class Failing(Processor):
    id = "failing"
    on_error: OnError = "raise"

    def process_output_stream(self, args: ProcessOutputStreamArgs) -> Any:
        if args.part.type == "text-delta":
            raise ValueError("broken hook")
        return args.part


@pytest.fixture
def registrations(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the agent really registered (one entry per time)."""
    calls: list[int] = []
    real = register_processors

    def counting(**lanes: Any) -> Any:
        calls.append(1)
        return real(**lanes)

    monkeypatch.setattr(_registrations, "register_processors", counting)
    return calls


async def test_runs_of_one_agent_register_its_processors_once(
    registrations: list[int],
) -> None:
    agent = Agent(id="a", model=ScriptedModel(["one", "two", "three"]))
    for _ in range(3):
        await agent.generate("hi")
    assert len(registrations) == 1


async def test_a_changed_processor_is_registered_again(
    registrations: list[int],
) -> None:
    failing = Failing()
    agent = Agent(
        id="a", model=ScriptedModel(["one", "two"]), output_processors=[failing]
    )
    first = await agent.generate("hi")
    assert isinstance(first.error, ProcessorError)
    failing.on_error = "pass"  # the next run must see the new policy
    second = await agent.generate("hi")
    assert second.error is None
    assert second.text == "two"
    assert len(registrations) == 2


async def test_other_instances_per_call_are_registered(
    registrations: list[int],
) -> None:
    agent = Agent(id="a", model=ScriptedModel(["one", "two"]))
    first = await agent.generate("hi", output_processors=[Failing()])
    second = await agent.generate("hi", output_processors=[Failing()])
    assert isinstance(first.error, ProcessorError)
    assert isinstance(second.error, ProcessorError)
    assert len(registrations) == 2


def _calls_in(module: Any, fn: Any) -> int:
    """Python function calls made in ``module``'s file while ``fn()`` runs."""
    return python_calls_in(module.__file__, fn)


@pytest.mark.parametrize("processors", [1, 5, 50])
def test_a_kept_registration_is_checked_without_a_call_per_attribute(
    processors: int,
) -> None:
    """Every run compares what registration read of each processor (its
    hooks, id, name, ...: 15 attributes) with what it read before. That
    comparison is read in C: ``register``, the fingerprint and its list, 3
    Python calls whatever the number of processors (a generator over the
    attributes cost one call per attribute per processor: 76 for 5)."""
    kept = _registrations.Registrations()
    lane = [Failing() for _ in range(processors)]
    for one, processor in enumerate(lane):
        processor.id = f"p{one}"
    first = kept.register(input=[], output=lane, error=[])
    calls = _calls_in(
        _registrations,
        lambda: kept.register(input=[], output=lane, error=[]),
    )
    assert kept.register(input=[], output=lane, error=[]) is first
    assert calls <= 3
