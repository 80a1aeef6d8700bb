"""The clerk of the approval tests: an agent whose one tool needs approval
(``delete_record``), on a model that calls it for a user's message and
answers ``slow_words`` words (``w0 `` ``w1 `` ..., one every ``every_s``
seconds) once the call is answered, so a continuation stays live long enough
for a follower to join it.

As a module served by ``procession serve tests/server/clerk_target.py:app``
(the replicas of ``test_server_approval_replicas.py``): the clerk on
PostgreSQL (``PROCESSION_TEST_POSTGRES_DSN``, schema
``PROCESSION_TEST_PG_SCHEMA``), the Redis bus (``PROCESSION_TEST_REDIS_URL``
under ``PROCESSION_TEST_REDIS_PREFIX``), tokens ``ada-token`` (resource
``ada``) and ``bob-token`` (``bob``); each execution of the tool appends a
line (the process id) to the file ``PROCESSION_TEST_EXECUTED``."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import attrs

from procession import Agent, tool
from procession.chunks import TextDeltaChunk, TextDeltaPayload
from procession.memory import Memory, MemoryStorage
from procession.models import ModelRequest
from procession.testing import Delay, ScriptedModel, tool_call_turn

TOKENS = {"ada-token": "ada", "bob-token": "bob"}


@attrs.frozen
class RecordId:
    id: int


def words(count: int) -> str:
    return "".join(f"w{i} " for i in range(count))


def clerk(
    storage: MemoryStorage,
    executed: Callable[[int], Any],
    *,
    slow_words: int = 20,
    every_s: float = 0.02,
) -> Agent:
    """The clerk on ``storage``; ``executed(id)`` is called (and awaited when
    it returns an awaitable) by each execution of ``delete_record``."""

    @tool(require_approval=True)
    async def delete_record(args: RecordId) -> dict[str, Any]:
        """Delete a record."""
        done = executed(args.id)
        if done is not None:
            await done
        return {"deleted": args.id}

    def turn(request: ModelRequest) -> list[Any]:
        if request.prompt[-1].role == "user":
            return tool_call_turn("delete_record", {"id": 42})
        items: list[Any] = []
        for i in range(slow_words):
            items += [
                Delay(every_s),
                TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} ")),
            ]
        return items

    return Agent(
        id="clerk",
        model=ScriptedModel([turn] * 10_000),
        tools=[delete_record],
        memory=Memory(storage=storage),
    )


def _app() -> Any:
    from procession.memory import PostgresStorage
    from procession.server import RedisRunBus, create_app

    path = os.environ["PROCESSION_TEST_EXECUTED"]

    def executed(record: int) -> None:
        with open(path, "a") as out:  # one short line: appends never interleave
            out.write(f"{os.getpid()} {record}\n")

    storage = PostgresStorage(
        os.environ["PROCESSION_TEST_POSTGRES_DSN"],
        schema_name=os.environ["PROCESSION_TEST_PG_SCHEMA"],
    )
    bus = RedisRunBus(
        os.environ["PROCESSION_TEST_REDIS_URL"],
        lease_s=1.0,
        prefix=os.environ["PROCESSION_TEST_REDIS_PREFIX"],
    )
    return create_app([clerk(storage, executed)], tokens=TOKENS, bus=bus, keepalive_s=0)


app = _app() if "PROCESSION_TEST_PG_SCHEMA" in os.environ else None
