"""Tool approval across replicas: two ``procession serve`` processes on one
PostgreSQL and one Redis, on the real clock (``clerk_target.py``).

* A run paused on replica A and answered on replica B: a client following
  the run on A (its run stream, its chat's stream) reads the continuation,
  with the run's id and its frames' ids going on after the pause's.
* Both replicas answering the same call at the same moment: the tool runs
  once, one answer streams the continuation and the other is a 409; another
  resource answering at that moment, or after, gets 404 (ownership before
  the 409).

Skipped (with the reason) without ``PROCESSION_TEST_REDIS_URL`` or
``PROCESSION_TEST_POSTGRES_DSN``, failed under CI without them."""

from __future__ import annotations

import pathlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import httpx2
import pytest
import trio

from procession.memory import PostgresStorage
from tests.server.clerk_target import words
from tests.server.redis_helpers import (
    Replica,
    entry_key,
    open_sse,
    postgres_dsn_or_skip,
    serving,
)

TARGET = pathlib.Path(__file__).with_name("clerk_target.py")
ADA = {"authorization": "Bearer ada-token"}
BOB = {"authorization": "Bearer bob-token"}
THREAD = {"thread": "t-1", "resource": "ada"}


@attrs.frozen
class Clerks:
    """The replicas and the file each execution of the tool appends to."""

    replicas: list[Replica]
    executed: pathlib.Path

    def executions(self) -> list[str]:
        return self.executed.read_text().splitlines()


@asynccontextmanager
async def clerks(tmp_path: pathlib.Path, count: int = 2) -> AsyncIterator[Clerks]:
    """``count`` replicas of the clerk on a PostgreSQL schema of their own
    (made before they start, dropped after) and one Redis prefix."""
    dsn = postgres_dsn_or_skip()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    storage = PostgresStorage(dsn, schema_name=schema)
    await storage.migrate()
    await storage.aclose()
    executed = tmp_path / "executed"
    executed.touch()
    try:
        async with serving(
            TARGET,
            count,
            postgres_dsn=dsn,
            pg_schema=schema,
            executed=str(executed),
        ) as spawned:
            yield Clerks(spawned, executed)
    finally:
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _types(frames: list[tuple[str, Any]]) -> list[str]:
    return [d if isinstance(d, str) else d["type"] for _, d in frames]


def _check_once_in_order(frames: list[tuple[str, Any]]) -> None:
    ids = [entry_id for entry_id, _ in frames]
    assert len(set(ids)) == len(ids), ids
    assert sorted(ids, key=entry_key) == ids


async def _pause(base: str) -> list[tuple[str, Any]]:
    """A run of ada's that calls the tool, to its pause."""
    frames: list[tuple[str, Any]] = []
    async with open_sse(
        "POST",
        f"{base}/api/agents/clerk/stream",
        json={"messages": "delete 42", "memory": THREAD},
        headers=ADA,
    ) as response:
        assert response.status == 200
        with trio.fail_after(10):
            await response.read(frames)
    assert _types(frames)[-2:] == ["tool-call-approval", "[DONE]"]
    return frames


async def test_a_follower_on_one_replica_reads_an_answer_given_on_another(
    tmp_path: pathlib.Path,
) -> None:
    async with clerks(tmp_path) as c:
        a, b = c.replicas
        pause = await _pause(a.base)
        waiting = pause[-2][1]
        run_id = waiting["runId"]
        follow = f"{a.base}/api/agents/clerk/runs/{run_id}/stream"
        after_pause = {**ADA, "last-event-id": pause[-1][0]}
        # Before any answer, a follower who read the pause has nothing more.
        waited: list[tuple[str, Any]] = []
        async with open_sse("GET", follow, headers=after_pause) as response:
            await response.read(waited)
            waited_status = response.status
        answered: list[tuple[str, Any]] = []
        followed: list[tuple[str, Any]] = []
        async with open_sse(
            "POST",
            f"{b.base}/api/agents/clerk/approve-tool-call",
            json={"runId": run_id, "toolCallId": waiting["payload"]["toolCallId"]},
            headers=ADA,
        ) as answer:
            assert answer.status == 200
            with trio.fail_after(10):
                await answer.read(answered, until=3)
                async with open_sse("GET", follow, headers=after_pause) as response:
                    assert response.status == 200
                    await response.read(followed)
                await answer.read(answered)
        # Ended, the continuation is the run's newest log: read from its start.
        fresh: list[tuple[str, Any]] = []
        async with open_sse("GET", follow, headers=ADA) as response:
            await response.read(fresh)
        async with httpx2.AsyncClient(timeout=10) as client:
            bob = await client.get(
                f"{a.base}/api/agents/clerk/runs/{run_id}/stream", headers=BOB
            )
    assert (waited_status, waited) == (200, [])
    assert followed == answered
    assert fresh == answered
    _check_once_in_order(pause + answered)
    assert _types(answered)[:2] == ["tool-result", "step-finish"]
    assert _types(answered)[-2:] == ["finish", "[DONE]"]
    assert {d["runId"] for _, d in pause + answered if isinstance(d, dict)} == {run_id}
    text = "".join(
        d["payload"]["text"]
        for _, d in answered
        if isinstance(d, dict) and d["type"] == "text-delta"
    )
    assert text == words(20)
    assert bob.status_code == 404  # another resource: as if nothing ran
    assert len(c.executions()) == 1


