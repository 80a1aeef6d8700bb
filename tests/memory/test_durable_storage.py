"""Durable runs in each backend (SQLite file, SQLite ``:memory:``,
PostgreSQL): a run kept at its start, checkpoints and tool records fenced by
the epoch, a lease renewed, lapsed and handed over, and a takeover that is a
compare-and-set (two takers at the same moment: one wins)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
import trio

from procession.memory import RunLostError, RunRecord, RunStorage, StorageError
from procession.messages import Message
from tests.memory.memory_helpers import Backend

NOW = dt.datetime(2026, 12, 4, tzinfo=dt.UTC)


def _durable(run_id: str = "run-d", *, agent: str = "agent") -> RunRecord:
    return RunRecord(
        id=run_id,
        agent_id=agent,
        resource_id="ada",
        thread_id="t-1",
        status="running",
        snapshot={"version": 1, "at": "input"},
        durable=True,
        owner="replica-a",
        host={"route": "mastra", "key": "run:ada:run-d"},
        created_at=NOW,
        updated_at=NOW,
    )


def _runs(storage: Any) -> RunStorage:
    assert isinstance(storage, RunStorage)
    return storage


async def test_a_durable_run_is_kept_from_its_start(storage: Any) -> None:
    runs = _runs(storage)
    kept = await runs.start_run(_durable(), lease_s=30)
    assert (kept.status, kept.epoch, kept.durable, kept.owner) == (
        "running",
        0,
        True,
        "replica-a",
    )
    assert kept.snapshot == {"version": 1, "at": "input"}
    assert kept.host == {"route": "mastra", "key": "run:ada:run-d"}
    assert kept.lease_until is not None
    assert kept.lease_until > kept.created_at
    with pytest.raises(StorageError, match="already kept"):
        await runs.start_run(_durable(), lease_s=30)
    # Not lapsed: nobody may take it.
    assert await runs.lapsed_runs(["agent"]) == []
    assert (
        await runs.take_over("run-d", expected_epoch=0, owner="replica-b", lease_s=30)
        is None
    )


async def test_checkpoints_and_tool_records_are_fenced_by_the_epoch(
    storage: Any,
) -> None:
    runs = _runs(storage)
    await runs.start_run(_durable(), lease_s=30)
    await runs.record_attempt("run-d", epoch=0, attempt={"step": 0, "raw": [1]})
    assert (await runs.get_run("run-d")).attempt == {"step": 0, "raw": [1]}  # type: ignore[union-attr]
    await runs.tool_started("run-d", epoch=0, tool_call_id="c1")
    await runs.tool_finished(
        "run-d", epoch=0, tool_call_id="c1", ok=True, result={"n": 1.5}
    )
    await runs.tool_started("run-d", epoch=0, tool_call_id="c2")
    records = {r.tool_call_id: r for r in await runs.tool_records("run-d")}
    assert (records["c1"].state, records["c1"].ok, records["c1"].result) == (
        "done",
        True,
        {"n": 1.5},
    )
    assert (records["c2"].state, records["c2"].ok) == ("started", None)
    await runs.checkpoint_run(
        "run-d",
        epoch=0,
        snapshot={"version": 1, "at": 1},
        owner="replica-a",
        lease_s=30,
    )
    run = await runs.get_run("run-d")
    assert run is not None
    assert (run.snapshot, run.attempt) == ({"version": 1, "at": 1}, None)
    assert run.host == {"route": "mastra", "key": "run:ada:run-d"}  # kept
    # A stale epoch writes nothing, whatever it writes.
    stale: list[Any] = [
        runs.checkpoint_run(
            "run-d", epoch=7, snapshot={"x": 1}, owner="replica-a", lease_s=30
        ),
        runs.record_attempt("run-d", epoch=7, attempt={"x": 1}),
        runs.tool_started("run-d", epoch=7, tool_call_id="c3"),
        runs.tool_finished("run-d", epoch=7, tool_call_id="c2", ok=False, result=None),
        runs.end_run("run-d", epoch=7),
    ]
    for write in stale:
        with pytest.raises(
            RunLostError, match=r"no longer held (at|by this continuation)"
        ):
            await write
    assert not await runs.renew_run("run-d", epoch=7, owner="replica-a", lease_s=30)
    assert not await runs.renew_run("run-d", epoch=0, owner="replica-z", lease_s=30)
    assert await runs.renew_run("run-d", epoch=0, owner="replica-a", lease_s=30)
    after = await runs.get_run("run-d")
    assert after is not None
    assert after.snapshot == {"version": 1, "at": 1}
    assert len(await runs.tool_records("run-d")) == 2


async def test_a_released_run_is_taken_over_once_and_fences_the_old_owner(
    storage: Any,
) -> None:
    runs = _runs(storage)
    await runs.start_run(_durable(), lease_s=30)
    await runs.start_run(_durable("run-other", agent="someone-else"), lease_s=0)
    assert await runs.release_run("run-d", epoch=0)
    lapsed = await runs.lapsed_runs(["agent"])
    assert [r.id for r in lapsed] == ["run-d"]  # not another agent's
    taken = await runs.take_over(
        "run-d", expected_epoch=0, owner="replica-b", lease_s=30
    )
    assert taken is not None
    assert (taken.epoch, taken.owner, taken.status) == (1, "replica-b", "running")
    # The same read a second time: the epoch moved on, nothing to take.
    assert (
        await runs.take_over("run-d", expected_epoch=0, owner="replica-c", lease_s=30)
        is None
    )
    assert await runs.lapsed_runs(["agent"]) == []
    # The old owner learns it lost the run at its next write.
    assert not await runs.renew_run("run-d", epoch=0, owner="replica-a", lease_s=30)
    with pytest.raises(RunLostError, match=r"no longer held (at|by this continuation)"):
        await runs.tool_started("run-d", epoch=0, tool_call_id="c9")
    await runs.tool_started("run-d", epoch=1, tool_call_id="c9")
    # The new owner ends it: the rest of the turn saved, the tool records gone.
    ended = await runs.end_run(
        "run-d",
        epoch=1,
        thread_id="t-1",
        resource_id="ada",
        messages=[Message.user("hi"), Message.assistant("done")],
    )
    assert (ended.status, ended.snapshot, ended.lease_until) == ("ended", None, None)
    assert await runs.tool_records("run-d") == []
    assert [m.text for m in await storage.list_messages("t-1", "ada")] == [
        "hi",
        "done",
    ]


async def test_two_takers_at_the_same_moment_one_wins(backend: Backend) -> None:
    """Two storages of one database (as two replicas) take the same lapsed
    run at once: exactly one gets it."""
    if backend.name == "sqlite-memory":
        pytest.skip("one ':memory:' database cannot be opened twice")
    first, second = _runs(backend()), _runs(backend())
    await first.start_run(_durable(), lease_s=0)
    outcomes: list[Any] = []

    async def take(storage: RunStorage, owner: str) -> None:
        outcomes.append(
            await storage.take_over("run-d", expected_epoch=0, owner=owner, lease_s=30)
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take, first, "replica-b")
        nursery.start_soon(take, second, "replica-c")
    won = [o for o in outcomes if o is not None]
    assert len(won) == 1
    assert len(outcomes) == 2
    run = await first.get_run("run-d")
    assert run is not None
    assert (run.epoch, run.owner) == (1, won[0].owner)
