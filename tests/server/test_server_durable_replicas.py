"""Durable runs across replicas (issue 24): two ``procession serve`` processes
of ``create_app(durable=...)`` on one PostgreSQL and one Redis, on the real
clock (``scribe_target.py``).

* ``kill -9`` of the replica executing a run, during its answer's stream,
  during a tool, or between the two steps: the other replica takes the run
  over (its lease lapsed); a client following the run on that replica reads
  one run: the cut attempt
  withdrawn by a ``step-retry`` (reason ``takeover``), the answer's text once,
  ``[DONE]`` at the end; the tool ran once (cut off mid-call, it is not run
  again: the model is told); memory holds the turn once.
* One process on a SQLite file with no bus, killed and started again, adopts
  its run and finishes it.
* A rolling restart of three replicas under load ends no run early.
* SIGTERM (a rolling restart) of the replica executing a run (the Mastra
  route, and the AI SDK chat route resumed by its chat id): it hands the
  run over at once; its response ends with ``retry:`` and no ``[DONE]``; the
  client reconnects to the other replica with its ``Last-Event-ID`` and reads
  the rest: no gap, no repeat.

Skipped (with the reason) without ``PROCESSION_TEST_REDIS_URL`` or
``PROCESSION_TEST_POSTGRES_DSN``, failed under CI without them."""

from __future__ import annotations

import pathlib
import signal
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import attrs
import h11
import pytest
import trio

from procession.memory import PostgresStorage, SqliteStorage
from tests.server.redis_helpers import (
    Replica,
    entry_key,
    open_sse,
    postgres_dsn_or_skip,
    serving,
    unique_prefix,
)
from tests.server.scribe_target import words

pytestmark = pytest.mark.procession_real_clock

TARGET = pathlib.Path(__file__).with_name("scribe_target.py")
ADA = {"authorization": "Bearer ada-token"}
THREAD = {"thread": "t-1", "resource": "ada"}


@attrs.frozen
class Scribes:
    replicas: list[Replica]
    executed: pathlib.Path
    hold: pathlib.Path
    dsn: str
    schema: str

    def executions(self) -> list[str]:
        return self.executed.read_text().splitlines()

    async def saved(self) -> list[Any]:
        storage = PostgresStorage(self.dsn, schema_name=self.schema)
        try:
            return await storage.list_messages("t-1", "ada")
        finally:
            await storage.aclose()