async def test_a_chat_follower_on_one_replica_reads_an_answer_given_on_another(
    tmp_path: pathlib.Path,
) -> None:
    chat_id = f"c-{uuid.uuid4().hex}"
    chat = {
        "id": chat_id,
        "messages": [
            {
                "id": "u1",
                "role": "user",
                "parts": [{"type": "text", "text": "delete 42"}],
            }
        ],
        "memory": THREAD,
    }
    async with clerks(tmp_path) as c:
        a, b = c.replicas
        paused: list[tuple[str, Any]] = []
        async with open_sse(
            "POST", f"{a.base}/api/chat", json=chat, headers=ADA
        ) as response:
            with trio.fail_after(10):
                await response.read(paused)
        [asked] = [
            d
            for _, d in paused
            if isinstance(d, dict) and d["type"] == "tool-approval-request"
        ]
        message_id = next(
            d["messageId"]
            for _, d in paused
            if isinstance(d, dict) and d["type"] == "start"
        )
        part = {
            "type": "tool-delete_record",
            "toolCallId": asked["toolCallId"],
            "state": "approval-responded",
            "input": {"id": 42},
            "approval": {"id": asked["approvalId"], "approved": True},
        }
        answer_body = {
            **chat,
            "messages": [
                *chat["messages"],
                {"id": message_id, "role": "assistant", "parts": [part]},
            ],
        }
        answered: list[tuple[str, Any]] = []
        followed: list[tuple[str, Any]] = []
        async with open_sse(
            "POST", f"{b.base}/api/chat", json=answer_body, headers=ADA
        ) as answer:
            assert answer.status == 200
            with trio.fail_after(10):
                await answer.read(answered, until=3)
                async with open_sse(
                    "GET",
                    f"{a.base}/api/chat/{chat_id}/stream",
                    headers={**ADA, "last-event-id": paused[-1][0]},
                ) as response:
                    assert response.status == 200
                    await response.read(followed)
                await answer.read(answered)
    assert followed == answered
    _check_once_in_order(paused + answered)
    assert _types(answered)[0] == "tool-output-available"
    assert _types(answered)[-1] == "[DONE]"
    deltas = "".join(
        d["delta"] for _, d in answered if isinstance(d, dict) and "delta" in d
    )
    assert deltas == words(20)
    assert len(c.executions()) == 1


async def _answer(
    client: httpx2.AsyncClient, base: str, action: str, body: Any, headers: Any
) -> httpx2.Response:
    return await client.post(
        f"{base}/api/agents/clerk/{action}", json=body, headers=headers
    )


async def _at_once(
    client: httpx2.AsyncClient, body: Any, answers: dict[str, tuple[str, str, Any]]
) -> dict[str, httpx2.Response]:
    """Each ``name: (base, action, headers)`` of ``answers`` sent at the same
    moment (all waiting on one event); their responses by name."""
    start = trio.Event()
    got: dict[str, httpx2.Response] = {}

    async def answer(name: str, base: str, action: str, headers: Any) -> None:
        await start.wait()
        got[name] = await _answer(client, base, action, body, headers)

    async with trio.open_nursery() as nursery:
        for name, (base, action, headers) in answers.items():
            nursery.start_soon(answer, name, base, action, headers)
        await trio.sleep(0.05)  # all of them are waiting at the start
        start.set()
    return got


@pytest.mark.parametrize("other", ["approve-tool-call", "decline-tool-call"])
async def test_two_replicas_answering_one_call_at_once_run_it_once(
    tmp_path: pathlib.Path, other: str
) -> None:
    rounds = 4
    outcomes = []
    async with (
        clerks(tmp_path) as c,
        httpx2.AsyncClient(timeout=20) as client,
    ):
        a, b = c.replicas
        for i in range(rounds):
            # Paused on each replica in turn: each answers first and second.
            waiting = (await _pause(c.replicas[i % 2].base))[-2][1]
            body = {
                "runId": waiting["runId"],
                "toolCallId": waiting["payload"]["toolCallId"],
            }
            with trio.fail_after(20):
                answers = await _at_once(
                    client,
                    body,
                    {
                        "a": (a.base, "approve-tool-call", ADA),
                        "b": (b.base, other, ADA),
                        "bob": (b.base, "approve-tool-call", BOB),
                    },
                )
                late_bob = await _answer(client, a.base, "approve-tool-call", body, BOB)
            winner = "a" if answers["a"].status_code == 200 else "b"
            loser = answers["b" if winner == "a" else "a"]
            outcomes.append(winner)
            assert answers[winner].status_code == 200
            assert answers[winner].text.rstrip().endswith("data: [DONE]")
            assert loser.status_code == 409, loser.text
            assert loser.json()["field"] == "toolCallId"
            assert answers["bob"].status_code == 404, answers["bob"].text
            assert late_bob.status_code == 404  # ownership before the 409
        executions = c.executions()
    approved = sum(1 for w in outcomes if w == "a" or other == "approve-tool-call")
    assert len(executions) == approved
    print(f"winners over {rounds} rounds ({other} on b): {outcomes}")
