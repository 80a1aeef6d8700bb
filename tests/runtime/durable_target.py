"""One OS process of the durable-run tests: ``crash STORE LEDGER`` starts a
durable run whose step calls two tools, ``note`` (returns at once) and
``fetch`` (writes that it started, then never returns), prints the run id as
a JSON line, and waits to be killed (``kill -9``) while ``fetch`` runs.
``adopt STORE LEDGER`` is a restarted process: it adopts the lapsed runs of
its agent (``adopt_lapsed_runs``) and prints one JSON line per run it
finished. STORE is a SQLite file, or ``DSN SCHEMA`` of a PostgreSQL
database. The tools append to LEDGER, so the test counts executions across
processes."""

from __future__ import annotations

import json
import sys
from typing import Any

import attrs
import trio

from procession import Agent, tool
from procession.memory import Memory, PostgresStorage, RunRecord, SqliteStorage
from procession.runtime import Durable, adopt_lapsed_runs
from procession.testing import ScriptedModel, text_turn, tool_call_turn

THREAD = {"thread": "t-1", "resource": "ada"}
LEASE_S = 0.5


@attrs.frozen
class Query:
    q: str


def storage(store: list[str]) -> Any:
    if store[0].startswith("postgresql://"):
        return PostgresStorage(store[0], schema_name=store[1])
    return SqliteStorage(store[0])


def agent(
    store: Any,
    ledger: str,
    model: ScriptedModel,
    *,
    idempotent: bool = False,
    crashing: bool = False,
) -> Agent:
    @tool
    def note(args: Query) -> dict[str, Any]:
        """Write a note."""
        with open(ledger, "a") as out:
            out.write(f"note {args.q}\n")
        return {"noted": args.q}

    @tool(idempotent=idempotent)
    async def fetch(args: Query) -> dict[str, Any]:
        """Fetch a page (the first process never returns from it)."""
        async with await trio.open_file(ledger, "a") as out:
            await out.write(f"fetch {args.q}\n")
        if crashing:
            await trio.sleep_forever()
        return {"page": args.q.upper()}

    return Agent(
        id="scribe",
        model=model,
        tools=[note, fetch],
        memory=Memory(storage=store),
        durable=Durable(lease_s=LEASE_S),
    )


def first_turns() -> list[Any]:
    return [
        [
            *tool_call_turn("note", {"q": "a"}, tool_call_id="c1"),
            *tool_call_turn("fetch", {"q": "b"}, tool_call_id="c2"),
        ],
        text_turn("never reached"),
    ]


async def crash(store: list[str], ledger: str) -> None:
    scribe = agent(storage(store), ledger, ScriptedModel(first_turns()), crashing=True)
    async with scribe.stream("look it up", memory=THREAD) as stream:
        print(json.dumps({"run_id": stream.run_id}), flush=True)
        async for _chunk in stream:
            pass
    raise AssertionError("the run should have been killed mid-tool")


async def adopt(store: list[str], ledger: str) -> None:
    scribe = agent(storage(store), ledger, ScriptedModel([text_turn("Adopted.")]))
    done = trio.Event()

    async def serve(a: Agent, record: RunRecord) -> None:
        async with a.take_over(record) as stream:
            types = [c.type async for c in stream]
            result = await stream.result()
        print(
            json.dumps({"run_id": result.run_id, "text": result.text, "types": types}),
            flush=True,
        )
        done.set()

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await nursery.start(adopt_lapsed_runs, [scribe], serve)
            await done.wait()
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    command, *store, ledger = sys.argv[1:]
    trio.run(crash if command == "crash" else adopt, store, ledger)