@asynccontextmanager
async def scribe_store(
    tmp_path: pathlib.Path, dsn: str, **extra: str
) -> AsyncIterator[tuple[PostgresStorage, dict[str, str], pathlib.Path]]:
    """A PostgreSQL schema of the test's own (made, then dropped), a storage
    on it, the settings of replicas serving the scribe there (``serving``),
    and the file each execution of its tool appends to."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    storage = PostgresStorage(dsn, schema_name=schema)
    await storage.migrate()
    executed = tmp_path / "executed"
    executed.touch()
    settings = {
        "postgres_dsn": dsn,
        "pg_schema": schema,
        "executed": str(executed),
        "redis_prefix": unique_prefix(),
        **extra,
    }
    try:
        yield storage, settings, executed
    finally:
        await storage.aclose()
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@asynccontextmanager
async def scribes(tmp_path: pathlib.Path, count: int = 2) -> AsyncIterator[Scribes]:
    hold = tmp_path / "hold"
    async with (
        scribe_store(tmp_path, postgres_dsn_or_skip(), hold=str(hold)) as (
            _storage,
            settings,
            executed,
        ),
        serving(TARGET, count, **settings) as spawned,
    ):
        yield Scribes(
            spawned, executed, hold, settings["postgres_dsn"], settings["pg_schema"]
        )


def _frames_of(frames: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [d for _, d in frames if isinstance(d, dict)]


def followed_text(frames: list[tuple[str, Any]]) -> str:
    """The text a client keeps: what each ``step-retry`` withdrew (its step
    and after) dropped."""
    kept: list[tuple[int, str]] = []
    step = -1
    for chunk in _frames_of(frames):
        if chunk["type"] == "step-retry":
            withdrawn = chunk["payload"]["stepNumber"]
            kept = [(s, t) for s, t in kept if s < withdrawn]
            step = withdrawn - 1
        elif chunk["type"] == "step-start":
            step += 1
        elif chunk["type"] == "text-delta":
            kept.append((step, chunk["payload"]["text"]))
    return "".join(t for _, t in kept)


def _check_one_log(frames: list[tuple[str, Any]], run_id: str) -> None:
    ids = [entry_id for entry_id, _ in frames]
    assert len(set(ids)) == len(ids), ids
    assert sorted(ids, key=entry_key) == ids
    assert {d["runId"] for d in _frames_of(frames)} == {run_id}


async def _start(base: str, run_id: str) -> Any:
    return open_sse(
        "POST",
        f"{base}/api/agents/scribe/stream",
        json={"messages": "look it up", "memory": THREAD, "runId": run_id},
        headers=ADA,
    )


def _texts(frames: list[tuple[str, Any]]) -> int:
    return sum(1 for d in _frames_of(frames) if d["type"] == "text-delta")


@pytest.mark.parametrize("where", ["stream", "tool", "between"])
async def test_a_run_whose_replica_is_killed_goes_on_on_the_other(
    tmp_path: pathlib.Path, where: str
) -> None:
    run_id = f"run-{uuid.uuid4().hex}"
    async with scribes(tmp_path) as s:
        a, b = s.replicas
        if where == "tool":
            s.hold.touch()  # fetch waits while this exists
        started: list[tuple[str, Any]] = []
        followed: list[tuple[str, Any]] = []
        async with await _start(a.base, run_id) as response:
            assert response.status == 200
            with trio.fail_after(20):
                if where == "stream":
                    while _texts(started) < 5:
                        await response.read(started, until=len(started) + 1)
                elif where == "between":  # the tool's step is over
                    while "step-finish" not in [d["type"] for d in _frames_of(started)]:
                        await response.read(started, until=len(started) + 1)
                else:
                    while "tool-call" not in [d["type"] for d in _frames_of(started)]:
                        await response.read(started, until=len(started) + 1)
                    while not s.executions():  # noqa: ASYNC110 (another process)
                        await trio.sleep(0.02)
        follow = f"{b.base}/api/agents/scribe/runs/{run_id}/stream"
        async with open_sse("GET", follow, headers=ADA) as follower:
            assert follower.status == 200
            await follower.read(followed, until=len(started))
            a.kill()  # kill -9: nothing closed, the leases lapse
            s.hold.unlink(missing_ok=True)
            with trio.fail_after(30):
                await follower.read(followed)
        saved = await s.saved()
    assert followed[: len(started)] == started  # the log, read from its start
    _check_one_log(followed, run_id)
    types = [d["type"] for d in _frames_of(followed)]
    retries = [d for d in _frames_of(followed) if d["type"] == "step-retry"]
    assert [r["payload"]["reason"] for r in retries] == ["takeover"]
    if where == "between":
        # Step 1's checkpoint may or may not have been written: either way
        # the tool's recorded outcome is used, never the tool run again.
        assert retries[0]["payload"]["stepNumber"] in (0, 1)
    else:
        assert retries[0]["payload"]["stepNumber"] == (1 if where == "stream" else 0)
    assert followed[-1][1] == "[DONE]"
    assert types[-1] == "finish"
    assert followed_text(followed) == words()
    assert len(s.executions()) == 1  # cut off mid-call, it is not run again
    results = [d for d in _frames_of(followed) if d["type"] in ("tool-result",)]
    errors = [d for d in _frames_of(followed) if d["type"] == "tool-error"]
    if where == "tool":
        assert "interrupted" in str(errors[-1]["payload"]["error"])
    else:
        assert results
    # The turn is saved once, by the replica that finished it.
    assert [m.role for m in saved].count("user") == 1
    assert len({m.id for m in saved}) == len(saved)
    assert "w39" in str(saved[-1].content)


async def test_a_stopped_replica_hands_its_run_over_and_the_client_reconnects(
    tmp_path: pathlib.Path,
) -> None:
    run_id = f"run-{uuid.uuid4().hex}"
    async with scribes(tmp_path) as s:
        a, b = s.replicas
        first: list[tuple[str, Any]] = []
        rest: list[tuple[str, Any]] = []
        async with await _start(a.base, run_id) as response:
            with trio.fail_after(20):
                while _texts(first) < 5:
                    await response.read(first, until=len(first) + 1)
            a.process.send_signal(signal.SIGTERM)  # a rolling restart
            with trio.fail_after(20):
                await response.read(first)
            retry_ms = response.retry_ms
        resume = {**ADA, "last-event-id": first[-1][0]}
        follow = f"{b.base}/api/agents/scribe/runs/{run_id}/stream"
        # The run taken over is still ada's alone: for bob it does not exist.
        bob = {"authorization": "Bearer bob-token", "last-event-id": first[-1][0]}
        async with open_sse("GET", follow, headers=bob) as intruder:
            bob_status = intruder.status
        async with open_sse("GET", follow, headers=resume) as follower:
            assert follower.status == 200
            with trio.fail_after(30):
                await follower.read(rest)
        saved = await s.saved()
    assert retry_ms == 1000
    assert bob_status == 404
    assert "[DONE]" not in [d for _, d in first]  # the run is not over
    assert rest[-1][1] == "[DONE]"
    _check_one_log(first + rest, run_id)
    retries = [d for d in _frames_of(rest) if d["type"] == "step-retry"]
    assert [r["payload"]["reason"] for r in retries] == ["takeover"]
    assert followed_text(first + rest) == words()
    assert len(s.executions()) == 1
    assert [m.role for m in saved].count("user") == 1


def _chat_text(frames: list[tuple[str, Any]]) -> str:
    """The text an AI SDK client keeps of a UI message stream, once each
    ``data-step-retry`` has withdrawn its step and after."""
    kept: list[tuple[int, str]] = []
    step = -1
    for chunk in _frames_of(frames):
        if chunk["type"] == "data-step-retry":
            withdrawn = chunk["data"]["stepNumber"]
            kept = [(s, t) for s, t in kept if s < withdrawn]
            step = withdrawn - 1
        elif chunk["type"] == "start-step":
            step += 1
        elif chunk["type"] == "text-delta":
            kept.append((step, chunk["delta"]))
    return "".join(t for _, t in kept)


async def test_a_chat_handed_over_is_resumed_on_another_replica_by_its_chat_id(
    tmp_path: pathlib.Path,
) -> None:
    """The AI SDK's chat route: a replica stopped mid-answer hands the run
    over; the chat's response ends with ``retry:`` and no ``[DONE]``; ``GET
    /api/chat/{id}/stream`` on the other replica, with the last id read,
    streams the rest of the same UI message stream."""
    chat_id = f"chat-{uuid.uuid4().hex}"
    body = {
        "id": chat_id,
        "messages": [
            {
                "id": "u1",
                "role": "user",
                "parts": [{"type": "text", "text": "look it up"}],
            }
        ],
        "memory": THREAD,
    }
    async with scribes(tmp_path) as s:
        a, b = s.replicas
        first: list[tuple[str, Any]] = []
        rest: list[tuple[str, Any]] = []
        async with open_sse(
            "POST", f"{a.base}/api/chat", json=body, headers=ADA
        ) as response:
            assert response.status == 200
            with trio.fail_after(20):
                while (
                    sum(1 for d in _frames_of(first) if d["type"] == "text-delta") < 5
                ):
                    await response.read(first, until=len(first) + 1)
            a.process.send_signal(signal.SIGTERM)
            with trio.fail_after(20):
                await response.read(first)
            retry_ms = response.retry_ms
        resume = {**ADA, "last-event-id": first[-1][0]}
        async with open_sse(
            "GET", f"{b.base}/api/chat/{chat_id}/stream", headers=resume
        ) as follower:
            assert follower.status == 200
            with trio.fail_after(30):
                await follower.read(rest)
        saved = await s.saved()
    assert retry_ms == 1000
    assert "[DONE]" not in [d for _, d in first]
    assert rest[-1][1] == "[DONE]"
    ids = [entry_id for entry_id, _ in first + rest]
    assert len(set(ids)) == len(ids)
    assert sorted(ids, key=entry_key) == ids
    types = [d["type"] for d in _frames_of(first + rest)]
    assert types.count("start") == 1  # one UI message, continued
    assert "data-step-retry" in [d["type"] for d in _frames_of(rest)]
    assert _chat_text(first + rest) == words()
    assert len(s.executions()) == 1
    assert [m.role for m in saved].count("user") == 1


async def test_one_process_without_a_bus_adopts_its_runs_when_it_restarts(
    tmp_path: pathlib.Path,
) -> None:
    db = str(tmp_path / "runs.db")
    executed = tmp_path / "executed"
    executed.touch()
    run_id = f"run-{uuid.uuid4().hex}"
    settings = {"sqlite": db, "executed": str(executed)}
    async with serving(TARGET, 1, **settings) as (first,):
        started: list[tuple[str, Any]] = []
        async with await _start(first.base, run_id) as response:
            with trio.fail_after(20):
                while _texts(started) < 5:
                    await response.read(started, until=len(started) + 1)
            first.kill()
    storage = SqliteStorage(db)
    try:
        async with serving(TARGET, 1, **settings):
            with trio.fail_after(30):
                while True:
                    record = await storage.get_run(run_id)
                    assert record is not None
                    if record.status == "ended":
                        break
                    await trio.sleep(0.05)
        saved = await storage.list_messages("t-1", "ada")
    finally:
        await storage.aclose()
    assert [m.role for m in saved].count("user") == 1
    assert len({m.id for m in saved}) == len(saved)
    assert words() in "".join(str(m.content) for m in saved)
    assert len(executed.read_text().splitlines()) == 1


async def test_a_rolling_restart_of_three_replicas_under_load_ends_no_run_early(
    tmp_path: pathlib.Path, postgres_dsn: str
) -> None:
    """Six runs at once on three replicas; each replica in turn is stopped
    (SIGTERM) and replaced by a fresh process. Each client reconnects with
    its ``Last-Event-ID`` to a live replica whenever its response ends
    without ``[DONE]`` (a ``retry:``, or its replica gone). Every run ends
    with its whole answer, read once; every tool ran once."""
    runs = 6
    live: list[str] = []
    read: dict[int, list[tuple[str, Any]]] = {i: [] for i in range(runs)}
    reconnects = [0] * runs

    async def client(i: int, run_id: str) -> None:
        def pick(attempt: int) -> str:
            reconnects[i] = attempt
            return live[(i + attempt) % len(live)]

        await read_to_the_end(read[i], run_id, f"t-{i}", pick)

    async with scribe_store(tmp_path, postgres_dsn) as (
        storage,
        settings,
        executed,
    ):
        async with AsyncExitStack() as stack:
            replicas = list(
                await stack.enter_async_context(serving(TARGET, 3, **settings))
            )
            live += [r.base for r in replicas]
            with trio.fail_after(180):  # a loaded machine spawns slowly
                async with trio.open_nursery() as nursery:
                    for i in range(runs):
                        nursery.start_soon(client, i, f"run-{uuid.uuid4().hex}")
                    for index in range(3):
                        await trio.sleep(0.7)
                        stopping = replicas[index]
                        live.remove(stopping.base)
                        stopping.process.send_signal(signal.SIGTERM)
                        await trio.to_thread.run_sync(stopping.process.wait, 20)
                        (fresh,) = await stack.enter_async_context(
                            serving(TARGET, 1, **settings)
                        )
                        replicas[index] = fresh
                        live.append(fresh.base)
        saved = [await storage.list_messages(f"t-{i}", "ada") for i in range(runs)]
    for i in range(runs):
        frames = read[i]
        assert frames[-1][1] == "[DONE]", i
        ids = [entry_id for entry_id, _ in frames]
        assert len(set(ids)) == len(ids), i
        assert followed_text(frames) == words(), i
        assert [m.role for m in saved[i]].count("user") == 1
    assert len(executed.read_text().splitlines()) == runs  # each tool once
    assert sum(reconnects) >= 1  # the restarts did cut some responses
    moved = [
        i
        for i in range(runs)
        if any(d["type"] == "step-retry" for d in _frames_of(read[i]))
    ]
    assert moved  # and some runs went on on another replica


async def read_to_the_end(
    frames: list[tuple[str, Any]],
    run_id: str,
    thread: str,
    pick: Callable[[int], str],
) -> None:
    """A client of a durable run: start it on ``pick(0)`` (a replica's
    base URL), then, whenever the response ends without ``[DONE]`` (a
    ``retry:``, or its replica gone), reconnect to ``pick(n)`` with the last
    id read, until ``[DONE]``."""
    request = await _start_in(pick(0), run_id, thread)
    attempt = 0
    while True:
        try:
            async with request as response:
                if response.status == 200:
                    await response.read(frames)
        except (OSError, trio.BrokenResourceError, h11.RemoteProtocolError):
            pass  # its replica went away mid-response
        if frames and frames[-1][1] == "[DONE]":
            return
        attempt += 1
        await trio.sleep(0.05)
        headers = {**ADA}
        if frames:
            headers["last-event-id"] = frames[-1][0]
        follow = f"{pick(attempt)}/api/agents/scribe/runs/{run_id}/stream"
        request = open_sse("GET", follow, headers=headers)


async def _start_in(base: str, run_id: str, thread: str) -> Any:
    return open_sse(
        "POST",
        f"{base}/api/agents/scribe/stream",
        json={
            "messages": "look it up",
            "memory": {"thread": thread, "resource": "ada"},
            "runId": run_id,
        },
        headers=ADA,
    )


async def _owner_pid(storage: PostgresStorage, run_id: str) -> tuple[int, int] | None:
    """The pid of the process holding the run, and the run's epoch."""
    record = await storage.get_run(run_id)
    if record is None or record.owner is None or record.status != "running":
        return None
    return int(record.owner.split("/")[1]), record.epoch


