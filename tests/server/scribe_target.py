"""The scribe of the durable-run server tests: a durable agent that calls its
tool ``fetch`` for a user's message, then answers ``WORDS`` words (``w0 ``
``w1 `` ..., one every ``EVERY_S`` seconds), so that a replica can be killed
or stopped in the middle of a step.

As a module served by ``procession serve tests/server/scribe_target.py:app``
(``test_server_durable_replicas.py``): ``create_app(durable=...)`` with a
one-second lease, on PostgreSQL (``PROCESSION_TEST_POSTGRES_DSN``, schema
``PROCESSION_TEST_PG_SCHEMA``) and the Redis bus (``PROCESSION_TEST_REDIS_URL``
under ``PROCESSION_TEST_REDIS_PREFIX``), or on the SQLite file
``PROCESSION_TEST_SQLITE`` with no bus, tokens ``ada-token`` (resource
``ada``) and ``bob-token`` (``bob``). Each execution of ``fetch`` appends a
line (the process id) to the file ``PROCESSION_TEST_EXECUTED``; while the
file ``PROCESSION_TEST_HOLD`` exists, ``fetch`` waits. ``PROCESSION_TEST_WORDS``
sets how many words the answer has (40)."""

from __future__ import annotations

import os
from typing import Any

import attrs
import trio

from procession import Agent, tool
from procession.chunks import TextDeltaChunk, TextDeltaPayload
from procession.memory import Memory, MemoryStorage
from procession.models import ModelRequest
from procession.testing import Delay, ScriptedModel, tool_call_turn

TOKENS = {"ada-token": "ada", "bob-token": "bob"}
WORDS = int(os.environ.get("PROCESSION_TEST_WORDS", "40"))
EVERY_S = 0.05
LEASE_S = 1.0


@attrs.frozen
class Query:
    q: str


def words(count: int = WORDS) -> str:
    return "".join(f"w{i} " for i in range(count))


def scribe(storage: MemoryStorage, executed: str, hold: str | None) -> Agent:
    @tool
    async def fetch(args: Query) -> dict[str, Any]:
        """Fetch a page (not idempotent: a call cut off is not made again)."""
        async with await trio.open_file(executed, "a") as out:
            await out.write(f"{os.getpid()}\n")
        # (the test removes the file, from another process: no trio.Event)
        while hold is not None and await trio.Path(hold).exists():  # noqa: ASYNC110
            await trio.sleep(0.02)
        return {"page": args.q}

    def turn(request: ModelRequest) -> list[Any]:
        if request.prompt[-1].role == "user":
            return tool_call_turn("fetch", {"q": "x"})
        items: list[Any] = []
        for i in range(WORDS):
            items += [
                Delay(EVERY_S),
                TextDeltaChunk(payload=TextDeltaPayload(id="t", text=f"w{i} ")),
            ]
        return items

    return Agent(
        id="scribe",
        model=ScriptedModel([turn] * 10_000),
        tools=[fetch],
        memory=Memory(storage=storage),
    )


def _app() -> Any:
    from procession.memory import PostgresStorage, SqliteStorage
    from procession.runtime import Durable
    from procession.server import RedisRunBus, create_app

    bus: Any = None
    if "PROCESSION_TEST_SQLITE" in os.environ:
        # One process on a SQLite file, no bus: a restart adopts its runs.
        storage: Any = SqliteStorage(os.environ["PROCESSION_TEST_SQLITE"])
    else:
        storage = PostgresStorage(
            os.environ["PROCESSION_TEST_POSTGRES_DSN"],
            schema_name=os.environ["PROCESSION_TEST_PG_SCHEMA"],
        )
        bus = RedisRunBus(
            os.environ["PROCESSION_TEST_REDIS_URL"],
            lease_s=LEASE_S,
            prefix=os.environ["PROCESSION_TEST_REDIS_PREFIX"],
        )
    agent = scribe(
        storage,
        os.environ["PROCESSION_TEST_EXECUTED"],
        os.environ.get("PROCESSION_TEST_HOLD"),
    )
    return create_app(
        [agent],
        tokens=TOKENS,
        bus=bus,
        keepalive_s=0,
        durable=Durable(lease_s=LEASE_S),
    )


app = (
    _app()
    if "PROCESSION_TEST_PG_SCHEMA" in os.environ
    or "PROCESSION_TEST_SQLITE" in os.environ
    else None
)
