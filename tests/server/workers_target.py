"""The agent ``procession serve --workers 2`` serves in test_server_workers:
its answers name the worker process that ran them (``pid=``) and how many
user messages the run saw (memory's history included), so a test can tell
which worker served what and whether a run loaded another's turn."""

from __future__ import annotations

import os
from contextlib import AbstractAsyncContextManager
from typing import Any

from procession import Agent
from procession.chunks import text_delta
from procession.memory import Memory, SqliteStorage
from procession.models import ModelRequest
from procession.server import create_app
from procession.testing import Delay, ScriptedModel


class WhoAmI:
    """``slow``: a delta every 50 ms for 10 s; ``hold``: the answer, then
    1 s before the run ends (the thread stays held); else the answer."""

    provider = "scripted"
    model_id = "who-am-i"

    def stream(self, request: ModelRequest) -> AbstractAsyncContextManager[Any]:
        users = [m for m in request.prompt if m.role == "user"]
        last = repr(users[-1].content) if users else ""
        pid = os.getpid()
        turn: list[Any]
        if "slow" in last:
            turn = []
            for _ in range(200):
                turn += [Delay(0.05), text_delta(f"pid={pid} ")]
        else:
            turn = [text_delta(f"pid={pid} saw={len(users)} ")]
            if "hold" in last:
                turn.append(Delay(1.0))
        return ScriptedModel([turn]).stream(request)


_db = os.environ.get("PROCESSION_TEST_WORKERS_DB", ":memory:")
agent = Agent(
    id="who",
    model=WhoAmI(),
    memory=Memory(storage=SqliteStorage(_db)),
)
app = create_app(
    [agent],
    max_concurrent_runs=int(os.environ.get("PROCESSION_TEST_WORKERS_LIMIT", 256)),
)
resumable = create_app([agent], resume=True)
