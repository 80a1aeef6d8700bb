"""An approval is applied once: two answers at the same moment from two
"replicas" (two agents, each with its own storage object, on one SQLite file
or one PostgreSQL database) give one execution; and any interleaving of
approvals, declines, repeated answers and restarts (a new agent and storage
on the same database) executes each approved call exactly once and never a
declined one (Hypothesis)."""

from __future__ import annotations

import os
import pathlib
import uuid
from collections.abc import Callable
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from procession import Agent, ApprovalAlreadyDecided, tool
from procession.memory import Memory, PostgresStorage, SqliteStorage
from procession.testing import ScriptedModel, text_turn, tool_call_turn

THREAD = {"thread": "t-1", "resource": "ada"}


@attrs.frozen
class Amount:
    cents: int


def _clerk(
    storage: Any, executed: list[int], answers: int = 4, calls: int = 1
) -> Agent:
    @tool(require_approval=True)
    def charge(args: Amount) -> str:
        """Charge a card."""
        executed.append(args.cents)
        return "charged"

    return Agent(
        id="clerk",
        model=ScriptedModel(
            [
                *[tool_call_turn("charge", {"cents": 500})] * calls,
                *[text_turn("ok")] * answers,
            ]
        ),
        tools=[charge],
        memory=Memory(storage=storage),
    )


def _postgres() -> Callable[[], Any]:
    dsn = os.environ.get("PROCESSION_TEST_POSTGRES_DSN")
    if not dsn:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but PROCESSION_TEST_POSTGRES_DSN is not set (.ci/pg)")
        pytest.skip("PROCESSION_TEST_POSTGRES_DSN is not set (bash .ci/pg -- ...)")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    return lambda: PostgresStorage(dsn, schema_name=schema)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_two_replicas_answering_at_once_run_the_tool_once(
    tmp_path: pathlib.Path, backend: str
) -> None:
    make = (
        (lambda: SqliteStorage(tmp_path / "shared.db"))
        if backend == "sqlite"
        else _postgres()
    )
    executed: list[int] = []
    storages = [make(), make()]
    first, second = (_clerk(s, executed) for s in storages)
    paused = await first.generate("charge 5", memory=THREAD)
    assert paused.finish_reason == "suspended"
    outcomes: list[Any] = []

    async def answer(agent: Agent) -> None:
        try:
            outcomes.append(await agent.approve_tool_call_generate(paused.run_id))
        except ApprovalAlreadyDecided as refused:
            outcomes.append(refused)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer, first)
        nursery.start_soon(answer, second)
    kinds = sorted(type(o).__name__ for o in outcomes)
    assert kinds == ["AgentResult", "ApprovalAlreadyDecided"]
    assert executed == [500]
    for storage in storages:
        await storage.aclose()


_steps = st.lists(
    st.sampled_from(["approve", "decline", "restart"]), min_size=1, max_size=6
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(runs=st.lists(_steps, min_size=1, max_size=3))
def test_any_interleaving_runs_each_approved_call_once(
    tmp_path: pathlib.Path, runs: list[list[str]]
) -> None:
    async def main() -> None:
        executed: list[int] = []
        path = tmp_path / f"{uuid.uuid4().hex}.db"
        storage = SqliteStorage(path)
        agent = _clerk(storage, executed, answers=len(runs), calls=len(runs))
        paused = []
        for _ in runs:
            result = await agent.generate("charge 5", memory=THREAD)
            paused.append(result.run_id)
        first: dict[str, str] = {}
        for run_id, steps in zip(paused, runs, strict=True):
            for step in steps:
                if step == "restart":  # another process on the same file
                    await storage.aclose()
                    storage = SqliteStorage(path)
                    # (its model answers what is left to answer)
                    agent = _clerk(storage, executed, answers=len(runs), calls=0)
                    continue
                answer = (
                    agent.approve_tool_call_generate
                    if step == "approve"
                    else agent.decline_tool_call_generate
                )
                if run_id in first:
                    with pytest.raises(ApprovalAlreadyDecided, match=first[run_id]):
                        await answer(run_id)
                    continue
                result = await answer(run_id)
                assert result.finish_reason == "stop"
                first[run_id] = "approved" if step == "approve" else "declined"
        approved = sum(1 for d in first.values() if d == "approved")
        assert executed == [500] * approved
        left = await agent.list_suspended_runs()
        assert {r.run_id for r in left} == set(paused) - set(first)
        await storage.aclose()

    trio.run(main)
