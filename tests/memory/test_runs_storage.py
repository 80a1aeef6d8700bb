"""Runs that wait for a person, in each backend (SQLite file, SQLite
``:memory:``, PostgreSQL): the pause saves the turn and the run in one
transaction; a decision is taken once, whoever answers (two storages of one
database answering at the same moment: one wins); the continuation writes only
while it holds the run; the decision outlives the run."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import trio

from procession import (
    ApprovalAlreadyDecided,
    ToolCallNotPendingError,
    WaitingRunNotFound,
)
from procession.memory import RunLostError, RunRecord, RunStorage, StorageError
from procession.messages import Message
from tests.memory.memory_helpers import Backend

NOW = dt.datetime(2026, 12, 4, tzinfo=dt.UTC)


def texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages]


def _run(
    run_id: str = "run-1",
    *,
    pending: tuple[str, ...] = ("call-1",),
    thread: str | None = "t-1",
    resource: str | None = "ada",
) -> RunRecord:
    return RunRecord(
        id=run_id,
        agent_id="agent",
        resource_id=resource,
        thread_id=thread,
        status="waiting",
        snapshot={"version": 1, "step": 3, "state": {"guard": {"seen": [1, 2.5]}}},
        pending=tuple({"toolCallId": c, "toolName": "rm", "args": {}} for c in pending),
        created_at=NOW,
        updated_at=NOW,
    )


def _runs(storage: Any) -> RunStorage:
    assert isinstance(storage, RunStorage)
    return storage


async def test_a_pause_keeps_the_turn_and_the_run_in_one_write(
    storage: Any,
) -> None:
    runs = _runs(storage)
    user, assistant = Message.user("delete 42"), Message.assistant("Deleting.")
    kept = await runs.suspend_run(_run(), [user, assistant])
    assert kept.status == "waiting"
    assert kept.epoch == 0
    assert texts(await storage.list_messages("t-1", "ada")) == [
        "delete 42",
        "Deleting.",
    ]
    found = await runs.get_run("run-1")
    assert found is not None
    assert found.snapshot == _run().snapshot  # JSON kept exactly
    assert [p["toolCallId"] for p in found.pending] == ["call-1"]
    listed = await runs.list_runs("agent", resource_id="ada", thread_id="t-1")
    assert [r.id for r in listed] == ["run-1"]
    assert await runs.list_runs("agent", resource_id="bob") == []
    assert await runs.list_runs("other-agent") == []
    with pytest.raises(StorageError, match="already kept"):
        await runs.suspend_run(_run(), [])


async def test_a_decision_claims_the_run_once(storage: Any) -> None:
    runs = _runs(storage)
    await runs.suspend_run(_run(), [])
    decision, claimed = await runs.decide(
        "run-1",
        agent_id="agent",
        tool_call_id=None,  # the only waiting call
        decision="approved",
        decided_by="ada",
    )
    assert (decision.tool_call_id, decision.decision, decision.decided_by) == (
        "call-1",
        "approved",
        "ada",
    )
    assert (claimed.status, claimed.epoch) == ("running", 1)
    for call in ("call-1", None):
        with pytest.raises(ApprovalAlreadyDecided, match="already answered") as info:
            await runs.decide(
                "run-1", agent_id="agent", tool_call_id=call, decision="declined"
            )
        assert info.value.decision == "approved"
    # The continuation ends it; the decision outlives the run.
    ended = await runs.end_run(
        "run-1",
        epoch=1,
        thread_id="t-1",
        resource_id="ada",
        messages=[Message.assistant("Done.")],
    )
    assert (ended.status, ended.snapshot) == ("ended", None)
    assert texts(await storage.list_messages("t-1", "ada")) == ["Done."]
    with pytest.raises(
        ApprovalAlreadyDecided, match=r"was already answered \(approved\)"
    ):
        await runs.decide(
            "run-1", agent_id="agent", tool_call_id="call-1", decision="approved"
        )
    assert [d.decision for d in await runs.run_decisions("run-1")] == ["approved"]


async def test_not_found_comes_before_already_decided(storage: Any) -> None:
    runs = _runs(storage)
    await runs.suspend_run(_run(), [])
    await runs.decide(
        "run-1", agent_id="agent", tool_call_id="call-1", decision="declined"
    )
    for kwargs in (
        {"agent_id": "other"},
        {"agent_id": "agent", "resource_id": "bob"},
    ):
        with pytest.raises(WaitingRunNotFound, match="run-1"):
            await runs.decide(
                "run-1", tool_call_id="call-1", decision="approved", **kwargs
            )
    with pytest.raises(WaitingRunNotFound, match=r"is waiting to be answered"):
        await runs.decide(
            "no-such-run", agent_id="agent", tool_call_id=None, decision="approved"
        )


async def test_the_call_must_be_a_waiting_one(storage: Any) -> None:
    runs = _runs(storage)
    await runs.suspend_run(_run(pending=("a", "b")), [])
    with pytest.raises(
        ToolCallNotPendingError, match=r"waits on 2 tool calls \(a, b\)"
    ):
        await runs.decide("run-1", agent_id="agent", tool_call_id=None, decision="x")
    with pytest.raises(
        ToolCallNotPendingError, match="does not wait on tool call 'c'"
    ) as info:
        await runs.decide("run-1", agent_id="agent", tool_call_id="c", decision="x")
    assert info.value.pending == ("a", "b")
    # Nothing was written by the refused answers.
    assert await runs.run_decisions("run-1") == []


async def test_a_stale_continuation_writes_nothing(storage: Any) -> None:
    runs = _runs(storage)
    await runs.suspend_run(_run(), [])
    _decision, claimed = await runs.decide(
        "run-1", agent_id="agent", tool_call_id="call-1", decision="approved"
    )
    with pytest.raises(RunLostError, match="no longer held"):
        await runs.end_run(
            "run-1",
            epoch=claimed.epoch - 1,
            thread_id="t-1",
            resource_id="ada",
            messages=[Message.assistant("stale")],
        )
    assert texts(await storage.list_messages("t-1", "ada")) == []
    # Pausing again (a second call that needs approval) needs the epoch too.
    again = _run(pending=("call-2",))
    with pytest.raises(RunLostError, match=r"was claimed by another continuation"):
        await runs.suspend_run(again, [], expected_epoch=claimed.epoch + 1)
    waiting = await runs.suspend_run(again, [], expected_epoch=claimed.epoch)
    assert (waiting.status, waiting.epoch) == ("waiting", claimed.epoch)
    _d, second = await runs.decide(
        "run-1", agent_id="agent", tool_call_id="call-2", decision="approved"
    )
    assert second.epoch == claimed.epoch + 1


async def test_two_answers_at_the_same_moment_one_wins(backend: Backend) -> None:
    """Two storages of one database (as two replicas) answer at once: exactly
    one decision, one claim; the other gets ApprovalAlreadyDecided."""
    if backend.name == "sqlite-memory":
        pytest.skip("one ':memory:' database cannot be opened twice")
    first, second = _runs(backend()), _runs(backend())
    await first.suspend_run(_run(), [])
    outcomes: list[Any] = []

    async def answer(storage: RunStorage, decision: str) -> None:
        try:
            outcomes.append(
                await storage.decide(
                    "run-1", agent_id="agent", tool_call_id="call-1", decision=decision
                )
            )
        except ApprovalAlreadyDecided as refused:
            outcomes.append(refused)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(answer, first, "approved")
        nursery.start_soon(answer, second, "declined")
    won = [o for o in outcomes if isinstance(o, tuple)]
    lost = [o for o in outcomes if isinstance(o, ApprovalAlreadyDecided)]
    assert (len(won), len(lost)) == (1, 1)
    assert won[0][1].epoch == 1
    assert lost[0].decision == won[0][0].decision
    assert len(await first.run_decisions("run-1")) == 1


async def test_a_version_1_database_is_upgraded_by_migrate(backend: Backend) -> None:
    """Through every version since (2: runs and leases, 3: durable runs)."""
    if backend.name == "sqlite-memory":
        pytest.skip("a ':memory:' database cannot be reopened by another storage")
    import attrs

    from procession.memory import SchemaVersionError

    old: Any = backend()
    current = old._schema
    later = {s for v in current.upgrades.values() for s in v}
    old._schema = attrs.evolve(
        current,
        version=1,
        create=tuple(s for s in current.create if s not in later),
        upgrades={},
    )
    await old.save_turn("t-1", "ada", [Message.user("from v1")])
    await old.aclose()
    new = backend()
    with pytest.raises(SchemaVersionError, match="migrate"):
        await new.list_messages("t-1", "ada")
    await new.migrate()
    assert texts(await new.list_messages("t-1", "ada")) == ["from v1"]
    await _runs(new).suspend_run(_run(), [])
    assert (await _runs(new).get_run("run-1")) is not None