async def test_a_run_killed_again_and_again_at_any_moment_finishes_once(
    tmp_path: pathlib.Path, postgres_dsn: str
) -> None:
    """The replica holding the run is killed (``kill -9``) three times, at
    moments that fall anywhere: in the model's stream, in a tool, in the
    middle of a checkpoint or of the takeover itself (0.05 s after a takeover:
    it is still restoring and writing). A fresh replica replaces each one.
    The client, reconnecting to live replicas with its ``Last-Event-ID``,
    reads the whole answer once; the tool ran once; memory holds the turn
    once."""
    run_id = f"run-{uuid.uuid4().hex}"
    frames: list[tuple[str, Any]] = []
    live: dict[int, Replica] = {}
    done = trio.Event()

    async def client() -> None:
        await read_to_the_end(
            frames, run_id, "t-1", lambda _attempt: list(live.values())[-1].base
        )
        done.set()

    kills: list[tuple[int, int]] = []
    # (six seconds of answer: time for three kills)
    async with scribe_store(tmp_path, postgres_dsn, words="120") as (
        storage,
        settings,
        executed,
    ):
        async with AsyncExitStack() as stack:
            for replica in await stack.enter_async_context(
                serving(TARGET, 2, **settings)
            ):
                assert replica.process.pid is not None
                live[replica.process.pid] = replica
            with trio.fail_after(240):  # a loaded machine spawns slowly
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(client)
                    for delay in (0.3, 0.05, 0.9):
                        # Wait for a process to hold the run (the first, or
                        # the taker of the last kill), then kill it.
                        while True:
                            held = await _owner_pid(storage, run_id)
                            if (
                                held is not None
                                and held[0] in live
                                and (not kills or held[1] > kills[-1][1])
                            ):
                                break
                            await trio.sleep(0.01)
                        await trio.sleep(delay)
                        if done.is_set():
                            break
                        victim = live.pop(held[0])
                        await trio.to_thread.run_sync(victim.kill)
                        kills.append(held)
                        (fresh,) = await stack.enter_async_context(
                            serving(TARGET, 1, **settings)
                        )
                        assert fresh.process.pid is not None
                        live[fresh.process.pid] = fresh
                    await done.wait()
        saved = await storage.list_messages("t-1", "ada")
    assert len(kills) == 3
    assert frames[-1][1] == "[DONE]"
    ids = [entry_id for entry_id, _ in frames]
    assert len(set(ids)) == len(ids)
    assert followed_text(frames) == words(120)
    assert len(executed.read_text().splitlines()) == 1
    assert [m.role for m in saved].count("user") == 1
    assert len({m.id for m in saved}) == len(saved)
