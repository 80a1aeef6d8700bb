"""The agent ``server_load.py`` has ``procession serve`` serve, in its own
process(es): ``python -m procession serve benchmarks/_served.py:app``. Each
request says its workload in its message, ``"chunks=200 pace=20"``: that many
text deltas ``"x "`` (``chunks=1``: one ``"ok"``), the model waiting ``pace``
ms before each (default 200 and 0). The 5 async pass-through output
processors run in ``$BENCH_MODE`` (default: the agent's default)."""

from __future__ import annotations

import functools
import os
import re
from contextlib import AbstractAsyncContextManager
from typing import Any, cast

from procession import Agent
from procession.actors import ExecutionMode
from procession.chunks import TextDeltaChunk, TextDeltaPayload
from procession.models import ModelRequest
from procession.server import create_app
from procession.testing import (
    CheckedTurn,
    Delay,
    PassThrough,
    ScriptedModel,
    check_turn,
)

MODE = os.environ.get("BENCH_MODE") or "adaptive"
_WORKLOAD = re.compile(r"chunks=(\d+)(?: pace=([\d.]+))?")


def turn(chunks: int, pace_s: float) -> list[Any]:
    """The scripted answer: ``chunks`` deltas, ``pace_s`` before each."""
    if chunks == 1:
        return [TextDeltaChunk(payload=TextDeltaPayload(id="t", text="ok"))]
    items: list[Any] = []
    delta = TextDeltaChunk(payload=TextDeltaPayload(id="t", text="x "))
    for _ in range(chunks):
        if pace_s:
            items.append(Delay(pace_s))
        items.append(delta)
    return items


@functools.cache
def _turn(chunks: int, pace_ms: float) -> CheckedTurn:
    # Checked once per workload, as Mastra's side (server.mjs) builds its
    # parts once per workload: a model per request, not a script check per
    # request (the checks of a 200-delta turn are a test kit's, not a
    # provider's, cost).
    return check_turn(turn(chunks, pace_ms / 1000))


class _Model:
    provider = "scripted"
    model_id = "bench"

    def stream(self, request: ModelRequest) -> AbstractAsyncContextManager[Any]:
        users = [m for m in request.prompt if m.role == "user"]
        match = _WORKLOAD.search(repr(users[-1].content)) if users else None
        chunks = int(match[1]) if match else 200
        pace_ms = float(match[2] or 0) if match else 0.0
        return ScriptedModel([_turn(chunks, pace_ms)]).stream(request)


def model() -> _Model:
    """The scripted model this module's agent runs: each call answers with
    the workload its last user message names."""
    return _Model()


agent = Agent(
    id="load",
    model=model(),
    output_processors=[PassThrough(i) for i in range(5)],
    execution_mode=cast(ExecutionMode, MODE),
)
app = create_app([agent], max_concurrent_runs=100_000, keepalive_s=0)
