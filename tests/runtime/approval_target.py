"""One OS process of the cross-process approval test: ``pause DB LEDGER``
runs an agent to its pause (a call needing approval) and exits;
``approve DB LEDGER RUN_ID`` approves it in a fresh process. The tool appends
to LEDGER, so the test counts executions across processes. Prints one JSON
line."""

from __future__ import annotations

import json
import sys
from typing import Any

import attrs
import trio

from procession import Agent, ApprovalAlreadyDecided, tool
from procession.memory import Memory, SqliteStorage
from procession.testing import ScriptedModel, text_turn, tool_call_turn


@attrs.frozen
class RecordId:
    id: int


def agent(db: str, ledger: str) -> Agent:
    @tool(require_approval=True)
    def delete_record(args: RecordId) -> dict[str, Any]:
        """Delete a record."""
        with open(ledger, "a") as out:
            out.write(f"delete_record {args.id}\n")
        return {"deleted": args.id}

    return Agent(
        id="clerk",
        model=ScriptedModel(
            [
                tool_call_turn("delete_record", {"id": 42}),
                text_turn("Deleted in another process."),
            ]
        ),
        tools=[delete_record],
        memory=Memory(storage=SqliteStorage(db)),
    )


async def main(command: str, db: str, ledger: str, *rest: str) -> dict[str, Any]:
    clerk = agent(db, ledger)
    try:
        if command == "pause":
            result = await clerk.generate(
                "delete 42", memory={"thread": "t-1", "resource": "ada"}
            )
        else:
            # The model of this process answers the turn after the tool call
            # (the call itself was the first process's).
            clerk.model = ScriptedModel([text_turn("Deleted in another process.")])
            result = await clerk.approve_tool_call_generate(rest[0])
    except ApprovalAlreadyDecided:
        return {"error": "ApprovalAlreadyDecided"}
    finally:
        storage = clerk.run_storage
        if storage is not None:
            await storage.aclose()  # type: ignore[attr-defined]
    return {
        "finish": result.finish_reason,
        "run_id": result.run_id,
        "text": result.text,
    }


if __name__ == "__main__":
    command, db, ledger, *rest = sys.argv[1:]
    print(json.dumps(trio.run(main, command, db, ledger, *rest)))
